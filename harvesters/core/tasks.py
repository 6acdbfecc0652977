"""Statements -> task runs -> RunRecords, for any SQL log (SQL Server Extended Events, Snowflake history).

A source reader turns its log rows into neutral :class:`Statement` records (time, task, host, session,
SQL, table lineage, status, query id). :class:`TaskGrouper` groups them:

* **Task** = the client application name (``App=`` on SQL Server, the task part of a Snowflake query tag).
  ``python_task::task1`` is the job ``python_task.task1`` (``::`` becomes ``.``, each part normalised like
  the Spark integration's app names); see :data:`TASK_NAME_RULES` for the cleaning of well-known names.
* **Task run** = the statements of one task from one host and one session until
  - an idle gap longer than ``idle_gap`` between one statement's end and the next one's start,
  - an explicit run marker: a statement whose text contains ``openlineage_run_marker`` (e.g. the comment
    ``/* openlineage_run_marker */``) starts a new run, the marker statement being its first,
  - or a statement naming a different ``openlineage_parent_id`` than the run's (a new Airflow task run).
  The same task tomorrow is therefore a new run of the same job. A task run is emitted only once it has a
  statement with lineage (its START is deferred until then, with the first statement's start as its time):
  sessions that never touch a table (pings, ``SET``, ``SELECT 1``) emit nothing.
* **Child runs**: every statement with table lineage is a run of the job ``{task job}.{verb}_{table}``
  (verb = first statement type, table = first output, else first input, dots to ``_``): a name that stays
  the same every day for the same statement, so a backend keeps its history under the task. START and
  COMPLETE (FAIL when the log says the statement failed), ``sql`` job facet, jobType ``QUERY``.
* **Modules**: a statement run inside a stored procedure (``module``/``module_key`` set) is the child of a
  module run ``{task job}.{module}`` (jobType ``TASK``), itself a child of the task run; the module run
  completes when the source reports its end (:meth:`TaskGrouper.end_module`) or with its task run.
* **Temp tables**: ``SELECT ... INTO #t FROM a`` then ``INSERT INTO b SELECT ... FROM #t`` in one task run:
  the second statement's run lists ``a`` as an input (the temp table is resolved to what filled it), and
  the task run's COMPLETE carries the union of its children's inputs and outputs: ``a -> b``.
* **Parents**: ``openlineage_parent_id=<namespace>/<job>/<runId>`` in the task name or in a comment of a
  statement makes that run (an Airflow task) the parent of the task run; ``openlineage_root_parent_id=``
  names the root (else the parent is the root). The compact form ``ol=<dag_id>/<task_id>/<run id>/<dag run id>``
  (:func:`compact_parent_id`; the namespace from ``--parent-namespace``) fits SQL Server's 128-character
  application name; a malformed or truncated id names no parent (:func:`parse_parent_ids` says why). Children
  have the task run as parent and the task's root (the Airflow root, else the task run itself) as root.

Run ids are deterministic (:func:`emitter.run_ids.stable_run_id` over the start instant and a natural key),
so the same log harvested twice gives the same events. Open task runs can be saved and restored
(:meth:`TaskGrouper.open_runs_state` / :meth:`TaskGrouper.restore`), so a task still running when a
harvest ends is continued, not split, by the next harvest.
"""
from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import attrs
from openlineage.client.facet_v2 import (
    error_message_run,
    output_statistics_output_dataset,
    sql_job,
    symlinks_dataset,
)

from emitter.naming import normalize_name
from emitter.records import COMPLETE, FAIL, START, Dataset, JobRef, JobType, RunRecord, RunRef, unvalidated
from emitter.redact import redact
from emitter.run_ids import stable_run_id
from harvesters.core.column_facets import relocated
from harvesters.core.state import gap_exceeded, is_idle

#: Text that starts a new task run when a statement contains it (e.g. ``/* openlineage_run_marker */``).
RUN_MARKER = "openlineage_run_marker"
_PARENT_ID = re.compile(r"openlineage_parent_id=([^\s;,'\"*]+)")
_ROOT_PARENT_ID = re.compile(r"openlineage_root_parent_id=([^\s;,'\"*]+)")
#: The compact parent form (:func:`compact_parent_id`), at the start of the text or after a space or separator.
_COMPACT_PARENT = re.compile(r"(?:^|(?<=[\s;|,(]))ol=([^\s;,'\"*)]+)")
COMPACT_PREFIX = "ol="
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Comments of a statement (``-- ...`` to the end of the line, ``/* ... */``): where parent ids are looked for.
_COMMENT = re.compile(r"--[^\r\n]*|/\*.*?\*/", re.DOTALL)

