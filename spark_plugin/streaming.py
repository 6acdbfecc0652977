"""Structured Streaming: one child run per micro-batch, as the JVM integration gives them.

What the JVM ``openlineage-spark`` integration emits for a streaming query (its ``OpenLineageSparkListener``
sees every SQL execution; each micro-batch is one, run by ``MicroBatchExecution`` on the query's thread):

=====================================  ============================================================================
micro-batch (one SQL execution)        its own run: START at the execution's start, COMPLETE at its end (FAIL when
                                       it failed); ``jobType {SQL_JOB, SPARK, STREAMING}`` (the optimized plan
                                       ``isStreaming``); parent = the application run, like every action
job name                               ``{app}.{executed plan root}``: ``scan_csv`` (a file source straight into a
                                       file sink or foreachBatch: the sink's V1 marker node is dropped from the
                                       plan), ``project``, ``write_to_data_source_v2`` (memory, console, foreach
                                       and Kafka sinks); no dataset suffix (no streaming builder provides one)
filtered                               as for batch actions (``SparkNodesFilter``), except a ``Project`` root
inputs: file source (csv, json,        the batch's ``LogicalRelation`` over the files of that batch: one file ->
parquet, text, orc directory)          that file (``/in/f0.csv``), several -> their directory
inputs: rate, memory, socket           none (``NoOpStreamStrategy``); Kafka/Kinesis/Mongo need their connectors
outputs: file sink by path             none (``WriteToMicroBatchDataSourceV1DatasetBuilder`` handles a
                                       ``FileStreamSink`` only with a catalog table)
outputs: file sink of ``toTable``      the table (location, ``symlinks``), on COMPLETE only (the builder is
                                       defined for the execution's end event)
outputs: memory/console/foreach sink   none (``WriteToDataSourceV2Visitor`` knows only Kafka's streaming write)
``foreachBatch``                       the micro-batch run (inputs, no output) and, as ordinary actions, the
                                       writes the function makes (``BATCH``: the batch DataFrame is an RDD scan)
=====================================  ============================================================================

The streaming listener of a session is attached when the application first reads a stream from it
(:func:`install` wraps ``SparkSession.readStream``, the start of every streaming query in PySpark), before any of
its queries can start: a batch application never creates a StreamingQueryManager for the plugin's sake. A stream
read before :func:`spark_plugin.instrument` was called (in a notebook) is not followed.

Python gets no call for a micro-batch's SQL execution (Spark reports only named executions to
``QueryExecutionListener``s), so the plugin follows streaming queries with PySpark's public
``StreamingQueryListener``: ``onQueryStarted`` (called synchronously on the query's thread, before its first
batch) keeps a handle on the query's ``StreamExecution``; ``onQueryProgress`` of a trigger that ran a batch
takes that execution's ``lastExecution`` (the batch's ``IncrementalExecution``, one py4j call) and queues it;
the worker reads its plan like any action's and emits START and COMPLETE. ``onQueryTerminated`` with an
exception after a batch no progress reported gives that batch a START and FAIL.

Bounds: the listener keeps one handle per *active* query (dropped when it terminates); nothing is kept per
batch; one queued item and one START+COMPLETE pair per executed micro-batch (idle triggers give nothing, the
JVM also sends RUNNING events per Spark job); the queue is the worker's bounded queue (full -> dropped and
counted). Limitation: the progress event is delivered asynchronously; when the query has already begun its
next batch by then (batches back to back: the default trigger, ``availableNow`` with a file or row limit), the
execution read is that newer batch's: same job name and sinks, and a file source that read a single file is
named by its directory (the JVM's name for a batch of several files), never by another batch's file.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import attrs

from emitter.deferred import facet_v2
from emitter.records import COMPLETE, FAIL, START, Dataset, RunRecord
from emitter.run_ids import new_run_id

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import error_message_run

    from spark_plugin.lifecycle import Application
else:
    error_message_run = facet_v2.error_message_run

log = logging.getLogger("spark_plugin")

#: ``durationMs`` key present only when a trigger ran a batch (idle triggers report progress without it).
_RAN_A_BATCH = "addBatch"


@attrs.frozen
class StreamBatch:
    """One micro-batch of a streaming query as the listener saw it (queued for the worker)."""

    query_name: str | None
    batch_id: int
    start: datetime
    end: datetime
    qe: Any  # py4j proxy of the batch's IncrementalExecution; released once the worker handled it
    error: str | None = None  # the query's exception text when the batch failed


def _parse_time(text: str) -> datetime:
    # progress timestamps are ISO-8601 UTC with milliseconds and a Z ("2026-11-23T22:30:00.123Z")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _listener_class() -> type:
    """The listener class, built when first needed (pyspark is only importable inside a Spark driver)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class LineageStreamListener(StreamingQueryListener):
        """PySpark ``StreamingQueryListener`` of one session: records and queues, never blocks."""

        def __init__(self, app: Application, jmanager: Any) -> None:
            self._app = app
            self._jmanager = jmanager  # the session's JVM StreamingQueryManager
            #: run id -> [StreamExecution proxy, last batch id queued]: active queries only
            self.queries: dict[str, list[Any]] = {}

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            self._app.guard.call("streaming listener", self._started, event)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            self._app.guard.call("streaming listener", self._progress, event.progress)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            pass  # no batch ran: the JVM sees no execution

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 - PySpark's name
            self._app.guard.call("streaming listener", self._terminated, event)

        def _started(self, event: Any) -> None:
            if not self._app.listener.active:
                return
            # synchronous on the query's thread, before its first batch: the query is registered and active
            query = self._jmanager.get(str(event.id))
            if query is not None:
                self.queries[str(event.runId)] = [query.streamingQuery(), -1]

        def _progress(self, progress: Any) -> None:
            known = self.queries.get(str(progress.runId))
            if known is None or _RAN_A_BATCH not in progress.durationMs or progress.batchId <= known[1]:
                return
            known[1] = progress.batchId
            start = _parse_time(progress.timestamp)
            end = start + timedelta(milliseconds=int(progress.durationMs.get("triggerExecution", 0)))
            qe = known[0].lastExecution()  # read now: the query may start its next batch at any moment
            self._app.on_stream_batch(StreamBatch(progress.name, progress.batchId, start, end, qe))

        def _terminated(self, event: Any) -> None:
            known = self.queries.pop(str(event.runId), None)
            if known is None or not event.exception:
                return
            qe = known[0].lastExecution()
            if qe is None or int(qe.currentBatchId()) <= known[1]:
                return  # failed before a batch began, or after its progress was reported
            now = datetime.now(timezone.utc)
            self._app.on_stream_batch(StreamBatch(None, int(qe.currentBatchId()), now, now, qe, error=event.exception))

    return LineageStreamListener


