"""Jobs made of RDDs only (``rdd.saveAsTextFile``, ``sc.textFile(...).count()``): no SQL execution, so neither
the query-execution listener nor the execution poll sees them.

The JVM integration names such a job after the RDD its Spark job computes (``RddExecutionContext.nameRDD``:
each RDD's name, or its class without ``RDD`` in snake case, joined with its dependencies' names) and reads
its inputs from the RDD's lineage and its output from the Hadoop output path. From Python, the actions of
``pyspark.RDD`` are where such jobs start: :func:`install` wraps the few that submit Spark jobs
(``collect`` (``count``, ``sum``, ``foreach``... end there), ``SparkContext.runJob`` (``take``, ``first``),
``saveAsTextFile``, ``saveAsPickleFile``, the Hadoop saves: ``saveAsHadoopFile``, ``saveAsNewAPIHadoopFile``,
``saveAsSequenceFile`` and the ``...Dataset`` forms, whose output directory is in their configuration). On the
calling thread a wrapper only notes the RDD, the output path, the Spark job ids the action used and the time
(two py4j calls); naming, the lineage walk and the statistics (the jobs' stage metrics from Spark's status
store) happen on the worker.

As in the JVM: a job with an output gets START and COMPLETE (FAIL when it failed), ``inputStatistics`` on a
single input and ``outputStatistics`` on the output; a job without an output only a START (the JVM's
``RddExecutionContext`` skips its end event); a job reading and writing nothing, nothing. The jobType is
``RDD_JOB``. RDD actions inside DataFrame code (``df.rdd``) are RDD jobs there too.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import attrs

#: The JVM's MAX_JOB_NAME_LENGTH: dependency names are cut to this many characters.
MAX_NAME = 100

_state: dict[str, Any] = {"installed": False, "apps": None}
#: Where a Hadoop job configuration names its output directory (new API, old API).
_OUTPUT_DIR_KEYS = ("mapreduce.output.fileoutputformat.outputdir", "mapred.output.dir")
_local = threading.local()  # an action running on this thread (nested actions are its own jobs)
_registry = threading.Lock()  # noting an action as running, and whether others run beside it


@attrs.frozen
class RddAction:
    """One RDD action as its wrapper saw it."""

    base: Any  # py4j proxy of the JVM RDD the action computes, below the layers it adds itself
    layers: tuple[str, ...]  # names of the RDDs the action adds on top (outermost first)
    output: str | None  # the path an RDD save writes
    first_job: int  # Spark job ids [first_job, last_job) ran by the action
    last_job: int
    start: datetime
    end: datetime
    #: what failed it: the exception the action raised, or our own message when the application ended while it ran
    error: BaseException | str | None = None
    #: whether PySpark set the job's ``callSite.short`` property (``RDD.collect`` does; the saves and
    #: ``SparkContext.runJob`` leave Spark's own call site, which the JVM's facet does not see)
    python_call_site: bool = False
    #: whether another RDD action ran on another thread meanwhile: the job ids [first_job, last_job) may then hold
    #: its jobs too, and only the jobs computing ``base`` are this action's (:func:`own_jobs`)
    shared: bool = False


def install(find_app: Any) -> None:
    """Wrap pyspark's RDD actions once per process; ``find_app(sc)`` returns the live application of a
    SparkContext or None (then the wrapper only calls through)."""
    _state["apps"] = find_app
    if _state["installed"]:
        return
    _state["installed"] = True
    from pyspark.rdd import RDD

    try:
        from pyspark.core.context import SparkContext
    except ImportError:  # PySpark 3.x
        from pyspark.context import SparkContext  # type: ignore[no-redef]  # the same class, older module

    def layers_collect(rdd: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple[str, ...], str | None]:
        return _python_base(rdd) + (None,)

    def saved(rdd: Any, path: Any) -> tuple[Any, tuple[str, ...], str | None]:
        # saveAsTextFile: mapPartitionsWithIndex (a PythonRDD), .map(BytesToString), Spark's own mapPartitions;
        # saveAsPickleFile: a PythonRDD, then saveAsObjectFile's two maps; the Hadoop saves: a PythonRDD, then
        # PythonRDD.saveAs*'s pythonToPairRDD (mapPartitions) and convertRDD (map), the RDD Spark's writer runs on
        base, layers = _python_base(rdd, force_python=True)
        return base, ("map_partitions", "map_partitions", *layers), str(path) if path is not None else None

    def layers_save(rdd: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple[str, ...], str | None]:
        return saved(rdd, args[0] if args else kwargs.get("path"))

    def layers_hadoop_dataset(rdd: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple[str, ...], str | None]:
        # saveAsHadoopDataset / saveAsNewAPIHadoopDataset: the output directory is in the job configuration
        conf = (args[0] if args else kwargs.get("conf")) or {}
        return saved(rdd, next((conf[key] for key in _OUTPUT_DIR_KEYS if conf.get(key)), None))

    def layers_run_job(sc: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple[str, ...], str | None]:
        rdd = args[0] if args else kwargs.get("rdd")
        base, layers = _python_base(rdd, force_python=True)
        return base, layers, None

    # (the Hadoop saves' key and value classes, when not given, are inferred by a first() before the write: one
    # more Spark job of the same action)
    saves = ("saveAsTextFile", "saveAsPickleFile", "saveAsHadoopFile", "saveAsNewAPIHadoopFile", "saveAsSequenceFile")
    for owner, name, describe in ((RDD, "collect", layers_collect), *((RDD, save, layers_save) for save in saves),
                                  (RDD, "saveAsHadoopDataset", layers_hadoop_dataset),
                                  (RDD, "saveAsNewAPIHadoopDataset", layers_hadoop_dataset),
                                  (SparkContext, "runJob", layers_run_job)):
        original = getattr(owner, name)
        setattr(owner, name, _wrap(original, describe, context_of=(lambda obj: obj) if owner is SparkContext
                                   else (lambda obj: obj.ctx), python_call_site=name == "collect"))


def _python_base(rdd: Any, force_python: bool = False) -> tuple[Any, tuple[str, ...]]:
    """(JVM RDD under the PythonRDD the action runs, ("python",) when there is one)."""
    from pyspark.rdd import PipelinedRDD

    if isinstance(rdd, PipelinedRDD) and rdd._is_pipelinable():
        return rdd._prev_jrdd, ("python",)  # the pipeline becomes one PythonRDD over this
    return rdd._jrdd, (("python",) if force_python else ())


def _wrap(original: Any, describe: Any, context_of: Any, python_call_site: bool) -> Any:
    def action(self: Any, *args: Any, **kwargs: Any) -> Any:
        find_app = _state["apps"]
        if getattr(_local, "busy", False) or find_app is None:
            return original(self, *args, **kwargs)
        app = None
        try:
            app = find_app(context_of(self))
        except Exception:  # noqa: BLE001 - never in the application's way
            app = None
        if app is None:
            return original(self, *args, **kwargs)
        noted = app.guard.call("rdd hook", _note_start, app, self, args, kwargs, describe, context_of,
                               python_call_site)
        _local.busy = True
        error: BaseException | None = None
        try:
            return original(self, *args, **kwargs)
        except BaseException as raised:
            error = raised
            raise
        finally:
            _local.busy = False
            if noted is not None:
                app.guard.call("rdd hook", _note_end, app, context_of(self), noted, error)

    action.__wrapped__ = original  # type: ignore[attr-defined]
    action.__name__, action.__doc__ = original.__name__, original.__doc__
    _as_pyspark_frame(action, original.__name__)
    return action


def _as_pyspark_frame(function: Any, name: str) -> None:
    """Give the wrapper's frame a file name inside PySpark's package and the wrapped method's name. PySpark names a
    job after the first frame outside its package ("collect at app.py:38", in the UI, the event log and
    ``spark_jobDetails.jobCallSite``): that was the wrapper ("collect at .../spark_plugin/rdd_jobs.py:135"). Its
    frame in a traceback then reads as one more PySpark frame, named after this module."""
    import pyspark

    path = os.path.join(os.path.dirname(pyspark.__file__), f"<lineage-capture: {__name__}.{name}>")
    names = {"co_filename": path, "co_name": name}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = name
    function.__code__ = function.__code__.replace(**names)


def _kept(key: str, sc: Any, make: Any) -> Any:
    """``make(sc)``, made once per SparkContext and kept under ``key`` (until another context asks): each new py4j
    proxy costs a call to make and one more (py4j's garbage collection thread) to release."""
    cached = _state.get(key)
    if cached is None or cached[0] is not sc:
        cached = _state[key] = (sc, make(sc))
    return cached[1]


#: Reads of a job's ``JobData`` done field by field before :class:`StatusReader` reads each as one JSON text (a
#: job may be read more than once: an RDD action's details, then its end and statistics): the JSON's first use
#: costs ~0.1 s of JVM CPU once (jackson-module-scala's introspection of ``JobData``), ~7 py4j calls a read fewer pay
#: it back after some 50-100 reads (a wide plan of 150 reads); an application of a few reads never pays it.
JSON_AFTER_JOBS = 32


class StatusReader:
    """Spark's status store of one SparkContext as the worker reads it, in few py4j calls. A job's ``JobData``
    (:meth:`job`) is read field by field as its fields are asked for, then, past :data:`JSON_AFTER_JOBS` reads, whole
    as one JSON text (Jackson with its Scala module: what Spark's REST API writes for the same ``api.v1`` classes;
    each field a call, and each object returned a proxy py4j releases with one call more). Arrays (the files a
    relation reads) are one JSON text always: plain Jackson, loaded by Spark already."""

    def __init__(self, sc: Any) -> None:
        jsc = sc._jsc.sc()
        self.listener_bus = jsc.listenerBus()
        self.store = jsc.statusStore()
        # a static method's member, kept: each ``Class.method`` lookup is a reflection call of its own
        self.make_dot_file = sc._jvm.org.apache.spark.ui.scope.RDDOperationGraph.makeDotFile
        self._jvm = sc._jvm
        self._mapper: Any = None
        self._scala_mapper: Any = None
        self._jobs_read = 0

    def json(self, jarray: Any) -> Any:
        """A JVM array or Java collection as Python data: one py4j call."""
        if self._mapper is None:
            self._mapper = self._jvm.com.fasterxml.jackson.databind.ObjectMapper()
        return json.loads(self._mapper.writeValueAsString(jarray))

    def job(self, job_id: int) -> Mapping[str, Any] | None:
        """The store's ``JobData`` of a job, as its JSON (``submissionTime`` in epoch milliseconds, Options as
        values or None), or None when the store does not keep it (not seen start yet, or no longer kept)."""
        self._jobs_read += 1
        try:
            jdata = self.store.job(job_id)
            if self._jobs_read <= JSON_AFTER_JOBS:
                return _JobFields(jdata)
            if self._scala_mapper is None:
                jackson = self._jvm.com.fasterxml.jackson
                self._scala_mapper = jackson.databind.ObjectMapper()
                self._scala_mapper.registerModule(jackson.module.scala.DefaultScalaModule())
            return json.loads(self._scala_mapper.writeValueAsString(jdata))
        except Exception:  # noqa: BLE001 - NoSuchElementException: a job the store does not keep
            return None


def _option_text(option: Any) -> str | None:
    """A Scala ``Option[String]`` in one call: its text is ``None`` or ``Some(<value>)``."""
    text = str(option.toString())
    return None if text == "None" else text[5:-1]


def _option_millis(option: Any) -> int | None:
    try:
        return int(option.get().getTime())  # None.get raises: rare, and a call fewer than asking first
    except Exception:  # noqa: BLE001 - no time
        return None


#: How :class:`_JobFields` reads each field of a ``JobData``: the keys of its JSON text this module reads.
_JOB_FIELDS: dict[str, Callable[[Any], Any]] = {
    "jobId": lambda data: int(data.jobId()),
    "name": lambda data: str(data.name()),
    "description": lambda data: _option_text(data.description()),
    "jobGroup": lambda data: _option_text(data.jobGroup()),
    "submissionTime": lambda data: _option_millis(data.submissionTime()),
    "status": lambda data: str(data.status().toString()),
    "stageIds": lambda data: [int(i) for i in str(data.stageIds().mkString(",")).split(",") if i],
}


class _JobFields(Mapping[str, Any]):
    """A ``JobData`` read a field at a time, when asked (each once): the mapping its JSON text gives."""

    def __init__(self, jdata: Any) -> None:
        self._jdata = jdata
        self._values: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            self._values[key] = _JOB_FIELDS[key](self._jdata)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_JOB_FIELDS)

    def __len__(self) -> int:
        return len(_JOB_FIELDS)


