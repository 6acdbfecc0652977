"""A real OpenLineage-ish HTTP backend on 127.0.0.1 for delivery tests: records every POST (decoded), can be
told to answer 5xx for the next N requests, and can be started on a port chosen before it listens.

Fault modes (issue 11): ``status=500`` (every request fails), ``flap=N`` (every N-th request answers 503),
``hang=True`` (takes the request and never answers until the backend stops), ``reject`` (a predicate on the
event: those are answered 422 with a Marquez-like body), ``delay`` (seconds before each answer: a slow backend),
``jitter`` (up to that many seconds more, at random, so that concurrent requests finish out of order),
``reject_status`` (what ``reject`` answers: 500 is an event the backend fails on), ``retry_after`` (a
``Retry-After`` header on every 429/503 answer), ``redirect_to`` (answers 307 to another URL), ``close_each``
(closes the connection after every answer), ``drop_each`` (the same without a ``Connection: close`` header, as
a restarted backend drops idle connections).
A closed port (``free_port()`` with nothing started) is the refusing backend."""
from __future__ import annotations

import gzip
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    """A port nothing listens on (yet)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    """``with Backend(port) as backend: ...``; ``backend.events`` are the received events in arrival order."""

    def __init__(self, port: int | None = None, fail_next: int = 0, status: int = 201, *, flap: int = 0,
                 hang: bool = False, reject: Callable[[dict], bool] | None = None, delay: float = 0.0,
                 jitter: float = 0.0, redirect_to: str | None = None, close_each: bool = False,
                 drop_each: bool = False, redirect_status: int = 307, reject_status: int = 422,
                 retry_after: str | None = None) -> None:
        # Without a port the server binds port 0 here, at once: a port chosen by free_port() and bound later can
        # be taken in between by anything on the machine (a Spark JVM's connections did, in CI).
        self._bound: ThreadingHTTPServer | None = None if port else self._new_server(0)
        self.port = port or self._bound.server_address[1]  # type: ignore[union-attr]
        self.fail_next = fail_next
        self.status = status
        self.flap = flap
        self.hang = hang
        self.reject = reject
        self.reject_status = reject_status
        self.retry_after = retry_after
        self.delay = delay
        self.jitter = jitter  # up to this many more seconds, at random: answers overtake each other
        self.redirect_to = redirect_to  # answer 307 to this URL (the event is not recorded as delivered)
        self.redirect_status = redirect_status  # the redirect's status (301/302/303 make a client GET the URL)
        self.close_each = close_each  # answer with "Connection: close" and close the connection
        self.drop_each = drop_each  # close the connection after every answer without saying so (a restart)
        self._random = random.Random(7)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> list[dict]:
        return [r["event"] for r in self.requests if 200 <= r["status"] < 300]

    def __enter__(self) -> Backend:
        self._server = self._bound or self._new_server(self.port)
        self._bound = None
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def _new_server(self, port: int) -> ThreadingHTTPServer:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Marquez

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                raw = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
                event = json.loads(raw)
                answer = b""
                with backend._lock:
                    status = backend.status
                    if backend.fail_next > 0:
                        backend.fail_next -= 1
                        status = 503
                    elif backend.flap and len(backend.requests) % backend.flap == backend.flap - 1:
                        status = 503
                    if backend.reject is not None and backend.reject(event):
                        status = backend.reject_status
                        answer = b'{"code":%d,"message":"eventType: must not be accepted"}' % status
                    if backend.hang:
                        status = 0  # never answered
                    if backend.redirect_to:
                        status = backend.redirect_status
                    backend.requests.append({"path": self.path, "headers": dict(self.headers),
                                             "encoding": self.headers.get("Content-Encoding"),
                                             "event": event, "status": status})
                if backend.hang:
                    backend._released.wait(60)
                    return
                if backend.delay or backend.jitter:
                    with backend._lock:
                        extra = backend._random.uniform(0, backend.jitter)
                    time.sleep(backend.delay + extra)
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                if backend.redirect_to:
                    self.send_header("Location", f"{backend.redirect_to}{self.path}")
                if backend.retry_after is not None and status in (429, 503):
                    self.send_header("Retry-After", backend.retry_after)
                if backend.close_each:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if backend.drop_each:
                    self.close_connection = True
                self.wfile.write(answer)

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            request_queue_size = 256  # the default 5 resets connections when 64 requests arrive at once

        return Server(("127.0.0.1", port), Handler)

    def __exit__(self, *exc) -> None:
        assert self._server is not None
        self._released.set()
        self._server.shutdown()
        self._server.server_close()


def order_violations(events: list[dict]) -> list[str]:
    """What breaks the order the emitter promises in a stream of events: a run's START after another of its
    events, a child's event before its parent's START, a parent's terminal event before a child's event."""
    seen_start: set[str] = set()
    seen_any: set[str] = set()
    terminated: set[str] = set()
    runs = {event["run"]["runId"] for event in events}  # a parent outside the stream (Airflow's) is not checked
    problems = []
    for event in events:
        run_id, kind = event["run"]["runId"], event["eventType"]
        parent = ((event["run"].get("facets") or {}).get("parent") or {}).get("run", {}).get("runId")
        if kind == "START" and run_id in seen_any:
            problems.append(f"{run_id} START after another of its events")
        if parent in runs and parent not in seen_start:
            problems.append(f"{run_id} {kind} before its parent's START")
        if parent and parent in terminated:
            problems.append(f"{run_id} {kind} after its parent ended")
        seen_any.add(run_id)
        if kind == "START":
            seen_start.add(run_id)
        if kind in ("COMPLETE", "FAIL", "ABORT"):
            terminated.add(run_id)
    return problems
