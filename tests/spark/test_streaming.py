"""Structured Streaming in-process: real streaming queries on the shared local SparkSession (file sources, file
sinks by path and by table, foreachBatch, the memory sink, a failing batch), each micro-batch a child run of the
application run named, typed and filled as the JVM integration does (see spark_plugin/streaming.py).

Each query below runs exactly one micro-batch per ``start()`` (``availableNow``; a second batch comes from a
restart on the same checkpoint), so every run's plan is the batch's own (see the module's limitation)."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_runtime import APP, parent_of, run_captured

STREAMING = "STREAMING"
BATCH = "BATCH"

Run = tuple[tuple[str, ...], str, str, tuple[str, ...], tuple[str, ...]]  # event types, job, processingType, in, out


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _available_now(writer: Any, method: str = "start", *args: Any) -> None:
    query = getattr(writer.trigger(availableNow=True), method)(*args)
    query.awaitTermination()


def _csv_stream(spark: Any, workdir: str) -> Any:
    return spark.readStream.schema("a INT, b STRING").csv(f"{workdir}/in")


def csv_to_parquet_path(spark: Any, workdir: str) -> None:
    """A csv directory into a parquet file sink by path; restarted on its checkpoint after a second file."""
    for name in ("f0", "f1"):
        if name == "f1":
            _write(Path(workdir, "in", "f1.csv"), "3,z\n")
        writer = _csv_stream(spark, workdir).writeStream.format("parquet") \
            .option("checkpointLocation", f"{workdir}/ck").option("path", f"{workdir}/out")
        _available_now(writer)


def json_to_table(spark: Any, workdir: str) -> None:
    """Two json files in one batch into a table (``toTable``: a FileStreamSink with a catalog table)."""
    stream = spark.readStream.schema("a INT, b STRING").json(f"{workdir}/in")
    _available_now(stream.writeStream.format("parquet").option("checkpointLocation", f"{workdir}/ck"),
                   "toTable", "stream_sink_json")


def text_foreach_batch(spark: Any, workdir: str) -> None:
    """A text directory through a projection into foreachBatch, which writes each batch as parquet."""
    def write_batch(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(f"{workdir}/fb")

    stream = spark.readStream.text(f"{workdir}/in").selectExpr("upper(value) AS v")
    _available_now(stream.writeStream.foreachBatch(write_batch).option("checkpointLocation", f"{workdir}/ck"))


def text_foreach_batch_session_hook(spark: Any, workdir: str) -> None:
    """As :func:`text_foreach_batch`, with the batch's session instrumented the way the spark-submit start-up
    hook instruments every new SparkSession (PySpark wraps the batch's JVM session in a new one per batch)."""
    import spark_plugin

    def write_batch(batch: Any, batch_id: int) -> None:
        spark_plugin.instrument(batch.sparkSession)
        batch.write.mode("append").parquet(f"{workdir}/fb")

    stream = spark.readStream.text(f"{workdir}/in").selectExpr("upper(value) AS v")
    _available_now(stream.writeStream.foreachBatch(write_batch).option("checkpointLocation", f"{workdir}/ck"))


def csv_to_memory(spark: Any, workdir: str) -> None:
    """The memory sink (a V2 sink): Spark runs the batch as an unnamed execution around a named ``collect``."""
    writer = _csv_stream(spark, workdir).writeStream.format("memory").queryName("stream_memory_sink") \
        .option("checkpointLocation", f"{workdir}/ck")
    _available_now(writer)


def failing_batch(spark: Any, workdir: str) -> None:
    """A batch whose job fails: the query terminates with the exception."""
    stream = _csv_stream(spark, workdir).selectExpr("CAST(raise_error('boom') AS STRING) AS x")
    writer = stream.writeStream.format("parquet").option("checkpointLocation", f"{workdir}/ck") \
        .option("path", f"{workdir}/out")
    with pytest.raises(Exception, match="boom"):
        _available_now(writer)


def _table_dir(spark: Any, table: str) -> str:
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    return os.path.realpath(warehouse.removeprefix("file:").rstrip("/")) + f"/{table}"


SC = ("START", "COMPLETE")
SRC = ("START", "RUNNING", "COMPLETE")
CREATE_SINK = f"{APP}.execute_create_data_source_table_command.default_stream_sink_json"

# (id, input files {relative path: content}, query, expected runs (order-free): event types, job, processingType,
#  input names (relative to workdir), output names (relative to workdir; "@table" = the table's directory))
CASES: list[tuple[str, dict[str, str], Callable[[Any, str], None], list[Run]]] = [
    # one file per batch: the batch's relation is that file (the JVM's input in SparkStreamingTest); a file sink by
    # path has no output (the JVM's builder handles a FileStreamSink only with a catalog table)
    ("csv_to_parquet_path", {"in/f0.csv": "1,x\n2,y\n"}, csv_to_parquet_path,
     [(SC, f"{APP}.scan_csv", STREAMING, ("in/f0.csv",), ()),
      (SC, f"{APP}.scan_csv", STREAMING, ("in/f1.csv",), ())]),
    # two files in one batch: their directory; the table's output on COMPLETE only (see test_table_output_on_end)
    ("json_to_table", {"in/a.json": '{"a": 1, "b": "x"}\n', "in/b.json": '{"a": 2, "b": "y"}\n'}, json_to_table,
     [(SC, CREATE_SINK, BATCH, (), ("@table",)),
      (SC, f"{APP}.scan_json", STREAMING, ("in",), ("@table",))]),
    # foreachBatch: the micro-batch (input, no output) and the function's own write, an ordinary BATCH action over
    # the batch's RDD (its files' directory)
    ("text_foreach_batch", {"in/t0.txt": "hello\nworld\n"}, text_foreach_batch,
     [(SC, f"{APP}.project", STREAMING, ("in/t0.txt",), ()),
      (SRC, f"{APP}.execute_insert_into_hadoop_fs_relation_command.{{wd}}_fb", BATCH, ("in",), ("fb",))]),
    # the clone of the query's session carries the listener already: its write is not reported twice
    ("text_foreach_batch_session_hook", {"in/t0.txt": "hello\nworld\n"}, text_foreach_batch_session_hook,
     [(SC, f"{APP}.project", STREAMING, ("in/t0.txt",), ()),
      (SRC, f"{APP}.execute_insert_into_hadoop_fs_relation_command.{{wd}}_fb", BATCH, ("in",), ("fb",))]),
    # the memory sink: two executions per batch, as the JVM sees them (the outer one and its named collect); no
    # output (the JVM names only Kafka's streaming write)
    ("csv_to_memory", {"in/f0.csv": "1,x\n"}, csv_to_memory,
     [(SC, f"{APP}.write_to_data_source_v2", STREAMING, ("in/f0.csv",), ()),
      (SC, f"{APP}.write_to_data_source_v2", STREAMING, ("in/f0.csv",), ())]),
    ("failing_batch", {"in/f0.csv": "1,x\n"}, failing_batch,
     [(("START", "FAIL"), f"{APP}.project", STREAMING, ("in/f0.csv",), ())]),
]


def _runs(events: list[dict], workdir: str, table_dir: str) -> list[Run]:
    """The action runs (the application's excluded) as comparable rows, names relative to ``workdir``."""
    def rel(name: str) -> str:
        if name == table_dir:
            return "@table"
        return name[len(workdir) + 1:] if name.startswith(workdir + "/") else name

    by_run: dict[str, list[dict]] = {}
    for event in events:
        if event["job"]["name"] != APP:
            by_run.setdefault(event["run"]["runId"], []).append(event)
    runs = []
    for run_events in by_run.values():
        last = run_events[-1]
        assert {e["job"]["name"] for e in run_events} == {last["job"]["name"]}
        runs.append((tuple(e["eventType"] for e in run_events), last["job"]["name"],
                     last["job"]["facets"]["jobType"]["processingType"],
                     tuple(rel(d["name"]) for d in last["inputs"]), tuple(rel(d["name"]) for d in last["outputs"])))
    return sorted(runs)


@pytest.mark.parametrize("name,files,query,expected", CASES, ids=[c[0] for c in CASES])
def test_micro_batch_runs(spark, workdir, name, files, query, expected):
    from spark_plugin import lifecycle

    for path, content in files.items():
        _write(Path(workdir, path), content)
    kept: list[list[dict]] = []

    def query_then_state(spark: Any, workdir: str) -> None:
        query(spark, workdir)
        spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()  # the terminations are delivered
        kept.append([dict(attached[1].queries) for attached in lifecycle.applications()[0]._streams])

    try:
        events, app = run_captured(spark, workdir, query_then_state)
    finally:
        spark.sql("DROP TABLE IF EXISTS stream_sink_json")
    wd = "_".join(workdir.rstrip("/").split("/")[-1:])  # trimPath: the last two segments of {workdir}/fb
    expected = sorted((types, job.format(wd=wd), kind, ins, outs) for types, job, kind, ins, outs in expected)
    assert _runs(events, workdir, _table_dir(spark, "stream_sink_json")) == expected
    application = events[0]
    assert (application["eventType"], application["job"]["name"]) == ("START", APP)
    for event in events[1:]:
        facets = event["job"]["facets"]
        if event["job"]["name"] != APP:
            assert facets["jobType"]["jobType"] == "SQL_JOB" and facets["jobType"]["integration"] == "SPARK"
            assert parent_of(event) == ("default", APP, application["run"]["runId"],
                                        "default", APP, application["run"]["runId"])
    assert kept == [[{}]]  # one listener (one session), holding nothing once its queries ended
    assert not app.guard.failures  # no callback, worker step or detach failed along the way


def test_table_output_on_end(spark, workdir):
    """``toTable``: START names no output (the JVM's builder answers the execution's end only); COMPLETE has the
    table with the query's schema and the table symlink the CREATE run has."""
    _write(Path(workdir, "in/a.json"), '{"a": 1, "b": "x"}\n')
    try:
        events, _ = run_captured(spark, workdir, json_to_table)
    finally:
        spark.sql("DROP TABLE IF EXISTS stream_sink_json")
    micro = [e for e in events if e["job"]["name"] == f"{APP}.scan_json"]
    create = [e for e in events if e["job"]["name"] == CREATE_SINK]
    assert [e["eventType"] for e in micro] == ["START", "COMPLETE"]
    assert micro[0]["outputs"] == []
    (output,) = micro[1]["outputs"]
    assert [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]] == [("a", "integer"), ("b", "string")]
    assert output["facets"]["symlinks"] == create[-1]["outputs"][0]["facets"]["symlinks"]
    assert micro[1]["inputs"][0]["name"] == f"{workdir}/in/a.json"


