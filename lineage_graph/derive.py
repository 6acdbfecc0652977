"""Derivation (reference section 7): runs -> job versions, dataset versions, the current graph, the job hierarchy
and the task DAG.

``refresh`` rebuilds the derived tables of the jobs that ingest marked dirty (all of a job's runs are read again,
so events that arrived out of order give the same result as ordered ones), then the hierarchy columns of all jobs.
``load_graph`` reads the current graph; ``task_dag`` folds it to tasks.
"""
from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable

import attrs

from .store import blob_ids, ids_blob

# (jobType, integration or None for any): jobs that only group the schedulable ones below them. An Airflow DAG
# groups its tasks; dbt's run of a project (jobType JOB, integration DBT: `dbt-run-<project>`) groups its models,
# which are the units a lineage-driven schedule orders (`dbt run --select <model>`). Under an Airflow task, the
# task stays the unit: it is the top-most job that is not a container.
CONTAINER_TYPES = frozenset({("DAG", None), ("JOB", "DBT")})


@attrs.define
class Version:
    """One job version: what its runs read and wrote while nothing changed."""

    version: int
    run_id: str
    t: float | None
    code: str | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    lineage_unknown: bool


def job_versions(runs: Iterable[tuple]) -> list[Version]:
    """Versions of one job from its runs ``(run_id, state_rank, start_t, code, inputs, outputs)`` in time order.

    A new version when the job is new, when its input or output set changed, or when its code version changed;
    run status is not a criterion (a failed run knows its datasets). A run without inputs/outputs whose code
    version changed keeps the previous lineage, marked ``lineage_unknown``; a run without lineage and without code
    change changes nothing. Runs still in progress count only while the job has no finished run with lineage (a
    streaming job's long RUNNING run keeps its lineage beside a finished run that named no dataset)."""
    runs = list(runs)
    finished = [r for r in runs if r[1] == 2]
    counted = finished if any(r[4] or r[5] for r in finished) else runs
    versions: list[Version] = []
    cur: Version | None = None
    for run_id, _rank, t, code, inputs, outputs in counted:
        has_io = bool(inputs or outputs)
        if cur is None:
            cur = Version(1, run_id, t, code, inputs, outputs, False)
            versions.append(cur)
            continue
        code_changed = code is not None and code != cur.code
        if has_io:
            if (inputs, outputs) != (cur.inputs, cur.outputs) or code_changed or cur.lineage_unknown:
                cur = Version(len(versions) + 1, run_id, t, code if code is not None else cur.code,
                              inputs, outputs, False)
                versions.append(cur)
        elif code_changed:
            cur = Version(len(versions) + 1, run_id, t, code, cur.inputs, cur.outputs, True)
            versions.append(cur)
    return versions


def refresh(conn: sqlite3.Connection) -> int:
    """Rebuild what depends on the runs of dirty jobs; returns how many jobs were rebuilt (0: nothing to do)."""
    if conn.execute("SELECT 1 FROM dirty_jobs LIMIT 1").fetchone() is None:
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        count = _rebuild_jobs(conn)
        _rebuild_hierarchy(conn)
        conn.execute("DELETE FROM dirty_jobs")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return count


_RUNS_OF_DIRTY = ("SELECT job_id, run_id, state_rank, start_t, code, inputs, outputs, state, end_t, error, job_type, "
                  "integration FROM runs WHERE job_id IN (SELECT job_id FROM dirty_jobs) "
                  "ORDER BY job_id, start_t, end_t, run_id")
_FLUSH = 20_000  # rows of derived tables written at once (memory stays flat whatever the number of runs)


