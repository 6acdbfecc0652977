"""One instrumented Spark application: its run, its listener, its worker and how it ends.

Events: the application run (START when instrumented, COMPLETE or FAIL when the app stops its
SparkContext or the interpreter exits) and one child run per action (START at ``end - duration``,
then COMPLETE, or FAIL with the JVM error). All delivery happens on the worker thread; the app's
threads only ever queue work. Every entry point from Spark or the app goes through the
:class:`~spark_plugin.guard.Guard`, so the application behaves exactly as without the plugin.

Start-up cost: :func:`instrument` runs on the driver's main thread before the application's first line
after ``getOrCreate()``, so it imports and builds only what registering the listener needs. The driver never
imports openlineage-python (~0.25 s of CPU under spark-submit, with the GIL the application's py4j calls wait
for): the facets are :class:`emitter.deferred.Deferred` calls, and the events are built, redacted and delivered
by the emitter's child process (:mod:`emitter.emitter_process`; ``spark.openlineage.python.emitterProcess=false``
keeps them in the driver). The plugin's own modules are imported by the start-up hook's preload thread while the
JVM creates the SparkContext (:func:`spark_plugin._startup.preload`); the facets are made on the worker, and the
emitter is started on a thread of its own (:meth:`Application.warm_up`; building an emitter in the driver
replays an earlier run's spool, seconds against a backend that is down, while the worker goes on making records
into a backlog), queued before the listener is registered: registering makes the JVM build the session's state
(one py4j call of ~0.2 s that the application's first DataFrame would otherwise pay), and the warm-up runs during
that wait, when the main thread needs no GIL. Later, the same work would hold the GIL while the application's
thread makes py4j calls (each reply waits for it) or, in local mode, take a core from its tasks. The streaming
listener is attached only when a session first reads a stream (:func:`spark_plugin.streaming.install`).
"""
from __future__ import annotations

import atexit
import collections
import functools
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any

import attrs

from emitter.emitter_process import EmitterProcess
from emitter.records import COMPLETE, FAIL, RUNNING, START, Dataset, JobRef, JobType, RunRecord, RunRef
from emitter.run_ids import new_run_id
from spark_plugin import _startup, exit_status, host_log, rdd_jobs, streaming
from spark_plugin.config import PluginConfig, file_settings
from spark_plugin.guard import Guard, short_error
from spark_plugin.listener import Captured, JvmProxy, QueryListener
from spark_plugin.worker import Worker

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import error_message_run, sql_job
    from openlineage.client.facet_v2 import input_statistics_input_dataset as input_stats
    from openlineage.client.facet_v2 import output_statistics_output_dataset as output_stats

    from spark_plugin import facet_classes as own
    from spark_plugin import facets as debug_facets
else:
    from emitter.deferred import Constructors, facet_v2

    error_message_run, sql_job = facet_v2.error_message_run, facet_v2.sql_job
    input_stats, output_stats = facet_v2.input_statistics_input_dataset, facet_v2.output_statistics_output_dataset
    own = Constructors("spark_plugin.facet_classes")

log = logging.getLogger("spark_plugin")

APPLICATION_JOB_TYPE = JobType("APPLICATION", "SPARK", "NONE")
RDD_JOB_TYPE = JobType("RDD_JOB", "SPARK", "BATCH")
#: ``onFailure`` calls that are not executions: Spark 4 reports analysis errors too, the JVM integration
#: emits nothing for them (no SQL execution ever started).
NOT_EXECUTIONS = frozenset({"analyze"})
#: The QueryPlanningTracker phase recorded once an action's physical plan exists (Spark records a phase only
#: when it completes): an action that failed without it never ran a Spark job.
PLANNED_PHASE = "planning"

#: Longest wait for Spark to hand over the listener calls of actions that already ran (at stop and exit).
LISTENER_WAIT_S = 2.0
#: A delivery (or the emitter's close) taking longer than this at the end means the backend is down or hanging:
#: what is undelivered goes to the spool at once.
STALL_S = 0.3

_lock = threading.RLock()
_live: list[Application] = []
_process: dict[str, bool] = {"atexit": False, "connect_warned": False}


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


@attrs.frozen
class AppEvent:
    """The application's START or end, queued as data: its record is made on the worker (see the module's
    start-up cost note); ``outcome`` says how the application ended."""

    event_type: str
    when: datetime
    outcome: exit_status.Outcome | None = None


def _raise(error: Exception) -> None:
    raise error


def _without_disabled(record: RunRecord, disabled: frozenset[str]) -> RunRecord:
    if not disabled:
        return record
    from spark_plugin.facets import without_disabled  # (not on instrument's path: see the start-up cost note)

    return without_disabled(record, disabled)


def _planned(qe: Any) -> bool:
    """Whether the action behind ``qe`` got as far as a physical plan. A failed one that did not (an error in
    analysis, optimization or planning, such as an ANSI cast of a constant the optimizer folds) ran nothing:
    no event, as for an analysis error. Nor is a plan read before it exists: the read would wait for the
    optimizer, run a failed phase again, and PySpark 4 logs every Spark error raised through py4j on the
    host's stderr."""
    try:
        return bool(qe.tracker().phases().contains(PLANNED_PHASE))
    except Exception:  # noqa: BLE001 - a Spark without the tracker's phases: read the plan as before
        return True


def _without_io_facets(datasets: tuple[Dataset, ...]) -> tuple[Dataset, ...]:
    # output statistics describe a finished run: START events carry none, as in the JVM (whose inputStatistics
    # come from the plan's relations, on every event)
    return tuple(Dataset(ds.namespace, ds.name, facets=ds.facets) for ds in datasets)