#: Cleaning of task (application) names before they become job names: (pattern, replacement), with an example.
TASK_NAME_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # the parent hint is not part of the task's name: "etl::load openlineage_parent_id=ns/dag.t/01.." -> etl::load
    (re.compile(r"\s*[;|,]?\s*openlineage_(?:root_)?parent_id=[^\s;,'\"*]+"), ""),
    # the compact form too: "python_task::task1 ol=etl_dag/load/AZ..." -> python_task::task1
    (re.compile(r"\s*[;|,]?\s*(?:^|(?<=[\s;|,]))ol=[^\s;,'\"*]+"), ""),
    # SSIS appends the execution GUID: "SSIS-LoadFactSales-{7C1E2B40-...}" -> SSIS-LoadFactSales
    (re.compile(r"-?\{[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\}"), ""),
    # SQL Agent: "SQLAgent - TSQL JobStep (Job 0x8F1C... : Step 2)" -> sqlagent.job_8f1c....step_2
    (re.compile(r"^SQLAgent - \w+ JobStep \(Job 0x([0-9A-Fa-f]+) : Step (\d+)\)$"),
     lambda m: f"sqlagent::job_{m.group(1).lower()}::step_{m.group(2)}"),
)
#: Separator of the seed convention ``python_task::task1`` (task group :: task).
TASK_PART_SEPARATOR = "::"
UNKNOWN_TASK = "unknown_task"


@attrs.define(slots=True)  # not frozen: a frozen class's __init__ costs 2 us more, paid for every statement
class Statement:
    """One executed statement as any SQL log reports it, with its table lineage already worked out. Not changed
    once made (:func:`attrs.evolve` makes a changed copy)."""

    query_id: str  # natural key of this execution in its source (unique per statement)
    start: datetime
    end: datetime
    task: str  # raw task name: the client application name / the task of a query tag
    host: str
    session: str
    sql: str
    namespace: str  # dataset namespace of the server
    dialect: str = "tsql"
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    temp_inputs: tuple[str, ...] = ()  # temp tables read (#t): resolved through the task run
    temp_outputs: tuple[str, ...] = ()  # temp tables written
    statement_types: tuple[str, ...] = ()
    failed: bool = False
    error_message: str | None = None
    parent_id: str | None = None  # openlineage_parent_id found in the task name or a comment
    root_parent_id: str | None = None
    marker: bool = False  # an explicit run marker: starts a new task run
    module: str | None = None  # procedure that ran this statement
    module_key: str | None = None  # that procedure execution (activity id / parent query id)
    outer_modules: tuple[tuple[str, str], ...] = ()  # (procedure, execution key) calling it, outermost first
    #: source-specific facets of the procedure executions' runs, by execution key: (run facets, job facets)
    module_facets: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = attrs.field(factory=dict)
    row_count: int | None = None
    run_facets: Mapping[str, Any] = attrs.field(factory=dict)  # source-specific facets of its run (externalQuery)
    #: dataset facets of its outputs, by output name (columnLineage); outputs not named here have none
    output_facets: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    #: the task's job name exactly as another integration names it (a dbt model: openlineage-dbt's name);
    #: None: worked out from ``task`` by :func:`task_job_name`
    job_name: str | None = None
    #: the id of its child run, fixed by its start and query id: worked out where the statement is made (the
    #: reading process of a large file) rather than in the harvest process
    run_id: str = attrs.field(default=attrs.Factory(
        lambda self: statement_run_id(self.start, self.namespace, self.query_id), takes_self=True))


def statement_run_id(start: datetime, namespace: str, query_id: str) -> str:
    """The run id of a statement's child run: fixed by its start, its server's namespace and its query id."""
    return stable_run_id(start, "statement", namespace, query_id)


