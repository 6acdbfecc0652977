"""The http transport's direct path (emitter/keepalive_http.py) against a real backend on 127.0.0.1: what reaches
the backend (body, headers), what it raises for each answer (as openlineage-python's stock transport raises, so
delivery can tell a final refusal from a failure for now), retries, redirects and connections closed by the
backend. Every case runs twice: the blocking ``emit`` (one request at a time) and the awaiting sender the
delivery's coroutines use."""
from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.server
import json
import ssl
import subprocess
import threading

import pytest

from emitter.delivery import rejection
from emitter.keepalive_http import direct_target
from emitter.transport import create_transport

from http_backend import Backend, free_port

EVENT = {"eventType": "START", "eventTime": "2026-11-01T03:00:00+00:00", "producer": "urn:test",
         "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
         "run": {"runId": "01900000-0000-7000-8000-000000000001"}, "job": {"namespace": "ns", "name": "j"},
         "inputs": [], "outputs": []}
FAST_RETRY = {"total": 2, "connect": 2, "read": 0, "backoff_factor": 0}


def send(transport, how: str, events: int = 1) -> None:
    """Send EVENT ``events`` times through ``transport``: its ``emit``, or one awaiting sender."""
    if how == "emit":
        for _ in range(events):
            transport.emit(EVENT)
        return
    sender = transport.async_sender()
    assert sender is not None

    async def run() -> None:
        try:
            for _ in range(events):
                await sender.emit(EVENT)
        finally:
            sender.close()

    asyncio.run(run())


