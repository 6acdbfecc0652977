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
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode() + body)
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