class Application:
    """The lineage state of one SparkContext. Created by :func:`instrument`."""

    def __init__(self, sc: Any, spark_conf: Mapping[str, str], config: PluginConfig) -> None:
        self.sc = sc
        self.spark_conf = dict(spark_conf)
        self.config = config
        self.guard = Guard()
        self.job = JobRef(config.namespace, config.app_name)
        started = _utc(sc.startTime)
        self.run_id = new_run_id(started)
        self.run = RunRef(self.run_id, self.job)
        # actions' root: the configured root, else the configured parent, else this application
        self.action_root = config.root or config.parent or self.run
        self.spark_version = sc.version  # read now: the facets may be made after the context stopped
        self.instrumented_ms = int(time.time() * 1000)  # SQL executions submitted before are not this plugin's
        self.listener = QueryListener(self._on_action, self.guard)
        self._poll: Any = None  # the ExecutionPoll, made on the worker's first tick
        self._poll_session: Any = None  # the JVM session whose SQL status store is polled
        self._sql_store: Any = None  # its SQL status store (see sql_status_store)
        self._tick_fn = self._tick  # one bound method: the worker's ``current`` while it polls
        self.worker = Worker(self._handle, self.guard, config.queue_size,
                             tick=self._tick_fn if config.poll_interval_s > 0 else None,
                             tick_interval=config.poll_interval_s or 1.0)
        self._emitter: Any = None
        self._emitter_config: Any = None  # the emitter's configuration, loaded as the application starts
        self._emitter_config_error: Exception | None = None  # (its transport type unknown: no emitter)
        self._emitter_tried = False  # its building has begun (it may be replaying an earlier run's spool)
        self._emitter_built = threading.Event()  # ... and ended: then None means no usable transport
        self._building_since: float | None = None  # while it is being built (replaying over the network)
        self._sessions: list[Any] = []  # JVM sessions the listener is registered on
        self._streams: list[Any] = []  # streaming listeners registered (see spark_plugin.streaming)
        self._streaming_sessions: list[Any] = []  # the JVM sessions those listeners follow
        self._proxy: JvmProxy | None = None
        self._original_stop: Any = None
        # Claims, each taken once and never given back (a non-blocking acquire): SIGTERM's thread must never wait on
        # one that the main thread, held by the signal handler, would never release.
        self._finish_claim = threading.Lock()  # finish() has begun: see `finished`
        self._end_claim = threading.Lock()  # the terminal event is queued (or spooled): see _queue_end
        #: RDD actions running now, noted by their wrappers (see rdd_jobs): those still running at the end fail
        self.rdd_actions_running: dict[object, tuple] = {}
        self.rdd_actions_shared: set[object] = set()  # running actions that overlapped another (rdd_jobs.RddAction)
        self.context_stopped = False
        self.delivery_counts: Any = None  # the emitter's Counts once closed
        self.started = started
        # Hand-over between the worker and the end of the application (see _spool_undelivered): the records
        # of the worker's current item not yet handed to the emitter, and whether the main thread took over.
        self._handoff = threading.Lock()
        self._unsent: collections.deque[RunRecord] = collections.deque()
        self._unsent_for: Any = None
        self._spooling = False
        #: records made while the emitter was being built, handed to it first once it is there
        self._backlog: list[RunRecord] = []
        self._delivering_since: float | None = None  # when the worker's current delivery began
        self.spooled_at_exit = 0
        self.breaker_stops = 0  # lineage work the circuit breaker stopped (see _breaker_closed)

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` has begun (its claim is taken): no new work is accepted."""
        return self._finish_claim.locked()

    # Facets are made on first use (the worker's first item): see the module's start-up cost note.

    @cached_property
    def facets(self) -> dict[str, Any]:
        """The run facets of every event: ``processing_engine``, ``spark_properties``, ``tags``."""
        from spark_plugin import facets

        return {**facets.engine_facets(self.spark_version, self.spark_conf, self.config.captured_properties),
                **facets.config_run_facets(self.config, os.environ)}

    @cached_property
    def application_details(self) -> Any:
        """The ``spark_applicationDetails`` facet of START events, read once by the worker's warm-up while the context
        is there; None (no such facet) if it cannot be read."""
        from spark_plugin import facets

        try:
            return facets.application_details(self.sc, self.spark_conf)
        except Exception as error:  # noqa: BLE001 - a context already stopped: the events go out without it
            log.warning("lineage capture: the spark_applicationDetails facet cannot be read (%s: %s)",
                        type(error).__name__, short_error(error), exc_info=log.isEnabledFor(logging.DEBUG))
            return None

    @cached_property
    def job_facets(self) -> dict[str, Any]:
        """The job facets of the application and every action: ``tags``, ``ownership``."""
        from spark_plugin.facets import config_job_facets

        return config_job_facets(self.config)

    @cached_property
    def debug(self) -> debug_facets.DebugFacets | None:
        """The ``debug`` facet's builder; None unless the debug facet or smart debug is on."""
        from spark_plugin import facets
        from spark_plugin.plan_lineage import jvm_facet_enabled

        enabled = jvm_facet_enabled(self.spark_conf, facets.DEBUG)
        if not enabled and not self.config.debug.smart:
            return None
        debug = facets.DebugFacets(self.sc, self.spark_conf, self.config, enabled)
        debug.jsession = self._poll_session  # the first session's catalog class is reported
        return debug

    @property
    def metrics(self) -> debug_facets.DebugMetrics | None:
        return self.debug.metrics if self.debug is not None else None

    def _count(self, meter: str) -> None:
        if self.metrics is not None:
            self.metrics.count(meter)

    def _debugged(self, records: list[RunRecord], qe: Any = None) -> list[RunRecord]:
        return records if self.debug is None else self.debug.apply(records, qe)

    def warm_up(self) -> None:
        """On the worker, first: import the plan reader, make the facets and the emitter (see the module's start-up
        cost note)."""
        self._build_emitter()  # first: its warnings (a transport type it does not know, the default file) are said
        # before the application's next lines, which may set Spark's log level to ERROR
        from spark_plugin import plan_lineage  # noqa: F401 - imported now for the first action

        _ = self.facets, self.job_facets, self.application_details

    def begin(self) -> None:
        """Queue the application's START (once the listener is in place)."""
        self.worker.submit(AppEvent(START, self.started), always=True)

    # ---- records -----------------------------------------------------------------------------------------

    def _app_record(self, event_type: str, when: datetime, extra: Mapping[str, Any] | None = None) -> RunRecord:
        return RunRecord(event_type, when, job=self.job, run_id=self.run_id, job_type=APPLICATION_JOB_TYPE,
                         parent=self.config.parent, root=self.config.root, run_facets={**self.facets, **(extra or {})},
                         job_facets=self.job_facets)

    def _app_event_record(self, event: AppEvent) -> RunRecord:
        extra: dict[str, Any] = {}
        if event.outcome is not None and event.outcome.failed:
            extra["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=event.outcome.message, programmingLanguage="PYTHON", stackTrace=event.outcome.stack_trace)
        return self._app_record(event.event_type, event.when, extra)

    def _action_job(self, lineage: Any, job_suffix: str | None = None) -> tuple[JobRef, dict[str, Any], JobType]:
        job = JobRef(self.config.namespace, f"{self.config.app_name}.{job_suffix or lineage.job_suffix}")
        job_facets = dict(self.job_facets)
        if lineage.sql:  # dialect "spark" as the JVM integration
            job_facets["sql"] = sql_job.SQLJobFacet(query=lineage.sql, dialect="spark")
        return job, job_facets, JobType("SQL_JOB", "SPARK", lineage.processing_type)

    def _action_record(self, event_type: str, when: datetime, lineage: Any, run_id: str,
                       job_suffix: str | None = None, run_facets: Mapping[str, Any] | None = None,
                       io_facets: bool = True) -> RunRecord:
        job, job_facets, job_type = self._action_job(lineage, job_suffix)
        inputs, outputs = tuple(lineage.inputs), tuple(lineage.outputs)
        if not io_facets:
            outputs = _without_io_facets(outputs)
        run_facets = self.facets if run_facets is None else run_facets
        if lineage.logical_plan is not None:
            run_facets = {**run_facets, "spark.logicalPlan": own.LogicalPlanRunFacet(plan=lineage.logical_plan)}
        if lineage.unknown is not None:
            run_facets = {**run_facets, "spark_unknown": own.UnknownEntryRunFacet(**lineage.unknown)}
        # io_containers: the JVM writes inputFacets/outputFacets ({} when empty) on a SQL event's datasets
        return RunRecord(event_type, when, job=job, run_id=run_id, parent=self.run, root=self.action_root,
                         job_type=job_type, job_facets=job_facets, inputs=inputs, outputs=outputs,
                         run_facets=run_facets, io_containers=True)

    def action_records(self, captured: Captured) -> list[RunRecord]:
        """The events of one action at its end: START (unless the execution poll sent it while the action
        ran), RUNNING when it wrote with statistics (the JVM's event at its Spark job's end), COMPLETE/FAIL;
        nothing when it is not a lineage-bearing action."""
        from spark_plugin import facets as debug_facets
        from spark_plugin import plan_lineage  # looked up per call: tests swap ``action_lineage``

        tracked = self.guard.call("execution poll", self._poll.take, captured.qe) if self._poll else None
        if captured.failed and (captured.func_name in NOT_EXECUTIONS or not _planned(captured.qe)):
            return []
        if tracked is None:
            self._count(debug_facets.SQL_START)  # the poll did not see it start
        self._count(debug_facets.SQL_END)
        started = tracked.lineage if tracked is not None else None  # its plan, read when its START was sent
        with debug_facets.recording(self.metrics):
            lineage = self.guard.call("lineage", functools.partial(
                plan_lineage.action_lineage, captured.qe, self.spark_conf, func_name=captured.func_name,
                plan=started.plan if started is not None else None))
        if lineage is None:
            return []
        records = []
        end = captured.end
        if tracked is not None and tracked.last_sent is not None:
            end = max(end, tracked.last_sent)  # a RUNNING the poll sent just as it ended: events stay in time order
        if tracked is not None and tracked.run_id is not None:
            run_id, suffix = tracked.run_id, tracked.job_suffix  # the name is fixed per run
        else:
            run_id, suffix = new_run_id(captured.start), None
            records.append(self._action_record(START, captured.start, lineage, run_id, io_facets=False))
        if any(ds.io_facets for ds in lineage.outputs):
            records.append(self._action_record(RUNNING, end, lineage, run_id, suffix))
        end_facets = dict(self.facets)
        if captured.failed:
            end_facets["errorMessage"] = self._jvm_error(captured.exception)
        records.append(self._action_record(FAIL if captured.failed else COMPLETE, end, lineage, run_id,
                                           suffix, end_facets))
        return records

    # ---- RDD-only jobs (see spark_plugin.rdd_jobs) -----------------------------------------------------------

    def on_rdd_action(self, action: rdd_jobs.RddAction) -> None:
        """An RDD action ended on an application thread: queue it (never blocks)."""
        if self.listener.active and self.config.rdd_events and action.last_job > action.first_job:
            self.worker.submit(action)

    def on_reader_jobs(self, item: rdd_jobs.ReaderJobs) -> None:
        """A DataFrameReader call ran Spark jobs (called on the application's thread): queue it (never blocks)."""
        if self.listener.active and self.config.rdd_events:
            self.worker.submit(item)

    def on_stream_batch(self, batch: streaming.StreamBatch) -> None:
        """A streaming query ran a micro-batch (called on Spark's listener thread): queue it (never blocks)."""
        if self.listener.active:
            self.worker.submit(batch)

    def rdd_records(self, action: rdd_jobs.RddAction, jobs_end_wait_s: float = rdd_jobs.JOBS_END_WAIT_S
                    ) -> list[RunRecord]:
        """START, then COMPLETE/FAIL when it wrote (or failed), of an RDD-only job; nothing when it read and
        wrote nothing (the JVM's RddExecutionContext). ``jobs_end_wait_s``: how long its statistics may wait for
        Spark's status store to see its jobs end (none for an action the application's end interrupted)."""
        from emitter import naming
        from spark_plugin.plan_context import RawDataset, path_raw
        from spark_plugin.plan_inputs import _rdd_input_dirs
        from spark_plugin.plan_lineage import _FacetBuilder

        base = action.base.rdd() if hasattr(action.base, "rdd") else action.base
        facets = _FacetBuilder(self.spark_conf)
        inputs: dict[tuple[str, str], RawDataset] = {}
        for directory in _rdd_input_dirs(base, self.sc._jvm):
            raw = path_raw(directory)
            inputs.setdefault((raw.namespace, raw.name), raw)
        output = path_raw(naming.escape_literal_path(action.output)) if action.output else None
        if not inputs and output is None:
            return []
        rdd_jobs.wait_for_listener_bus(self.sc)  # once, for the job details and statistics read from the store below
        own_jobs = rdd_jobs.own_jobs(self.sc, action)  # (all of its range unless other threads' actions overlapped)
        job = JobRef(self.config.namespace, f"{self.config.app_name}.{rdd_jobs.job_name(action)}")
        common: dict[str, Any] = dict(job=job, run_id=new_run_id(action.start), parent=self.run,
                                      root=self.action_root, job_type=RDD_JOB_TYPE, job_facets=self.job_facets)
        start_inputs = tuple(facets.dataset(raw) for raw in inputs.values())
        start_outputs: tuple[Dataset, ...] = (facets.dataset(output),) if output else ()
        details = self._with_job_details(own_jobs[0], action.python_call_site) if own_jobs else self.facets
        records = [RunRecord(START, action.start, inputs=start_inputs, outputs=start_outputs, run_facets=details,
                             **common)]
        if output is None and action.error is None:
            return records  # the JVM sends no end event for a job without an output
        if jobs_end_wait_s > 0 and not self._spooling:  # (the end spooling this item waits for nothing more)
            rdd_jobs.wait_for_jobs(self.sc, own_jobs, jobs_end_wait_s)
        stats = rdd_jobs.job_statistics(self.sc, action.first_job, action.last_job, own_jobs)
        end_inputs, end_outputs = start_inputs, start_outputs
        if len(start_inputs) == 1 and facets.enabled("inputStatistics") and own_jobs:  # (none known: no numbers)
            end_inputs = (Dataset(start_inputs[0].namespace, start_inputs[0].name, facets=start_inputs[0].facets,
                                  io_facets={"inputStatistics": input_stats.InputStatisticsInputDatasetFacet(
                                      rowCount=stats["inputRecords"], size=stats["inputBytes"])}),)
        if start_outputs and facets.enabled("outputStatistics") and own_jobs:
            end_outputs = tuple(Dataset(output_ds.namespace, output_ds.name, facets=output_ds.facets,
                                        io_facets={"outputStatistics": output_stats.OutputStatisticsOutputDatasetFacet(
                                            rowCount=stats["outputRecords"], size=stats["outputBytes"])})
                                for output_ds in start_outputs)
        end_facets = dict(self.facets)
        if isinstance(action.error, str):
            end_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=action.error,
                                                                                programmingLanguage="PYTHON")
        elif action.error is not None:
            java = getattr(action.error, "java_exception", None)
            end_facets["errorMessage"] = self._jvm_error(java) if java is not None else \
                error_message_run.ErrorMessageRunFacet(message=f"{type(action.error).__name__}: {action.error}",
                                                       programmingLanguage="PYTHON")
        records.append(RunRecord(FAIL if action.error is not None else COMPLETE, action.end, inputs=end_inputs,
                                 outputs=end_outputs, run_facets=end_facets, **common))
        return records

    def sql_status_store(self) -> Any:
        """The SQL status store of the first session (shared by every session of the context), its proxy kept."""
        if self._sql_store is None:
            self._sql_store = self._poll_session.sharedState().statusStore()
        return self._sql_store

    def reader_records(self, item: rdd_jobs.ReaderJobs) -> list[RunRecord]:
        """The START of each Spark job a DataFrameReader call ran outside SQL executions (schema inference), as
        the JVM reports them: an RDD job with the read directories as inputs and no end event."""
        from spark_plugin.plan_context import path_raw
        from spark_plugin.plan_lineage import _FacetBuilder

        facets = _FacetBuilder(self.spark_conf)
        records = []
        for suffix, when, directories, details in rdd_jobs.reader_job_runs(self.sc, self.sql_status_store(), item):
            inputs: dict[tuple[str, str], Any] = {}
            for directory in directories:
                raw = path_raw(directory)
                inputs.setdefault((raw.namespace, raw.name), raw)
            job = JobRef(self.config.namespace, f"{self.config.app_name}.{suffix}")
            records.append(RunRecord(START, when, job=job, run_id=new_run_id(when), parent=self.run,
                                     root=self.action_root, job_type=RDD_JOB_TYPE, job_facets=self.job_facets,
                                     inputs=tuple(facets.dataset(raw) for raw in inputs.values()),
                                     run_facets=self._with_details(details)))
        return records

    def _with_job_details(self, job_id: int, python_call_site: bool) -> Mapping[str, Any]:
        """The run facets of an event the JVM builds from Spark job ``job_id``'s start: ``spark_jobDetails`` too."""
        return self._with_details(rdd_jobs.job_details(self.sc, job_id, python_call_site))

    def _with_details(self, details: dict[str, Any] | None) -> Mapping[str, Any]:
        """The run facets with the ``spark_jobDetails`` facet of :func:`rdd_jobs.job_details` (when known)."""
        from spark_plugin.facets import JOB_DETAILS

        return self.facets if details is None else {**self.facets, JOB_DETAILS: own.SparkJobDetailsRunFacet(**details)}

    # ---- the execution poll (worker thread): START and RUNNING while an action runs ------------------------

    def _execution_poll(self) -> Any:
        if self._poll is None:
            if self._poll_session is None or self.context_stopped:
                return None
            from spark_plugin.executions import ExecutionPoll

            self._poll = ExecutionPoll(self._poll_session, self.sc._jvm, self.config.poll_interval_s,
                                       self.instrumented_ms)
        return self._poll

    def _tick(self) -> None:
        if self._breaker_closed():
            return
        poll = self._execution_poll()
        if poll is None:
            return
        new, progressed = poll.poll()
        if not new and not progressed:
            return
        from spark_plugin import facets as debug_facets  # here: a tick with nothing to report imports nothing
        from spark_plugin import plan_lineage

        records: list[RunRecord] = []
        for tracked in new:
            self._count(debug_facets.SQL_START)
            if not _planned(tracked.qe):  # still optimizing (the read would wait for it, and raise if it fails)
                continue  # reported at its end, as a short action is
            try:  # strict: a plan not fully readable yet (a table created by this very action) waits for the end
                with debug_facets.recording(self.metrics):
                    lineage = plan_lineage.action_lineage(tracked.qe, self.spark_conf, strict=True)
            except Exception:  # noqa: BLE001 - reported at the end instead, as a short action is
                continue
            if lineage is None:
                tracked.ignored = True
                continue
            tracked.run_id, tracked.job_suffix, tracked.lineage = (
                new_run_id(tracked.submitted), lineage.job_suffix, lineage)
            records += self._debugged(
                [self._action_record(START, tracked.submitted, lineage, tracked.run_id, io_facets=False)], tracked.qe)
        now = datetime.now(timezone.utc)
        for tracked in progressed:
            if tracked.run_id is not None:
                records += self._debugged(
                    [self._action_record(RUNNING, now, tracked.lineage, tracked.run_id, io_facets=False)], tracked.qe)
                tracked.last_sent = now
        if records and not self.config_disabled():
            self._deliver(self._finished(records), self._tick_fn)

    def _jvm_error(self, exception: Any) -> error_message_run.ErrorMessageRunFacet:
        utils = self.sc._jvm.org.apache.spark.util.Utils
        return error_message_run.ErrorMessageRunFacet(
            message=exception.toString(), programmingLanguage="JAVA", stackTrace=utils.exceptionString(exception))

    # ---- the listener's side (Spark's listener thread): queue only ---------------------------------------

    def _on_action(self, captured: Captured) -> None:
        self.worker.submit(captured)

    # ---- the worker's side ------------------------------------------------------------------------------

    def _handle(self, item: Any) -> None:
        if callable(item):
            item()
            return
        if self.config_disabled():  # no usable transport (already warned): lineage work would be wasted
            return
        if self._breaker_closed():
            return
        started = time.monotonic()
        records = self._records_of(item)
        if self._breaker_closed(started):  # closed meanwhile, or over its timeout: dropped, as the JVM cancels
            return
        self._deliver(records, item)

    @cached_property
    def circuit_breaker(self) -> Any:
        """The configured ``circuitBreaker.*`` (None: none), made on the worker: it reads the driver's JVM."""
        if self.config.circuit_breaker is None:
            return None
        from spark_plugin.circuit_breaker import jvm_circuit_breaker

        return jvm_circuit_breaker(self.config.circuit_breaker, self.sc._jvm)

    def _breaker_closed(self, started: float | None = None) -> bool:
        """Whether the circuit breaker stops the worker's current lineage work (``started``: the work began then
        and its timeout applies). Warned about the first time; every stop is counted."""
        breaker = self.circuit_breaker
        if breaker is None:
            return False
        reason = breaker.state()
        if reason is None and started is not None and breaker.timeout_s is not None:
            elapsed = time.monotonic() - started
            reason = f"timeout of {breaker.timeout_s:g} s exceeded ({elapsed:.1f} s)" \
                if elapsed > breaker.timeout_s else None
        if reason is None:
            return False
        self.breaker_stops += 1
        if self.breaker_stops == 1:
            log.warning("lineage capture: circuit breaker closed (%s): lineage work stopped while it stays closed "
                        "(counted, reported at the end)", reason)
        return True

    def _deliver(self, records: list[RunRecord], item: Any) -> None:
        """Hand ``records`` (made from the worker's current ``item``) to the emitter one by one, unless the
        end of the application took them over for the spool."""
        self._build_emitter()  # (started by the warm-up, unless that failed)
        with self._handoff:
            if self._spooling:  # the application ended meanwhile: the main thread spools this item
                return
            if not self._emitter_built.is_set():  # kept in order until it is there: the worker goes on reading
                self._backlog += records
                return
            self._unsent = collections.deque([*self._backlog, *records])
            self._backlog.clear()
            self._unsent_for = item
            emitter = self._emitter
            if emitter is None:  # no usable transport (already warned): nothing to hand over, nothing to spool
                self._unsent.clear()
                return
        while True:
            with self._handoff:
                if self._spooling or not self._unsent:
                    return
                record = self._unsent[0]
            self._delivering_since = time.monotonic()
            try:
                emitter.emit(record)  # may block on a hanging backend: the end of the app does not wait for it
            finally:
                self._delivering_since = None
            with self._handoff:
                if self._unsent and self._unsent[0] is record:
                    self._unsent.popleft()

    def _records_of(self, item: Any) -> list[RunRecord]:
        if isinstance(item, Captured):
            records = self._debugged(self.action_records(item), item.qe)
        elif isinstance(item, rdd_jobs.RddAction):
            records = self._debugged(self.guard.call("rdd lineage", self.rdd_records, item) or [])
        elif isinstance(item, rdd_jobs.ReaderJobs):
            records = self._debugged(self.guard.call("reader jobs", self.reader_records, item) or [])
        elif isinstance(item, streaming.StreamBatch):
            records = self._debugged(self.guard.call("streaming lineage", streaming.batch_records, self, item) or [],
                                     item.qe)
        else:  # an AppEvent: counted in delivery order, as the JVM's listener does
            from spark_plugin import facets

            self._count(facets.APP_START if item.event_type == START else facets.APP_END)
            records = self._debugged([self._app_event_record(item)])
        return self._finished(records)

    def _finished(self, records: list[RunRecord]) -> list[RunRecord]:
        """Last touches to every record: the JVM's ``spark_applicationDetails`` on START events (its facet builder
        answers the application, job and SQL execution starts; this plugin's RUNNING events stand for the JVM's
        at a job's end or the poll's), then ``facets.<name>.disabled``."""
        from spark_plugin.facets import APPLICATION_DETAILS  # (imported by the worker's warm-up)

        details = self.application_details
        return [_without_disabled(attrs.evolve(r, run_facets={**r.run_facets, APPLICATION_DETAILS: details})
                                  if r.event_type == START and details is not None else r, self.config.disabled_facets)
                for r in records]

    def _build_emitter(self) -> None:
        """Build the emitter on a thread of its own (once): building it replays an earlier run's spool over the
        network, seconds against a backend that is down. Meanwhile the worker goes on making the actions'
        records (they wait in ``_backlog``), so the end of the application never has to read their plans."""
        if self._emitter_tried:
            return
        self._emitter_tried = True

        def build() -> None:
            try:
                self._emitter = self.guard.call("emitter setup", self._new_emitter)
            finally:
                self._emitter_built.set()
                if not self.worker.closed:  # (closed: the end of the application spools the backlog)
                    self.worker.submit(self._flush_backlog, always=True)

        threading.Thread(target=build, name="lineage-capture-emitter", daemon=True).start()

    def _flush_backlog(self) -> None:
        """On the worker, once the emitter is built: deliver the records that waited for it. Without this they
        would wait for the next records, and a long action's START from the execution poll would come at its end."""
        if self._backlog:
            self._deliver([], self._flush_backlog)

    def check_emitter_config(self) -> Any:
        """On the main thread as the application starts (before its next lines, which may set Spark's log level to
        ERROR): load the emitter's configuration and, for an emitter in a child process, check the transport type
        and name the default events file, as an emitter built here would say at once. A type it does not know: the
        emitter setup fails, said once (see :meth:`_new_emitter`). The configuration."""
        from emitter.config import load_config

        config = self._emitter_config = load_config(self.config.emitter_overrides)
        if not self._in_child(config) or not config.transport:  # (the second: for mypy, implied by the first)
            return config
        from emitter.transport import KNOWN_TYPES, announce_file_transport, check_types

        try:
            check_types(config.transport, KNOWN_TYPES)
        except ValueError as error:
            self._emitter_config_error = error
            self.guard.call("emitter setup", _raise, error)
            return config
        if self._announce(config):
            announce_file_transport(config.transport, log.warning)
        return config

    def _in_child(self, config: Any) -> bool:
        return bool(self.config.emitter_process and not config.disabled and config.transport)

    @staticmethod
    def _announce(config: Any) -> bool:
        # a configured file transport is not announced: the user named it, and the host prints nothing; the
        # default file is, as a warning through log4j: the driver's stderr would land in spark-submit's stdout,
        # which an application may use for its data
        return not host_log.configured_file(config.transport, config.source)

    def _new_emitter(self) -> Any:
        """The emitter: in a child process (:mod:`emitter.emitter_process`: the driver never imports
        openlineage-python; the one the start-up hook started, if any), else, when no child can be started, in
        this process."""
        from emitter.emitter_process import EmitterProcess
        from emitter.process_launch import discard

        child = _startup.take_emitter_child()
        try:
            config = self._emitter_config or self.check_emitter_config()
        except Exception:
            discard(child)  # (it would end with this process anyway, at its input's end)
            raise
        if self._emitter_config_error is not None:  # (said by check_emitter_config)
            discard(child)
            return None
        announce = self._announce(config)

        def in_this_process() -> Any:
            from emitter import Emitter

            self._building_since = time.monotonic()
            try:
                return Emitter(config, announce_file=log.warning if announce else False)
            finally:
                self._building_since = None

        def setup_failed(kind: str, message: str) -> None:  # reported as for an emitter built here
            self.guard.call("emitter setup", _raise, type(kind, (Exception,), {})(message))

        if self._in_child(config):
            process = EmitterProcess.start(config, end_timeout=self.config.shutdown_timeout_s, stall_s=STALL_S,
                                           announce_logger=None, fallback=in_this_process,
                                           on_setup_error=setup_failed, child=child)
            if process is not None:
                return process
        else:
            discard(child)
        return in_this_process()

    def _spool(self) -> Any:
        """The emitter's spool (or, when the emitter was never built, the configured one)."""
        if self._emitter is not None:
            return self._emitter.spool
        from emitter.config import load_config
        from emitter.exit_spool import make_spool

        return make_spool(load_config(self.config.emitter_overrides))

    def _settle(self, timeout: float) -> bool:
        """Let the worker finish what is queued, for at most ``timeout``, and spool whatever it has not
        delivered as soon as one delivery stalls longer than :data:`STALL_S`. True when all was delivered."""
        deadline = time.monotonic() + timeout
        wait = 0.0  # the first look does not wait: a stall known already spools at once
        while not self.worker.drain(wait):
            now = time.monotonic()
            if now >= deadline or self._stalled_for(now) > STALL_S:
                self._spool_undelivered()
                return False
            wait = min(0.05, max(0.0, deadline - now))
        return True

    def _stalled_for(self, now: float) -> float:
        """How long delivery has been stuck: the worker's call into the emitter, or the emitter's request to a
        backend that has not answered yet (a refused connection being retried since the application's first
        event is known to be stalled at once, without another :data:`STALL_S` of waiting)."""
        since, building = self._delivering_since, self._building_since
        worker = 0.0 if since is None else now - since
        emitter = self._emitter
        return max(worker, 0.0 if building is None else now - building,
                   emitter.stalled_for() if emitter is not None else 0.0)

    def _spool_undelivered(self, extra: tuple[AppEvent, ...] = ()) -> None:
        """Take every item the worker has not delivered (its queue, the rest of its current item) and
        write their events to the spool now: nothing waits for a stuck backend, nothing is dropped."""
        with self._handoff:
            first_time = not self._spooling
            self._spooling = True
            items = self.worker.take_remaining()
            current = self.worker.current
            unsent = list(self._unsent) if current is not None and self._unsent_for is current else None
            self._unsent.clear()
            records: list[RunRecord] = list(self._backlog)
            self._backlog.clear()
        if unsent is not None:
            records += unsent
        elif current is not None and not callable(current):
            records += self.guard.call("lineage", self._records_of, current) or []
        for item in items:
            if not callable(item):
                records += self.guard.call("lineage", self._records_of, item) or []
        for event in extra:
            records += self.guard.call("lineage", self._records_of, event) or []
        if self.config_disabled():
            return
        problem: list[str]
        if isinstance(self._emitter, EmitterProcess):  # the child spools what it holds, then these, in order
            spooled, dropped, problem, events_path = self._emitter.spool_now(records)
        else:
            from emitter.exit_spool import spool_undelivered

            if self._emitter is None and not records:
                return
            # what the emitter itself holds (its delivery may work on other threads): before ours, in order
            spooled, dropped, problem, events_path = spool_undelivered(self._emitter, self._spool(), records)
            if not (spooled or dropped or problem):
                return
        self._report_spooled(first_time, spooled, dropped, problem, events_path)

    def _report_spooled(self, first_time: bool, spooled: int, dropped: int, problem: list[str],
                        events_path: str) -> None:
        """Count what the end spooled, and say so once (dropped: an error)."""
        self.spooled_at_exit += spooled
        if not first_time or not (spooled or dropped):
            return
        kept = (f"{spooled} went to the spool {events_path} (delivered by `lineage-capture replay` or the next "
                f"run)") if spooled else ""
        if dropped:  # an error: it passes an application's setLogLevel("ERROR"), as the emitter's own spool errors
            why = f" ({'; '.join(problem)})" if problem else ""
            log.error("lineage capture: the backend did not take the last lineage events in time and %d of them "
                      "could not be kept either%s: they are LOST%s", dropped, why, f"; {kept}" if kept else "")
        else:
            log.warning("lineage capture: the backend did not take the last lineage events in time; %s", kept)

    def config_disabled(self) -> bool:
        """No usable transport: nothing would be delivered. Not while the emitter is still being built (stuck
        replaying an earlier run's spool to a backend that is down): this run's events then go to the spool."""
        return self._emitter_built.is_set() and (self._emitter is None or getattr(self._emitter, "disabled", False))

    def _close_emitter(self) -> None:
        self._build_emitter()  # (started by the warm-up, unless that failed)
        self._emitter_built.wait()  # a stalled build is seen by the end (_stalled_for), which spools meanwhile
        self._deliver([], self._close_emitter)  # the backlog, unless the end took it
        if isinstance(self._emitter, EmitterProcess):  # (it times its own deliveries, and spools when one stalls)
            self.delivery_counts = self._emitter.close()
            if self._emitter.spooled_at_end is not None:
                with self._handoff:
                    first_time = not self._spooling
                    self._spooling = True
                self._report_spooled(first_time, *self._emitter.spooled_at_end)
        elif self._emitter is not None:
            self._delivering_since = time.monotonic()
            try:
                self.delivery_counts = self._emitter.close()
            finally:
                self._delivering_since = None

    # ---- sessions and stop -------------------------------------------------------------------------------

    def add_session(self, spark: Any) -> None:
        """Register the listener on ``spark``'s JVM session unless it already is."""
        jsession = spark._jsparkSession
        if any(known.equals(jsession) for known in self._sessions):
            return
        if self.sc._jsc.getLocalProperty("spark.sql.execution.id") is not None:
            # made while a SQL execution runs on this thread: a session Spark hands to Python code, e.g. the batch
            # session of a foreachBatch function (a clone of the query's session, carrying its listeners already)
            return
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self.sc._gateway)
        if self._proxy is None:
            self._proxy = JvmProxy(self.sc._gateway, self.listener)
        self._proxy.call(jsession.listenerManager(), "register")
        self._sessions.append(jsession)
        if self._poll_session is None:
            self._poll_session = jsession
            if "debug" in self.__dict__ and self.debug is not None:  # made already (else it reads _poll_session)
                self.debug.jsession = jsession

    def follow_streams(self, spark: Any) -> None:
        """Attach a streaming listener to ``spark``'s session, once, when it is one of the sessions the listener is
        registered on. Called when the session first reads a stream (see :func:`spark_plugin.streaming.install`):
        a batch application never pays for Spark's streaming machinery (~30 ms on the main thread, ~0.2 s of JVM
        CPU to create the session's StreamingQueryManager)."""
        jsession = spark._jsparkSession
        if not self.listener.active or any(known.equals(jsession) for known in self._streaming_sessions):
            return
        if not any(known.equals(jsession) for known in self._sessions):
            return  # e.g. a foreachBatch function's batch session: the query's own listener follows it
        self._streaming_sessions.append(jsession)
        self._streams.append(streaming.attach(self, spark))

    def hook_stop(self) -> None:
        """Make ``sc.stop()`` (which ``SparkSession.stop()`` calls) end the application run first."""
        original = self.sc.stop
        app = self

        def stop() -> None:
            app.guard.call("stop hook", app.on_stop)
            return original()

        stop.__doc__ = original.__doc__
        self._original_stop = original
        self.sc.stop = stop

    def _unhook_stop(self) -> None:
        if self._original_stop is not None and self.sc.__dict__.get("stop") is not None:
            del self.sc.__dict__["stop"]
        self._original_stop = None

    def _wait_for_listener_calls(self, deadline: float) -> None:
        # Spark delivers listener calls asynchronously: let it hand over the actions that already ran.
        if self.context_stopped or self.sc._jsc is None:
            return
        millis = max(1, int((deadline - time.monotonic()) * 1000))
        self.guard.call("listener drain", self.sc._jsc.sc().listenerBus().waitUntilEmpty, millis)

    def on_stop(self) -> None:
        """The app stops its SparkContext: end the run now, or at exit when an exception propagates."""
        outcome = exit_status.at_stop()
        if outcome is not None:
            self.finish(outcome)
            return
        self._wait_for_listener_calls(time.monotonic() + LISTENER_WAIT_S)
        # the plans of queued actions are read while the context lives; what is undelivered goes to the spool
        self._settle(self.config.shutdown_timeout_s)
        self.context_stopped = True

    def finish(self, outcome: exit_status.Outcome) -> None:
        """Emit the application's terminal event, deliver within the time budget, unhook. Idempotent."""
        if not self._finish_claim.acquire(blocking=False):
            return
        self._wait_for_listener_calls(time.monotonic() + LISTENER_WAIT_S)
        self._end_and_settle(outcome)
        if self.worker.dropped:
            log.warning("lineage capture: lineage of %d actions was dropped (queue full)", self.worker.dropped)
        if self.breaker_stops:
            log.warning("lineage capture: the circuit breaker stopped lineage work %d times", self.breaker_stops)
        self._unregister()
        self._unhook_stop()
        self.worker.stop(0.0 if self.worker.closed else 0.5)
        with _lock:
            if self in _live:
                _live.remove(self)

    def _queue_end(self, outcome: exit_status.Outcome) -> None:
        """Queue the application's last items once: its unfinished actions' FAIL, its terminal event, the emitter's
        close; or, when the worker was closed (stuck at stop: its items are spooled already), spool the terminal
        event."""
        if not self._end_claim.acquire(blocking=False):
            return
        terminal = AppEvent(FAIL if outcome.failed else COMPLETE, datetime.now(timezone.utc), outcome)
        if self.worker.closed:
            self._spool_undelivered((terminal,))
            return
        self.worker.submit(functools.partial(self._end_unfinished_runs, outcome), always=True)
        self.worker.submit(terminal, always=True)
        self.worker.submit(self._close_emitter, always=True)

    def end_interrupted(self, outcome: exit_status.Outcome) -> None:
        """After :meth:`finish` returned on SIGTERM's thread: when another thread was ending this application (the
        main thread inside ``spark.stop()`` or at exit, now held by the signal handler until the process dies), do
        the rest of its end here: queue the end if that thread had not yet (``outcome`` is then the signal's), and
        deliver or spool everything within the end's time budget, as that thread would have. Nothing queued dies
        with the process."""
        if self not in _live:  # ended
            return
        self._end_and_settle(outcome)

    def _end_and_settle(self, outcome: exit_status.Outcome) -> None:
        """Stop taking actions, queue the end (once), and let the worker deliver it within the end's budget."""
        self.listener.active = False
        self._queue_end(outcome)
        if not self.worker.closed:
            self._settle(self.config.shutdown_timeout_s)

    def _end_unfinished_runs(self, outcome: exit_status.Outcome) -> None:
        """On the worker, as the application ends: a FAIL for every action whose START the execution poll sent
        and whose end Spark never reported (the driver killed while it ran), and a START and FAIL for every RDD
        action still running (its wrapper reports at the action's end, which never came): no run stays open for
        ever, no job goes unseen. The JVM integration sends FAIL for them too (their Spark jobs end failed as the
        context stops)."""
        message = f"the application ended while this action ran: {outcome.message or 'no error'}"
        unfinished = self._poll.unfinished() if self._poll is not None else []
        rdd_actions = rdd_jobs.unfinished_actions(self.rdd_actions_running, self.sc, message) \
            if self.rdd_actions_running and self.config.rdd_events else []
        if not unfinished and not rdd_actions:
            return
        now = datetime.now(timezone.utc)
        facets = dict(self.facets)
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage="PYTHON")
        records = [self._action_record(FAIL, max(now, tracked.last_sent or now), tracked.lineage, tracked.run_id,
                                       tracked.job_suffix, facets)
                   for tracked in unfinished]
        for action in rdd_actions:
            records += self.guard.call("rdd lineage", self.rdd_records, action, 0.0) or []
        if records and not self.config_disabled():
            self._deliver(self._finished(records), self._end_unfinished_runs)

    def _unregister(self) -> None:
        if self.context_stopped or self.sc._jsc is None:
            return
        proxy = self._proxy
        for jsession in self._sessions:
            assert proxy is not None  # set before the first session was registered
            self.guard.call("unregister", proxy.call, jsession.listenerManager(), "unregister")
        self._sessions.clear()
        for attached in self._streams:
            self.guard.call("unregister", streaming.detach, attached)
        self._streams.clear()
        self._streaming_sessions.clear()


# ---- process-wide entry points --------------------------------------------------------------------------


def _at_exit() -> None:
    _finish_all(exit_status.at_exit())


def _finish_all(outcome: exit_status.Outcome) -> None:
    """End every live application's run with ``outcome`` (the interpreter's exit; SIGTERM's, through
    :func:`_terminate_all`)."""
    # no lock: SIGTERM's thread must not wait on a lock the interrupted main thread may hold (a list copy is atomic)
    apps = list(_live)
    for app in apps:
        app.guard.call("exit hook", app.finish, outcome)


def _terminate_all(outcome: exit_status.Outcome) -> None:
    """SIGTERM (on a thread of its own; the main thread is held in the signal handler): end every live
    application's run with ``outcome``, or finish the end another thread had begun."""
    _finish_all(outcome)
    for app in list(_live):
        app.guard.call("exit hook", app.end_interrupted, outcome)


def _app_of_context(sc: Any) -> Application | None:
    """The live application of a SparkContext (called by RDD action wrappers on the app's threads: cheap)."""
    for app in _live:  # one or two entries; no lock: a list read is atomic
        if app.sc is sc and not app.finished and not app.context_stopped:
            return app
    return None


def _any_live_app() -> Application | None:
    """The live application of this process (one SparkContext per process), for the reader wrappers."""
    for app in _live:  # no lock: a list read is atomic
        if not app.finished and not app.context_stopped:
            return app
    return None


def _is_classic(spark: Any) -> bool:
    return hasattr(spark, "_jsparkSession")  # Spark Connect sessions have no JVM session in this process


def _start(spark: Any, conf: Mapping[str, str] | None) -> Application | None:
    with _lock:
        app = _start_context(spark.sparkContext, conf)
        if app is not None:
            app.add_session(spark)
        return app


def _start_context(sc: Any, conf: Mapping[str, str] | None) -> Application | None:
    """The live application of ``sc``, made (and its run started) unless there is one; None when disabled."""
    from emitter.log import install_redaction

    install_redaction(root_handlers=False)  # our log lines only: the application's handlers stay as they are
    with _lock:
        for app in _live:
            if app.sc is sc and not app.finished and not app.context_stopped:
                return app
        # openlineage.yml's settings under the SparkConf's, the explicit ones over both (the JVM's precedence)
        from_file, file_warnings = file_settings()
        spark_conf = {**from_file, **dict(sc._conf.getAll()), **(conf or {})}
        config = PluginConfig.from_spark_conf(spark_conf)
        if config.disabled:
            log.info("lineage capture disabled by spark.openlineage.disabled / OPENLINEAGE_DISABLED")
            _startup.discard_emitter_child()
            return None
        host_log.install(sc._jvm)  # before the first warning: they go where Spark's go
        for warning in file_warnings:
            log.warning("%s", warning)
        config.warn_problems()
        app = Application(sc, spark_conf, config)
        app.guard.call("emitter setup", app.check_emitter_config)
        app.worker.submit(app.warm_up, always=True)
        app.hook_stop()
        rdd_jobs.install(_app_of_context)
        rdd_jobs.install_reader(_any_live_app)
        streaming.install(_app_of_context)
        app.begin()
        exit_status.install(on_terminate=_terminate_all)
        if not _process["atexit"]:
            _process["atexit"] = True
            atexit.register(_at_exit)
        _live.append(app)
        return app


def instrument_context(sc: Any) -> Application | None:
    """Capture lineage of the application of ``sc`` (a PySpark SparkContext) as soon as it exists, sessions or not:
    its run, and its RDD-only jobs (the JVM integration listens to the context itself). A session made on it later
    is instrumented by :func:`instrument`, which then finds this application. Never raises."""
    return Guard().call("instrument", _start_context, sc, None)


def instrument(spark: Any, conf: Mapping[str, str] | None = None) -> Application | None:
    """Capture lineage of ``spark``'s application: one run for the app, one child run per action.

    ``conf`` adds or overrides ``spark.openlineage.*`` keys (full names) on top of the SparkConf, e.g. a
    transport for a notebook. Idempotent per SparkContext (a further session of the same context gets the
    listener too). Never raises: returns None when nothing was instrumented (disabled, Spark Connect, error).
    """
    if not _is_classic(spark):
        if not _process["connect_warned"]:
            _process["connect_warned"] = True
            log.warning("lineage capture: Spark Connect sessions are not supported by the Python plugin "
                        "(no JVM in this process); lineage of this application is not captured")
        return None
    return Guard().call("instrument", _start, spark, conf)


def uninstrument() -> None:
    """End every instrumented application's run (COMPLETE), deliver its events and detach. Idempotent."""
    with _lock:
        apps = list(_live)
    for app in apps:
        app.guard.call("uninstrument", app.finish, exit_status.Outcome(False))
    with _lock:
        if not _live:
            exit_status.uninstall()
            host_log.uninstall()


def applications() -> list[Application]:
    """The applications currently instrumented in this process."""
    with _lock:
        return list(_live)
