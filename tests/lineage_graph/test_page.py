"""The page's data (lineage_graph.html.graph_data): every graph shape gets nodes, edges, levels and a preset position
for every drawn node. The same graphs are loaded in Chromium by test_page_browser.py."""
from __future__ import annotations

import pytest
from graph_events import event as E

from lineage_graph.html import graph_data

# (events, {node key: (kind, level)}, edges as (source key, target key))
PAGE_GRAPHS = [
    # the demo's harvested task: the task run carries the union of its statements' datasets, so the group node has
    # edges of its own (this crashed _preset_positions with KeyError: 'j1')
    pytest.param([E(1, "task", "load", "START"), E(2, "s1", "load.stmt1", parent=("load", "task"), inputs=["src"],
                                                   outputs=["dst"]),
                  E(3, "task", "load", inputs=["src"], outputs=["dst"])],
                 {"ns/load": ("group", 1), "ns/load.stmt1": ("job", 1), "db/src": ("dataset", 0),
                  "db/dst": ("dataset", 2)},
                 {("db/src", "ns/load"), ("ns/load", "db/dst"), ("db/src", "ns/load.stmt1"),
                  ("ns/load.stmt1", "db/dst")}, id="group-with-own-inputs-and-outputs"),
    pytest.param([E(1, "p", "app", outputs=["mid"]), E(2, "c", "app.step", parent=("app", "p"), inputs=["mid"],
                                                       outputs=["out"])],
                 {"ns/app": ("group", 0), "ns/app.step": ("job", 2), "db/mid": ("dataset", 1),
                  "db/out": ("dataset", 3)},
                 {("ns/app", "db/mid"), ("db/mid", "ns/app.step"), ("ns/app.step", "db/out")},
                 id="member-reads-what-its-group-writes"),
    pytest.param([E(1, "r1", "a", inputs=["x"], outputs=["x", "y"])],
                 {"ns/a": ("job", 0), "db/x": ("dataset", 0), "db/y": ("dataset", 1)},
                 {("db/x", "ns/a"), ("ns/a", "db/x"), ("ns/a", "db/y")}, id="dataset-read-and-written-by-one-job"),
    pytest.param([E(1, "r1", "lonely"), E(2, "c1", "dag.t", parent=("dag", "d1")), E(3, "r3", "w", outputs=["o"])],
                 {"ns/lonely": ("job", 0), "ns/dag": ("group", 0), "ns/dag.t": ("job", 0), "ns/w": ("job", 0),
                  "db/o": ("dataset", 1)},
                 {("ns/w", "db/o")}, id="isolated-nodes-and-parent-without-runs"),
    pytest.param([E(1, "r1", "t1", inputs=["y"], outputs=["x"]), E(2, "r2", "t2", inputs=["x"], outputs=["y"]),
                  E(3, "r3", "t3", inputs=["y"], outputs=["z"])],
                 {"ns/t1": ("job", 0), "ns/t2": ("job", 0), "db/x": ("dataset", 0), "db/y": ("dataset", 0),
                  "ns/t3": ("job", 1), "db/z": ("dataset", 2)},
                 {("db/y", "ns/t1"), ("ns/t1", "db/x"), ("db/x", "ns/t2"), ("ns/t2", "db/y"), ("db/y", "ns/t3"),
                  ("ns/t3", "db/z")}, id="cycle"),
]


@pytest.mark.parametrize("events,nodes,edges", PAGE_GRAPHS)
def test_page_data_places_every_node(db, events, nodes, edges):
    db(events)
    data = graph_data(db.conn)
    key = {n["data"]["id"]: n["data"]["key"] for n in data["nodes"]}
    assert {n["data"]["key"]: (n["data"]["kind"], n["data"]["level"]) for n in data["nodes"]} == nodes
    assert {(key[e["data"]["source"]], key[e["data"]["target"]]) for e in data["edges"]} == edges
    assert len({e["data"]["id"] for e in data["edges"]}) == len(edges)  # an input and an output never share an id
    drawn = [n for n in data["nodes"] if n["data"]["kind"] != "group"]
    # a group is drawn around its members: only the other nodes have a position, each its own, in its level's row
    assert all("position" not in n for n in data["nodes"] if n["data"]["kind"] == "group")
    assert len({(n["position"]["x"], n["position"]["y"]) for n in drawn}) == len(drawn)
    assert all(n["position"]["y"] == n["data"]["level"] * 110 for n in drawn)
