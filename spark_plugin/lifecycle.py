"""One instrumented Spark application: its run, its listener, its worker and how it ends.

Events: the application run (START when instrumented, COMPLETE or FAIL when the app stops its
SparkContext or the interpreter exits) and one child run per action (START at ``end - duration``,
then COMPLETE, or FAIL with the JVM error). All delivery happens on the worker thread; the app's
threads only ever queue work. Every entry point from Spark or the app goes through the
:class:`~spark_plugin.guard.Guard`, so the application behaves exactly as without the plugin.
"""
from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from openlineage.client.facet_v2 import error_message_run, sql_job

from emitter.records import COMPLETE, FAIL, START, Dataset, JobRef, JobType, RunRecord, RunRef
from emitter.run_ids import new_run_id
from spark_plugin import exit_status
from spark_plugin.config import PluginConfig
from spark_plugin.facets import config_job_facets, config_run_facets, engine_facets, without_disabled
from spark_plugin.guard import Guard
from spark_plugin.listener import Captured, JvmProxy, QueryListener
from spark_plugin.worker import Worker

log = logging.getLogger("spark_plugin")

APPLICATION_JOB_TYPE = JobType("APPLICATION", "SPARK", "NONE")
#: ``onFailure`` calls that are not executions: Spark 4 reports analysis errors too, the JVM integration
#: emits nothing for them (no SQL execution ever started).
NOT_EXECUTIONS = frozenset({"analyze"})

