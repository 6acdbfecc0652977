"""`graph serve` over real HTTP on 127.0.0.1: POST /api/v1/lineage (plain, gzip, API key, 400s), GET / and
/api/graph."""
from __future__ import annotations

import functools
import gzip
import http.client
import json
import socket
import threading
import zlib

import pytest
from graph_events import event as E

from lineage_graph.server import make_server


@pytest.fixture
def server(tmp_path):
    srv = make_server(tmp_path / "graph.sqlite", "127.0.0.1", 0, api_key="s3cret")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(srv, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


AUTH = {"Authorization": "Bearer s3cret", "Content-Type": "application/json"}

CASES = [
    ("plain", json.dumps(E(1, "r1", "a", outputs=["x"])).encode(), AUTH, 201, {"received": 1, "new": 1,
                                                                                "duplicates": 0, "ignored": 0}),
    ("gzip", gzip.compress(json.dumps(E(2, "r2", "b", inputs=["x"])).encode()), {**AUTH, "Content-Encoding": "gzip"},
     201, {"received": 1, "new": 1, "duplicates": 0, "ignored": 0}),
    ("array-with-duplicate", json.dumps([E(1, "r1", "a", outputs=["x"]), E(3, "r3", "c")]).encode(), AUTH, 201,
     {"received": 2, "new": 1, "duplicates": 1, "ignored": 0}),
    # a JobEvent (design-time lineage: no run for the graph) is valid and said to be ignored; Marquez's own fixture
    # of one carries an eventType, its schemaURL says what it is
    ("job-event-in-array", json.dumps([E(7, "r7", "g"), {
        "eventTime": "2024-01-01T00:00:00Z", "producer": "p", "eventType": "COMPLETE",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "ns", "name": "static"}, "inputs": [], "outputs": []}]).encode(), AUTH, 201,
     {"received": 2, "new": 1, "duplicates": 0, "ignored": 1}),
    ("no-key", json.dumps(E(4, "r4", "d")).encode(), {}, 401,
     {"error": "missing or wrong API key (Authorization: Bearer ...)"}),
    ("wrong-key", json.dumps(E(4, "r4", "d")).encode(), {"Authorization": "Bearer nope"}, 401,
     {"error": "missing or wrong API key (Authorization: Bearer ...)"}),
    ("invalid-event", json.dumps({**E(4, "r4", "d"), "run": {"runId": "x"}}).encode(), AUTH, 400,
     {"error": "run.runId must be a UUID"}),
    ("invalid-in-array", json.dumps([E(4, "r4", "d"), {"job": 1}]).encode(), AUTH, 400,
     {"error": "event 1: job must be an object"}),
    ("not-json", b"{", AUTH, 400, {"error": "body is not JSON (unexpected end of data)"}),
    ("bad-gzip", b"nope", {**AUTH, "Content-Encoding": "gzip"}, 400, {"error": "body is not valid gzip"}),
    ("cut-gzip", gzip.compress(json.dumps(E(5, "r5", "e")).encode())[:-12], {**AUTH, "Content-Encoding": "gzip"},
     400, {"error": "body is not valid gzip"}),
    # 65 KB sent, 65 MB once decompressed: refused before it is all in memory
    ("gzip-bomb", gzip.compress(b" " * (65 << 20), 9), {**AUTH, "Content-Encoding": "gzip"}, 413,
     {"error": "body too large once decompressed"}),
    ("deflate", zlib.compress(json.dumps(E(5, "r5", "e")).encode()), {**AUTH, "Content-Encoding": "deflate"}, 201,
     {"received": 1, "new": 1, "duplicates": 0, "ignored": 0}),
    # a UTF-8 byte order mark, as `graph ingest` reads it in a file
    ("byte-order-mark", b"\xef\xbb\xbf" + json.dumps(E(5, "r5", "e")).encode(), AUTH, 201,
     {"received": 1, "new": 0, "duplicates": 1, "ignored": 0}),
    ("gzip-two-members", gzip.compress(b"[") + gzip.compress(json.dumps(E(6, "r6", "f")).encode() + b"]"),
     {**AUTH, "Content-Encoding": "gzip"}, 201, {"received": 1, "new": 1, "duplicates": 0, "ignored": 0}),
    # (the requests below are sent raw, in one write: the server answers them without reading a body)
    ("content-length-not-a-number", b"{}", {**AUTH, "Content-Length": "abc"}, 400,
     {"error": "Content-Length is not a number of bytes"}),
    ("content-length-negative", b"{}", {**AUTH, "Content-Length": "-1"}, 400,
     {"error": "Content-Length is not a number of bytes"}),
    ("chunked", b"2\r\n{}\r\n0\r\n\r\n", {**AUTH, "Transfer-Encoding": "chunked"}, 411,
     {"error": "send the body with a Content-Length (chunked bodies are not read)"}),
]