def status_reader(sc: Any) -> StatusReader:
    """The :class:`StatusReader` of ``sc``'s SparkContext, kept: the worker reads it for every RDD action and
    reader call. Kept apart from :func:`_next_job_id`'s scheduler, which the application's threads ask for: this
    one is made on the worker only."""
    return _kept("status_reader", sc, StatusReader)


def wait_for_listener_bus(sc: Any) -> None:
    """Let Spark's listener bus deliver what is queued (the status store learns of jobs and stages from it), for at
    most 2 s: a busy bus leaves what the store holds already."""
    try:
        status_reader(sc).listener_bus.waitUntilEmpty(2000)
    except Exception:  # noqa: BLE001 - a busy bus: what the store holds is used
        pass


#: How long the worker waits, at most, for Spark's status store to see an RDD action's jobs end before it reads
#: their statistics. The store learns of a job's end from the listener bus's status queue: within milliseconds on a
#: quiet driver (the first look finds it), seconds behind on a loaded one, where one 2 s wait for the whole bus read
#: the stage data of a job still running (statistics 0).
JOBS_END_WAIT_S = 5.0


def wait_for_jobs(sc: Any, jobs: range | list[int], timeout_s: float) -> bool:
    """Until Spark's status store has seen every one of ``jobs`` end (their stage data, the statistics, is final
    then), for at most ``timeout_s``: True when it has. One look (two py4j calls a job), then one every 50 ms."""
    status = status_reader(sc)
    deadline = time.monotonic() + timeout_s
    pending = list(jobs)
    while True:
        pending = [job_id for job_id in pending if not _ended_in_store(status, job_id)]
        if not pending:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _ended_in_store(status: StatusReader, job_id: int) -> bool:
    data = status.job(job_id)  # (None: a job the store has not seen start yet)
    return data is not None and data.get("status") not in ("RUNNING", "UNKNOWN")