def _rebuild_jobs(conn: sqlite3.Connection) -> int:
    """All dirty jobs at once: their derived rows deleted with one statement per table, their runs read in one
    ordered scan (a job at a time, never all runs in memory), the new rows written in batches."""
    count = conn.execute("SELECT count(*) FROM dirty_jobs").fetchone()[0]
    for table in ("job_versions", "job_current", "current_io"):
        conn.execute(f"DELETE FROM {table} WHERE job_id IN (SELECT job_id FROM dirty_jobs)")
    out: dict[str, list] = {"versions": [], "current": [], "io": [], "types": []}

    def flush() -> None:
        conn.executemany("INSERT INTO job_versions VALUES (?,?,?,?,?,?,?,?)", out["versions"])
        conn.executemany("INSERT INTO job_current VALUES (?,?,?,?,?,?,?,?)", out["current"])
        conn.executemany("INSERT INTO current_io VALUES (?,?,?)", out["io"])
        conn.executemany("UPDATE jobs SET job_type=?, integration=? WHERE id=?", out["types"])
        for rows in out.values():
            rows.clear()

    # a second connection is not needed: SQLite lets one connection write other tables while a scan of `runs`
    # is open; the scan is read in pages so the writes interleave
    cursor = conn.execute(_RUNS_OF_DIRTY)
    job_id = -1
    runs: list[tuple] = []
    while True:
        page = cursor.fetchmany(5000)
        for row in page:
            if row[0] != job_id:
                if runs:
                    _derive_job(job_id, runs, out)
                job_id, runs = row[0], []
            runs.append(row[1:])
        if not page:
            break
        if len(out["versions"]) + len(out["io"]) > _FLUSH:
            flush()
    if runs:
        _derive_job(job_id, runs, out)
    flush()
    return count


def _derive_job(job_id: int, rows: list[tuple], out: dict[str, list]) -> None:
    """Derived rows of one job from its runs ``(run_id, state_rank, start_t, code, inputs, outputs, state, end_t,
    error, job_type, integration)`` in time order."""
    decoded = [(r[0], r[1], r[2], r[3], blob_ids(r[4]), blob_ids(r[5])) for r in rows]
    versions = job_versions(decoded)
    out["versions"].extend((job_id, v.version, v.run_id, v.t, v.code, ids_blob(v.inputs), ids_blob(v.outputs),
                            int(v.lineage_unknown)) for v in versions)
    last = versions[-1]
    latest = rows[-1]
    out["current"].append((job_id, last.version, int(last.lineage_unknown), latest[0], latest[6], latest[2],
                           latest[8] if latest[6] == "FAIL" else None, len(rows)))
    out["io"].extend([(job_id, d, 0) for d in last.inputs] + [(job_id, d, 1) for d in last.outputs])
    for r in reversed(rows):
        if r[9] is not None:
            out["types"].append((r[9], r[10], job_id))
            break


def _rebuild_hierarchy(conn: sqlite3.Connection) -> None:
    jobs = conn.execute("SELECT id, namespace, name, parent_namespace, parent_name FROM jobs").fetchall()
    by_name: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j, ns, name, _pns, _pn in jobs:
        by_name[(ns, name)].append(j)
    # parents known only from ParentRun facets (an Airflow DAG that sends no events) become jobs without runs
    for _j, _ns, _name, pns, pname in jobs:
        if pname and (pns, pname) not in by_name:
            new = conn.execute("INSERT INTO jobs (namespace, name, parent_namespace, parent_name) "
                               "VALUES (?,?,'','')", (pns, pname)).lastrowid
            assert new is not None  # an INSERT into a rowid table
            by_name[(pns, pname)].append(new)
            jobs.append((new, pns, pname, "", ""))
    latest_parent_job = dict(conn.execute(
        "SELECT c.job_id, p.job_id FROM job_current c JOIN runs r ON r.run_id = c.latest_run_id "
        "JOIN runs p ON p.run_id = r.parent_run_id"))
    recent = dict(conn.execute("SELECT job_id, latest_t FROM job_current"))
    info = {j: (ns, name) for j, ns, name, _pns, _pn in jobs}
    parent: dict[int, int | None] = {}
    for j, _ns, _name, pns, pname in jobs:
        if not pname:
            parent[j] = None
            continue
        cands = by_name[(pns, pname)]
        p = latest_parent_job.get(j)
        if p not in cands:
            # the parent run is not known: the job of that name, the most recently run if several
            p = max(cands, key=lambda c: (recent.get(c) or 0, c))
        parent[j] = p if p != j else None
    fqns: dict[int, tuple[str, str]] = {}

    def fqn(j: int, seen: frozenset = frozenset()) -> tuple[str, str]:
        if j in fqns:
            return fqns[j]
        ns, name = info[j]
        p = parent[j]
        if p is None or p in seen:
            res = (name, ns)
        else:
            pf, pns = fqn(p, seen | {j})
            praw = info[p][1]
            if name.startswith(pf + "."):
                res = (name, pns)
            elif name.startswith(praw + "."):
                res = (f"{pf}.{name[len(praw) + 1:]}", pns)
            else:
                res = (f"{pf}.{name}", pns)
        fqns[j] = res
        return res

    conn.executemany("UPDATE jobs SET parent_id=?, fqn=?, effective_namespace=? WHERE id=?",
                     [(parent[j], *fqn(j), j) for j in info])


