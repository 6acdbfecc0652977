"""openlineage-python's http transport, posting over a kept-alive standard-library connection.

Why: a POST through requests costs the sending process about 440 us of CPU (request preparation, hooks, session
merging, adapters, response wrapping); the same POST through ``http.client`` on a kept-alive connection costs
about 70 us (``benchmarks/delivery_faults.py``; 145 us per request with 64 requests in flight on threads). A
harvest delivers ten thousand events a minute to a backend that answers in 10 ms: with requests the sending cost
alone was several times the harvest's own.

What stays openlineage-python's: it parses the configuration (``HttpConfig``: url, endpoint, timeout, auth token
provider, custom headers, compression, verify, retry), and the headers are built from the same parts as its
``emit`` builds them. The retry policy is urllib3's ``Retry`` made from the same ``retry`` settings, as the stock
transport's adapter makes it. What goes to the stock ``emit`` (requests) instead: an event that is not a
JSON-ready dict, a configuration with a ``session``, an ``adapter`` or an ``sslContext``, credentials in
``~/.netrc``, a URL reached through a proxy, and an answer that redirects with 307 or 308. A 301, 302 or 303 is
refused for good (dead letter, reported): followed, it turns the POST into a GET whose 200 said "delivered" for an
event the backend never received.
"""
from __future__ import annotations

import asyncio
import gzip
import http.client
import os
import ssl
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import orjson

from emitter.delivery import REPOSTED_REDIRECTS, RETRY_AFTER_WAIT_S, TRANSIENT_4XX


class PostRefused(Exception):
    """The backend answered a POST with an error status that is not retried; ``response`` has ``status_code``
    and ``text`` as a requests response has (``emitter.delivery.rejection`` reads them)."""

    def __init__(self, status: int, reason: str, text: str) -> None:
        super().__init__(f"{status} {reason}")
        self.response = _Answer(status, text)


