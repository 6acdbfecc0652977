"""Answers as text, JSON, Graphviz dot, Mermaid and dag-factory YAML."""
from __future__ import annotations

import functools
import json
import re
import shlex
from datetime import datetime, timezone

TYPE_CHECKING = False  # (not typing's: importing typing costs a traversal a few ms)
if TYPE_CHECKING:  # annotations only: a traversal's answer does not import the derivation (attrs)
    from .derive import Graph, Job, TaskDag
    from .query import Walk


# What a name must not bring to a terminal: C0/C1 controls (an escape sequence clears the screen, retitles the
# window or plants a link; a CR or a line break fakes a line) and bidirectional controls (they reverse how the rest
# of the line reads).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """A name as terminal text: the characters of :data:`_UNPRINTABLE` written as ``\\xNN`` / ``\\uNNNN``."""
    return _UNPRINTABLE.sub(_escaped, text)


def iso(t: float | None) -> str | None:
    """POSIX seconds -> ISO 8601 UTC (``...Z``)."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):  # a time ingested before ingest refused times past year 9999
        return "(out of range)"


def job_json(graph: Graph, j: Job) -> dict:
    """One job of the current graph as JSON."""
    dk = graph.dataset_keys()
    return {"key": j.key, "namespace": j.effective_namespace, "fqn": j.fqn, "name": j.name,
            "job_namespace": j.namespace, "job_type": j.job_type, "integration": j.integration,
            "parent": graph.jobs[j.parent_id].key if j.parent_id in graph.jobs else None,
            "version": j.version, "lineage_unknown": j.lineage_unknown, "latest_state": j.state,
            "latest_time": iso(j.latest_t), "runs": j.nruns, **({"error": j.error} if j.error else {}),
            "inputs": sorted([dk[d] for d in j.inputs]), "outputs": sorted([dk[d] for d in j.outputs])}


def show_json(graph: Graph) -> dict:
    """``graph show --json``: every job (parents included) and every dataset of the current graph."""
    return {"jobs": [job_json(graph, j) for j in graph.visible_jobs()],
            "datasets": sorted(graph.dataset_keys().values())}


def show_text(graph: Graph) -> str:
    """Jobs with their current inputs and outputs, children indented under their parent."""
    lines: list[str] = []
    visible = {j.id for j in graph.visible_jobs()}

    emitted: set[int] = set()

    def emit(top: Job, note: str | None = None) -> None:
        # depth first with a stack of its own: a chain of parents a thousand deep exceeded Python's recursion limit
        stack: list[tuple[Job, int, str | None]] = [(top, 0, note)]
        while stack:
            j, indent, why = stack.pop()
            if j.id in emitted:  # (parents in a cycle: each job is written once)
                continue
            emitted.add(j.id)
            pad = "  " * indent
            flags = [f for f in (j.state and j.state.lower(), j.job_type and j.job_type.lower(),
                                 j.version and f"v{j.version}", "lineage unknown" if j.lineage_unknown else None,
                                 why) if f]
            label = j.key if indent == 0 else j.fqn
            lines.append(f"{pad}{shown(label)}" + (f"  [{shown(', '.join(flags))}]" if flags else ""))
            for d in sorted(graph.dataset_key(d) for d in j.inputs):
                lines.append(f"{pad}    <- {shown(d)}")
            for d in sorted(graph.dataset_key(d) for d in j.outputs):
                lines.append(f"{pad}    -> {shown(d)}")
            children = sorted((graph.jobs[c] for c in j.children if c in visible), key=lambda c: c.key)
            stack.extend((c, indent + 1, None) for c in reversed(children))

    roots = [j for j in graph.visible_jobs() if j.parent_id is None or j.parent_id not in visible]
    for j in roots:
        emit(j)
    for j in sorted(graph.visible_jobs(), key=lambda j: j.key):  # jobs whose parents form a cycle have no root
        emit(j, "in a parent cycle")
    lines.append(f"{len(visible)} jobs, {len(graph.datasets)} datasets")
    return "\n".join(lines) + "\n"


def walk_text(w: Walk) -> str:
    """Nodes found by an upstream/downstream walk, nearest first."""
    data = w.to_json()
    lines = [f"{w.direction} of {data['start']['kind']} {shown(data['start']['key'])}"
             + (f" (depth {w.depth})" if w.depth is not None else "")]
    for n in data["nodes"][1:]:
        state = f"  [{shown(n['state'].lower())}]" if n.get("state") else ""
        lines.append(f"  {n['distance']:>3}  {n['kind']:<7} {shown(n['key'])}{state}")
    lines.append(f"{len(data['nodes']) - 1} nodes")
    return "\n".join(lines) + "\n"


def dag_json(graph: Graph, dag: TaskDag, level: str | int) -> dict:
    """The task DAG as JSON: tasks with level, members and dependencies; edges with datasets; cycles."""
    name = {t: j.key for t, j in dag.tasks.items()}
    dk = graph.dataset_keys()
    deps: dict[int, list[int]] = {t: [] for t in dag.tasks}
    for a, b in dag.edges:
        deps[b].append(a)
    return {
        "level": level,
        "tasks": [{"task": name[t], "level": dag.levels[t], "latest_state": dag.tasks[t].state,
                   "dependencies": sorted(name[a] for a in deps[t]),
                   "jobs": sorted(graph.jobs[m].key for m in dag.members[t]),
                   "inputs": sorted([dk[d] for d in dag.inputs[t]]),
                   "outputs": sorted([dk[d] for d in dag.outputs[t]])}
                  for t in sorted(dag.tasks, key=lambda t: (dag.levels[t], name[t]))],
        "edges": [{"from": name[a], "to": name[b], "datasets": sorted([dk[d] for d in ds])}
                  for (a, b), ds in sorted(dag.edges.items(), key=lambda e: (name[e[0][0]], name[e[0][1]]))],
        "cycles": [{"tasks": [name[t] for t in c["tasks"]], "path": [name[t] for t in c["path"]],
                    "datasets": sorted([dk[d] for d in c["datasets"]])} for c in dag.cycles],
    }


def dag_text(graph: Graph, dag: TaskDag, level: str | int) -> str:
    """One line per topological level (tasks that can run in parallel), then dependencies and cycles."""
    data = dag_json(graph, dag, level)
    lines = []
    by_level: dict[int, list[dict]] = {}
    for t in data["tasks"]:
        by_level.setdefault(t["level"], []).append(t)
    for lvl in sorted(by_level):
        lines.append(f"level {lvl}:")
        for t in by_level[lvl]:
            deps = f"  <- {', '.join(map(shown, t['dependencies']))}" if t["dependencies"] else ""
            lines.append(f"  {shown(t['task'])}{deps}")
    for c in data["cycles"]:
        lines.append(cycle_text(c, "CYCLE: tasks", " -> ", "path", " through datasets"))
    lines.append(f"{len(data['tasks'])} tasks, {len(data['edges'])} dependencies, {len(data['cycles'])} cycles")
    return "\n".join(lines) + "\n"


def cycle_text(cycle: dict, head: str, joint: str, tasks: str, between: str) -> str:
    """One cycle of :func:`dag_json` as terminal text."""
    return f"{head} {joint.join(map(shown, cycle[tasks]))}{between} {', '.join(map(shown, cycle['datasets']))}"


def _dot(text: str) -> str:
    """A DOT quoted string: only ``"`` and ``\\`` are escaped there (a JSON escape such as ``\\u00fc`` would be
    drawn as it is written); a line break in a name becomes DOT's ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def dag_dot(graph: Graph, dag: TaskDag) -> str:
    """Graphviz: one rank per level, edges labelled with the datasets that make them."""
    lines = ["digraph tasks {", "  rankdir=TB;", '  node [shape=box, style=rounded, fontname="sans-serif"];']
    by_level: dict[int, list[int]] = {}
    for t in dag.tasks:
        by_level.setdefault(dag.levels[t], []).append(t)
    for lvl in sorted(by_level):
        ids = " ".join(_dot(dag.tasks[t].key) for t in sorted(by_level[lvl], key=lambda t: dag.tasks[t].key))
        lines.append(f"  {{ rank=same; {ids} }}")
    for (a, b), ds in sorted(dag.edges.items(), key=lambda e: (dag.tasks[e[0][0]].key, dag.tasks[e[0][1]].key)):
        label = "\\n".join(_dot(name)[1:-1] for name in sorted(graph.datasets[d][1] for d in ds))  # one per line
        lines.append(f'  {_dot(dag.tasks[a].key)} -> {_dot(dag.tasks[b].key)} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def dag_mermaid(graph: Graph, dag: TaskDag) -> str:
    """Mermaid flowchart (top-down); node ids t0, t1... in level order, labels quoted."""
    order = sorted(dag.tasks, key=lambda t: (dag.levels[t], dag.tasks[t].key))
    ident = {t: f"t{i}" for i, t in enumerate(order)}
    lines = ["flowchart TD"]
    for t in order:
        # (Mermaid reads entity codes in a label; `<` and `>` would start HTML there)
        label = shown(dag.tasks[t].key).replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
        lines.append(f'  {ident[t]}["{label}"]')
    for (a, b), _ds in sorted(dag.edges.items(), key=lambda e: (ident[e[0][0]], ident[e[0][1]])):
        lines.append(f"  {ident[a]} --> {ident[b]}")
    return "\n".join(lines) + "\n"


#: Airflow's limit on a task id's length.
TASK_ID_MAX = 250
#: BashOperator's ``template_ext``: a command ending so is read as the path of a template file (Airflow's advice:
#: end it with a space).
_TEMPLATE_FILE_ENDINGS = (".sh", ".bash")
# Characters a YAML double-quoted scalar may not hold even escaped by JSON (YAML's printable set excludes them).
_NOT_YAML = re.compile("[\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
# The placeholders of a bash_command template; any other brace (an Airflow `{{ ds }}`) is written as it is.
_PLACEHOLDER = re.compile(r"\{(task|fqn|name|namespace)\}")


def task_id(job: Job) -> str:
    """An Airflow task id for a task: its fully qualified name with other characters than ``[A-Za-z0-9_.-]``
    replaced by ``_``; a name longer than Airflow's 250 characters keeps its start and a digest of the whole."""
    tid = re.sub(r"[^A-Za-z0-9_.\-]", "_", job.fqn)
    if len(tid) > TASK_ID_MAX:
        import hashlib  # here: a traversal's answer imports render, and only what it needs (test_quick_queries)

        digest = hashlib.sha1(job.fqn.encode("utf-8", "surrogatepass")).hexdigest()[:10]  # noqa: S324 - a name
        tid = f"{tid[:TASK_ID_MAX - 11]}_{digest}"
    return tid


def _yaml_str(text: str) -> str:
    # JSON strings are valid YAML double-quoted scalars, once the characters YAML refuses are escaped too
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_YAML.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _placeholder(values: dict[str, str], match: re.Match[str]) -> str:
    return values[match.group(1)]


def _shell_word(text: str) -> str:
    """A name as one word of the bash command Airflow runs: quoted for the shell, and each brace written as a
    Jinja expression giving it (Airflow renders ``bash_command`` as a template before bash reads it), so a name
    from any producer (``x; rm -rf ~``, ``{{ var.value.secret }}``) stays that name."""
    return shlex.quote(text).replace("{", "{{ '{' }}")


def dag_factory(graph: Graph, dag: TaskDag, *, dag_id: str = "lineage_dag",
                bash_command: str = "echo {task}", schedule: str | None = None) -> str:
    """A dag-factory YAML file: one entry per task with ``dependencies:`` and a ``bash_command`` made from the
    template (placeholders ``{task}`` the task id, ``{fqn}``, ``{name}``, ``{namespace}``, each one shell word
    (:func:`_shell_word`); other text, an Airflow ``{{ ds }}`` or a shell ``${HOME}`` included, is kept as written)."""
    ids: dict[int, str] = {}
    used: set[str] = set()
    for t in sorted(dag.tasks, key=lambda t: dag.tasks[t].key):
        base = tid = task_id(dag.tasks[t])
        n = 2
        while tid in used:  # (the suffix within Airflow's limit: a longer id fails the whole DAG's import)
            suffix = f"_{n}"
            tid, n = f"{base[:TASK_ID_MAX - len(suffix)]}{suffix}", n + 1
        used.add(tid)
        ids[t] = tid
    deps: dict[int, list[str]] = {t: [] for t in dag.tasks}
    for a, b in dag.edges:
        deps[b].append(ids[a])
    key = dag_id if re.fullmatch(r"[A-Za-z0-9_.\-]+", dag_id) else _yaml_str(dag_id)
    lines = [f"{key}:", "  default_args:", "    owner: lineage-capture", "    start_date: 2024-01-01",
             f"  schedule_interval: {_yaml_str(schedule) if schedule else 'null'}",
             "  description: " + _yaml_str("task dependencies derived from OpenLineage lineage"), "  tasks:"]
    for t in sorted(dag.tasks, key=lambda t: (dag.levels[t], ids[t])):
        job = dag.tasks[t]
        values = {"task": ids[t], "fqn": _shell_word(job.fqn), "name": _shell_word(job.name),
                  "namespace": _shell_word(job.effective_namespace)}
        cmd = _PLACEHOLDER.sub(functools.partial(_placeholder, values), bash_command)
        if cmd.endswith(_TEMPLATE_FILE_ENDINGS):  # BashOperator would load `echo x.sh` as a template file
            cmd += " "
        lines.append(f"    {_yaml_str(ids[t])}:")
        lines.append("      operator: airflow.operators.bash.BashOperator")
        lines.append(f"      bash_command: {_yaml_str(cmd)}")
        if deps[t]:
            lines.append("      dependencies: [" + ", ".join(_yaml_str(d) for d in sorted(deps[t])) + "]")
    return "\n".join(lines) + "\n"


def history_text(key: str, versions: list[dict]) -> str:
    """Versions of a job and what changed between them."""
    if not versions:  # a job known only from its children's parent facets
        return f"{shown(key)}: no runs of its own (known as the parent of the jobs under it in `graph show`)\n"
    lines = [f"{shown(key)}: {len(versions)} versions"]
    for v in versions:
        flag = "  (lineage unknown)" if v["lineage_unknown"] else ""
        code = f"  code {shown(str(v['code_version']))}" if v["code_version"] else ""
        lines.append(f"v{v['version']}  since {iso(v['since'])}  {v['runs']} runs{code}{flag}")
        if v["version"] == 1:
            for d in v["inputs"]:
                lines.append(f"    <- {shown(d)}")
            for d in v["outputs"]:
                lines.append(f"    -> {shown(d)}")
        for k, label in (("inputs_added", "+ <- "), ("inputs_removed", "- <- "), ("outputs_added", "+ -> "),
                         ("outputs_removed", "- -> ")):
            for d in v["changes"].get(k, []):
                lines.append(f"    {label}{shown(d)}")
        if "code" in v["changes"]:
            before, after = v["changes"]["code"]
            lines.append(f"    code {shown(str(before))} -> {shown(str(after))}")
    return "\n".join(lines) + "\n"