def _next_job_id(sc: Any) -> int:
    """The id the next Spark job will get (``DAGScheduler.nextJobId``: an AtomicInteger in Spark 3.5, its value
    in Spark 4). The scheduler's proxy is kept: one py4j call (two on 3.5) on an application's thread."""
    value = _kept("scheduler", sc, lambda sc: sc._jsc.sc().dagScheduler()).nextJobId()
    return int(value if isinstance(value, int) else value.get())


def _note_start(app: Any, obj: Any, args: tuple, kwargs: dict, describe: Any, context_of: Any,
                python_call_site: bool) -> object:
    """Note the action in ``app.rdd_actions_running`` (the end of the application reports those still there);
    the key to its note."""
    base, layers, output = describe(obj, args, kwargs)
    key = object()
    noted = (base, tuple(layers), output, _next_job_id(context_of(obj)), datetime.now(timezone.utc),
             python_call_site)
    with _registry:  # (after the py4j call: of two actions starting at once, the second to get here sees the first)
        running = app.rdd_actions_running
        if running:  # actions on other threads: the job ids of each may interleave with this one's
            app.rdd_actions_shared.update(running)
            app.rdd_actions_shared.add(key)
        running[key] = noted
    return key


def _note_end(app: Any, sc: Any, key: object, error: BaseException | None) -> None:
    # (a dict's pop is atomic: the action is reported here or by the end of the application, never twice)
    noted = app.rdd_actions_running.pop(key, None)
    if noted is None:  # the application ended while it ran and reported it (FAIL)
        return
    shared = key in app.rdd_actions_shared
    app.rdd_actions_shared.discard(key)
    app.on_rdd_action(_ended_now(noted, sc, error, shared))