def test_failed_batch_error_message(spark, workdir):
    _write(Path(workdir, "in/f0.csv"), "1,x\n")
    events, _ = run_captured(spark, workdir, failing_batch)
    (fail,) = [e for e in events if e["eventType"] == "FAIL"]
    error = fail["run"]["facets"]["errorMessage"]
    assert error["programmingLanguage"] == "JAVA" and "boom" in error["stackTrace"]


def rate_every_half_second(spark: Any, workdir: str) -> None:
    """The rate source on a 0.5 s trigger for about 2.5 s; the query's progress log is kept for the test."""
    import time

    stream = spark.readStream.format("rate").option("rowsPerSecond", 20).load().selectExpr("value * 2 AS v")
    query = stream.writeStream.foreachBatch(lambda batch, batch_id: None).trigger(processingTime="0.5 seconds") \
        .option("checkpointLocation", f"{workdir}/ck").start()
    time.sleep(2.5)
    query.stop()
    ran = sum(1 for progress in query.recentProgress if "addBatch" in progress["durationMs"])
    Path(workdir, "batches_ran").write_text(str(ran))


def test_one_run_per_executed_batch(spark, workdir):
    """A short trigger gives one START and one COMPLETE per micro-batch Spark ran (as the JVM's one execution per
    batch), none for triggers that found no data; the rate source names no dataset (the JVM's NoOpStreamStrategy)
    and its Project root is kept (the plan is streaming)."""
    events, _ = run_captured(spark, workdir, rate_every_half_second)
    ran = int(Path(workdir, "batches_ran").read_text())
    assert ran >= 2
    assert _runs(events, workdir, "") == [(SC, f"{APP}.project", STREAMING, (), ())] * ran