_state: dict[str, Any] = {"installed": False, "apps": None}


def install(find_app: Any) -> None:
    """Wrap ``SparkSession.readStream`` once per process; ``find_app(sc)`` returns the live application of a
    SparkContext or None (then the wrapper only calls through). A live application's session reading a stream
    gets its streaming listener then (:meth:`~spark_plugin.lifecycle.Application.follow_streams`)."""
    _state["apps"] = find_app
    if _state["installed"]:
        return
    _state["installed"] = True
    from pyspark.sql.session import SparkSession

    original = SparkSession.__dict__["readStream"]  # a property of the classic session

    def read_stream(session: Any) -> Any:
        app = None
        try:
            app = _state["apps"](session.sparkContext)
        except Exception:  # noqa: BLE001 - never in the application's way
            app = None
        if app is not None:
            app.guard.call("streaming listener", app.follow_streams, session)
        return original.fget(session)

    read_stream.__wrapped__ = original.fget  # type: ignore[attr-defined]
    SparkSession.readStream = property(read_stream, doc=original.__doc__)  # type: ignore[method-assign,assignment]


def attach(app: Application, spark: Any) -> Any:
    """Register a streaming listener on ``spark``'s StreamingQueryManager; returns what :func:`detach` needs."""
    listener = _listener_class()(app, spark._jsparkSession.streams())
    manager = spark.streams
    manager.addListener(listener)
    return manager, listener


def detach(attached: Any) -> None:
    """Remove a listener :func:`attach` registered."""
    manager, listener = attached
    listener.queries.clear()
    manager.removeListener(listener)