def find_parent_ids(task: str, sql: str) -> tuple[str | None, str | None]:
    """(``openlineage_parent_id``, ``openlineage_root_parent_id``) from the task name, else from a comment.

    The compact form (``ol=...``, :func:`compact_parent_id`) is returned whole as the parent id (its root is inside
    it); :func:`parse_parent_ids` reads both forms.
    """
    for text in (task, *(_COMMENT.findall(sql) if "openlineage_" in sql or "ol=" in sql else ())):
        if "openlineage_" in text:
            parent = _PARENT_ID.search(text)
            if parent:
                root = _ROOT_PARENT_ID.search(text)
                return parent.group(1), root.group(1) if root else None
        if "ol=" in text:
            compact = _COMPACT_PARENT.search(text)
            if compact:
                return COMPACT_PREFIX + compact.group(1), None
    return None, None


def compact_parent_id(parent_id: str, root_parent_id: str | None = None) -> str:
    """The compact form of Airflow's parent (and root) id, for SQL Server's 128-character application name.

    ``<ns>/<dag_id>.<task_id>/<task run id>`` with root ``<ns>/<dag_id>/<dag run id>`` becomes
    ``ol=<dag_id>/<task_id>/<task run id>/<dag run id>``, each UUID in 22 base64url characters; without a root
    (or when the parent job is not ``<root job>.<task>``) ``ol=<job>/<task run id>``. The namespace is left out:
    the harvester takes Airflow's namespace from ``--parent-namespace`` (default: the job namespace). A 60-character
    ``dag_id.task_id`` gives 111 characters with the task name ``python_task::task1 `` in front.
    """
    parent = RunRef.parse(parent_id)
    root = RunRef.parse(root_parent_id) if root_parent_id else None
    run = _short_uuid(parent.run_id)
    if root is not None and parent.job.name.startswith(root.job.name + "."):
        task = parent.job.name[len(root.job.name) + 1 :]
        return f"{COMPACT_PREFIX}{root.job.name}/{task}/{run}/{_short_uuid(root.run_id)}"
    return f"{COMPACT_PREFIX}{parent.job.name}/{run}"


def _short_uuid(run_id: str) -> str:
    return base64.urlsafe_b64encode(uuid.UUID(run_id).bytes).decode().rstrip("=")


def _full_uuid(text: str) -> str | None:
    """A run id as the canonical lower-case UUID: from itself, 32 hex digits or 22 base64url characters; None when
    it is none of these (a truncated id)."""
    text = text.strip()
    if len(text) == 36 and _UUID.fullmatch(text.lower()):
        return text.lower()
    try:
        if len(text) == 32:
            return str(uuid.UUID(hex=text))
        if len(text) == 22:
            return str(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))
    except ValueError:
        return None
    return None


@lru_cache(maxsize=1024)  # one Airflow task run's id comes with each of its statements
def parse_parent_ids(parent_id: str | None, root_parent_id: str | None, parent_namespace: str
                     ) -> tuple[RunRef | None, RunRef | None, str | None]:
    """(parent, root, problem) from the ids :func:`find_parent_ids` found: the long form
    ``<namespace>/<job>/<uuid>`` or the compact ``ol=...`` (namespace ``parent_namespace``). A malformed or
    truncated id gives no parent and the problem, for the harvest to count (run ids must be UUIDs)."""
    if not parent_id:
        return None, None, None
    if parent_id.startswith(COMPACT_PREFIX):
        parts = parent_id[len(COMPACT_PREFIX):].split("/")
        if len(parts) == 4 and all(parts):
            runs = [_full_uuid(parts[2]), _full_uuid(parts[3])]
            if runs[0] and runs[1]:
                return (RunRef(runs[0], JobRef(parent_namespace, f"{parts[0]}.{parts[1]}")),
                        RunRef(runs[1], JobRef(parent_namespace, parts[0])), None)
        elif len(parts) == 2 and all(parts):
            run = _full_uuid(parts[1])
            if run:
                return RunRef(run, JobRef(parent_namespace, parts[0])), None, None
        return None, None, "malformed compact parent id (ol=<dag>/<task>/<run id>/<dag run id>; truncated?)"
    parent = _parse_ref(parent_id)
    if parent is None:
        return None, None, "malformed openlineage_parent_id (<namespace>/<job>/<run id>)"
    run_id = _full_uuid(parent.run_id)
    if run_id is None:
        return None, None, "openlineage_parent_id run id is not a UUID (truncated application name?)"
    parent = attrs.evolve(parent, run_id=run_id)
    root = _parse_ref(root_parent_id)
    root_run_id = _full_uuid(root.run_id) if root is not None else None
    if root_parent_id and (root is None or root_run_id is None):
        return parent, None, "malformed openlineage_root_parent_id (truncated application name?)"
    return parent, None if root is None or root_run_id is None else attrs.evolve(root, run_id=root_run_id), None