_lock = threading.RLock()
_live: list[Application] = []
_process: dict[str, bool] = {"atexit": False, "connect_warned": False}


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def _without_io_facets(datasets: tuple[Dataset, ...]) -> tuple[Dataset, ...]:
    # statistics (outputStatistics...) describe a finished run: START events carry none, as in the JVM
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
        self.facets = {**engine_facets(sc.version, self.spark_conf, config.captured_properties),
                       **config_run_facets(config)}
        self.job_facets = config_job_facets(config)  # tags, ownership: on the application and every action
        self.listener = QueryListener(self._on_action, self.guard)
        self.worker = Worker(self._handle, self.guard, config.queue_size)
        self._emitter: Any = None
        self._emitter_tried = False
        self._sessions: list[Any] = []  # JVM sessions the listener is registered on
        self._proxy: JvmProxy | None = None
        self._original_stop: Any = None
        self._finish_lock = threading.Lock()
        self.finished = False
        self.context_stopped = False
        self.delivery_counts: Any = None  # the emitter's Counts once closed
        self.started = started

    def begin(self) -> None:
        """Queue the application's START (once the listener is in place)."""
        self.worker.submit(self._app_record(START, self.started), always=True)

    # ---- records -----------------------------------------------------------------------------------------

    def _app_record(self, event_type: str, when: datetime, extra: Mapping[str, Any] | None = None) -> RunRecord:
        return RunRecord(event_type, when, job=self.job, run_id=self.run_id, job_type=APPLICATION_JOB_TYPE,
                         parent=self.config.parent, root=self.config.root, run_facets={**self.facets, **(extra or {})},
                         job_facets=self.job_facets)

    def action_records(self, captured: Captured) -> list[RunRecord]:
        """START and COMPLETE/FAIL of one action, or nothing when it is not a lineage-bearing action."""
        from spark_plugin import plan_lineage  # looked up per call: tests swap ``action_lineage``

        if captured.failed and captured.func_name in NOT_EXECUTIONS:
            return []
        lineage = self.guard.call("lineage", functools.partial(
            plan_lineage.action_lineage, captured.qe, self.spark_conf, func_name=captured.func_name))
        if lineage is None:
            return []
        job = JobRef(self.config.namespace, f"{self.config.app_name}.{lineage.job_suffix}")
        job_facets = dict(self.job_facets)
        if lineage.sql:  # dialect "spark" as the JVM integration
            job_facets["sql"] = sql_job.SQLJobFacet(query=lineage.sql, dialect="spark")
        common: dict[str, Any] = dict(
            job=job, run_id=new_run_id(captured.start), parent=self.run, root=self.action_root,
            job_type=JobType("SQL_JOB", "SPARK", lineage.processing_type), job_facets=job_facets,
        )
        end_facets = dict(self.facets)
        if captured.failed:
            end_facets["errorMessage"] = self._jvm_error(captured.exception)
        return [
            RunRecord(START, captured.start, inputs=_without_io_facets(tuple(lineage.inputs)),
                      outputs=_without_io_facets(tuple(lineage.outputs)), run_facets=self.facets, **common),
            RunRecord(FAIL if captured.failed else COMPLETE, captured.end, inputs=lineage.inputs,
                      outputs=lineage.outputs, run_facets=end_facets, **common),
        ]

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
        emitter = self._get_emitter()
        if emitter is None:  # no usable transport (already warned): lineage work would be wasted
            return
        for record in self.action_records(item) if isinstance(item, Captured) else [item]:
            emitter.emit(without_disabled(record, self.config.disabled_facets))

    def _get_emitter(self) -> Any:
        # Built on the worker: building it may replay a spool over the network.
        if not self._emitter_tried:
            self._emitter_tried = True
            from emitter import Emitter

            self._emitter = self.guard.call("emitter setup", Emitter.from_config, self.config.emitter_overrides)
        return self._emitter

    def _close_emitter(self) -> None:
        if self._emitter is not None:
            counts = self._emitter.close()
            self.delivery_counts = counts

    # ---- sessions and stop -------------------------------------------------------------------------------

    def add_session(self, spark: Any) -> None:
        """Register the listener on ``spark``'s JVM session unless it already is."""
        jsession = spark._jsparkSession
        if any(known.equals(jsession) for known in self._sessions):
            return
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self.sc._gateway)
        if self._proxy is None:
            self._proxy = JvmProxy(self.sc._gateway, self.listener)
        self._proxy.call(jsession.listenerManager(), "register")
        self._sessions.append(jsession)

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
        deadline = time.monotonic() + self.config.shutdown_timeout_s
        self._wait_for_listener_calls(deadline)
        self.worker.drain(max(0.0, deadline - time.monotonic()))
        self.context_stopped = True

    def finish(self, outcome: exit_status.Outcome) -> None:
        """Emit the application's terminal event, deliver within the time budget, unhook. Idempotent."""
        with self._finish_lock:
            if self.finished:
                return
            self.finished = True
        deadline = time.monotonic() + self.config.shutdown_timeout_s
        self._wait_for_listener_calls(deadline)
        self.listener.active = False
        extra: dict[str, Any] = {}
        if outcome.failed:
            extra["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=outcome.message, programmingLanguage="PYTHON", stackTrace=outcome.stack_trace)
        self.worker.submit(self._app_record(FAIL if outcome.failed else COMPLETE, datetime.now(timezone.utc), extra),
                           always=True)
        self.worker.submit(self._close_emitter, always=True)
        if not self.worker.drain(max(0.0, deadline - time.monotonic())):
            log.warning("lineage capture: delivery did not finish within %.1fs (backend slow or down?); "
                        "%d queued lineage items dropped, 1 in flight", self.config.shutdown_timeout_s,
                        self.worker.pending())
        if self.worker.dropped:
            log.warning("lineage capture: lineage of %d actions was dropped (queue full)", self.worker.dropped)
        self._unregister()
        self._unhook_stop()
        self.worker.stop(0.5)
        with _lock:
            if self in _live:
                _live.remove(self)

    def _unregister(self) -> None:
        if self.context_stopped or self.sc._jsc is None:
            return
        for jsession in self._sessions:
            self.guard.call("unregister", self._proxy.call, jsession.listenerManager(), "unregister")
        self._sessions.clear()


# ---- process-wide entry points --------------------------------------------------------------------------


def _at_exit() -> None:
    outcome = exit_status.at_exit()
    with _lock:
        apps = list(_live)
    for app in apps:
        app.guard.call("exit hook", app.finish, outcome)


def _is_classic(spark: Any) -> bool:
    return hasattr(spark, "_jsparkSession")  # Spark Connect sessions have no JVM session in this process


def _start(spark: Any, conf: Mapping[str, str] | None) -> Application | None:
    from emitter.log import install_redaction

    install_redaction(root_handlers=False)  # our log lines only: the application's handlers stay as they are
    sc = spark.sparkContext
    with _lock:
        for app in _live:
            if app.sc is sc and not app.finished and not app.context_stopped:
                app.add_session(spark)
                return app
        spark_conf = dict(sc._conf.getAll())
        spark_conf.update(conf or {})
        config = PluginConfig.from_spark_conf(spark_conf)
        if config.disabled:
            log.info("lineage capture disabled by spark.openlineage.disabled / OPENLINEAGE_DISABLED")
            return None
        config.warn_unknown()
        app = Application(sc, spark_conf, config)
        app.add_session(spark)
        app.hook_stop()
        app.begin()
        exit_status.install()
        if not _process["atexit"]:
            _process["atexit"] = True
            atexit.register(_at_exit)
        _live.append(app)
        return app


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


def applications() -> list[Application]:
    """The applications currently instrumented in this process."""
    with _lock:
        return list(_live)