def _ended_now(noted: tuple, sc: Any, error: BaseException | str | None, shared: bool = False) -> RddAction:
    base, layers, output, first_job, start, python_call_site = noted
    return RddAction(base, layers, output, first_job, _next_job_id(sc), start, datetime.now(timezone.utc), error,
                     python_call_site, shared)


def unfinished_actions(running: dict[object, tuple], sc: Any, message: str) -> list[RddAction]:
    """The RDD actions still running as the application ends (the driver killed while one ran, or one on a thread
    the application left running) that started a Spark job, taken from ``running`` so that their wrappers do not
    report them too, each failed with ``message``."""
    actions = []
    for key in list(running):
        noted = running.pop(key, None)
        if noted is not None:
            actions.append(_ended_now(noted, sc, message))
    return [action for action in actions if action.last_job > action.first_job]


# ---- the worker's side ----------------------------------------------------------------------------------


def _combine(name: str, dependency: str) -> str:
    return dependency if dependency.startswith(name) else f"{name}_{dependency}"


def _class_name(jrdd: Any) -> str:
    from emitter import naming

    simple = jrdd.getClass().getSimpleName()
    return naming.normalize_name(simple[:-3] if simple.endswith("RDD") else simple.rstrip("0123456789"))


def rdd_name(jrdd: Any, budget: list[int] | None = None) -> str:
    """The JVM's ``nameRDD``: the RDD's own name, unless it is unset, a Hadoop RDD named by its path, or a map
    named as the RDD it maps (``textFile``); then its class. Dependencies' names follow, joined by ``_``."""
    budget = budget if budget is not None else [200]
    budget[0] -= 1
    name = jrdd.name()
    kind = jrdd.getClass().getSimpleName()
    if name is None or kind in ("HadoopRDD", "NewHadoopRDD") or (
            kind == "MapPartitionsRDD" and name == jrdd.prev().name()):
        name = _class_name(jrdd)
    dependencies = jrdd.dependencies()
    if dependencies.isEmpty() or budget[0] <= 0:
        return name
    names = []
    iterator = dependencies.iterator()
    while iterator.hasNext():
        names.append(rdd_name(iterator.next().rdd(), budget))
    return _combine(name, "_".join(names)[:MAX_NAME])