def is_run_marker(sql: str) -> bool:
    """True when the statement is an explicit task-run marker."""
    return RUN_MARKER in sql


@lru_cache(maxsize=4096)  # the same few task names come with every statement
def task_job_name(task: str) -> str:
    """``python_task::task1`` -> ``python_task.task1``; ``OrderStatusSync`` -> ``order_status_sync``.

    Secrets are masked first (``etl;Pwd=X`` -> ``etl_pwd``): normalised, ``pwd_x`` would no longer look like one.
    """
    task = redact(task)
    for pattern, replacement in TASK_NAME_RULES:
        task = pattern.sub(replacement, task)
    parts = [normalize_name(part) for part in task.split(TASK_PART_SEPARATOR)]
    return ".".join(p for p in parts if p) or UNKNOWN_TASK


@lru_cache(maxsize=4096)  # a few hosts (client_hostname, Snowflake's USER_NAME) with every statement
def safe_host(host: str) -> str:
    """The host (or user) a task run is keyed by, secrets masked: it is kept in the state file."""
    return redact(host)


@lru_cache(maxsize=16384)
def _table_part(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


#: Statement types that never name what a text does to tables (``SET NOCOUNT ON; INSERT ...`` is an insert,
#: ``IF @@ROWCOUNT = 0 RETURN`` then ``UPDATE ...`` an update; transactions and control of flow name nothing: an IF's
#: condition reported alone, reading a table, is a ``query``).
NO_LINEAGE_TYPES = frozenset({
    "SET", "USE", "DECLARE", "BEGIN", "COMMIT", "ROLLBACK", "PRINT", "TRANSACTION", "BEGIN TRANSACTION", "SAVE",
    "END", "RETURN", "BREAK", "CONTINUE", "GOTO", "THROW", "RAISERROR", "WAITFOR", "ENABLE", "DISABLE", "OPEN",
    "FETCH", "CLOSE", "DEALLOCATE", "IF", "WHILE",
})


def statement_job_suffix(statement: Statement, inputs: Iterable[str]) -> str:
    """``{verb}_{table}``: stable for the same statement shape, e.g. ``insert_dw_dbo_factsales``."""
    table = next(iter(statement.outputs), None) or next(iter(inputs), None)
    verb = _verb(statement.statement_types)
    return f"{verb}_{_table_part(table)}" if table else verb


@lru_cache(maxsize=1024)
def _verb(statement_types: tuple[str, ...]) -> str:
    verbs = [t for t in statement_types if t.upper() not in NO_LINEAGE_TYPES]
    return normalize_name(verbs[0]) if verbs else "query"


@lru_cache(maxsize=16384)  # the same statements of the same tasks, run after run: one JobRef each
def _child_job(namespace: str, parent_job: str, suffix: str) -> JobRef:
    return JobRef(namespace, f"{parent_job}.{suffix}")


@lru_cache(maxsize=4096)
def _module_part(module: str) -> str:
    return normalize_name(module)


def same_server(namespace: str, name: str) -> tuple[str, str]:
    """:attr:`TaskGrouper.locate` by default: every table a statement names is on the statement's server."""
    return namespace, name


@lru_cache(maxsize=16384)  # a task's statements read and write the same tables over and over
def _dataset(namespace: str, name: str, also: str | None = None) -> Dataset:
    """A dataset; one instance per table, shared between records (the emitter only reads them and serializes an
    instance once while it is recent). ``also``: the same table's namespace in another integration's naming
    (Airflow's ``mssql://``), given as a ``symlinks`` identifier so both names meet in one graph."""
    if also is None:
        return Dataset(namespace, name)
    with unvalidated():
        facet = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(namespace=also, name=name, type="TABLE")])
    return Dataset(namespace, name, facets={"symlinks": facet})