def raw_request(srv, path, body, headers):
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(srv.server_address[:2], timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode() + body)
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        return resp.status, resp.read()


def test_post_cases_then_graph_and_page(server):
    for name, body, headers, status, answer in CASES:
        send = raw_request if "Content-Length" in headers or "Transfer-Encoding" in headers else \
            functools.partial(request, method="POST")
        got = send(server, path="/api/v1/lineage", body=body, headers=headers)
        assert (got[0], json.loads(got[1])) == (status, answer), name
    status, body = request(server, "GET", "/api/graph")
    data = json.loads(body)
    assert status == 200
    assert sorted(n["data"]["key"] for n in data["nodes"]) == ["db/x", "ns/a", "ns/b", "ns/c", "ns/e", "ns/f", "ns/g"]
    assert sorted((e["data"]["source"], e["data"]["target"]) for e in data["edges"]) == \
        sorted([("j1", "d1"), ("d1", "j2")])
    status, page = request(server, "GET", "/")
    assert status == 200 and b"var LIVE = true;" in page and b"cytoscape" in page and b"http://" not in page[:200]
    assert request(server, "POST", "/other", b"{}", AUTH)[0] == 404


def test_posts_after_another_process_added_rows_reuse_its_ids(server, tmp_path):
    # the server keeps its dataset and job ids between POSTs; rows another process (graph ingest) added meanwhile
    # must be found, not inserted a second time
    assert request(server, "POST", "/api/v1/lineage", json.dumps(E(1, "r1", "a", outputs=["x"])).encode(),
                   AUTH)[0] == 201
    events = tmp_path / "more.jsonl"
    events.write_text(json.dumps(E(2, "r2", "b", inputs=["x"], outputs=["y"])) + "\n")
    from lineage_graph import ingest
    from lineage_graph.store import connect

    other = connect(tmp_path / "graph.sqlite")
    ingest.ingest(other, [events])
    other.close()
    assert request(server, "POST", "/api/v1/lineage", json.dumps(E(3, "r3", "b", inputs=["y"])).encode(),
                   AUTH)[0] == 201
    status, body = request(server, "GET", "/api/graph")
    keys = sorted(n["data"]["key"] for n in json.loads(body)["nodes"])
    assert keys == ["db/x", "db/y", "ns/a", "ns/b"]


def test_many_producers_posting_at_once_lose_nothing(server):
    n = 120
    start = threading.Barrier(n)
    statuses: list[int] = []

    def post(i: int) -> None:
        start.wait()
        statuses.append(request(server, "POST", "/api/v1/lineage",
                                json.dumps(E(i % 60, f"run{i}", f"job{i}", outputs=[f"t{i}"])).encode(), AUTH)[0])

    threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [201] * n
    assert server.received == n