def _sink_outputs(app: Application, qe: Any) -> tuple[Any, ...]:
    """The JVM's ``WriteToMicroBatchDataSourceV1DatasetBuilder``: a ``FileStreamSink`` writing a catalog table
    (``toTable``) -> that table with the query's schema; any other V1 sink -> nothing."""
    from spark_plugin import plan_lineage, plan_tree
    from spark_plugin.plan_context import PlanContext, catalog_table_raw

    analyzed = qe.analyzed()
    if analyzed.nodeName() != "WriteToMicroBatchDataSourceV1":
        return ()
    table = analyzed.catalogTable()
    if not table.isDefined() or analyzed.sink().getClass().getSimpleName() != "FileStreamSink":
        return ()
    root = plan_tree.PlanNode(analyzed.getClass().getName(), {}, (), (), ())
    ctx = PlanContext(qe, root, analyzed, app.spark_conf)
    raw = catalog_table_raw(ctx, table.get(), None, schema=plan_tree.struct_schema(analyzed.schema().json()))
    return (plan_lineage._FacetBuilder(app.spark_conf).dataset(raw),)


def _files_as_directories(app: Application, qe: Any, inputs: tuple[Dataset, ...]) -> tuple[Dataset, ...]:
    """``inputs`` with each streaming file relation's single file named by its directory instead: what a batch
    of several files is named, and true of whichever batch read it (see :func:`batch_records`)."""
    from emitter import naming
    from spark_plugin import plan_lineage, plan_tree
    from spark_plugin.plan_context import PlanContext, path_raw

    jplan = qe.optimizedPlan()
    root = plan_tree.parse_plan(jplan)
    ctx = PlanContext(qe, root, jplan, app.spark_conf)
    facets = plan_lineage._FacetBuilder(app.spark_conf)
    renames: dict[tuple[str, str], tuple[str, str]] = {}
    for node in plan_tree.walk(root):
        if node.name != "LogicalRelation" or node.fields.get("isStreaming") is not True:
            continue
        paths = ctx.jvm_node(node).relation().location().rootPaths()
        path = naming.escape_literal_path(paths.apply(0).toString()) if paths.size() == 1 else None
        if path is None or not ctx.is_file(path):
            continue
        file = path_raw(path)
        directory = path_raw(path.rsplit("/", 1)[0])
        renames[(facets.namespace(file.namespace), facets._name(file.name))] = (
            facets.namespace(directory.namespace), facets._name(directory.name))
    out: dict[tuple[str, str], Dataset] = {}
    for ds in inputs:
        namespace, name = renames.get((ds.namespace, ds.name), (ds.namespace, ds.name))
        out.setdefault((namespace, name), Dataset(namespace, name, facets=ds.facets, io_facets=ds.io_facets))
    return tuple(out.values())


def batch_records(app: Application, batch: StreamBatch) -> list[RunRecord]:
    """START and COMPLETE (FAIL) of one micro-batch; nothing when the JVM would filter its plan.

    When the query had already begun its next batch when the progress event came (batches back to back), the
    execution read is that next batch's: same job name and sinks, but its file source may have read other files,
    so a single file is named by its directory rather than attributing the wrong file to this batch."""
    from spark_plugin import plan_lineage

    if batch.qe is None:
        return []
    lineage = plan_lineage.action_lineage(batch.qe, app.spark_conf, func_name="micro-batch")
    if lineage is None:
        return []
    lineage = attrs.evolve(lineage, processing_type="STREAMING" if batch.qe.optimizedPlan().isStreaming()
                           else "BATCH")
    if batch.error is None and int(batch.qe.currentBatchId()) != batch.batch_id:
        lineage = attrs.evolve(lineage, inputs=_files_as_directories(app, batch.qe, lineage.inputs))
    run_id = new_run_id(batch.start)
    records = [app._action_record(START, batch.start, lineage, run_id, io_facets=False)]
    sinks = _sink_outputs(app, batch.qe)
    if sinks:
        lineage = attrs.evolve(lineage, outputs=(*lineage.outputs, *sinks))
    end_facets = dict(app.facets)
    if batch.error is not None:
        end_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=batch.error.strip().splitlines()[0] if batch.error.strip() else batch.error,
            programmingLanguage="JAVA", stackTrace=batch.error)
    records.append(app._action_record(FAIL if batch.error is not None else COMPLETE, batch.end, lineage, run_id,
                                      run_facets=end_facets, io_facets=False))
    return records