#: Datasets with facets (columnLineage) by the identity of their facets mapping, which a source hands shared per
#: statement shape: one instance for its statements, so the emitter serializes it once while it is recent (as
#: :func:`_dataset`). The mapping is kept with the dataset: its id cannot be reused while the entry exists.
_FACETED: dict[int, tuple[Mapping[str, Any], Dataset]] = {}


def _faceted_dataset(namespace: str, name: str, facets: Mapping[str, Any], also: str | None = None) -> Dataset:
    hit = _FACETED.get(id(facets))
    if hit is not None and hit[0] is facets and hit[1].name == name and hit[1].namespace == namespace:
        return hit[1]
    if len(_FACETED) >= 16384:
        _FACETED.clear()
    dataset = Dataset(namespace, name, facets={**_dataset(namespace, name, also).facets, **facets} if also else facets)
    _FACETED[id(facets)] = (facets, dataset)
    return dataset


def _parse_ref(parent_id: str | None) -> RunRef | None:
    if not parent_id:
        return None
    try:
        return RunRef.parse(parent_id)
    except ValueError:
        return None


class _OneRef:
    """``ref``: this run as the parent of its children, one object for all their records (the emitter's
    per-parent caches then match by identity). The class declares ``job``, ``run_id`` and ``_ref``."""

    job: JobRef
    run_id: str
    _ref: RunRef | None

    @property
    def ref(self) -> RunRef:
        if self._ref is None:
            self._ref = RunRef(self.run_id, self.job)
        return self._ref


@attrs.define
class _ModuleRun(_OneRef):
    job: JobRef
    run_id: str
    start: datetime
    last_end: datetime
    failed: bool = False
    caller: RunRef | None = None  # the run of the procedure execution that called this one (None: the task run)
    # the source's facets for this run, on its START and its end (kept in memory only, not in the state)
    run_facets: Mapping[str, Any] = attrs.field(factory=dict)
    job_facets: Mapping[str, Any] = attrs.field(factory=dict)
    _ref: RunRef | None = attrs.field(default=None, init=False, repr=False, eq=False)


