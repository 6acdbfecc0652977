"""Questions over the current graph: node resolution (exact, then unambiguous prefix) and upstream/downstream walks.

Walks read the ``current_io`` edge table layer by layer through its two indexes, so an impact question touches
only the part of the graph it needs, not the whole graph.
"""
from __future__ import annotations

import sqlite3


class NodeNotFound(LookupError):
    """No node matches; ``candidates`` lists the nodes an ambiguous prefix matched (empty: none)."""

    def __init__(self, text: str, candidates: list[str]) -> None:
        self.text = text
        self.candidates = candidates
        super().__init__(f"{'ambiguous' if candidates else 'no'} node {text!r}")


class Node:
    """A dataset (``kind='dataset'``) or a job, with the id of its table and its display key. (Plain classes
    here, not attrs: a traversal imports nothing it does not need, see ``cli``.)"""

    __slots__ = ("kind", "id", "key")

    def __init__(self, kind: str, id: int, key: str) -> None:  # noqa: A002 - the table's column
        self.kind, self.id, self.key = kind, id, key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and (self.kind, self.id, self.key) == (other.kind, other.id, other.key)

    def __hash__(self) -> int:
        return hash((self.kind, self.id, self.key))

    def __repr__(self) -> str:
        return f"Node(kind={self.kind!r}, id={self.id!r}, key={self.key!r})"


#: Jobs shown by ``show`` (:meth:`derive.Graph.visible_jobs`): those that ran, and those known only as the parent
#: of jobs (an Airflow task named by its Spark application's parent facet). Leaving the latter out made the
#: prefix match answer ``history dag.task`` with the history of ``dag.task.child``. The parents are one list
#: subquery, read once (a correlated EXISTS over jobs.parent_id, which has no index, scanned every job for each
#: job without runs).
_JOB_SQL = ("SELECT id, coalesce(effective_namespace, namespace) || '/' || coalesce(fqn, name), "
            "namespace || '/' || name FROM jobs j "
            "WHERE (EXISTS (SELECT 1 FROM job_current c WHERE c.job_id = j.id) "
            "OR j.id IN (SELECT parent_id FROM jobs)) AND ")


def resolve(conn: sqlite3.Connection, text: str) -> Node:
    """A dataset written ``namespace/name`` or a job written ``namespace/fqn``, its fully qualified name, or its own
    name; exact match first, then a prefix matching one node only. Raises NodeNotFound."""
    found: dict[tuple[str, int], str] = {}
    # namespace/name split at each '/' (namespaces hold slashes too): exact lookups on the unique index
    pairs = [(text[:i], text[i + 1:]) for i, c in enumerate(text) if c == "/"]
    if "://" in text or text.lower().startswith("file:"):
        pairs += _spelled_as_stored(text, pairs)
    for ns, name in pairs:
        for (i,) in conn.execute("SELECT id FROM datasets WHERE namespace=? AND name=?", (ns, name)):
            found[("dataset", i)] = f"{ns}/{name}"
        for i, key in conn.execute("SELECT d.id, d.namespace || '/' || d.name FROM dataset_aliases a JOIN datasets d "
                                   "ON d.id = a.dataset_id WHERE a.namespace=? AND a.name=?", (ns, name)):
            found[("dataset", i)] = key  # another name of it (a symlink): the dataset under the name it is shown by
    if not found:
        for i, ns, name in conn.execute("SELECT id, namespace, name FROM datasets WHERE name = ?", (text,)):
            found[("dataset", i)] = f"{ns}/{name}"
        for i, key in conn.execute("SELECT d.id, d.namespace || '/' || d.name FROM dataset_aliases a JOIN datasets d "
                                   "ON d.id = a.dataset_id WHERE a.name = ?", (text,)):
            found[("dataset", i)] = key  # one of its other names (a table's other location, its table name)
    own: dict[tuple[str, int], str] = {}  # a job's own namespace/name: tells apart two jobs shown alike
    for i, key, own_name in conn.execute(_JOB_SQL + "(coalesce(effective_namespace, namespace) || '/' || "
                                         "coalesce(fqn, name) = ? OR fqn = ? OR name = ? OR namespace || '/' || "
                                         "name = ?)", (text, text, text, text)):
        found[("job", i)], own[("job", i)] = key, own_name
    if not found:
        hi = text + "\U0010ffff"
        # the prefix as a range on the indexed (namespace, name) pair when it spans the namespace, else on name
        for i, ns, name in conn.execute(
                "SELECT id, namespace, name FROM datasets WHERE (namespace || '/' || name >= ? AND "
                "namespace || '/' || name < ?) OR (name >= ? AND name < ?) LIMIT 50", (text, hi, text, hi)):
            found[("dataset", i)] = f"{ns}/{name}"
        for i, key, own_name in conn.execute(_JOB_SQL + "(coalesce(effective_namespace, namespace) || '/' || "
                                             "coalesce(fqn, name) LIKE ? ESCAPE '\\' OR fqn LIKE ? ESCAPE '\\') "
                                             "LIMIT 50", (_like(text), _like(text))):
            found[("job", i)], own[("job", i)] = key, own_name
    if len(found) == 1:
        (kind, i), key = next(iter(found.items()))
        return Node(kind, i, key)
    shown = list(found.values())
    # two jobs shown by one name (job `a.b` under `p`, job `b` under `p.a`): each with a name that picks it
    candidates = [f"{key}  (or {own[node]})" if node in own and shown.count(key) > 1 else key
                  for node, key in found.items()]
    raise NodeNotFound(text, sorted(candidates))


