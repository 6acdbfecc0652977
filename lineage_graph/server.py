"""``graph serve``: an OpenLineage HTTP receiver (POST /api/v1/lineage, the path Marquez uses) and the live page.

POST bodies may be gzip (``Content-Encoding: gzip``) and hold one event or a JSON array of events; with an API key
configured, ``Authorization: Bearer KEY`` is required. Answers 201, or 400 with the reason for an invalid event,
401 for a missing or wrong key. GET / is the page (live), GET /api/graph its data.

A web page the user has open elsewhere must not write to the graph or read it: a POST from a browser page of
another origin (its ``Origin`` header), or with a content type a page may send without asking first (``text/plain``,
a form), is refused (403 / 415); on a loopback address, a request naming another host (``Host``: a name rebound to
127.0.0.1 by its owner's DNS) is refused (421).
"""
from __future__ import annotations

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
#: Seconds a connection may stay silent (a client that never finishes its request holds a thread until then).
IDLE_S = 60
# Content types a browser page may POST to another origin without a preflight request (CORS "simple" requests)
_SIMPLE_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"})
# What another process's ingest changes (the ids the POSTs' ingester keeps)
_MARK = ("SELECT (SELECT max(id) FROM datasets), (SELECT max(id) FROM dataset_aliases), "
         "(SELECT max(id) FROM jobs)")
# Content-Encoding -> zlib's wbits (0: not compressed)
_WBITS = {"": 0, "identity": 0, "gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decompressed(body: bytes, wbits: int) -> bytes | None:
    """``body`` decompressed, at most ``MAX_BODY + 1`` bytes of it (a small body may expand a thousandfold: the
    limit applies to what is decompressed, not to what was sent); None if it is not valid."""
    parts: list[bytes] = []
    size = 0
    while True:  # (a gzip body may be several members one after another)
        inflater = zlib.decompressobj(wbits)
        try:
            part = inflater.decompress(body, MAX_BODY + 1 - size)
        except zlib.error:
            return None
        parts.append(part)
        size += len(part)
        if size > MAX_BODY:
            return b"".join(parts)
        if not inflater.eof:
            return None  # cut short
        body = inflater.unused_data
        if not body.strip(b"\0"):
            return b"".join(parts)


class LineageServer(ThreadingHTTPServer):
    """Holds one database connection; a lock serialises its use (SQLite writes are serial anyway)."""

    daemon_threads = True
    # many producers posting at once (one connection per event for some): the default backlog of 5 made the
    # kernel reset connections, and their events were lost to producers without a retry
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], db: Path, api_key: str | None) -> None:
        super().__init__(address, Handler)
        self.conn: sqlite3.Connection = connect(db)
        self.lock = threading.Lock()
        self.api_key = api_key
        self.received = 0
        self._ingester: ingest.Ingester | None = None
        self._ingester_mark: tuple | None = None
        self._graph: tuple[tuple, bytes] | None = None

    def ingester(self) -> ingest.Ingester:
        """The ingester of the POSTs (call with :attr:`lock` held). Kept between POSTs: building one reads every
        dataset and job id (0.4 s with 300,000 datasets); built again when another process added rows."""
        mark = self.conn.execute(_MARK).fetchone()
        if self._ingester is None or mark != self._ingester_mark:
            self._ingester = ingest.Ingester(self.conn)
        return self._ingester

    def ingested(self) -> None:
        """After a POST's events are stored: what the ingester added is what the database holds."""
        self._ingester_mark = self.conn.execute(_MARK).fetchone()

    def graph_json(self) -> bytes:
        """``/api/graph``'s body (call with :attr:`lock` held): made again only when the database changed. The
        live page asks for it every 2 s; at 100,000 jobs making it takes seconds, which every poll paid."""
        from .html import graph_data

        # data_version moves when another connection commits; our own POSTs count in `received`
        mark = (self.conn.execute("PRAGMA data_version").fetchone()[0], self.received)
        if self._graph is None or self._graph[0] != mark:
            derive.refresh(self.conn)
            self._graph = (mark, orjson.dumps(graph_data(self.conn)))
        return self._graph[1]

    def forget_ingester(self) -> None:
        """After a failed POST: the ingester may hold ids of rows that were rolled back."""
        self._ingester = self._ingester_mark = None


def _host_name(netloc: str) -> str:
    """The host of ``host[:port]`` / ``[v6]:port``, lower-cased, without brackets."""
    if netloc.startswith("["):
        return netloc[1:].partition("]")[0].lower()
    return netloc.rpartition(":")[0].lower() if netloc.count(":") == 1 else netloc.lower()


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class Handler(BaseHTTPRequestHandler):
    server: LineageServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_S

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, **extra) -> None:
        self._send(status, orjson.dumps({"error": message, **extra}))

    def _foreign(self, post: bool) -> bool:
        """Refuse (and say so) a request that another site's page may have made (see the module docstring)."""
        host = self.headers.get("Host")
        bound = str(self.server.server_address[0])
        if host and _is_loopback(bound) and not _is_loopback(_host_name(host)):
            self._error(421, f"this server answers requests to {bound} or localhost, not to {host!r}")
            return True
        if not post:
            return False
        origin = self.headers.get("Origin")
        if origin is not None and origin.partition("://")[2].rstrip("/").lower() != (host or "").lower():
            self._error(403, "requests from another site's page are refused (Origin)")
            return True
        media = (self.headers.get("Content-Type") or "").partition(";")[0].strip().lower()
        if media in _SIMPLE_TYPES:
            self._error(415, "send events as Content-Type: application/json")
            return True
        return False

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if self._foreign(post=True):
            self.close_connection = True
            return
        if self.headers.get("Transfer-Encoding"):
            self._error(411, "send the body with a Content-Length (chunked bodies are not read)")
            self.close_connection = True
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._error(400, "Content-Length is not a number of bytes")
            self.close_connection = True
            return
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
        if encoding not in _WBITS:
            self._error(400, f"unsupported Content-Encoding {encoding!r}")
            return
        if _WBITS[encoding]:
            inflated = _decompressed(body, _WBITS[encoding])
            if inflated is None:
                self._error(400, f"body is not valid {encoding}")
                return
            if len(inflated) > MAX_BODY:
                self._error(413, "body too large once decompressed")
                return
            body = inflated
        if body.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (some Windows tools write one): as a file's
            body = body[3:]
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
        try:
            with self.server.lock:
                try:
                    report = ingest.ingest_decoded(self.server.conn, events, ingester=self.server.ingester())
                except BaseException:
                    self.server.forget_ingester()
                    raise
                self.server.ingested()
                self.server.received += report.new_events
        except sqlite3.OperationalError as exc:  # the database locked by another process for longer than the timeout
            self._send(503, orjson.dumps({"error": f"lineage database busy ({exc}); retry later"}),
                       headers={"Retry-After": "5"})
            return
        # `ignored`: JobEvents and DatasetEvents, valid but without a run for the graph (the sender should know)
        self._send(201, orjson.dumps({"received": len(events), "new": report.new_events,
                                      "duplicates": report.duplicates, "ignored": report.ignored}))

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        from .html import page

        if self._foreign(post=False):
            return
        path = self.path.split("?")[0]
        if path in ("/", "/index.html"):
            with self.server.lock:
                derive.refresh(self.server.conn)
                body = page(self.server.conn, live=True).encode()
            self._send(200, body, "text/html; charset=utf-8")
        elif path == "/api/graph":
            with self.server.lock:
                body = self.server.graph_json()
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