# (id, files, whether the progress event came after the next batch began, expected input names of the run)
RACES = [
    ("own_batch_single_file", ["f0.csv"], False, ["in/f0.csv"]),
    ("next_batch_single_file", ["f0.csv"], True, ["in"]),  # never another batch's file: the directory
    ("next_batch_two_files", ["f0.csv", "f1.csv"], True, ["in"]),
]


@pytest.mark.parametrize("name,files,raced,expected", RACES, ids=[r[0] for r in RACES])
def test_execution_of_a_later_batch(spark, workdir, name, files, raced, expected):
    """The run of a batch whose progress event was read when the query's last execution was already a later
    batch's (simulated by the batch id the listener hands over, with the real execution of a finished query)."""
    from spark_plugin import lifecycle, streaming

    for file in files:
        _write(Path(workdir, "in", file), "1,x\n")
    got: list[list[dict]] = []

    def query_then_records(spark: Any, workdir: str) -> None:
        query = _csv_stream(spark, workdir).writeStream.format("parquet").option("path", f"{workdir}/out") \
            .option("checkpointLocation", f"{workdir}/ck").trigger(availableNow=True).start()
        query.awaitTermination()
        qe = query._jsq.streamingQuery().lastExecution()
        batch_id = int(qe.currentBatchId()) - (1 if raced else 0)
        app = lifecycle.applications()[0]
        now = streaming.datetime.now(streaming.timezone.utc)
        records = streaming.batch_records(app, streaming.StreamBatch(None, batch_id, now, now, qe))
        got.append([{"type": r.event_type, "inputs": [d.name for d in r.inputs]} for r in records])

    run_captured(spark, workdir, query_then_records)
    names = [f"{workdir}/{e}" for e in expected]
    assert got == [[{"type": "START", "inputs": names}, {"type": "COMPLETE", "inputs": names}]]