def job_name(action: RddAction) -> str:
    """The job name suffix of ``action`` (normalized as the JVM's JobNameBuilder)."""
    from emitter import naming

    name = rdd_name(action.base.rdd() if hasattr(action.base, "rdd") else action.base)
    for layer in reversed(action.layers):
        name = _combine(layer, name)
    return naming.normalize_name(name)


def job_details(sc: Any, job_id: int, python_call_site: bool) -> dict[str, Any] | None:
    """The fields of the JVM's ``spark_jobDetails`` facet for Spark job ``job_id``, from the status store (the
    caller has let the listener bus deliver its start: :func:`wait_for_listener_bus`); None when the store does not
    keep the job.

    The JVM reads them from the job start's properties, which the store does not keep: it keeps the description
    (``spark.job.description``) and group (``spark.jobGroup.id``), and its job name is the result stage's name,
    which is the ``callSite.short`` property whenever one is set (``python_call_site``: PySpark's ``RDD.collect``
    sets it); otherwise Spark's own call site, which the JVM's facet does not report."""
    data = status_reader(sc).job(job_id)
    return None if data is None else details_of(job_id, data, python_call_site)  # (None: retainedJobs)


def details_of(job_id: int, data: Mapping[str, Any], python_call_site: bool) -> dict[str, Any]:
    """:func:`job_details` of a job's ``JobData`` read already."""
    return {"jobId": job_id, "jobDescription": data.get("description"), "jobGroup": data.get("jobGroup"),
            "jobCallSite": data.get("name") if python_call_site else None}


def own_jobs(sc: Any, action: RddAction) -> list[int]:
    """The Spark jobs of ``action``: all of [first_job, last_job), or, when actions on other threads ran meanwhile
    (``shared``), those whose stages compute the action's RDD (its id is in their RDD operation graphs: a few py4j
    calls a stage, only then)."""
    jobs = list(range(action.first_job, action.last_job))
    if not action.shared:
        return jobs
    try:
        rdd_id = str(int(action.base.id()))
    except Exception:  # noqa: BLE001 - an RDD without an id to ask: which jobs are its own is unknown
        return []
    status = status_reader(sc)
    own = []
    for job_id in jobs:
        try:
            stages = _stage_graphs(status, job_id)
        except Exception:  # noqa: BLE001, S112 - a job the store no longer keeps
            continue
        if any(node == rdd_id for dot, _ in stages for node, _ in _DOT_NODE.findall(dot)):
            own.append(job_id)
    return own


def job_statistics(sc: Any, first_job: int, last_job: int, jobs: list[int] | None = None) -> dict[str, int]:
    """Records and bytes read and written by the Spark jobs [first_job, last_job) (or ``jobs``), from the status store's
    stage data (Spark updates it from its listener bus: the caller has waited for it, briefly, with
    :func:`wait_for_listener_bus`; a busy bus: the statistics may be partial, the events still go out)."""
    status = status_reader(sc)
    totals = {"inputRecords": 0, "inputBytes": 0, "outputRecords": 0, "outputBytes": 0}
    for job_id in range(first_job, last_job) if jobs is None else jobs:
        data = status.job(job_id)
        for stage_id in data.get("stageIds", ()) if data else ():  # (None: a job the store no longer keeps)
            try:
                stage = status.store.lastStageAttempt(stage_id)
            except Exception:  # noqa: BLE001, S112 - a stage skipped (already computed) has no attempt
                continue
            for key in totals:
                totals[key] += int(getattr(stage, key)())
    return totals


