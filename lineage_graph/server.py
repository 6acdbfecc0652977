"""``graph serve``: an OpenLineage HTTP receiver (POST /api/v1/lineage, the path Marquez uses) and the live page.

POST bodies may be gzip (``Content-Encoding: gzip``) and hold one event or a JSON array of events; with an API key
configured, ``Authorization: Bearer KEY`` is required. Answers 201, or 400 with the reason for an invalid event,
401 for a missing or wrong key. GET / is the page (live), GET /api/graph its data.
"""
from __future__ import annotations

import gzip
import hmac
import sqlite3
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from . import derive, ingest
from .store import connect

MAX_BODY = 64 << 20


class LineageServer(ThreadingHTTPServer):
    """Holds one database connection; a lock serialises its use (SQLite writes are serial anyway)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], db: Path, api_key: str | None) -> None:
        super().__init__(address, Handler)
        self.conn: sqlite3.Connection = connect(db)
        self.lock = threading.Lock()
        self.api_key = api_key
        self.received = 0


class Handler(BaseHTTPRequestHandler):
    server: LineageServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, **extra) -> None:
        self._send(status, orjson.dumps({"error": message, **extra}))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, "body too large")
            self.close_connection = True
            return
        body = self.rfile.read(length)
        if self.path.split("?")[0].rstrip("/") != "/api/v1/lineage":
            self._error(404, "not found; POST events to /api/v1/lineage")
            return
        if self.server.api_key is not None:
            auth = self.headers.get("Authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else ""
            if not hmac.compare_digest(token.encode(), self.server.api_key.encode()):
                self._error(401, "missing or wrong API key (Authorization: Bearer ...)")
                return
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding not in ("", "identity"):
                self._error(400, f"unsupported Content-Encoding {encoding!r}")
                return
        except (OSError, EOFError, zlib.error):
            self._error(400, "body is not valid gzip/deflate")
            return
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self._error(400, f"body is not JSON ({str(exc).split(':')[0]})")
            return
        events = doc if isinstance(doc, list) else [doc]
        # validate all before storing any: a batch is accepted or refused whole
        for i, ev in enumerate(events):
            try:
                ingest.parse_event(ev)
            except ingest.BadEvent as exc:
                where = f"event {i}: " if isinstance(doc, list) else ""
                self._error(400, f"{where}{exc}")
                return
            except ingest.NotRunEvent:
                pass
        with self.server.lock:
            report = ingest.ingest_decoded(self.server.conn, events)
            self.server.received += report.new_events
        self._send(201, orjson.dumps({"received": len(events), "new": report.new_events,
                                      "duplicates": report.duplicates}))

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        from .html import graph_data, page

        path = self.path.split("?")[0]
        if path in ("/", "/index.html"):
            with self.server.lock:
                derive.refresh(self.server.conn)
                body = page(self.server.conn, live=True).encode()
            self._send(200, body, "text/html; charset=utf-8")
        elif path == "/api/graph":
            with self.server.lock:
                derive.refresh(self.server.conn)
                body = orjson.dumps(graph_data(self.server.conn))
            self._send(200, body)
        elif path == "/health":
            self._send(200, b'{"ok":true}')
        else:
            self._error(404, "not found")


def make_server(db: Path, host: str = "127.0.0.1", port: int = 5000, api_key: str | None = None) -> LineageServer:
    """A bound server (port 0 picks a free one: ``server.server_address``); call ``serve_forever``."""
    return LineageServer((host, port), Path(db), api_key)


def serve(db: Path, state_dir: Path | None, host: str, port: int, api_key: str | None) -> int:
    """Run until interrupted: first ingest what is new in the known files and the default events file."""
    from .store import default_events_file

    conn = connect(db)
    report = ingest.ingest(conn, [p for p in ingest.known_files(conn) if p.exists()],
                           default=default_events_file(state_dir))
    conn.close()
    try:
        server = make_server(db, host, port, api_key)
    except OSError as exc:
        print(f"cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 2
    h, p = server.server_address[:2]
    h = h.decode() if isinstance(h, bytes) else h
    print(f"lineage graph on http://{h}:{p}/  (POST events to http://{h}:{p}/api/v1/lineage; "
          f"{report.new_events} new events ingested from files)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