HOW = ["emit", "await"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("extra,headers", [
    ({}, {"Content-Type": "application/json"}),
    ({"auth": {"type": "api_key", "apiKey": "s3cr3t-key"}}, {"Authorization": "Bearer s3cr3t-key"}),
    ({"custom_headers": {"X-Team": "data"}}, {"X-Team": "data", "Content-Type": "application/json"}),
    ({"compression": "gzip"}, {"Content-Encoding": "gzip"}),
    ({"endpoint": "custom/lineage"}, {}),
], ids=["plain", "api-key", "custom-header", "gzip", "endpoint"])
def test_what_reaches_the_backend(how, extra, headers):
    with Backend() as backend:
        transport = create_transport({"type": "http", "url": backend.url, **extra}, announce=False)
        send(transport, how, events=3)  # three on one kept-alive connection
        transport.close()
    assert [r["event"] for r in backend.requests] == [EVENT] * 3
    assert {r["path"] for r in backend.requests} == {"/" + extra.get("endpoint", "api/v1/lineage")}
    for request in backend.requests:
        assert {k: request["headers"].get(k) for k in headers} == headers


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("backend_kwargs,requests_seen,outcome", [
    ({"status": 422}, 1, (422, "must not be accepted")),  # a final refusal: set aside, never retried
    ({"status": 400}, 1, (400, "")),
    ({"status": 429}, 1, None),  # transient, not in the retried statuses: spooled by the delivery
    ({"status": 500}, 3, None),  # retried (total 2), then a failure for now
    ({"fail_next": 2}, 3, "delivered"),  # two 503 answers, then 201
    ({"close_each": True}, 1, "delivered"),  # the backend closes after each answer
], ids=["422", "400", "429", "500-retried", "503-then-ok", "connection-close"])
def test_each_answer(how, backend_kwargs, requests_seen, outcome):
    if backend_kwargs.get("status") == 422:
        backend_kwargs = {"reject": lambda event: True}
    with Backend(**backend_kwargs) as backend:
        transport = create_transport({"type": "http", "url": backend.url, "retry": FAST_RETRY}, announce=False)
        try:
            send(transport, how, events=2 if outcome == "delivered" else 1)
            error = None
        except Exception as raised:  # noqa: BLE001 - what it raised is the subject
            error = raised
        transport.close()
    if outcome == "delivered":
        assert error is None
        assert len(backend.events) == 2 and len(backend.requests) == requests_seen + 1
        return
    assert error is not None and len(backend.requests) == requests_seen
    refused = rejection(error)
    if outcome is None:
        assert refused is None
    else:
        status, text = refused
        assert status == outcome[0] and outcome[1] in text


@pytest.mark.parametrize("how", HOW)
def test_a_closed_port_fails_for_now_after_the_connect_retries(how):
    transport = create_transport({"type": "http", "url": f"http://127.0.0.1:{free_port()}", "retry": FAST_RETRY},
                                 announce=False)
    with pytest.raises(Exception) as raised:
        send(transport, how)
    assert rejection(raised.value) is None


@pytest.mark.parametrize("how", HOW)
def test_a_redirect_is_followed_by_the_stock_transport(how):
    """A 307 sends the event through openlineage-python's own emit, which posts it again and follows: the target
    gets it once."""
    with Backend() as target, Backend(redirect_to=target.url) as backend:
        transport = create_transport({"type": "http", "url": backend.url}, announce=False)
        send(transport, how)
        transport.close()
    assert [r["status"] for r in backend.requests] == [307, 307]
    assert target.events == [EVENT]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_a_post_cannot_follow_is_a_final_refusal(how, status):
    """A 301/302/303 (an http -> https redirect in front of Marquez): followed, the POST becomes a GET whose 200
    counted the event delivered though the target never got it. Refused for good instead, with the status."""
    with Backend() as target, Backend(redirect_to=target.url, redirect_status=status) as backend:
        transport = create_transport({"type": "http", "url": backend.url}, announce=False)
        with pytest.raises(Exception) as raised:
            send(transport, how)
        transport.close()
    assert [r["status"] for r in backend.requests] == [status]
    assert target.requests == [] and target.events == []
    refused = rejection(raised.value)
    assert refused is not None and refused[0] == status


@pytest.mark.parametrize("how", HOW)
def test_a_connection_the_backend_dropped_while_idle_is_opened_again(how):
    """The backend closes each kept-alive connection after its answer without saying so (as a restarted backend
    does): every event still arrives, once, with no retry spent (retries are 0 here)."""
    with Backend(drop_each=True) as backend:
        transport = create_transport({"type": "http", "url": backend.url, "retry": {"total": 0, "connect": 0,
                                                                                     "read": 0}}, announce=False)
        send(transport, how, events=3)
        transport.close()
    assert backend.events == [EVENT] * 3


@pytest.mark.parametrize("transport,environment,target", [
    ({"url": "http://marquez:5000"}, {}, ("http", "marquez", 5000, "/api/v1/lineage")),
    ({"url": "https://lineage.example.com/", "endpoint": "api/v2/x"}, {},
     ("https", "lineage.example.com", 443, "/api/v2/x")),
    ({"url": "http://marquez:5000/base/", "endpoint": "api/v1/lineage?x=1"}, {},
     ("http", "marquez", 5000, "/base/api/v1/lineage?x=1")),
    ({"url": "http://marquez:5000", "session": object()}, {}, None),  # the caller's requests session
    ({"url": "http://user:pw@marquez:5000"}, {}, None),  # credentials in the URL: requests' handling
    ({"url": "http://marquez:5000"}, {"http_proxy": "http://proxy:3128"}, None),  # through a proxy
    ({"url": "http://marquez:5000"}, {"http_proxy": "http://proxy:3128", "no_proxy": "marquez"},
     ("http", "marquez", 5000, "/api/v1/lineage")),
    ({"url": "http://marquez:5000"}, {"NETRC": "/etc/lineage-netrc"}, None),  # credentials from a netrc
    ({"url": "kafka://broker"}, {}, None),
])
def test_which_configurations_post_directly(monkeypatch, transport, environment, target):
    for key in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                "NO_PROXY", "NETRC"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    assert direct_target(transport) == target


def test_the_token_never_reaches_stdout_even_with_a_debug_level(capfd):
    """http.client prints request headers at a debug level: the direct path keeps it at 0 on its connection."""
    import http.client

    previous = http.client.HTTPConnection.debuglevel
    http.client.HTTPConnection.debuglevel = 1
    try:
        with Backend() as backend:
            transport = create_transport({"type": "http", "url": backend.url,
                                          "auth": {"type": "api_key", "apiKey": "s3cr3t-key"}}, announce=False)
            transport.emit(EVENT)
            transport.close()
    finally:
        http.client.HTTPConnection.debuglevel = previous
    out, err = capfd.readouterr()
    assert "s3cr3t-key" not in out + err
    assert json.loads(json.dumps(backend.events[0])) == EVENT


def test_gzip_body_is_the_event():
    with Backend() as backend:
        transport = create_transport({"type": "http", "url": backend.url, "compression": "gzip"}, announce=False)
        body, headers = transport.request_parts(EVENT)
        transport.emit(EVENT)
        transport.close()
    assert json.loads(gzip.decompress(body)) == EVENT and headers["Content-Encoding"] == "gzip"
    assert backend.requests[0]["encoding"] == "gzip" and backend.events == [EVENT]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("backend_kwargs,requests_seen,slept,asked,words", [
    # asks for longer than is waited for here: no retry, the delivery leaves the backend alone that long
    ({"status": 503, "retry_after": "120"}, 1, (0.0, 1.0), 120.0,
     "answered HTTP 503 Service Unavailable asking to be left alone for 120 s (Retry-After)"),
    ({"status": 429, "retry_after": "3600"}, 1, (0.0, 1.0), 3600.0, "asking to be left alone for 3600 s"),
    # a short Retry-After is waited for, also on a 429 (retried only when the backend says when)
    ({"fail_next": 1, "retry_after": "1"}, 2, (0.9, 3.0), None, None),
    ({"status": 429, "retry_after": "1"}, 3, (1.9, 4.0), None, "answered HTTP 429 Too Many Requests (3 attempts)"),
    # a date in the past is no wait; an unreadable header is no request to wait (backoff 0 here)
    ({"fail_next": 2, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 3, (0.0, 1.0), None, None),
    ({"fail_next": 2, "retry_after": "soon"}, 3, (0.0, 1.0), None, None),
    ({"status": 500}, 3, (0.0, 1.0), None, "answered HTTP 500 Internal Server Error (3 attempts)"),
], ids=["503-120s", "429-1h", "503-1s-then-ok", "429-1s", "past-date", "garbage", "500"])
def test_retry_after_is_honoured_up_to_a_few_seconds(how, backend_kwargs, requests_seen, slept, asked, words):
    """A backend that says when to come back (``Retry-After`` on 429/503) is not asked again sooner; one that
    asks for minutes is not waited for in the sending thread (a harvest would stall), but left alone by the
    delivery that long: the failure carries the seconds."""
    import time

    with Backend(**backend_kwargs) as backend:
        transport = create_transport({"type": "http", "url": backend.url, "retry": FAST_RETRY}, announce=False)
        started = time.monotonic()
        try:
            send(transport, how)
            error = None
        except Exception as raised:  # noqa: BLE001 - what it raised is the subject
            error = raised
        elapsed = time.monotonic() - started
        transport.close()
    assert len(backend.requests) == requests_seen
    assert slept[0] <= elapsed < slept[1]
    if words is None:
        assert error is None and len(backend.events) == 1
        return
    assert error is not None and rejection(error) is None  # a failure for now: spooled
    assert getattr(error, "retry_after", None) == asked
    assert str(error) == f"{backend.url} {words}" or words in str(error)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("case,words", [
    ("closed-port", "Connection refused (3 attempts)"),
    ("hanging", "no answer within 0.5 s (1 attempt)"),
    # an OSError of errno 1: it read "Operation not permitted"
    ("self-signed-certificate", "TLS certificate verify failed: self-signed certificate"),
])
def test_a_failure_for_now_says_what_happened_in_words(how, case, words, tmp_path):
    """urllib3's ``MaxRetryError: None: Max retries exceeded ... (Caused by ...)`` and an empty ``TimeoutError``
    said nothing a user could act on."""
    with contextlib.ExitStack() as stack:
        if case == "hanging":
            url = stack.enter_context(Backend(hang=True)).url
        elif case == "self-signed-certificate":
            url = stack.enter_context(_tls_server(tmp_path))
        else:
            url = f"http://127.0.0.1:{free_port()}"
        transport = create_transport({"type": "http", "url": url, "timeout": 0.5, "retry": FAST_RETRY},
                                     announce=False)
        with pytest.raises(Exception) as raised:
            send(transport, how)
        transport.close()
    message = str(raised.value)
    assert words in message and "None" not in message and "Max retries" not in message, message


@contextlib.contextmanager
def _tls_server(tmp_path):
    """An HTTPS listener on 127.0.0.1 with a self-signed certificate (made by openssl): yields its URL."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