def test_streaming_listener_only_once_a_session_reads_a_stream(spark, workdir):
    """A batch application never gets a streaming listener (creating the session's StreamingQueryManager costs the
    JVM ~0.2 s of CPU); the first ``readStream`` of an instrumented session attaches one, once; a session the
    plugin does not follow gets none."""
    seen: list[int] = []

    def batch_then_streams(spark: Any, workdir: str) -> None:
        from spark_plugin import lifecycle

        app = lifecycle.applications()[0]
        spark.range(3).write.mode("overwrite").parquet(f"{workdir}/batch")
        seen.append(len(app._streams))
        spark.readStream.format("rate")  # noqa: B018 - reading the property is the point
        spark.readStream.format("rate")  # noqa: B018
        seen.append(len(app._streams))
        spark.newSession().readStream.format("rate")  # noqa: B018 - not instrumented: not followed
        seen.append(len(app._streams))

    events, app = run_captured(spark, workdir, batch_then_streams)
    assert seen == [0, 1, 1]
    assert app._streams == [] and not app.guard.failures  # detached at the end
    assert [e["eventType"] for e in events if e["job"]["name"] == APP] == ["START", "COMPLETE"]


def slow_batch_to_memory(spark: Any, workdir: str) -> None:
    """One micro-batch slower than the execution poll's interval (a Python UDF sleeping 1 s per row)."""
    import time

    from pyspark.sql.functions import udf

    @udf("int")
    def slow(a: int) -> int:
        time.sleep(1.0)
        return a

    writer = _csv_stream(spark, workdir).select(slow("a").alias("a")).writeStream.format("memory") \
        .queryName("stream_slow_batch").option("checkpointLocation", f"{workdir}/ck")
    _available_now(writer)


def test_slow_micro_batch_is_one_run_that_ends(spark, workdir):
    """A micro-batch the execution poll sees running is still one START/COMPLETE pair, reported by the streaming
    listener: the poll leaves streaming executions alone (it started a run for it that never ended)."""
    _write(Path(workdir, "in/f0.csv"), "1,x\n2,y\n")
    events, _ = run_captured(spark, workdir, slow_batch_to_memory,
                             {"spark.openlineage.python.pollIntervalSeconds": "0.2"})
    by_run: dict[str, list[str]] = {}
    for event in events:
        if event["job"]["name"] != APP:
            by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert sorted(by_run.values()) == [["START", "COMPLETE"]] * 2  # the memory sink's two executions per batch