@attrs.define
class TaskRun(_OneRef):
    """An open task run: what is needed to continue it and to complete it."""

    job: JobRef
    run_id: str
    host: str
    session: str
    start: datetime
    last_end: datetime
    parent: RunRef | None = None
    root: RunRef | None = None
    parent_id: str | None = None  # the raw openlineage_parent_id, to notice a change
    inputs: dict[tuple[str, str], None] = attrs.field(factory=dict)  # ordered set of (namespace, name)
    outputs: dict[tuple[str, str], None] = attrs.field(factory=dict)
    temps: dict[str, list[str]] = attrs.field(factory=dict)  # temp table -> tables that filled it
    modules: dict[str, _ModuleRun] = attrs.field(factory=dict)
    children: int = 0
    started: bool = False  # START emitted: deferred to the first statement with lineage
    _ref: RunRef | None = attrs.field(default=None, init=False, repr=False, eq=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form for the harvest state."""

        def ref(r: RunRef | None) -> list[str] | None:
            return [r.job.namespace, r.job.name, r.run_id] if r else None

        return {
            "job": [self.job.namespace, self.job.name], "run_id": self.run_id, "host": self.host,
            "session": self.session, "start": self.start.isoformat(), "last_end": self.last_end.isoformat(),
            "parent": ref(self.parent), "root": ref(self.root), "parent_id": self.parent_id,
            "inputs": [list(k) for k in self.inputs], "outputs": [list(k) for k in self.outputs],
            "temps": self.temps, "children": self.children, "started": self.started,
            "modules": {key: {"job": [m.job.namespace, m.job.name], "run_id": m.run_id,
                              "start": m.start.isoformat(), "last_end": m.last_end.isoformat(),
                              "failed": m.failed, "caller": ref(m.caller)} for key, m in self.modules.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskRun:
        def ref(r: list[str] | None) -> RunRef | None:
            return RunRef(r[2], JobRef(r[0], r[1])) if r else None

        return cls(
            job=JobRef(*data["job"]), run_id=data["run_id"], host=data["host"], session=data["session"],
            start=datetime.fromisoformat(data["start"]), last_end=datetime.fromisoformat(data["last_end"]),
            parent=ref(data.get("parent")), root=ref(data.get("root")), parent_id=data.get("parent_id"),
            inputs={tuple(k): None for k in data.get("inputs", [])},
            outputs={tuple(k): None for k in data.get("outputs", [])},
            temps={k: list(v) for k, v in data.get("temps", {}).items()}, children=data.get("children", 0),
            started=data.get("started", True),
            modules={key: _ModuleRun(job=JobRef(*m["job"]), run_id=m["run_id"],
                                     start=datetime.fromisoformat(m["start"]),
                                     last_end=datetime.fromisoformat(m["last_end"]), failed=m.get("failed", False),
                                     caller=ref(m.get("caller")))
                     for key, m in data.get("modules", {}).items()},
        )


@attrs.define
class GroupCounts:
    """What the grouper did, for the harvest summary."""

    statements: int = 0
    with_lineage: int = 0
    without_lineage: int = 0
    runs: int = 0  # runs started (task, module and statement runs)
    records: int = 0  # RunRecords handed to the sink


class TaskGrouper:
    """Groups statements into task runs and turns them into RunRecords handed to ``sink`` in a valid order:
    a task START before its children, a child's START before its COMPLETE, the task COMPLETE last."""

    def __init__(self, sink: Callable[[RunRecord], None], job_namespace: str, integration: str,
                 idle_gap: timedelta = timedelta(minutes=30)) -> None:
        self._sink = sink
        self.job_namespace = job_namespace
        self.integration = integration
        self.idle_gap = idle_gap
        self.counts = GroupCounts()
        self._open: dict[tuple[str, str, str], TaskRun] = {}
        self._module_owner: dict[str, tuple[str, str, str]] = {}  # module_key -> task run key
        self._query_type = JobType("QUERY", integration)
        #: Airflow's namespace, for the compact parent form (``ol=...``, which leaves it out)
        self.parent_namespace = job_namespace
        #: dataset namespace -> the same server's namespace in another integration's naming (a symlinks identifier)
        self.symlinks: dict[str, str] = {}
        #: where a table a statement names lives, ``(namespace, name)``, from the statement's namespace and the
        #: name as the SQL engine gave it: on the statement's server, unless a source whose SQL can name another
        #: server's tables says otherwise (SQL Server's linked servers: ``srv.db.dbo.t``)
        self.locate: Callable[[str, str], tuple[str, str]] = same_server
        self._task_type = JobType("TASK", integration)
        self._last_sweep: datetime | None = None

    # ---- input -------------------------------------------------------------------------------------------

    def add(self, statement: Statement) -> None:
        """Place one statement: continue or start its task run, emit its child run when it has lineage."""
        self.counts.statements += 1
        job_name = statement.job_name or task_job_name(statement.task)
        key = (job_name, safe_host(statement.host), statement.session)
        run = self._open.get(key)
        if run is not None and (
            statement.marker
            or gap_exceeded(run.last_end, statement.start, self.idle_gap)
            or (statement.parent_id is not None and statement.parent_id != run.parent_id)
        ):
            self._close(key)
            run = None
        if run is None:
            run = self._start_task(key, job_name, statement)
        run.last_end = max(run.last_end, statement.end)

        inputs = self._resolve_inputs(run, statement)
        for temp in statement.temp_outputs:
            filled = run.temps.setdefault(temp.lower(), [])
            filled.extend(name for name in inputs if name not in filled)
        if not inputs and not statement.outputs:
            self.counts.without_lineage += 1
            return
        self.counts.with_lineage += 1
        if not run.started:
            self._emit_task_start(run)
        parent = run.ref
        if statement.module and statement.module_key:
            module = self._module(key, run, statement)
            parent = module.ref
        self._emit_statement(statement, run, parent, inputs)

    def end_module(self, module_key: str, end: datetime, failed: bool = False,
                   run_facets: Mapping[str, Any] | None = None) -> None:
        """The source reported the end of a procedure execution: complete its module run if it has one
        (``run_facets``, e.g. the error, go on the run's last event)."""
        owner = self._module_owner.pop(module_key, None)
        run = self._open.get(owner) if owner else None
        module = run.modules.pop(module_key, None) if run else None
        if run is None or module is None:
            return
        run.last_end = max(run.last_end, end)
        module.last_end = max(module.last_end, end)
        module.failed = module.failed or failed
        if run_facets:
            module.run_facets = {**module.run_facets, **run_facets}
        self._complete_module(run, module)

    def close_idle(self, clock: datetime) -> None:
        """Complete every task run idle for longer than the idle gap at ``clock``."""
        for key in [k for k, run in self._open.items() if is_idle(run.last_end, clock, self.idle_gap)]:
            self._close(key)

    def advance(self, clock: datetime) -> None:
        """The log's clock moved to ``clock``: once per idle gap, complete the task runs gone idle, so a long
        log does not pile up open runs."""
        if self._last_sweep is None:
            self._last_sweep = clock
        elif clock - self._last_sweep > self.idle_gap:
            self.close_idle(clock)
            self._last_sweep = clock

    def close_all(self) -> None:
        """Complete every open task run (end of the input when no state keeps them open)."""
        for key in list(self._open):
            self._close(key)

    # ---- state -------------------------------------------------------------------------------------------

    def open_runs_state(self) -> list[dict[str, Any]]:
        """The open task runs, JSON-ready, to continue them in the next harvest."""
        return [run.to_json() for run in self._open.values()]

    def restore(self, saved: Iterable[Mapping[str, Any]]) -> None:
        """Re-open task runs saved by :meth:`open_runs_state`."""
        for data in saved:
            run = TaskRun.from_json(data)
            task_job = run.job.name
            key = (task_job, run.host, run.session)
            self._open[key] = run
            for module_key in run.modules:
                self._module_owner[module_key] = key

    @property
    def open_count(self) -> int:
        return len(self._open)

    # ---- runs --------------------------------------------------------------------------------------------

    def _emit(self, record: RunRecord) -> None:
        self.counts.records += 1
        self._sink(record)

    def _start_task(self, key: tuple[str, str, str], job_name: str, statement: Statement) -> TaskRun:
        parent, root, _ = parse_parent_ids(statement.parent_id, statement.root_parent_id, self.parent_namespace)
        job = JobRef(self.job_namespace, job_name)
        host = safe_host(statement.host)
        run_id = stable_run_id(statement.start, "task", self.job_namespace, job_name, host,
                               statement.session)
        run = TaskRun(job=job, run_id=run_id, host=host, session=statement.session,
                      start=statement.start, last_end=statement.end, parent=parent, root=root,
                      parent_id=statement.parent_id if parent else None)
        self._open[key] = run
        return run

    def _emit_task_start(self, run: TaskRun) -> None:
        # deferred until the run has a child: sessions that never touch a table (pings, SET, SELECT 1)
        # would otherwise fill the backend with empty task runs
        run.started = True
        self.counts.runs += 1
        self._emit(RunRecord(START, run.start, run.job, run.run_id, self._task_type, parent=run.parent,
                             root=run.root))

    def _module(self, key: tuple[str, str, str], run: TaskRun, statement: Statement) -> _ModuleRun:
        """The run of the procedure execution that ran ``statement``, started (with the runs of the executions
        calling it, each a child of its caller) when this is its first statement with lineage."""
        module: _ModuleRun | None = None
        caller: RunRef | None = None  # the run of the execution calling the next one (None: the task run)
        for name, module_key in (*statement.outer_modules, (statement.module or "", statement.module_key or "")):
            module = run.modules.get(module_key) or self._start_module(key, run, statement, name, module_key, caller)
            module.last_end = max(module.last_end, statement.end)
            caller = module.ref
        assert module is not None
        return module

    def _start_module(self, key: tuple[str, str, str], run: TaskRun, statement: Statement, name: str,
                      module_key: str, caller: RunRef | None) -> _ModuleRun:
        parent = caller or run.ref
        job = JobRef(self.job_namespace, f"{parent.job.name}.{_module_part(name)}")
        run_facets, job_facets = statement.module_facets.get(module_key, ({}, {}))
        module = _ModuleRun(job=job, run_id=stable_run_id(statement.start, "module", run.run_id, module_key),
                            start=statement.start, last_end=statement.end, caller=caller,
                            run_facets=run_facets, job_facets=job_facets)
        run.modules[module_key] = module
        self._module_owner[module_key] = key
        self.counts.runs += 1
        self._emit(RunRecord(START, statement.start, job, module.run_id, self._task_type, parent=parent,
                             root=self._task_root(run), run_facets=run_facets, job_facets=job_facets))
        return module

    def _task_root(self, run: TaskRun) -> RunRef:
        """The root of everything under a task run: the Airflow root, else the Airflow parent, else the run."""
        return run.root or run.parent or run.ref

    def _resolve_inputs(self, run: TaskRun, statement: Statement) -> list[str]:
        inputs = list(dict.fromkeys(statement.inputs))
        for temp in statement.temp_inputs:
            for source in run.temps.get(temp.lower(), ()):
                if source not in inputs:
                    inputs.append(source)
        return inputs

    def _emit_statement(self, statement: Statement, run: TaskRun, parent: RunRef, inputs: list[str]) -> None:
        job = _child_job(self.job_namespace, parent.job.name, statement_job_suffix(statement, inputs))
        run_id = statement.run_id
        root = self._task_root(run)
        namespace = statement.namespace
        locate, symlinks = self.locate, self.symlinks
        located_in = [locate(namespace, name) for name in inputs]
        located_out = [locate(namespace, name) for name in statement.outputs]
        in_ds = tuple([_dataset(ns, name, symlinks.get(ns)) for ns, name in located_in])
        out_ds = tuple([_dataset(ns, name, symlinks.get(ns)) for ns, name in located_out])
        if statement.output_facets:  # columnLineage: a dataset of its own for the outputs that have facets
            out_facets = statement.output_facets
            if locate is not same_server:
                out_facets = {name: relocated(facets, locate) for name, facets in out_facets.items()}
            out_ds = tuple([_faceted_dataset(ds.namespace, ds.name, out_facets[name], symlinks.get(ds.namespace))
                            if name in out_facets else ds for name, ds in zip(statement.outputs, out_ds)])
        run_facets: dict[str, Any] = dict(statement.run_facets)
        # facet_v2 validators only urlparse the constant schema URL and producer, at 3/4 of a facet's cost
        with unvalidated():
            # one facets dict for START and COMPLETE: the emitter only reads it
            job_facets = {"sql": sql_job.SQLJobFacet(query=statement.sql, dialect=statement.dialect)}
            if statement.failed:
                run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                    message=statement.error_message or "statement failed", programmingLanguage="SQL")
            final_out = out_ds
            if statement.row_count is not None and len(out_ds) == 1 and not statement.failed:
                stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=statement.row_count)
                final_out = (Dataset(out_ds[0].namespace, out_ds[0].name, facets=out_ds[0].facets,
                                     io_facets={"outputStatistics": stats}),)
        self.counts.runs += 1
        self._emit(RunRecord(START, statement.start, job, run_id, self._query_type, parent=parent, root=root,
                             inputs=in_ds, outputs=out_ds, run_facets=statement.run_facets, job_facets=job_facets))
        self._emit(RunRecord(FAIL if statement.failed else COMPLETE, statement.end, job, run_id, self._query_type,
                             parent=parent, root=root, inputs=in_ds, outputs=final_out, run_facets=run_facets,
                             job_facets=job_facets))
        run.inputs.update(dict.fromkeys(located_in))
        run.outputs.update(dict.fromkeys(located_out))
        run.children += 1

    def _complete_module(self, run: TaskRun, module: _ModuleRun) -> None:
        self._emit(RunRecord(FAIL if module.failed else COMPLETE, module.last_end, module.job, module.run_id,
                             self._task_type, parent=module.caller or run.ref, root=self._task_root(run),
                             run_facets=module.run_facets, job_facets=module.job_facets))

    def _close(self, key: tuple[str, str, str]) -> None:
        run = self._open.pop(key)
        for module_key, module in reversed(run.modules.items()):  # callees before their callers
            self._module_owner.pop(module_key, None)
            self._complete_module(run, module)
        run.modules.clear()
        if not run.started:
            return  # no statement with lineage: nothing was emitted for this run
        self._emit(RunRecord(COMPLETE, run.last_end, run.job, run.run_id, self._task_type,
                             parent=run.parent, root=run.root,
                             inputs=[_dataset(ns, name, self.symlinks.get(ns)) for ns, name in run.inputs],
                             outputs=[_dataset(ns, name, self.symlinks.get(ns)) for ns, name in run.outputs]))