# -- reading the current graph ------------------------------------------------------------------------------
@attrs.define
class Job:
    """A job of the current graph (inputs/outputs of its latest version)."""

    id: int
    namespace: str
    name: str
    fqn: str
    effective_namespace: str
    parent_id: int | None
    job_type: str | None
    integration: str | None
    version: int | None = None
    lineage_unknown: bool = False
    state: str | None = None
    latest_t: float | None = None
    error: str | None = None
    nruns: int = 0
    inputs: set[int] = attrs.Factory(set)
    outputs: set[int] = attrs.Factory(set)
    children: list[int] = attrs.Factory(list)
    # namespace/fqn, made once: answers about 20,000 jobs sort and print it hundreds of thousands of times
    key: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.key = f"{self.effective_namespace}/{self.fqn}"

    @property
    def is_container(self) -> bool:
        """A DAG, a dbt run (see :data:`CONTAINER_TYPES`) or a parent known only from its children's ParentRun
        facets."""
        job_type = (self.job_type or "").upper()
        return self.nruns == 0 or (job_type, None) in CONTAINER_TYPES \
            or (job_type, (self.integration or "").upper()) in CONTAINER_TYPES


@attrs.define
class Graph:
    """The current lineage graph: jobs (with hierarchy) and the datasets they read or write."""

    jobs: dict[int, Job]
    datasets: dict[int, tuple[str, str]]
    _keys: dict[int, str] = attrs.Factory(dict)

    def readers(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = defaultdict(set)
        for j in self.jobs.values():
            for d in j.inputs:
                out[d].add(j.id)
        return out

    def writers(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = defaultdict(set)
        for j in self.jobs.values():
            for d in j.outputs:
                out[d].add(j.id)
        return out

    def dataset_key(self, d: int) -> str:
        return self.dataset_keys()[d]

    def dataset_keys(self) -> dict[int, str]:
        """``namespace/name`` of every dataset, by id (made once)."""
        if len(self._keys) != len(self.datasets):
            self._keys = {d: f"{ns}/{name}" for d, (ns, name) in self.datasets.items()}
        return self._keys

    def visible_jobs(self) -> list[Job]:
        """Jobs that ran or contain jobs that ran, sorted by namespace and fully qualified name."""
        return sorted((j for j in self.jobs.values() if j.nruns or j.children), key=lambda j: (j.key, j.id))


def load_graph(conn: sqlite3.Connection) -> Graph:
    """Read the current graph (call ``refresh`` first)."""
    jobs = {r[0]: Job(*r) for r in conn.execute(
        "SELECT id, namespace, name, coalesce(fqn, name), coalesce(effective_namespace, namespace), parent_id, "
        "job_type, integration FROM jobs")}
    for job_id, version, unknown, state, t, error, nruns in conn.execute(
            "SELECT job_id, version, lineage_unknown, latest_state, latest_t, error, nruns FROM job_current"):
        j = jobs[job_id]
        j.version, j.lineage_unknown, j.state, j.latest_t, j.error, j.nruns = \
            version, bool(unknown), state, t, error, nruns
    used: set[int] = set()
    for job_id, d, direction in conn.execute("SELECT job_id, dataset_id, dir FROM current_io"):
        (jobs[job_id].outputs if direction else jobs[job_id].inputs).add(d)
        used.add(d)
    for j in jobs.values():
        if j.parent_id is not None and j.parent_id in jobs:
            jobs[j.parent_id].children.append(j.id)
    datasets = {}
    if used:
        for i, ns, name in conn.execute("SELECT id, namespace, name FROM datasets"):
            if i in used:
                datasets[i] = (ns, name)
    return Graph(jobs, datasets)


# -- task DAG -------------------------------------------------------------------------------------------------
@attrs.define
class TaskDag:
    """Tasks (jobs at the chosen level, with the jobs folded into them), edges labelled with the datasets that make
    them, topological levels, and the cycles found (each: its tasks and the datasets on its edges)."""

    tasks: dict[int, Job]
    members: dict[int, list[int]]
    inputs: dict[int, set[int]]
    outputs: dict[int, set[int]]
    edges: dict[tuple[int, int], set[int]]
    levels: dict[int, int]
    cycles: list[dict]


def fold_target(graph: Graph, job: Job, level: str | int) -> int | None:
    """The job that ``job`` folds into at ``level`` (``task``, ``root``, ``leaf`` or a depth, 0 = root)."""
    chain = [job]
    seen = {job.id: 0}
    parent = job.parent_id
    while parent is not None and parent in graph.jobs and parent not in seen:
        seen[parent] = len(chain)
        chain.append(graph.jobs[parent])
        parent = chain[-1].parent_id
    if parent is not None and parent in seen:  # a cycle of parents above: one job stands for all of it, the same
        cycle = chain[seen[parent]:]  # for each of them (else each folded into another and the tasks swapped)
        chain = chain[:seen[parent]] + [min(cycle, key=lambda j: j.key)]
    chain.reverse()  # root first
    if level == "leaf":
        return job.id
    if level == "root":
        return chain[0].id
    if isinstance(level, int):
        return chain[min(level, len(chain) - 1)].id
    for j in chain:  # "task": the top-most job below containers (DAGs, parents without runs)
        if not j.is_container:
            return j.id
    return job.id if (job.inputs or job.outputs) else None


def _task_tops(graph: Graph) -> dict[int, int | None]:
    """For every job whose ancestry has no cycle: the top-most job of its chain that is not a container (None if
    all are), what ``fold_target(..., "task")`` looks for, computed once per job from its parent's answer instead
    of walking every chain. Jobs on or below a parent cycle are left to ``fold_target``."""
    jobs = graph.jobs
    tops: dict[int, int | None] = {}
    for start in jobs:
        chain: list[int] = []
        on_chain: set[int] = set()
        j: int | None = start
        while j is not None and j not in tops:
            if j in on_chain:
                break  # a cycle of parents: fold_target decides for these jobs
            chain.append(j)
            on_chain.add(j)
            p = jobs[j].parent_id
            j = p if p is not None and p in jobs else None
        else:
            above = tops[j] if j is not None else None
            for k in reversed(chain):  # root side first
                if above is None and not jobs[k].is_container:
                    above = k
                tops[k] = above
    return tops


def _covered_by_children(graph: Graph) -> set[int]:
    """Jobs whose inputs and outputs are all their children's (a harvested task's are its statements' union): at
    the ``leaf`` level they are drawn as those children; as nodes of their own beside them they made a cycle with
    them (the task writes what its next statement reads, which writes what the task reads)."""
    ins: dict[int, set[int]] = defaultdict(set)
    outs: dict[int, set[int]] = defaultdict(set)
    for job in graph.jobs.values():
        if job.nruns and job.parent_id is not None and job.parent_id != job.id:
            ins[job.parent_id] |= job.inputs
            outs[job.parent_id] |= job.outputs
    return {j.id for j in graph.jobs.values() if (j.inputs or j.outputs) and (ins[j.id] or outs[j.id])
            and j.inputs <= ins[j.id] and j.outputs <= outs[j.id]}


def parse_level(text: str) -> str | int:
    """``task``/``root``/``leaf`` or a non-negative depth."""
    if text in ("task", "root", "leaf"):
        return text
    if text.isdigit():
        return int(text)
    raise ValueError(f"level must be task, root, leaf or a depth number, not {text!r}")


def task_dag(graph: Graph, level: str | int = "task") -> TaskDag:
    """Fold the current graph to tasks at ``level``: task A -> task B when B reads a dataset A writes (a task
    reading its own output is no edge). Levels by longest path from the sources; tasks of one cycle share a
    level, and each cycle is reported with its tasks and datasets instead of failing."""
    members: dict[int, list[int]] = defaultdict(list)
    inputs: dict[int, set[int]] = defaultdict(set)
    outputs: dict[int, set[int]] = defaultdict(set)
    tops = _task_tops(graph) if level == "task" else {}
    covered = _covered_by_children(graph) if level == "leaf" else set()
    for job in graph.jobs.values():
        if not job.nruns or job.id in covered:
            continue
        if job.id in tops:
            top = tops[job.id]
            t = top if top is not None else (job.id if (job.inputs or job.outputs) else None)
        else:
            t = fold_target(graph, job, level)
        if t is None:
            continue
        members[t].append(job.id)
        inputs[t] |= job.inputs
        outputs[t] |= job.outputs
    writers: dict[int, set[int]] = defaultdict(set)
    for t, outs in outputs.items():
        for d in outs:
            writers[d].add(t)
    edges: dict[tuple[int, int], set[int]] = defaultdict(set)
    for b, ins in inputs.items():
        for d in ins:
            for a in writers.get(d, ()):
                if a != b:
                    edges[(a, b)].add(d)
    succ: dict[int, list[int]] = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    nodes = sorted(members, key=lambda t: graph.jobs[t].key)
    comps = _tarjan(nodes, succ)
    comp_of = {n: i for i, comp in enumerate(comps) for n in comp}
    cycles = []
    for comp in comps:
        if len(comp) > 1:
            inside = set(comp)
            ds = set()
            for (a, b), dsets in edges.items():
                if a in inside and b in inside:
                    ds |= dsets
            tasks = sorted(comp, key=lambda t: graph.jobs[t].key)
            cycles.append({"tasks": tasks, "datasets": sorted(ds), "path": _cycle_path(tasks[0], inside, succ)})
    # longest-path levels over the condensation (Tarjan returns components in reverse topological order)
    comp_level = [0] * len(comps)
    for ci in range(len(comps) - 1, -1, -1):
        for n in comps[ci]:
            for m in succ.get(n, ()):
                cj = comp_of[m]
                if cj != ci and comp_level[cj] < comp_level[ci] + 1:
                    comp_level[cj] = comp_level[ci] + 1
    levels = {n: comp_level[comp_of[n]] for n in nodes}
    return TaskDag({t: graph.jobs[t] for t in nodes}, dict(members), dict(inputs), dict(outputs), dict(edges),
                   levels, cycles)


def _cycle_path(start: int, inside: set[int], succ: dict[int, list[int]]) -> list[int]:
    """One cycle through ``start`` inside its strongly connected component, in the order its edges run
    (``start, ..., start``): the shortest, found breadth first."""
    came_from: dict[int, int] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for n in frontier:
            for m in sorted(succ.get(n, ())):
                if m not in inside:
                    continue
                if m == start:
                    path = [n]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if n != start else [start, start]
                if m not in came_from:
                    came_from[m] = n
                    nxt.append(m)
        frontier = nxt
    return [start]


def _tarjan(nodes: list[int], succ: dict[int, list[int]]) -> list[list[int]]:
    """Strongly connected components, iteratively (no recursion limit), in reverse topological order."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    comps: list[list[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
    return comps


def graph_levels(graph: Graph) -> dict[str, int]:
    """Layer of every node of the bipartite current graph (``j:<id>``/``d:<id>``), longest path from the sources,
    nodes of a cycle sharing a layer: what the page lays out row by row."""
    succ: dict[str, list[str]] = defaultdict(list)
    nodes: list[str] = []
    for j in graph.visible_jobs():
        if not j.nruns:
            continue
        jk = f"j:{j.id}"
        nodes.append(jk)
        for d in j.inputs:
            succ[f"d:{d}"].append(jk)
        for d in j.outputs:
            succ[jk].append(f"d:{d}")
    nodes.extend(f"d:{d}" for d in sorted(graph.datasets))
    ids = {n: i for i, n in enumerate(nodes)}
    isucc = {ids[a]: [ids[b] for b in bs] for a, bs in succ.items()}
    comps = _tarjan(list(range(len(nodes))), isucc)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    lvl = [0] * len(comps)
    for ci in range(len(comps) - 1, -1, -1):
        for n in comps[ci]:
            for m in isucc.get(n, ()):
                cj = comp_of[m]
                if cj != ci and lvl[cj] < lvl[ci] + 1:
                    lvl[cj] = lvl[ci] + 1
    return {nodes[n]: lvl[comp_of[n]] for n in range(len(nodes))}