class PostFailed(Exception):
    """The backend did not take an event after the configured retries, or asked to be left alone for longer than
    :data:`~emitter.delivery.RETRY_AFTER_WAIT_S` (``Retry-After``): a failure for now (the event is spooled). The
    message says what happened in words (urllib3's ``MaxRetryError`` said ``None: Max retries exceeded``);
    ``response`` is the last answer (``status_code``, ``text``) when there was one, else None; ``retry_after`` the
    seconds the backend asked for, else None."""

    def __init__(self, message: str, status: int | None = None, text: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.response = _Answer(status, text) if status is not None else None
        self.retry_after = retry_after


class _Answer:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text


class _Redirected(Exception):
    """The backend redirects: the stock transport (which follows redirects) sends the event."""


#: One answer: status, reason, body text, and the ``Retry-After`` header when the backend sent one.
Reply = tuple[int, str, str, "str | None"]


def _described(error: BaseException, timeout: float) -> str:
    """An error in words: asyncio's and the socket module's timeouts say nothing (``TimeoutError: ``)."""
    if isinstance(error, TimeoutError):  # asyncio.TimeoutError and socket.timeout are TimeoutError (3.11)
        return f"no answer within {timeout:g} s"
    if isinstance(error, ssl.SSLCertVerificationError):  # (an OSError whose errno 1 read "Operation not permitted")
        return f"TLS certificate verify failed: {error.verify_message} (transport.verify / a CA bundle)"
    if isinstance(error, ssl.SSLError):
        return f"TLS error: {error.reason or error}"
    if isinstance(error, OSError) and isinstance(error.errno, int) and error.errno > 0:
        return os.strerror(error.errno)  # asyncio says "Connect call failed (...)" for a refused connection
    if isinstance(error, OSError) and error.strerror:
        return str(error.strerror)  # a name that does not resolve: "Name or service not known"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _attempts(retry: Any) -> str:
    """How many attempts a ``Retry`` that is used up has seen, in words."""
    tries = len(retry.history) + 1
    return "1 attempt" if tries == 1 else f"{tries} attempts"


def _asked_wait(retry: Any, response: Any) -> float | None:
    """Seconds the backend's ``Retry-After`` asks for (honoured as urllib3 honours it), None when it sent none,
    the retry policy ignores it, or it cannot be read."""
    if not retry.respect_retry_after_header or response.status not in retry.RETRY_AFTER_STATUS_CODES:
        return None
    try:
        wait: float | None = retry.get_retry_after(response)
    except Exception:  # noqa: BLE001 - an unreadable header (urllib3's InvalidHeader) is no request to wait
        return None
    return wait


def direct_target(transport: dict[str, Any]) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) when the http transport ``transport`` can post directly, else None (the stock
    requests path is used). Decided from the configuration once, not per event."""
    if transport.get("session") is not None or transport.get("adapter") is not None \
            or transport.get("ssl_context") or transport.get("sslContext") or transport.get("sslcontext"):
        return None
    url = urljoin(str(transport.get("url", "")).strip(), str(transport.get("endpoint", "api/v1/lineage")))
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    if _proxied(parts.scheme, parts.hostname) or _netrc():
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    return parts.scheme, parts.hostname, port, path + (f"?{parts.query}" if parts.query else "")


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)


def _netrc() -> bool:
    """requests would take credentials from ~/.netrc (or $NETRC); this path does not."""
    return bool(os.environ.get("NETRC") or Path(os.path.expanduser("~/.netrc")).exists())


def keepalive_http_transport() -> type:
    """openlineage-python's HttpTransport whose ``emit`` posts JSON-ready dicts over one kept-alive connection
    (one transport per delivery thread), falling back to the stock ``emit`` as the module docstring says."""
    from openlineage.client.transport.http import HttpCompression, HttpTransport
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, ProtocolError
    from urllib3.response import HTTPResponse
    from urllib3.util import Retry

    class KeepAliveHttpTransport(HttpTransport):
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.target = None if self.cert else direct_target(
                {"url": config.url, "endpoint": config.endpoint, "session": config.session,
                 "adapter": config.adapter, "ssl_context": config.ssl_context})
            self._connection: http.client.HTTPConnection | None = None
            self._tls: ssl.SSLContext | None = None

        def emit(self, event: Any) -> Any:
            if self.target is None or not isinstance(event, dict):
                return super().emit(event)
            body, headers = self.request_parts(event)
            try:
                self._post(body, headers)
            except _Redirected:
                self.stock_emit(event)
            return None

        def async_sender(self) -> AsyncSender | None:
            """A sender for one delivery coroutine (its own connection), or None when this configuration
            goes through the stock transport."""
            if self.target is None:
                return None
            scheme, host, port, _ = self.target
            tls = self.tls_context if scheme == "https" else None
            return AsyncSender(self, AsyncConnection(host, port, self.timeout, tls))

        def tls_context(self) -> ssl.SSLContext:
            """The transport's TLS context, made on first use and shared by its connections: loading the CA
            bundle takes milliseconds, and the delivery opens a hundred connections."""
            if self._tls is None:
                self._tls = _tls_context(self.verify)
            return self._tls

        def stock_emit(self, event: Any) -> None:
            """openlineage-python's own emit (requests): redirects and events that are not dicts."""
            super().emit(event)

        def request_parts(self, event: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
            """Body and headers, from the parts the stock ``emit`` builds them from."""
            body = orjson.dumps(event)
            headers = {"Content-Type": "application/json"}
            bearer = self.config.auth.get_bearer()
            if bearer:
                headers["Authorization"] = bearer
            headers.update(self.config.custom_headers)
            if self.compression == HttpCompression.GZIP:
                headers["Content-Encoding"] = "gzip"
                body = gzip.compress(body, compresslevel=3)  # the stock transport's level
            return body, headers

        def _post(self, body: bytes, headers: dict[str, str]) -> None:
            """POST with the configured retries; raises as the stock transport does when they run out."""
            retry = self.new_retry()
            while True:
                try:
                    reply = self._exchange(body, headers, ConnectTimeoutError, ProtocolError)
                except (ConnectTimeoutError, ProtocolError) as error:
                    retry = self.after_error(error, retry)
                    time.sleep(retry.get_backoff_time())
                    continue
                step = self.answer(reply, retry)
                if step is None:
                    return
                retry, wait = step
                time.sleep(wait)

        def after_error(self, error: Exception, retry: Any) -> Any:
            """The next ``Retry`` after a failure to connect or to read an answer; :class:`PostFailed` when the
            retries are used up."""
            try:
                return retry.increment("POST", self.target[3], error=error)  # type: ignore[index]
            except MaxRetryError:
                raise PostFailed(f"{error} ({_attempts(retry)})") from None

        def answer(self, reply: Reply, retry: Any) -> tuple[Any, float] | None:
            """None when the answer means delivered; (the next ``Retry``, seconds to wait first) when it is
            retried; raises ``_Redirected`` (307/308), :class:`PostRefused` (a final refusal) or
            :class:`PostFailed` (retries used up, or a ``Retry-After`` longer than is waited for here)."""
            status, reason, text, asked = reply
            if 200 <= status < 300:
                return None
            if status in REPOSTED_REDIRECTS:  # the POST is sent again to the new URL, as it is
                raise _Redirected()
            if 300 <= status < 400:  # a client follows 301/302/303 with a GET: the event would never arrive there
                raise PostRefused(status, reason, text or f"a {status} redirect: configure the URL it names")
            answered = f"{self.url} answered HTTP {status} {reason}".rstrip()
            if not retry.is_retry("POST", status, has_retry_after=asked is not None):
                if retry.history and (status >= 500 or status in TRANSIENT_4XX):  # (a 429 retried while it said
                    raise PostFailed(f"{answered} ({_attempts(retry)})", status, text)  # when: now used up)
                raise PostRefused(status, reason, text)
            response = HTTPResponse(body=b"", status=status, preload_content=False,
                                    headers={"Retry-After": asked} if asked is not None else None)
            wait = _asked_wait(retry, response)
            if wait is not None and wait > RETRY_AFTER_WAIT_S:
                # Waiting here would hold a harvest (or a delivery thread) for as long as the backend asked:
                # the delivery leaves it alone that long instead, and the events wait in the spool.
                raise PostFailed(f"{answered} asking to be left alone for {wait:g} s (Retry-After)", status, text,
                                 wait)
            try:
                retry = retry.increment("POST", self.target[3], response=response)  # type: ignore[index]
            except MaxRetryError:
                raise PostFailed(f"{answered} ({_attempts(retry)})", status, text, wait) from None
            return retry, retry.get_backoff_time() if wait is None else wait

        def new_retry(self) -> Any:
            return Retry(**self.config.retry)

        def _exchange(self, body: bytes, headers: dict[str, str], connect_error: type[Exception],
                      read_error: type[Exception]) -> Reply:
            """One request on the kept-alive connection. A failure to connect
            raises ``connect_error``, any later failure ``read_error`` (urllib3's kinds, which ``Retry`` counts
            against ``connect`` and ``read``). A kept-alive connection the backend closed meanwhile is opened
            again once, as urllib3 does for its pooled connections."""
            for first_try in (True, False):
                connection = self._open()
                fresh = connection.sock is None
                try:
                    if fresh:
                        connection.connect()
                except OSError as error:
                    self._drop()
                    raise connect_error(f"cannot connect to {self.url}: {_described(error, self.timeout)}") \
                        from None
                try:
                    connection.request("POST", self.target[3], body=body, headers=headers)  # type: ignore[index]
                    response = connection.getresponse()
                    text = response.read().decode("utf-8", "replace")
                    if response.will_close:
                        self._drop()
                    return response.status, response.reason, text, response.getheader("Retry-After")
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
                    self._drop()
                    if first_try and not fresh:  # closed while idle: the request never reached the backend
                        continue
                    raise read_error(f"{self.url}: {_described(error, self.timeout)}") from None
                except (OSError, http.client.HTTPException) as error:
                    self._drop()
                    raise read_error(f"{self.url}: {_described(error, self.timeout)}") from None
            raise AssertionError("unreachable")

        def _open(self) -> http.client.HTTPConnection:
            if self._connection is None:
                scheme, host, port, _ = self.target  # type: ignore[misc]
                if scheme == "https":
                    self._connection = http.client.HTTPSConnection(host, port, timeout=self.timeout,
                                                                   context=self.tls_context())
                else:
                    self._connection = http.client.HTTPConnection(host, port, timeout=self.timeout)
                self._connection.set_debuglevel(0)  # a debug level would print headers (the token) to stdout
            return self._connection

        def _drop(self) -> None:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

        def close(self, timeout: float = -1) -> bool:
            self._drop()
            return bool(super().close(timeout))

    return KeepAliveHttpTransport


def _tls_context(verify: bool | str) -> ssl.SSLContext:
    """Certificates checked as requests checks them: against the configured CA file, else the environment's
    (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``), else certifi's bundle."""
    import certifi

    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or certifi.where()
    return ssl.create_default_context(cafile=bundle)


class AsyncSender:
    """Posts events for one delivery coroutine, on its own connection, with the transport's headers and
    retries: what :meth:`KeepAliveHttpTransport.emit` does, awaiting instead of blocking."""

    def __init__(self, transport: Any, connection: AsyncConnection) -> None:
        self.transport = transport
        self.connection = connection

    async def emit(self, event: Any) -> None:
        """Deliver ``event``; raises as the transport's ``emit`` raises."""
        from urllib3.exceptions import ConnectTimeoutError, ProtocolError

        if not isinstance(event, dict):
            await asyncio.to_thread(self.transport.stock_emit, event)
            return
        body, headers = self.transport.request_parts(event)
        path = self.transport.target[3]
        retry = self.transport.new_retry()
        while True:
            try:
                reply = await self.connection.post(path, body, headers, ConnectTimeoutError, ProtocolError)
            except (ConnectTimeoutError, ProtocolError) as error:
                retry = self.transport.after_error(error, retry)
                await asyncio.sleep(retry.get_backoff_time())
                continue
            try:
                step = self.transport.answer(reply, retry)
            except _Redirected:
                await asyncio.to_thread(self.transport.stock_emit, event)
                return
            if step is None:
                return
            retry, wait = step
            await asyncio.sleep(wait)

    def close(self) -> None:
        self.connection.close()


class AsyncConnection:
    """One kept-alive HTTP/1.1 connection on asyncio streams, its protocol kept by h11 (the state machine under
    httpx's core): what a delivery coroutine posts on.

    Why not threads: 64 threads each blocked on a request (what a 10 ms backend needs to keep up with a harvest)
    cost about 150 us of CPU per request in thread switches; 64 coroutines on one thread cost about 85 us."""

    def __init__(self, host: str, port: int, timeout: float, tls: Callable[[], ssl.SSLContext] | None) -> None:
        """``tls`` gives the TLS context of an https backend (made when a first connection opens), else None."""
        self.host, self.port, self.timeout = host, port, timeout
        self._tls = tls
        self._host_header = host if port == (443 if tls else 80) else f"{host}:{port}"
        self._streams: tuple[Any, Any] | None = None
        self._protocol: Any = None

    async def post(self, target: str, body: bytes, headers: dict[str, str], connect_error: type[Exception],
                   read_error: type[Exception]) -> Reply:
        """The answer; errors as :meth:`KeepAliveHttpTransport._exchange` raises them."""
        import asyncio

        import h11

        for first_try in (True, False):
            fresh = self._streams is None
            if fresh:
                try:
                    self._streams = await _within(self.timeout, asyncio.open_connection(
                        self.host, self.port, ssl=self._tls() if self._tls else None))
                except (OSError, asyncio.TimeoutError) as error:
                    self.close()
                    raise connect_error(f"cannot connect to {self.host}:{self.port}: "
                                        f"{_described(error, self.timeout)}") from None
                self._protocol = h11.Connection(h11.CLIENT)
            try:
                return await _within(self.timeout, self._exchange(target, body, headers))
            except (ConnectionResetError, BrokenPipeError, h11.RemoteProtocolError, EOFError) as error:
                self.close()
                if first_try and not fresh:  # closed while idle: the request never reached the backend
                    continue
                raise read_error(f"{self.host}:{self.port}: {_described(error, self.timeout)}") from None
            except (OSError, asyncio.TimeoutError, h11.ProtocolError) as error:
                self.close()
                raise read_error(f"{self.host}:{self.port}: {_described(error, self.timeout)}") from None
        raise AssertionError("unreachable")

    async def _exchange(self, target: str, body: bytes, headers: dict[str, str]) -> Reply:
        import h11

        reader, writer = self._streams  # type: ignore[misc]
        protocol = self._protocol
        fields = [("Host", self._host_header), ("Content-Length", str(len(body))), *headers.items()]
        writer.write(protocol.send(h11.Request(method="POST", target=target, headers=fields))
                     + protocol.send(h11.Data(data=body)) + protocol.send(h11.EndOfMessage()))
        status, reason, chunks, asked = 0, "", [], None
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data and protocol.their_state is not h11.DONE:
                    raise EOFError("the backend closed the connection")
                protocol.receive_data(data)
            elif isinstance(event, h11.Response):
                status, reason = event.status_code, event.reason.decode("latin-1")
                asked = next((value.decode("latin-1") for name, value in event.headers if name == b"retry-after"),
                             None)
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise EOFError("the backend closed the connection")
        if protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
            protocol.start_next_cycle()
        else:  # the backend closes after this answer ("Connection: close")
            self.close()
        return status, reason, b"".join(chunks).decode("utf-8", "replace"), asked

    def close(self) -> None:
        """Close the connection (from its event loop; once the loop is gone there is nothing left to close)."""
        if self._streams is not None:
            try:
                self._streams[1].close()
            except RuntimeError:  # the event loop has ended, and its sockets with it
                pass
        self._streams = None
        self._protocol = None


async def _within(seconds: float, awaitable: Any) -> Any:
    import asyncio

    if hasattr(asyncio, "timeout"):  # Python 3.11+: no task per call, as wait_for makes
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)
