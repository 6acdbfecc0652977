"""The lineage page: one self-contained HTML file (vendored Cytoscape.js + cytoscape-dagre, data inlined) that works
offline; ``serve`` shows the same page and refreshes it from ``/api/graph``."""
from __future__ import annotations

import sqlite3
from functools import lru_cache
from pathlib import Path

import orjson

from .derive import graph_levels, load_graph
from .render import iso

STATIC = Path(__file__).with_name("static")
VENDORED = ("cytoscape.min.js", "cytoscape-dagre.min.js")
# above this many drawn nodes the page places nodes by the levels computed here instead of running dagre in the
# browser (dagre's crossing reduction grows faster than linearly; measured in benchmarks/graph_bench.py)
DAGRE_MAX_NODES = 1200
# nor for groups nested deeper than this (parents of parents...): dagre's compound layout took 3.6 s for 100 levels
# and froze the tab for minutes at 300, whatever the number of nodes
DAGRE_MAX_NESTING = 30


def graph_data(conn: sqlite3.Connection) -> dict:
    """The current graph as the page draws it: nodes (jobs, datasets, parent groups) with their level and a preset
    position, and edges (dataset -> job for inputs, job -> dataset for outputs)."""
    graph = load_graph(conn)
    levels = graph_levels(graph)
    nodes: list[dict] = []
    edges: list[dict] = []
    visible = graph.visible_jobs()
    groups = {j.id for j in visible if j.children and any(graph.jobs[c].nruns or graph.jobs[c].children
                                                          for c in j.children)}
    for j in visible:
        parent = graph.jobs.get(j.parent_id) if j.parent_id is not None else None
        label = j.fqn
        if parent is not None and j.fqn.startswith(parent.fqn + "."):
            label = j.fqn[len(parent.fqn) + 1:]
        data = {"id": f"j{j.id}", "label": label, "key": j.key, "kind": "group" if j.id in groups else "job",
                "state": j.state, "version": j.version, "jobType": j.job_type,
                "lineageUnknown": j.lineage_unknown, "latest": iso(j.latest_t), "runs": j.nruns,
                "level": levels.get(f"j:{j.id}", 0)}
        if j.error:
            data["error"] = j.error[:500]
        if parent is not None and parent.id in groups:
            data["parent"] = f"j{parent.id}"
        classes = [str(data["kind"])] + (["failed"] if j.state in ("FAIL", "ABORT") else [])
        nodes.append({"data": data, "classes": " ".join(classes)})
        for d in sorted(j.inputs):
            edges.append({"data": {"id": f"i{d}_{j.id}", "source": f"d{d}", "target": f"j{j.id}"}})
        # ids tell inputs from outputs: job 1 reading dataset 2 and job 2 writing dataset 1 are two edges
        for d in sorted(j.outputs):
            edges.append({"data": {"id": f"o{j.id}_{d}", "source": f"j{j.id}", "target": f"d{d}"}})
    for d, (ns, name) in sorted(graph.datasets.items()):
        nodes.append({"data": {"id": f"d{d}", "label": name, "key": f"{ns}/{name}", "namespace": ns,
                               "kind": "dataset", "level": levels.get(f"d:{d}", 0)}, "classes": "dataset"})
    _preset_positions(nodes, edges)
    return {"nodes": nodes, "edges": edges,
            "stats": {"jobs": sum(1 for n in nodes if n["data"]["kind"] == "job"),
                      "datasets": len(graph.datasets), "groups": len(groups), "edges": len(edges),
                      "nesting": _nesting(nodes)}}


def _nesting(nodes: list[dict]) -> int:
    """How many groups deep the deepest node sits."""
    parent = {n["data"]["id"]: n["data"].get("parent") for n in nodes}
    depth: dict[str, int] = {}
    for start in parent:
        chain: list[str] = []
        node: str | None = start
        while node is not None and node not in depth and len(chain) <= len(parent):  # (bounded: no parent loop)
            chain.append(node)
            node = parent.get(node)
        below = depth.get(node, -1) if node is not None else -1
        for each in reversed(chain):
            below += 1
            depth[each] = below
    return max(depth.values(), default=0)


def _preset_positions(nodes: list[dict], edges: list[dict]) -> None:
    """x order within each level by two barycenter sweeps (fewer crossings), y by level: the layout used for
    large graphs, where running dagre in the browser would cost seconds."""
    rows: dict[int, list[dict]] = {}
    for n in nodes:
        if n["data"]["kind"] != "group":
            rows.setdefault(n["data"]["level"], []).append(n)
    pos: dict[str, float] = {}
    for lvl in sorted(rows):
        rows[lvl].sort(key=lambda n: n["data"]["key"])
        for i, n in enumerate(rows[lvl]):
            pos[n["data"]["id"]] = i
    # only predecessors that are placed in a row count: a group (a parent job with its own inputs or outputs, such
    # as a Spark application) is drawn around its members and has no row of its own
    preds: dict[str, list[str]] = {}
    for e in edges:
        if e["data"]["source"] in pos and e["data"]["target"] in pos:
            preds.setdefault(e["data"]["target"], []).append(e["data"]["source"])

    def barycenter(n: dict) -> float:
        ps = preds.get(n["data"]["id"])
        return sum(pos[p] for p in ps) / len(ps) if ps else pos[n["data"]["id"]]

    for _sweep in range(2):
        for lvl in sorted(rows)[1:]:
            row = rows[lvl]
            row.sort(key=barycenter)
            for i, n in enumerate(row):
                pos[n["data"]["id"]] = i
    for lvl, row in rows.items():
        width = len(row)
        for i, n in enumerate(row):
            n["position"] = {"x": (i - width / 2) * 190, "y": lvl * 110}


_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


@lru_cache(maxsize=1)
def _vendored() -> str:
    return "\n".join(f"<script>/* {name}: vendored, see {name.replace('.min.js', '.LICENSE')} */\n"
                     + (STATIC / name).read_text(encoding="utf-8").replace("</script", "<\\/script")
                     + "\n</script>" for name in VENDORED)


def page(conn: sqlite3.Connection, *, live: bool = False) -> str:
    """The whole page with the current graph inlined; ``live`` makes it poll ``/api/graph`` for changes."""
    # `<`, `>` and `&` only occur inside the data's strings, where JSON's \u escapes mean the same: escaped, no name
    # can end the script element (`</script>`) or switch the HTML parser's script state (`<!--<script>`)
    blob = orjson.dumps(graph_data(conn)).decode().translate(_SCRIPT_SAFE)
    text = (_TEMPLATE.replace("/*VENDORED*/", _vendored())
            .replace("/*LIVE*/false", "true" if live else "false")
            .replace("/*DAGRE_MAX*/0", str(DAGRE_MAX_NODES))
            .replace("/*DAGRE_MAX_NESTING*/0", str(DAGRE_MAX_NESTING)))
    return text.replace("/*DATA*/null", blob, 1)  # last: the data is never searched for placeholders


_TEMPLATE = (STATIC / "page.html").read_text(encoding="utf-8") if (STATIC / "page.html").exists() else ""