# ---- jobs Spark runs by itself while a DataFrameReader resolves its relation ------------------------------------
#
# The JVM integration reports every Spark job that has no SQL execution as an RDD job, those Spark starts by itself
# included: resolving ``spark.read.parquet(dir)`` runs one to read the Parquet footers (Spark's schema merging:
# ``parallelize((path, length) of the footer files).mapPartitions(...).collect()``), JSON and CSV schema inference
# scan the files. The JVM names the job from its final RDD (``map_partitions_parallel_collection``) and reads its
# inputs from the RDDs: the parent directory of each parallelized path, or of each scanned file; with no output it
# sends the START only. Python sees no such job start, and once it ended its RDDs are gone, so the wrappers below
# note the job ids a reader call ran (two py4j calls) and the worker rebuilds what the JVM reports: the name from
# the jobs' RDD operation graph in Spark's status store, the inputs from the directories of the files the returned
# DataFrame reads (what the footers and the scanned files are part of; partition folders are trimmed afterwards).
# Jobs of SQL executions (CSV inference's ``take(1)``) are left to the query-execution listener.

#: ``DataFrameReader`` methods that may resolve a file relation (``table`` reads the catalog's schema).
READER_METHODS = ("load", "parquet", "orc", "json", "csv", "text", "xml")
#: Files of a read whose directories are its jobs' inputs. The footer-merging job reads the first file (unless
#: ``mergeSchema``); JSON/CSV inference scans them all, whose directories the partition trimming makes one.
MAX_FILES = 16
#: Recent SQL executions looked at for the jobs a reader call ran inside one (CSV inference's ``take(1)``).
RECENT_EXECUTIONS = 16

_reading = threading.local()


@attrs.frozen
class ReaderJobs:
    """The Spark jobs [first_job, last_job) one ``DataFrameReader`` call ran and the DataFrame it returned."""

    df: Any  # the returned pyspark DataFrame (its files are read on the worker)
    first_job: int
    last_job: int
    start: datetime
    executions: int  # SQL executions the session's status store held before the call
    #: whether another reader call or RDD action ran beside it (on another thread): the call's range of job ids may
    #: then hold their jobs
    concurrent: bool = False


def install_reader(find_app: Any) -> None:
    """Wrap :data:`READER_METHODS` of pyspark's classic ``DataFrameReader`` once per process; ``find_app()``
    returns the live application or None (then the wrapper only calls through)."""
    _state["reader_app"] = find_app
    if _state.get("reader_installed"):
        return
    _state["reader_installed"] = True
    from pyspark.sql.readwriter import DataFrameReader

    for name in READER_METHODS:
        original = getattr(DataFrameReader, name, None)
        if original is not None:
            setattr(DataFrameReader, name, _wrap_read(original))


def _wrap_read(original: Any) -> Any:
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        find_app = _state.get("reader_app")
        app = None
        if find_app is not None and not getattr(_reading, "busy", False):
            try:
                app = find_app()
            except Exception:  # noqa: BLE001 - never in the application's way
                app = None
        if app is None:
            return original(self, *args, **kwargs)
        first = app.guard.call("reader hook", _read_marks, app)
        start = datetime.now(timezone.utc)
        key = app.guard.call("reader hook", _begin_read, app)
        _reading.busy = True  # a reader method calling another is one call
        try:
            df = original(self, *args, **kwargs)
        finally:
            _reading.busy = False
            shared = _end_read(key)
        if first is not None:
            app.guard.call("reader hook", _note_read, app, df, first, start, shared)
        return df

    read.__wrapped__ = original  # type: ignore[attr-defined]
    read.__name__, read.__doc__ = original.__name__, original.__doc__
    return read


def _read_marks(app: Any) -> tuple[int, int]:
    """(the next Spark job id, the SQL executions held): two py4j calls on kept proxies."""
    return _next_job_id(app.sc), int(app.sql_status_store().executionsCount())


_reads_running: set[object] = set()
_reads_shared: set[object] = set()


