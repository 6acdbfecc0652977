"""A real OpenLineage-ish HTTP backend on 127.0.0.1 for delivery tests: records every POST (decoded), can be
told to answer 5xx for the next N requests, and can be started on a port chosen before it listens."""
from __future__ import annotations

import gzip
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    """A port nothing listens on (yet)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    """``with Backend(port) as backend: ...``; ``backend.events`` are the received events in arrival order."""

    def __init__(self, port: int | None = None, fail_next: int = 0, status: int = 201) -> None:
        self.port = port or free_port()
        self.fail_next = fail_next
        self.status = status
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def events(self) -> list[dict]:
        return [r["event"] for r in self.requests if r["status"] < 300]

    def __enter__(self) -> Backend:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                raw = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
                with backend._lock:
                    status = backend.status
                    if backend.fail_next > 0:
                        backend.fail_next -= 1
                        status = 503
                    backend.requests.append({"path": self.path, "headers": dict(self.headers),
                                             "encoding": self.headers.get("Content-Encoding"),
                                             "event": json.loads(raw), "status": status})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