def test_graph_answer_follows_posts_and_other_processes(server, tmp_path):
    def keys():
        return sorted(n["data"]["key"] for n in json.loads(request(server, "GET", "/api/graph")[1])["nodes"])

    assert keys() == []
    request(server, "POST", "/api/v1/lineage", json.dumps(E(1, "r1", "a", outputs=["x"])).encode(), AUTH)
    assert keys() == ["db/x", "ns/a"]
    assert keys() == ["db/x", "ns/a"]  # (made once, answered again)
    events = tmp_path / "more.jsonl"
    events.write_text(json.dumps(E(2, "r2", "b", inputs=["x"])) + "\n")
    from lineage_graph import ingest
    from lineage_graph.store import connect

    other = connect(tmp_path / "graph.sqlite")
    ingest.ingest(other, [events])
    other.close()
    assert keys() == ["db/x", "ns/a", "ns/b"]


@pytest.fixture
def open_server(tmp_path):
    """A server without an API key (the default)."""
    srv = make_server(tmp_path / "graph.sqlite", "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


JSON = {"Content-Type": "application/json"}
AS_JSON = "send events as Content-Type: application/json"


@pytest.mark.parametrize(("method", "headers", "status", "error"), [
    # a page of another origin posting to the receiver (fetch with mode no-cors, a form)
    ("POST", {**JSON, "Origin": "http://localhost:5874"}, 403, "requests from another site's page are refused"),
    ("POST", {**JSON, "Origin": "null"}, 403, "requests from another site's page are refused"),
    ("POST", {"Content-Type": "text/plain"}, 415, AS_JSON),
    ("POST", {"Content-Type": "application/x-www-form-urlencoded"}, 415, AS_JSON),
    ("POST", {"Content-Type": "multipart/form-data; boundary=x"}, 415, AS_JSON),
    # a name of the attacker's, rebound to 127.0.0.1: the page is then same-origin with the server
    ("POST", {**JSON, "Host": "evil.example:5000", "Origin": "http://evil.example:5000"}, 421, "this server answers"),
    ("GET", {"Host": "evil.example:5000"}, 421, "this server answers"),
    # what producers and the page itself send
    ("POST", JSON, 201, None),
    ("POST", {}, 201, None),
    ("POST", {**JSON, "Host": "localhost:5000"}, 201, None),
    ("POST", {**JSON, "Origin": "http://{host}"}, 201, None),
    ("GET", {"Host": "[::1]:5000"}, 200, None),
], ids=["other-origin", "null-origin", "text-plain", "form", "multipart", "rebound-post", "rebound-get", "producer",
        "no-content-type", "localhost", "same-origin", "ipv6-loopback"])
def test_another_site_page_can_neither_write_nor_read_the_graph(open_server, method, headers, status, error):
    """Without an API key (the default), any page in the user's browser could post events to the receiver (a
    text/plain fetch needs no preflight) and, with a DNS name rebound to 127.0.0.1, read /api/graph: such requests
    are refused and store nothing; producers and the server's own page go on as before."""
    host = "{}:{}".format(*open_server.server_address[:2])
    headers = {k: v.format(host=host) for k, v in headers.items()}
    path, body = ("/api/v1/lineage", json.dumps(E(1, "r1", "injected", outputs=["x"])).encode()) \
        if method == "POST" else ("/api/graph", None)
    got, data = request(open_server, method, path, body, headers)
    assert got == status
    if error:
        assert json.loads(data)["error"].startswith(error)
    _, graph = request(open_server, "GET", "/api/graph")
    assert (b"injected" in graph) == (method == "POST" and status == 201)


def test_a_client_that_never_finishes_its_request_is_let_go(open_server, monkeypatch):
    """A connection that sends half a request and then nothing is closed after the idle limit (it held a thread
    forever: four hundred such clients, four hundred threads)."""
    from lineage_graph import server as server_module

    assert server_module.Handler.timeout == server_module.IDLE_S == 60
    monkeypatch.setattr(server_module.Handler, "timeout", 0.5)  # (the same limit, shorter for the test)
    with socket.create_connection(open_server.server_address[:2], timeout=10) as sock:
        sock.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        assert sock.recv(1024) == b""  # closed by the server, well before this socket's own 10 s
    assert request(open_server, "GET", "/health")[0] == 200