def _begin_read(app: Any) -> object:
    """Note a reader call as running; a read or an RDD action running beside it makes both ``shared``."""
    key = object()
    with _registry:
        if _reads_running or app.rdd_actions_running:
            _reads_shared.update(_reads_running)
            _reads_shared.add(key)
            app.rdd_actions_shared.update(app.rdd_actions_running)
        _reads_running.add(key)
    return key


def _end_read(key: object | None) -> bool:
    """The reader call ended: whether another ran beside it."""
    if key is None:  # (noting it failed: the guard reported it)
        return False
    with _registry:
        _reads_running.discard(key)
        shared = key in _reads_shared
        _reads_shared.discard(key)
    return shared


def _note_read(app: Any, df: Any, marks: tuple[int, int], start: datetime, shared: bool) -> None:
    last = _next_job_id(app.sc)
    if last > marks[0]:
        app.on_reader_jobs(ReaderJobs(df, marks[0], last, start, marks[1], shared))


def reader_job_runs(sc: Any, sql_store: Any, item: ReaderJobs
                    ) -> list[tuple[str, datetime, list[str], dict[str, Any] | None]]:
    """(job name suffix, submission time, input directories, :func:`job_details`) of each job of ``item`` that no
    SQL execution ran; nothing when the DataFrame reads no file (the JVM finds no input then)."""
    from emitter import naming

    wait_for_listener_bus(sc)  # the status stores learn of the jobs from the listener bus
    status = status_reader(sc)
    directories = dict.fromkeys(path.rstrip("/").rsplit("/", 1)[0] for path in _files(status, item.df))
    if not directories:
        return []
    # The read's range of job ids may hold other threads' jobs: SQL jobs of executions that began before the read
    # (another thread's write or aggregate, not seen by any wrapper) are left out too, always: a read that ran no job
    # of its own has one of theirs as its whole range. Beside another read or RDD action, more than one job left
    # cannot be told apart (no run: none is wrong).
    in_sql = _sql_job_ids(sql_store, item.executions, RECENT_EXECUTIONS)
    candidates = [job_id for job_id in range(item.first_job, item.last_job) if job_id not in in_sql]
    if item.concurrent and len(candidates) > 1:
        return []
    runs = []
    for job_id in candidates:
        data = status.job(job_id)
        name = _graph_job_name(status, job_id, data)
        if name is None:
            continue
        details = None if data is None else details_of(job_id, data, python_call_site=False)
        runs.append((naming.normalize_name(name), _submitted(data) or item.start, list(directories), details))
    return runs


def _files(status: StatusReader, df: Any) -> list[str]:
    """The first :data:`MAX_FILES` files ``df`` reads: the array as one JSON text (py4j cannot hand a JVM
    ``String[]`` to a method taking ``Object[]``, and reads an element in two calls), one call each beyond.

    What a file reader returns is a file relation, analyzed already: its files come from the analyzed plan's
    relation. ``Dataset.inputFiles()`` would optimize the plan first, which on an application's first read is
    ~0.2 s of JVM CPU (the optimizer's first run) taken from the application; other plans still go through it."""
    try:  # a LogicalRelation of a FileRelation (HadoopFsRelation...): no node or class name to ask first
        files = df._jdf.queryExecution().analyzed().relation().inputFiles()
    except Exception:  # noqa: BLE001 - another plan, or a relation of another kind: no files of its own
        files = df._jdf.inputFiles()
    count = len(files)
    if count <= MAX_FILES:
        return [str(path) for path in status.json(files)]
    return [str(files[i]) for i in range(MAX_FILES)]


def _sql_job_ids(sql_store: Any, before: int, earlier: int = 0) -> set[int]:
    """Job ids of the SQL executions added to the store since it held ``before`` (the first
    :data:`RECENT_EXECUTIONS`: those that began during the read), and of the ``earlier`` ones before those
    (executions of other threads that may still have been running): none to look at for most reads. The window is
    anchored at the read, not at the store's newest: a worker behind a busy application reads it after many more
    executions began, which cannot hold the read's jobs."""
    count = int(sql_store.executionsCount())
    start = max(0, before - earlier)
    added = min(max(0, count - start), RECENT_EXECUTIONS + earlier)
    ids: set[int] = set()
    if added == 0:
        return ids
    recent = sql_store.executionsList(start, added)
    for i in range(recent.size()):
        keys = recent.apply(i).jobs().keys().iterator()
        while keys.hasNext():
            ids.add(int(keys.next()))
    return ids