def _spelled_as_stored(text: str, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The dataset the user typed, spelled as the ingest stores it (``naming.normalize_dataset``): a path written
    as a URI (``hdfs://nn:8020/warehouse/t``, ``file:///tmp/x``), a Snowflake name in any case."""
    from .naming import normalize_dataset, uri_dataset

    snowflake = [normalize_dataset(ns, name) for ns, name in pairs if ns.lower().startswith("snowflake://")]
    return uri_dataset(text) + [p for p in snowflake if p is not None]


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Walk:
    """The result of a walk: nodes with their distance (edges from the start) and the edges crossed."""

    def __init__(self, start: Node, direction: str, depth: int | None, nodes: dict[tuple[str, int], int],
                 edges: list[tuple[tuple[str, int], tuple[str, int]]], names: dict[tuple[str, int], str],
                 states: dict[int, str | None]) -> None:
        self.start, self.direction, self.depth = start, direction, depth
        self.nodes, self.edges, self.names, self.states = nodes, edges, names, states

    def to_json(self) -> dict:
        def ref(n: tuple[str, int]) -> dict:
            return {"kind": n[0], "key": self.names[n]}

        return {"start": {"kind": self.start.kind, "key": self.start.key}, "direction": self.direction,
                "depth": self.depth,
                "nodes": [{**ref(n), "distance": d, **({"state": self.states.get(n[1])} if n[0] == "job" else {})}
                          for n, d in sorted(self.nodes.items(), key=lambda x: (x[1], self.names[x[0]]))],
                "edges": [{"from": ref(a), "to": ref(b)} for a, b in
                          sorted(self.edges, key=lambda e: (self.names[e[0]], self.names[e[1]]))]}


def walk(conn: sqlite3.Connection, start: Node, direction: str, depth: int | None = None) -> Walk:
    """Breadth-first walk over the current job/dataset graph; ``depth`` counts edges (dataset -> job -> dataset is
    2), None for no limit. ``direction`` is ``upstream`` or ``downstream``."""
    down = direction == "downstream"
    nodes: dict[tuple[str, int], int] = {(start.kind, start.id): 0}
    edges: list[tuple[tuple[str, int], tuple[str, int]]] = []
    frontier = [(start.kind, start.id)]
    # a job's first step includes the jobs it contains, shown as itself: a Spark application, an Airflow DAG or
    # task reads and writes through its actions and tasks (the application's own events name no dataset)
    shown_as = {j: start.id for j in _descendants(conn, start.id)} if start.kind == "job" else {}
    frontier += [("job", j) for j in shown_as]
    seen_edges: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    dist = 0
    while frontier and (depth is None or dist < depth):
        dist += 1
        nxt = []
        ds_ids = [i for k, i in frontier if k == "dataset"]
        job_ids = [i for k, i in frontier if k == "job"]
        found: list[tuple[tuple[str, int], tuple[str, int]]] = []
        # downstream: dataset -> jobs reading it (dir 0), job -> datasets it writes (dir 1); upstream: reverse
        for part in _chunks(ds_ids):
            for d, j in conn.execute(f"SELECT dataset_id, job_id FROM current_io WHERE dir=? AND dataset_id IN "
                                     f"({','.join('?' * len(part))})", (0 if down else 1, *part)):
                found.append((("dataset", d), ("job", j)))
        for part in _chunks(job_ids):
            for j, d in conn.execute(f"SELECT job_id, dataset_id FROM current_io WHERE dir=? AND job_id IN "
                                     f"({','.join('?' * len(part))})", (1 if down else 0, *part)):
                found.append((("job", shown_as.get(j, j) if dist == 1 else j), ("dataset", d)))
        for a, b in found:
            edge = (a, b) if down else (b, a)
            if edge in seen_edges:  # (two contained jobs writing one dataset)
                continue
            seen_edges.add(edge)
            edges.append(edge)
            if b not in nodes:
                nodes[b] = dist
                nxt.append(b)
        frontier = nxt
    names = _names(conn, nodes)
    states = _states(conn, [i for k, i in nodes if k == "job"])
    return Walk(start, direction, depth, nodes, edges, names, states)


def _descendants(conn: sqlite3.Connection, job_id: int) -> list[int]:
    """The jobs under ``job_id`` (children, their children...), by the hierarchy's parent ids."""
    return [j for (j,) in conn.execute(
        "WITH RECURSIVE d(id) AS (SELECT id FROM jobs WHERE parent_id = ? "
        "UNION SELECT j.id FROM jobs j JOIN d ON j.parent_id = d.id) SELECT id FROM d", (job_id,))]


def _chunks(ids: list[int], size: int = 500) -> list[list[int]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def _names(conn: sqlite3.Connection, nodes: dict[tuple[str, int], int]) -> dict[tuple[str, int], str]:
    names: dict[tuple[str, int], str] = {}
    ds = [i for k, i in nodes if k == "dataset"]
    jobs = [i for k, i in nodes if k == "job"]
    for part in _chunks(ds):
        for i, key in conn.execute(f"SELECT id, namespace || '/' || name FROM datasets WHERE id IN "
                                   f"({','.join('?' * len(part))})", part):
            names[("dataset", i)] = key
    for part in _chunks(jobs):
        for i, key in conn.execute(f"SELECT id, coalesce(effective_namespace, namespace) || '/' || "
                                   f"coalesce(fqn, name) FROM jobs WHERE id IN ({','.join('?' * len(part))})", part):
            names[("job", i)] = key
    return names


def _states(conn: sqlite3.Connection, jobs: list[int]) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for part in _chunks(jobs):
        out.update(conn.execute(f"SELECT job_id, latest_state FROM job_current WHERE job_id IN "
                                f"({','.join('?' * len(part))})", part))
    return out


def history(conn: sqlite3.Connection, job_id: int) -> list[dict]:
    """Versions of a job, oldest first, each with what changed from the previous one."""
    from .store import blob_ids

    rows = conn.execute("SELECT version, run_id, t, code, inputs, outputs, lineage_unknown FROM job_versions "
                        "WHERE job_id=? ORDER BY version", (job_id,)).fetchall()
    ids = {d for r in rows for blob in (r[4], r[5]) for d in blob_ids(blob)}
    names = _names(conn, {("dataset", d): 0 for d in ids})
    nruns = dict(conn.execute("SELECT v.version, count(*) FROM job_versions v JOIN runs r ON r.job_id = v.job_id "
                              "AND r.start_t >= v.t AND NOT EXISTS (SELECT 1 FROM job_versions w WHERE "
                              "w.job_id = v.job_id AND w.version = v.version + 1 AND r.start_t >= w.t) "
                              "WHERE v.job_id=? GROUP BY v.version", (job_id,)))
    out = []
    prev_in: set[str] = set()
    prev_out: set[str] = set()
    prev_code = None
    for version, run_id, t, code, inputs, outputs, unknown in rows:
        ins = {names[("dataset", d)] for d in blob_ids(inputs)}
        outs = {names[("dataset", d)] for d in blob_ids(outputs)}
        changes = {}
        if version > 1:
            changes = {k: v for k, v in {
                "inputs_added": sorted(ins - prev_in), "inputs_removed": sorted(prev_in - ins),
                "outputs_added": sorted(outs - prev_out), "outputs_removed": sorted(prev_out - outs),
                "code": [prev_code, code] if code != prev_code else None}.items() if v}
        out.append({"version": version, "first_run": run_id, "since": t, "code_version": code,
                    "lineage_unknown": bool(unknown), "runs": nruns.get(version, 0), "inputs": sorted(ins),
                    "outputs": sorted(outs), "changes": changes})
        prev_in, prev_out, prev_code = ins, outs, code
    return out


def dataset_versions(conn: sqlite3.Connection, dataset_id: int | None = None) -> list[tuple[int, str, int, float]]:
    """Versions of a dataset (of all datasets when None): every COMPLETE run writing it makes one, as
    ``(dataset_id, run_id, job_id, end time)`` in time order. Read from the runs when asked (no command keeps them
    up to date at every ingest)."""
    from .store import blob_ids

    out = [(d, run_id, job_id, t) for run_id, job_id, t, outputs in conn.execute(
        "SELECT run_id, job_id, end_t, outputs FROM runs WHERE state = 'COMPLETE'")
        for d in blob_ids(outputs) if dataset_id is None or d == dataset_id]
    out.sort(key=lambda v: (v[3] or 0, v[0], v[1]))
    return out

