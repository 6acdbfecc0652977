"""`graph serve` over real HTTP on 127.0.0.1: POST /api/v1/lineage (plain, gzip, API key, 400s), GET / and
/api/graph."""
from __future__ import annotations

import gzip
import http.client
import json
import threading

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
                                                                                "duplicates": 0}),
    ("gzip", gzip.compress(json.dumps(E(2, "r2", "b", inputs=["x"])).encode()), {**AUTH, "Content-Encoding": "gzip"},
     201, {"received": 1, "new": 1, "duplicates": 0}),
    ("array-with-duplicate", json.dumps([E(1, "r1", "a", outputs=["x"]), E(3, "r3", "c")]).encode(), AUTH, 201,
     {"received": 2, "new": 1, "duplicates": 1}),
    ("no-key", json.dumps(E(4, "r4", "d")).encode(), {}, 401,
     {"error": "missing or wrong API key (Authorization: Bearer ...)"}),
    ("wrong-key", json.dumps(E(4, "r4", "d")).encode(), {"Authorization": "Bearer nope"}, 401,
     {"error": "missing or wrong API key (Authorization: Bearer ...)"}),
    ("invalid-event", json.dumps({**E(4, "r4", "d"), "run": {"runId": "x"}}).encode(), AUTH, 400,
     {"error": "run.runId must be a UUID"}),
    ("invalid-in-array", json.dumps([E(4, "r4", "d"), {"job": 1}]).encode(), AUTH, 400,
     {"error": "event 1: job must be an object"}),
    ("not-json", b"{", AUTH, 400, {"error": "body is not JSON (unexpected end of data)"}),
    ("bad-gzip", b"nope", {**AUTH, "Content-Encoding": "gzip"}, 400, {"error": "body is not valid gzip/deflate"}),
]


def test_post_cases_then_graph_and_page(server):
    for name, body, headers, status, answer in CASES:
        got = request(server, "POST", "/api/v1/lineage", body, headers)
        assert (got[0], json.loads(got[1])) == (status, answer), name
    status, body = request(server, "GET", "/api/graph")
    data = json.loads(body)
    assert status == 200
    assert sorted(n["data"]["key"] for n in data["nodes"]) == ["db/x", "ns/a", "ns/b", "ns/c"]
    assert sorted((e["data"]["source"], e["data"]["target"]) for e in data["edges"]) == \
        sorted([("j1", "d1"), ("d1", "j2")])
    status, page = request(server, "GET", "/")
    assert status == 200 and b"var LIVE = true;" in page and b"cytoscape" in page and b"http://" not in page[:200]
    assert request(server, "POST", "/other", b"{}", AUTH)[0] == 404