#: One RDD and one edge of the DOT text Spark's ``RDDOperationGraph.makeDotFile`` writes for a stage:
#: ``4 [id="node_4" labelType="html" label="<name> [4]<br><call site>"];`` (`` [Cached]`` and the like may follow
#: the id; the whole label is Java-escaped) and ``4->5;``.
_DOT_NODE = re.compile(r'^\s*(\d+) \[.*?label="(.*) \[\1\](?: \[[^\]<]*\])*<br>', re.MULTILINE)
_DOT_EDGE = re.compile(r"^\s*(\d+)->(\d+);", re.MULTILINE)
#: An edge of a stage's ``incomingEdges`` (shuffle dependencies) as the Scala sequence's text writes it: the case
#: class ``RDDOperationEdge(fromId, toId)``.
_EDGE_TEXT = re.compile(r"RDDOperationEdge\((\d+),\s*(\d+)\)")


def _submitted(data: Mapping[str, Any] | None) -> datetime | None:
    """When a job was submitted (its ``JobData.submissionTime``), or None when unknown."""
    millis = data.get("submissionTime") if data else None
    return None if millis is None else datetime.fromtimestamp(millis / 1000.0, tz=timezone.utc)


def _graph_job_name(status: StatusReader, job_id: int, data: Mapping[str, Any] | None = None) -> str | None:
    """The JVM's ``nameRDD`` of a job's final RDD, from the RDD operation graphs of its stages (the result stage
    last), each read as one DOT text (a few py4j calls a stage instead of a few per RDD): each RDD's name, or its
    class without ``RDD`` in snake case, then its dependencies' (shuffle dependencies are incoming edges).
    ``data``: the job's ``JobData`` when read already."""
    names: dict[int, str] = {}
    parents: dict[int, list[int]] = {}
    last_stage: list[int] = []
    for dot, incoming in _stage_graphs(status, job_id, data):
        last_stage = []
        for node, label in _DOT_NODE.findall(dot):
            names[int(node)] = _dot_label(label)
            last_stage.append(int(node))
        for source, target in _DOT_EDGE.findall(dot):
            parents.setdefault(int(target), []).append(int(source))
        for source, target in incoming:
            parents.setdefault(target, []).append(source)
    if not last_stage:
        return None
    return _node_name(max(last_stage), names, parents, [200])


def _stage_graphs(status: StatusReader, job_id: int, data: Mapping[str, Any] | None = None
                  ) -> list[tuple[str, list[tuple[int, int]]]]:
    """The RDD operation graph of each stage of a job (the result stage last): its DOT text
    (``RDDOperationGraph.makeDotFile``: one call a stage instead of a few per RDD) and its incoming edges (the
    shuffle dependencies, (from, to) RDD ids; the DOT text leaves them out). A job of one stage (``data``, its
    ``JobData``, says so) has no shuffle dependency: its stage's graph is read alone, in two calls (a reader
    call's job: the footers or the files it scans)."""
    stage_ids = data.get("stageIds") if data else None
    if stage_ids is not None and len(stage_ids) == 1:
        return [(str(status.make_dot_file(status.store.operationGraphForStage(stage_ids[0]))), [])]
    graphs = status.store.operationGraphForJob(job_id)
    stages = []
    for graph in map(graphs.apply, range(graphs.size())):
        incoming = _EDGE_TEXT.findall(str(graph.incomingEdges()))  # one call, however many
        stages.append((str(status.make_dot_file(graph)), [(int(a), int(b)) for a, b in incoming]))
    return stages


def _dot_label(label: str) -> str:
    """An RDD's name as the DOT text writes it (Java-escaped)."""
    if "\\" not in label:
        return label
    return label.encode("latin-1", "backslashreplace").decode("unicode_escape")


_RDD_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*RDD\d*")


def _node_name(node: int, names: dict[int, str], parents: dict[int, list[int]], budget: list[int]) -> str:
    from emitter import naming

    budget[0] -= 1
    own = names.get(node, "")
    if _RDD_CLASS.fullmatch(own):  # an RDD without a name of its own is shown by its class
        own = naming.normalize_name(re.sub(r"RDD\d*$", "", own))
    dependencies = list(dict.fromkeys(parents.get(node, [])))
    if not dependencies or budget[0] <= 0:
        return own
    joined = "_".join(_node_name(p, names, parents, budget) for p in dependencies)[:MAX_NAME]
    return _combine(own, joined)
