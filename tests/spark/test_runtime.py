"""The plugin runtime in-process: instrument() on the shared local SparkSession, real actions, the real
emitter with a file (or http) transport, events read back and validated against the OpenLineage schemas."""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import spark_plugin
from spark_plugin import exit_status, lifecycle, plan_lineage

from ol_schema import assert_valid_event, read_events

APP = "spark_plugin_tests"  # normalized "spark plugin tests", the fixture session's spark.app.name
WRITE_JOB = f"{APP}.execute_insert_into_hadoop_fs_relation_command.lake_orders"
PARENT = {"spark.openlineage.parentJobNamespace": "airflow", "spark.openlineage.parentJobName": "dag.task",
          "spark.openlineage.parentRunId": "01890000-0000-7000-8000-000000000001"}
ROOT = {"spark.openlineage.rootParentJobNamespace": "airflow", "spark.openlineage.rootParentJobName": "dag",
        "spark.openlineage.rootParentRunId": "01890000-0000-7000-8000-000000000002"}
CONTEXT = {"spark.openlineage.context": json.dumps({
    "parent": {"run": {"runId": "01890000-0000-7000-8000-00000000000a"}, "job": {"namespace": "ctx", "name": "p"}},
    "root": {"run": {"runId": "01890000-0000-7000-8000-00000000000b"}, "job": {"namespace": "ctx", "name": "r"}},
})}


def write_orders(spark: Any, workdir: str) -> None:
    spark.range(5).withColumnRenamed("id", "order_id").write.mode("overwrite").parquet(f"{workdir}/lake/orders")


def count_only(spark: Any, workdir: str) -> None:
    assert spark.range(7).count() == 7


def failing_write(spark: Any, workdir: str) -> None:
    # a runtime error inside the job (no Python worker needed): the action fails, the app goes on
    with pytest.raises(Exception, match="boom"):
        failing = spark.range(1).selectExpr("CAST(raise_error('boom') AS STRING) AS x")
        failing.write.mode("overwrite").parquet(f"{workdir}/lake/orders")


def analysis_error(spark: Any, workdir: str) -> None:
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("SELECT * FROM no_such_table").collect()


def optimizer_error(spark: Any, workdir: str) -> None:
    """Fails in the optimizer (constant folding of an ANSI cast), after analysis and before any Spark job."""
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
            spark.sql("SELECT CAST('x' AS INT) AS c").write.mode("overwrite").parquet(f"{workdir}/lake/orders")
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def run_captured(spark: Any, workdir: str, action: Callable[[Any, str], None],
                 conf: dict[str, str] | None = None) -> tuple[list[dict], Any]:
    """Instrument with a file transport, run ``action``, uninstrument; the validated events and the app."""
    events_file = Path(workdir) / "events.jsonl"
    # no execution poll unless asked: an action longer than its interval would add START/RUNNING events early
    # the emitter in the driver unless asked: a child per application costs ~0.5 s of CPU to start, ~40 times in these
    # in-process tests; the child is what spark-submit tests (test_runtime_submit, test_jvm_shapes) and
    # tests/emitter/test_emitter_process.py run, and the rows below that ask for it
    conf = {"spark.openlineage.python.pollIntervalSeconds": "0", "spark.openlineage.python.emitterProcess": "false",
            **(conf or {})}
    if "spark.openlineage.transport.type" not in conf:
        conf.update({"spark.openlineage.transport.type": "file",
                     "spark.openlineage.transport.location": str(events_file)})
    app = spark_plugin.instrument(spark, conf)
    try:
        action(spark, workdir)
    finally:
        spark_plugin.uninstrument()
    events = read_events(events_file)
    for event in events:
        assert_valid_event(event)
    return events, app


def spooled_events(state_dir: Path) -> list[dict]:
    """The events waiting in the spool(s) under ``state_dir``, oldest first: one spool per destination
    (``spool/<destination>/events.jsonl``) or one for all (``spool/events.jsonl``)."""
    return spool_file_records(state_dir, "events.jsonl")


def spool_file_records(state_dir: Path, name: str) -> list[dict]:
    """The records of every ``spool/**/<name>`` file under ``state_dir`` (``events.jsonl``,
    ``dead-letters.jsonl``), oldest first; lines are bare JSON or ``<crc32> <JSON>`` records."""
    records = []
    for path in sorted((state_dir / "spool").rglob(name)):
        for line in path.read_text().splitlines():
            if line.strip():
                head, _, rest = line.partition(" ")
                records.append(json.loads(rest if len(head) == 8 and not head.startswith("{") else line))
    return records


def driver_env(pythonpath: list[str], state_dir: Path) -> dict[str, str]:
    """The environment of a spark-submit driver under test: none of the caller's lineage or Spark settings,
    this venv's spark-submit and Python, the plugin importable as installed (``pythonpath``: the
    ``hook_pythonpath`` fixture), its own state directory and no OpenLineage config file."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "PYSPARK_", "SPARK_"))}
    venv_bin = Path(sys.executable).parent
    env.update(PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=os.pathsep.join(pythonpath),
               LINEAGE_CAPTURE_STATE_DIR=str(state_dir), OPENLINEAGE_CONFIG=str(state_dir / "none.yml"))
    return env


class ClassArchive:
    """Speed for spark-submit tests (AppCDS, JDK 13+): the first driver JVM of the session dumps the classes it
    loaded into an archive, the drivers started after that dump map them instead of loading and verifying them
    again: each run's JVM starts seconds sooner (13 s -> 7 s a run on the CI machine). Events do not change; a JVM
    that cannot use the archive ignores it. CDS logging is off: a run's output stays Spark's and the app's."""

    #: C1-only JIT and serial GC: a short driver starts in half the time on a small machine; how the JVM compiles
    #: and collects does not change events
    FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._claimed = threading.Lock()  # taken for good by the run that dumps
        self._ready = threading.Event()

    @contextmanager
    def java_options(self) -> Iterator[str]:
        """The driver's ``--driver-java-options`` for one run (the dump, the archive, or neither while the dump
        is still running)."""
        dump = self._claimed.acquire(blocking=False)
        cds = "ArchiveClassesAtExit" if dump else "SharedArchiveFile" if self._ready.is_set() else None
        try:
            yield f"{self.FAST_JVM} -Xlog:cds=off,cds+dynamic=off" + (f" -XX:{cds}={self.path}" if cds else "")
        finally:
            if dump and self.path.exists():
                self._ready.set()


def kinds(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["job"]["name"]) for e in events]


def parent_of(event: dict) -> tuple | None:
    parent = event["run"]["facets"].get("parent")
    if parent is None:
        return None
    return (parent["job"]["namespace"], parent["job"]["name"], parent["run"]["runId"],
            parent["root"]["job"]["namespace"], parent["root"]["job"]["name"], parent["root"]["run"]["runId"])


def rdd_save_then_write(spark: Any, workdir: str) -> None:
    spark.sparkContext.parallelize(["a", "b"]).saveAsTextFile(f"{workdir}/lake/text")
    write_orders(spark, workdir)


# (id, extra conf, action, expected (eventType, job name) in delivery order)
SCENARIOS = [
    # RUNNING: the JVM's event at the end of the write's Spark job, with its output statistics
    ("write", {}, write_orders,
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
    # the same events from the emitter's child process (spark-submit's default)
    ("write_emitter_in_a_child", {"spark.openlineage.python.emitterProcess": "true"}, write_orders,
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
    ("pure_read_not_emitted", {}, count_only, [("START", APP), ("COMPLETE", APP)]),
    ("action_fails", {}, failing_write,
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("FAIL", WRITE_JOB), ("COMPLETE", APP)]),
    ("analysis_error_not_emitted", {}, analysis_error, [("START", APP), ("COMPLETE", APP)]),
    ("optimizer_error_not_emitted", {}, optimizer_error, [("START", APP), ("COMPLETE", APP)]),
    # the JVM's filter.rddEventsDisabled: an RDD-only job (here a saveAsTextFile) gets no run; SQL actions still do
    ("rdd_events_disabled", {"spark.openlineage.filter.rddEventsDisabled": "true"}, rdd_save_then_write,
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
    ("namespace_and_app_name", {"spark.openlineage.namespace": "team-a", "spark.openlineage.appName": "NightlyLoad"},
     write_orders,
     [("START", "nightly_load"), ("START", "nightly_load.execute_insert_into_hadoop_fs_relation_command.lake_orders"),
      ("RUNNING", "nightly_load.execute_insert_into_hadoop_fs_relation_command.lake_orders"),
      ("COMPLETE", "nightly_load.execute_insert_into_hadoop_fs_relation_command.lake_orders"),
      ("COMPLETE", "nightly_load")]),
]


@pytest.mark.parametrize("name,conf,action,expected", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_event_sequence(spark, workdir, name, conf, action, expected):
    events, app = run_captured(spark, workdir, action, conf)
    assert kinds(events) == expected
    in_child = conf.get("spark.openlineage.python.emitterProcess") == "true"
    assert type(app._emitter).__name__ == ("EmitterProcess" if in_child else "Emitter")
    namespace = conf.get("spark.openlineage.namespace", "default")
    assert {e["job"]["namespace"] for e in events} == {namespace}
    app_run = events[0]["run"]["runId"]
    assert {e["run"]["runId"] for e in events if e["job"]["name"] == events[0]["job"]["name"]} == {app_run}
    for event in events:
        facets = event["run"]["facets"]
        assert facets["processing_engine"]["name"] == "spark"
        assert facets["processing_engine"]["version"] == spark.version
        assert facets["spark_properties"]["properties"] == {"spark.master": "local[2]",
                                                            "spark.app.name": "spark plugin tests"}
        is_app = event["job"]["name"] == events[0]["job"]["name"]
        assert event["job"]["facets"]["jobType"]["jobType"] == ("APPLICATION" if is_app else "SQL_JOB")
        assert event["job"]["facets"]["jobType"]["processingType"] == ("NONE" if is_app else "BATCH")
        if not is_app:  # actions: parent and root are the application run
            app_job = events[0]["job"]["name"]
            assert parent_of(event) == (namespace, app_job, app_run, namespace, app_job, app_run)
    actions = [e for e in events if e["job"]["name"] != events[0]["job"]["name"]]
    if actions:
        start, *_, end = actions
        assert {e["run"]["runId"] for e in actions} == {start["run"]["runId"]} != {app_run}
        assert start["eventTime"] <= end["eventTime"]
        assert start["outputs"][0]["name"] == f"{workdir}/lake/orders"


def _two_parquet_partitions(spark: Any, workdir: str) -> None:
    spark.createDataFrame([(1, 2020), (2, 2021)], "v int, year int").write.partitionBy("year").parquet(
        f"{workdir}/lake/parted")


def _csv_orders(spark: Any, workdir: str) -> None:
    spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string").write.option("header", True).csv(
        f"{workdir}/lake/csv")


# (id, extra conf, set-up, read, expected (event type, job name, jobType, input names) of the reader's jobs)
READER_CASES = [
    # Spark's Parquet schema merging: parallelize((footer path, length)).mapPartitions(...).collect()
    ("parquet", {}, write_orders, lambda spark, wd: spark.read.parquet(f"{wd}/lake/orders"),
     [("START", f"{APP}.map_partitions_parallel_collection", "RDD_JOB", ["{wd}/lake/orders"])]),
    ("parquet_partitions_trimmed", {}, _two_parquet_partitions,
     lambda spark, wd: spark.read.parquet(f"{wd}/lake/parted"),
     [("START", f"{APP}.map_partitions_parallel_collection", "RDD_JOB", ["{wd}/lake/parted"])]),
    ("parquet_with_a_schema_runs_no_job", {}, write_orders,
     lambda spark, wd: spark.read.schema("order_id long").parquet(f"{wd}/lake/orders"), []),
    ("load", {}, write_orders, lambda spark, wd: spark.read.format("parquet").load(f"{wd}/lake/orders"),
     [("START", f"{APP}.map_partitions_parallel_collection", "RDD_JOB", ["{wd}/lake/orders"])]),
    ("csv_schema_inference", {}, _csv_orders,
     lambda spark, wd: spark.read.option("header", True).option("inferSchema", True).csv(f"{wd}/lake/csv"),
     [("START", f"{APP}.map_partitions_sql_execution_map_partitions_file_scan", "RDD_JOB", ["{wd}/lake/csv"])]),
    # not a file relation (the analyzed plan reads an RDD): the jobs of its schema inference read no file
    ("json_of_an_rdd_reads_no_file", {}, None,
     lambda spark, wd: spark.read.json(spark.sparkContext.parallelize(['{"k": 1}'])), []),
    ("rdd_events_disabled", {"spark.openlineage.filter.rddEventsDisabled": "true"}, write_orders,
     lambda spark, wd: spark.read.parquet(f"{wd}/lake/orders"), []),
]


@pytest.mark.parametrize("name,conf,setup,read,expected", READER_CASES, ids=[c[0] for c in READER_CASES])
def test_jobs_spark_runs_inside_a_read(spark, workdir, name, conf, setup, read, expected):
    """The JVM integration reports the Spark jobs a read runs outside any SQL execution (schema inference) as RDD
    jobs: START only, the read directory as input; the read's own SQL-less DataFrame is not an action."""
    if setup is not None:
        setup(spark, workdir)
    events, app = run_captured(spark, workdir, lambda s, wd: read(s, wd), conf)
    jobs = [(e["eventType"], e["job"]["name"], e["job"]["facets"]["jobType"]["jobType"],
             [i["name"] for i in e["inputs"]]) for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert jobs == [(t, j, k, [i.format(wd=workdir) for i in ins]) for t, j, k, ins in expected]
    assert all(e["outputs"] == [] for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB")
    assert not app.guard.failures


def test_actions_failing_before_their_plan_exists_cost_no_lineage(spark, workdir):
    """Failures in the optimizer, more than the guard's streak that would switch lineage off: no event, no
    lineage failure, the next write still reported, and no plan read that makes PySpark log the error again
    (PySpark 4 logs every Spark error raised through py4j: only the application's own six failing calls do)."""
    optimizer_error(spark, workdir)  # PySpark creates its error logger on the first error it converts
    errors: list[logging.LogRecord] = []
    counter = logging.Handler()
    counter.emit = errors.append  # type: ignore[method-assign]
    error_logger = logging.getLogger("SQLQueryContextLogger")
    error_logger.addHandler(counter)
    optimizer_error(spark, workdir)
    per_failure = len(errors)  # what PySpark logs for one failing call of the application: 1 on 4.x, 0 on 3.5
    errors.clear()

    def actions(spark: Any, workdir: str) -> None:
        for _ in range(6):
            optimizer_error(spark, workdir)
        write_orders(spark, workdir)

    try:
        events, app = run_captured(spark, workdir, actions)
    finally:
        error_logger.removeHandler(counter)
    assert kinds(events) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB),
                             ("COMPLETE", APP)]
    assert not app.guard.failures
    assert len(errors) == 6 * per_failure


def test_rdd_job_names_folders_as_on_disk(spark, workdir):
    """An RDD-only job's input (the Hadoop input directory) and output (the path given to saveAsTextFile) are
    named as the folders Hadoop made of those strings: `%` is not an escape there."""
    Path(f"{workdir}/in/t%41").mkdir(parents=True)
    Path(f"{workdir}/in/t%41/a.txt").write_text("x\n")
    events, _ = run_captured(spark, workdir, lambda s, wd: s.sparkContext.textFile(f"{wd}/in/t%41").map(
        str.upper).saveAsTextFile(f"{wd}/out/s%42 y"))
    assert Path(f"{workdir}/out/s%42 y/_SUCCESS").exists()
    (end,) = [e for e in events
              if e["eventType"] == "COMPLETE" and e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert [(d["namespace"], d["name"]) for d in end["inputs"]] == [("file", f"{workdir}/in/t%41")]
    assert [(d["namespace"], d["name"]) for d in end["outputs"]] == [("file", f"{workdir}/out/s%42 y")]


#: Hadoop inputs of RDD jobs as the JVM names them (FileInputFormat.getInputPaths, PlanUtils.getDirectoryPaths):
#: (id, the argument of textFile / newAPIHadoopFile under the workdir, the inputs under the workdir)
RDD_INPUT_PATHS = [
    ("directory", "in/2020", ["in/2020"]),
    ("file_as_its_directory", "in/2020/a.txt", ["in/2020"]),
    ("two_files_of_one_directory", "in/2020/a.txt,{w}/in/2020/b.txt", ["in/2020"]),
    ("comma_separated_directories", "in/2020,{w}/in/2021", ["in/2020", "in/2021"]),
    ("glob_as_given", "in/*/a.txt", ["in/*/a.txt"]),
    ("brace_glob_is_one_path", "in/{{2020,2021}}", ["in/{2020,2021}"]),
]


@pytest.mark.parametrize("api", ["textFile", "newAPIHadoopFile"])
@pytest.mark.parametrize("path,expected", [pytest.param(p, e, id=i) for i, p, e in RDD_INPUT_PATHS])
def test_rdd_inputs_named_as_the_jvm_names_them(spark, workdir, api, path, expected):
    for folder in ("2020", "2021"):
        Path(f"{workdir}/in/{folder}").mkdir(parents=True)
        for name in ("a.txt", "b.txt"):
            Path(f"{workdir}/in/{folder}/{name}").write_text("x\n")
    location = f"{workdir}/{path.format(w=workdir)}"

    def read(s: Any, wd: str) -> None:
        if api == "textFile":
            s.sparkContext.textFile(location).count()
        else:
            s.sparkContext.newAPIHadoopFile(location, "org.apache.hadoop.mapreduce.lib.input.TextInputFormat",
                                            "org.apache.hadoop.io.LongWritable", "org.apache.hadoop.io.Text").count()

    events, app = run_captured(spark, workdir, read)
    (start,) = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert [(d["namespace"], d["name"]) for d in start["inputs"]] == [("file", f"{workdir}/{e}") for e in expected]
    assert not app.guard.failures


#: RDD saves through Hadoop output formats (PySpark's PythonRDD.saveAs*): (id, the save of `rdd` into `out`)
HADOOP_SAVES = [
    ("sequence_file", lambda rdd, out: rdd.saveAsSequenceFile(out)),
    ("hadoop_file", lambda rdd, out: rdd.saveAsHadoopFile(out, "org.apache.hadoop.mapred.TextOutputFormat")),
    ("new_api_hadoop_file", lambda rdd, out: rdd.saveAsNewAPIHadoopFile(
        out, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat")),
    ("new_api_hadoop_dataset", lambda rdd, out: rdd.saveAsNewAPIHadoopDataset({
        "mapreduce.output.fileoutputformat.outputdir": out,
        "mapreduce.job.outputformat.class": "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
        "mapreduce.job.output.key.class": "org.apache.hadoop.io.Text",
        "mapreduce.job.output.value.class": "org.apache.hadoop.io.IntWritable"})),
    ("hadoop_dataset", lambda rdd, out: rdd.saveAsHadoopDataset({
        "mapred.output.dir": out, "mapred.output.format.class": "org.apache.hadoop.mapred.TextOutputFormat",
        "mapred.output.key.class": "org.apache.hadoop.io.Text",
        "mapred.output.value.class": "org.apache.hadoop.io.IntWritable"})),
]


@pytest.mark.parametrize("name,save", HADOOP_SAVES, ids=[c[0] for c in HADOOP_SAVES])
def test_rdd_saves_through_hadoop_output_formats(spark, workdir, name, save):
    """Each is an RDD job as saveAsTextFile is: START and COMPLETE, the input directory, the output directory
    (from the configuration for the ...Dataset forms) with its row count."""
    Path(f"{workdir}/in").mkdir()
    Path(f"{workdir}/in/a.txt").write_text("x\ny\n")
    events, app = run_captured(spark, workdir, lambda s, wd: save(
        s.sparkContext.textFile(f"{wd}/in").map(lambda line: (line, 1)), f"{wd}/out"))
    assert list(Path(f"{workdir}/out").glob("part-*"))
    jobs = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert [(e["eventType"], e["job"]["name"]) for e in jobs] == [
        (kind, f"{APP}.map_partitions_python_map_partitions_hadoop") for kind in ("START", "COMPLETE")]
    end = jobs[-1]
    assert [(d["namespace"], d["name"]) for d in end["inputs"]] == [("file", f"{workdir}/in")]
    assert [(d["namespace"], d["name"], d["outputFacets"]["outputStatistics"]["rowCount"]) for d in end["outputs"]] \
        == [("file", f"{workdir}/out", 2)]
    assert not app.guard.failures


def test_dataset_namespace_resolvers(spark, workdir, caplog):
    """The JVM's spark.openlineage.dataset.namespaceResolvers.*: every dataset namespace (inputs, outputs, their
    dataSource facet, column lineage's input fields) resolved; an invalid resolver warned about once, not applied."""
    spark.createDataFrame([(1, "a")], "k int, v string").write.parquet(f"{workdir}/in")
    resolvers = {"spark.openlineage.dataset.namespaceResolvers.shared-fs.type": "pattern",
                 "spark.openlineage.dataset.namespaceResolvers.shared-fs.regex": "^file$",
                 "spark.openlineage.dataset.namespaceResolvers.bad.type": "hostLst"}

    def two_writes(spark: Any, wd: str) -> None:
        for out in ("o1", "o2"):
            spark.read.parquet(f"{wd}/in").selectExpr("k", "upper(v) AS u").write.parquet(f"{wd}/{out}")

    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        events, app = run_captured(spark, workdir, two_writes, resolvers)
    (end, _) = [e for e in events if e["eventType"] == "COMPLETE" and e["outputs"]]
    (source,), (out,) = end["inputs"], end["outputs"]
    assert (source["namespace"], source["name"], out["namespace"], out["name"]) == (
        "shared-fs", f"{workdir}/in", "shared-fs", f"{workdir}/o1")
    assert out["facets"]["dataSource"]["name"] == out["facets"]["dataSource"]["uri"] == "shared-fs"
    fields = out["facets"]["columnLineage"]["fields"]
    assert {(f["namespace"], f["name"], f["field"]) for f in fields["u"]["inputFields"]} == {
        ("shared-fs", f"{workdir}/in", "v")}
    assert [r.getMessage() for r in caplog.records if "resolver" in r.getMessage()] == [
        "lineage capture: dataset namespace resolver 'bad': type 'hostLst' is not one of hostList, pattern, "
        "patternGroup; it is not applied"]
    assert not app.guard.failures


def test_json_schema_inference_is_an_rdd_job(spark, workdir):
    """JSON schema inference scans the files outside any SQL execution: one RDD job, named from its RDDs as the
    JVM names them, reading the directory."""
    spark.createDataFrame([(1, "a")], "k int, v string").write.json(f"{workdir}/lake/j")
    events, _ = run_captured(spark, workdir, lambda s, wd: s.read.json(f"{wd}/lake/j"))
    (job,) = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert (job["eventType"], job["job"]["name"].startswith(f"{APP}.map_partitions_"), job["outputs"]) == (
        "START", True, [])
    assert [i["name"] for i in job["inputs"]] == [f"{workdir}/lake/j"]


def _text_lines(spark: Any, workdir: str) -> Any:
    Path(f"{workdir}/in").mkdir(parents=True, exist_ok=True)
    Path(f"{workdir}/in/a.txt").write_text("x\ny\n")
    return spark.sparkContext.textFile(f"{workdir}/in")


def _count_in_a_group(spark: Any, workdir: str) -> None:
    spark.sparkContext.setJobGroup("nightly", "load the orders")
    _text_lines(spark, workdir).count()  # the call site PySpark sets: "count at <this file>:<this line>"


def _described_save(spark: Any, workdir: str) -> None:
    spark.sparkContext.setJobDescription("save the lines")
    _text_lines(spark, workdir).saveAsTextFile(f"{workdir}/out")


JOB_DETAILS = "spark_jobDetails"
# (id, extra conf, action, expected (event type, jobType, spark_jobDetails fields without jobId, or None) of the
#  RDD jobs' events; "{site}" = the action's PySpark call site)
JOB_DETAIL_CASES = [
    ("collect_in_a_group", {}, _count_in_a_group,
     [("START", {"jobDescription": "load the orders", "jobGroup": "nightly", "jobCallSite": "{site}"})]),
    # a save runs under Spark's own call site (PySpark sets none): the JVM's facet has no jobCallSite then
    ("save_with_a_description", {}, _described_save,
     [("START", {"jobDescription": "save the lines"}), ("COMPLETE", None)]),
    ("reader_job", {}, lambda spark, wd: write_orders(spark, wd) or spark.read.parquet(f"{wd}/lake/orders"),
     [("START", {})]),
    ("disabled", {f"spark.openlineage.facets.{JOB_DETAILS}.disabled": "true"}, _count_in_a_group, [("START", None)]),
]


def test_rdd_statistics_wait_for_the_status_store_to_see_the_jobs_end(spark):
    """The statistics of an RDD action are read once Spark's status store has seen its jobs end (a loaded driver's
    listener bus lags): ``wait_for_jobs`` says whether it has, and waits no longer than it is given."""
    from spark_plugin import rdd_jobs

    sc = spark.sparkContext
    ended = rdd_jobs._next_job_id(sc)
    sc.parallelize([1, 2], 1).count()
    running = rdd_jobs._next_job_id(sc)
    started = threading.Event()

    def slow(rows: Any) -> Any:
        time.sleep(3)
        return rows

    thread = threading.Thread(target=lambda: (started.set(), sc.parallelize([1], 1).mapPartitions(slow).collect()))
    thread.start()
    started.wait()
    try:
        assert rdd_jobs.wait_for_jobs(sc, [ended], 0.0) is True
        assert rdd_jobs.wait_for_jobs(sc, [running + 1000], 0.1) is False  # a job the store has not seen
        assert rdd_jobs.wait_for_jobs(sc, [ended, running], 0.3) is False  # still running
        began = time.monotonic()
        assert rdd_jobs.wait_for_jobs(sc, [ended, running], 30.0) is True
        assert time.monotonic() - began < 10  # ends with the job, not at the timeout
    finally:
        thread.join()


@pytest.mark.parametrize("description, group", [("load the orders", "nightly"), (None, None),
                                                ("Some(text) (with parentheses)", "None")])
def test_a_jobs_data_read_field_by_field_is_its_json(spark, monkeypatch, description, group):
    """Spark's status store keeps a ``JobData`` per job: the first jobs are read a field at a time (no JSON machinery
    loaded for an application of a few jobs), later ones as one JSON text; both readings give the same values."""
    from spark_plugin import rdd_jobs

    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", description)
    sc.setLocalProperty("spark.jobGroup.id", group)
    try:
        job_id = rdd_jobs._next_job_id(sc)
        sc.parallelize(range(4), 2).map(lambda x: (x % 2, x)).reduceByKey(lambda a, b: a + b).collect()
    finally:
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.jobGroup.id", None)
    rdd_jobs.wait_for_listener_bus(sc)
    by_fields = rdd_jobs.StatusReader(sc)
    fields = by_fields.job(job_id)
    assert type(fields).__name__ == "_JobFields" and by_fields._scala_mapper is None
    monkeypatch.setattr(rdd_jobs, "JSON_AFTER_JOBS", 0)
    as_json = rdd_jobs.StatusReader(sc).job(job_id)
    assert isinstance(as_json, dict)
    assert {key: fields[key] for key in fields} == {key: as_json[key] for key in fields}
    assert (fields["description"], fields["jobGroup"], fields["jobId"]) == (description, group, job_id)
    assert len(fields["stageIds"]) == 2 and fields["status"] == "SUCCEEDED" and fields["submissionTime"] > 0
    assert rdd_jobs.StatusReader(sc).job(job_id + 1000) is None  # a job the store has not seen


@pytest.mark.parametrize("name, make", [
    ("one_stage", lambda sc: sc.parallelize(range(10), 2).map(lambda x: x + 1)),
    # the shuffle: the result stage's RDDs reach the map stage's only through the graph's incoming edges
    ("shuffle", lambda sc: sc.parallelize(range(10), 2).map(lambda x: (x % 3, 1)).reduceByKey(lambda a, b: a + b)),
])
def test_a_job_is_named_from_its_stage_graphs_as_from_its_rdds(spark, name, make):
    """A job Python saw no RDD of (a reader's schema job) is named from its stages' RDD operation graphs in Spark's
    status store: the same name as the JVM's walk of the final RDD's dependencies gives."""
    from spark_plugin import rdd_jobs

    sc = spark.sparkContext
    rdd = make(sc)
    job_id = rdd_jobs._next_job_id(sc)
    rdd.collect()
    rdd_jobs.wait_for_listener_bus(sc)
    walked = rdd_jobs.rdd_name(rdd._jrdd.rdd())
    status = rdd_jobs.status_reader(sc)
    for data in (None, status.job(job_id)):  # the stages' graphs read by job, or (one stage, its JobData read) alone
        assert rdd_jobs._graph_job_name(status, job_id, data) == walked
    assert walked == {"one_stage": "python_parallel_collection",
                      "shuffle": "python_map_partitions_shuffled_pairwise_python_parallel_collection"}[name]


@pytest.mark.parametrize("name,conf,action,expected", JOB_DETAIL_CASES, ids=[c[0] for c in JOB_DETAIL_CASES])
def test_rdd_job_start_has_job_details(spark, workdir, name, conf, action, expected):
    """The JVM's ``spark_jobDetails`` run facet on the events it builds from a Spark job's start: an RDD job's
    START (the job's id, description, group and the call site PySpark set), not its end."""
    from spark_plugin import rdd_jobs

    sc = spark.sparkContext
    first_jobs: list[int] = []

    def act(spark: Any, workdir: str) -> None:
        first_jobs.append(rdd_jobs._next_job_id(sc))
        action(spark, workdir)

    try:
        events, app = run_captured(spark, workdir, act, conf)
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)
    site = f"count at {__file__}:{_count_in_a_group.__code__.co_firstlineno + 2}"
    rdd_events = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    got = [(e["eventType"], e["run"]["facets"].get(JOB_DETAILS)) for e in rdd_events]
    assert [(kind, None if facet is None else {k: v for k, v in facet.items() if not k.startswith("_")})
            for kind, facet in got] == [
        (kind, None if fields is None else {"jobId": first_jobs[0] + (1 if name == "reader_job" else 0),
                                            **{k: v.format(site=site) for k, v in fields.items()}})
        for kind, fields in expected]
    assert not app.guard.failures


def slow_write(spark: Any, workdir: str) -> None:
    """A write whose two tasks each sleep 6 s in the JVM (no Python worker): long enough for the execution poll
    (every 0.5 s) to read its plan and deliver its START on a loaded CI machine."""
    spark.range(0, 2, 1, 2).selectExpr("id", "reflect('java.lang.Thread', 'sleep', CAST(6000 AS BIGINT)) AS s") \
        .write.mode("overwrite").parquet(f"{workdir}/lake/orders")


@pytest.mark.parametrize("build_delay", [0.0, 2.0], ids=["emitter_ready", "emitter_built_late"])
def test_start_and_running_while_the_action_runs(spark, workdir, monkeypatch, build_delay):
    """The execution poll: a long write's START is delivered while it runs (at its submission time), then
    RUNNING once its Spark job started; the end reuses the run (one run id, one job name) and the plan its
    START read (one ``toJSON()`` per action). The emitter may be built after the poll's START was made (a slow
    start, a spool to replay): the START still goes out as soon as it is, not at the action's end."""
    seen_while_running = []
    plans_read = []
    read_plan = plan_lineage.read_plan
    new_emitter = lifecycle.Application._new_emitter

    def late_emitter(self: Any) -> Any:
        time.sleep(build_delay)
        return new_emitter(self)

    monkeypatch.setattr(lifecycle.Application, "_new_emitter", late_emitter)

    def counted_read_plan(qe: Any, func_name: str = "", jplan: Any = None) -> Any:
        plans_read.append(qe)
        return read_plan(qe, func_name, jplan)

    monkeypatch.setattr(plan_lineage, "read_plan", counted_read_plan)

    def watched(spark: Any, workdir: str) -> None:
        import threading

        written = threading.Event()

        def peek() -> None:  # what reached the file while the write runs, until the write's START is there
            path = Path(workdir) / "events.jsonl"
            while not written.wait(0.1):
                seen = kinds(read_events(path)) if path.exists() else []
                if ("START", WRITE_JOB) in seen:
                    seen_while_running.extend(seen)
                    return

        peeker = threading.Thread(target=peek)
        peeker.start()
        try:
            slow_write(spark, workdir)
        finally:
            written.set()
            peeker.join()

    events, _ = run_captured(spark, workdir, watched, {"spark.openlineage.python.pollIntervalSeconds": "0.5"})
    assert ("START", WRITE_JOB) in seen_while_running
    assert ("COMPLETE", WRITE_JOB) not in seen_while_running
    actions = [e for e in events if e["job"]["name"] == WRITE_JOB]
    assert [e["eventType"] for e in actions][0] == "START"
    assert [e["eventType"] for e in actions][-1] == "COMPLETE"
    assert set(e["eventType"] for e in actions[1:-1]) == {"RUNNING"}
    assert len({e["run"]["runId"] for e in actions}) == 1
    assert actions[0]["outputs"][0]["name"] == f"{workdir}/lake/orders"
    assert "outputStatistics" in actions[-1]["outputs"][0]["outputFacets"]
    assert len(plans_read) == 1


@contextmanager
def _py4j_calls() -> Iterator[list[str]]:
    """The names of the JVM methods this thread calls through py4j meanwhile (not py4j's own commands)."""
    from py4j import clientserver

    calls: list[str] = []
    me = threading.current_thread()
    send = clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        parts = command.split("\n")
        if threading.current_thread() is me and parts[0] == "c":
            calls.append(parts[2])
        return send(self, command)

    clientserver.ClientServerConnection.send_command = counted
    try:
        yield calls
    finally:
        clientserver.ClientServerConnection.send_command = send


def test_the_poll_passes_ended_executions_in_three_calls_and_finds_a_running_one(spark):
    """A burst of small actions ends before the execution poll sees them: each costs it three py4j calls (and one
    proxy for py4j to release), not five (and three); an action still running is found and started."""
    from spark_plugin.executions import ExecutionPoll

    poll = ExecutionPoll(spark._jsparkSession, spark._jvm, 0.0, int(time.time() * 1000))
    assert poll.poll() == ([], [])
    for _ in range(3):
        spark.range(3).collect()
    with _py4j_calls() as calls:
        assert poll.poll() == ([], [])
    assert calls == ["execution", "isDefined", "getQueryExecution"] * 3 + ["execution", "isDefined"]

    slow = threading.Thread(target=lambda: spark.range(0, 1, 1, 1).selectExpr(
        "reflect('java.lang.Thread', 'sleep', CAST(3000 AS BIGINT))").collect())
    slow.start()
    try:
        found: list[Any] = []
        deadline = time.monotonic() + 20
        while not found and time.monotonic() < deadline:
            found = poll.poll()[0]
            time.sleep(0.05)
    finally:
        slow.join()
    assert len(found) == 1 and found[0].qe.getClass().getSimpleName() == "QueryExecution"
    assert poll.poll() == ([], [])  # it ended: passed


def test_failed_action_carries_the_jvm_error(spark, workdir):
    events, _ = run_captured(spark, workdir, failing_write)
    fail = next(e for e in events if e["eventType"] == "FAIL")
    error = fail["run"]["facets"]["errorMessage"]
    assert error["programmingLanguage"] == "JAVA"
    assert "boom" in error["message"]
    assert error["stackTrace"].startswith(error["message"].split(":")[0])
    assert "errorMessage" not in events[-1]["run"]["facets"]  # the application itself went on fine


def test_sql_facet_on_actions_from_spark_sql(spark, workdir):
    spark.sql(f"CREATE TABLE sql_facet_t (a INT) USING parquet LOCATION '{workdir}/lake/orders'")
    query = "INSERT INTO sql_facet_t SELECT 1 AS a"
    try:
        events, _ = run_captured(spark, workdir, lambda spark, workdir: spark.sql(query))
    finally:
        spark.sql("DROP TABLE sql_facet_t")
    assert kinds(events) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB),
                             ("COMPLETE", APP)]
    assert [e["job"]["facets"].get("sql", {}).get("query") for e in events] == [None, query, query, query, None]
    assert events[1]["job"]["facets"]["sql"]["dialect"] == "spark"  # as the JVM integration


CTE = "WITH t AS (SELECT id AS a FROM range(3)) SELECT a FROM t"
SQL_PLANS = [  # (id, the action on a fresh workdir, the SQL facet's query on every event of its write)
    ("cte_under_with_cte", lambda s, out: s.sql(CTE).write.parquet(out), CTE),
    ("sql_then_dataframe_api", lambda s, out: s.sql("SELECT id FROM range(5)").filter("id > 1")
     .withColumnRenamed("id", "b").write.parquet(out), "SELECT id FROM range(5)"),
    # the JVM looks at the last child first: the join's right side
    ("join_right_side_first", lambda s, out: s.sql("SELECT id FROM range(2)")
     .join(s.sql("SELECT id AS id FROM range(3)"), "id").write.parquet(out), "SELECT id AS id FROM range(3)"),
    ("join_with_dataframe", lambda s, out: s.range(4).join(s.sql("SELECT id FROM range(2)"), "id")
     .write.parquet(out), "SELECT id FROM range(2)"),
    ("dataframe_api_only", lambda s, out: s.range(4).selectExpr("id * 2 AS x").write.parquet(out), None),
    ("ctas_of_a_cte", lambda s, out: s.sql(CTE).write.saveAsTable("sql_plans_t"), CTE),
]


@pytest.mark.parametrize(("action", "query"), [pytest.param(a, q, id=i) for i, a, q in SQL_PLANS])
def test_sql_facet_found_below_the_root_as_the_jvm_finds_it(spark, workdir, action, query):
    """``SparkSqlQueryRecordingTest``: a CTE's text sits below its ``WithCTE``, a spark.sql DataFrame's below the
    DataFrame-API nodes built on it (the JVM walks the logical plan depth first, last child first)."""
    try:
        events, _ = run_captured(spark, workdir, lambda s, w: action(s, f"{w}/lake/out"))
    finally:
        spark.sql("DROP TABLE IF EXISTS sql_plans_t")
    actions = [e for e in events if e["job"]["name"] != APP]
    assert actions
    assert {e["job"]["facets"].get("sql", {}).get("query") for e in actions} == {query}


# (id, extra conf, expected app parent (ns, job, run, root ns, root job, root run) or None, expected action root)
PARENTS = [
    ("no_parent", {}, None, "app"),
    ("parent", PARENT, ("airflow", "dag.task", PARENT["spark.openlineage.parentRunId"],
                        "airflow", "dag.task", PARENT["spark.openlineage.parentRunId"]),
     ("airflow", "dag.task", PARENT["spark.openlineage.parentRunId"])),
    ("parent_and_root", {**PARENT, **ROOT}, ("airflow", "dag.task", PARENT["spark.openlineage.parentRunId"],
                                             "airflow", "dag", ROOT["spark.openlineage.rootParentRunId"]),
     ("airflow", "dag", ROOT["spark.openlineage.rootParentRunId"])),
    ("partial_parent_ignored", {k: v for k, v in PARENT.items() if not k.endswith("RunId")}, None, "app"),
    ("context_wins", {**PARENT, **ROOT, **CONTEXT},
     ("ctx", "p", "01890000-0000-7000-8000-00000000000a", "ctx", "r", "01890000-0000-7000-8000-00000000000b"),
     ("ctx", "r", "01890000-0000-7000-8000-00000000000b")),
]


@pytest.mark.parametrize("name,conf,app_parent,action_root", PARENTS, ids=[p[0] for p in PARENTS])
def test_parent_and_root(spark, workdir, name, conf, app_parent, action_root):
    events, _ = run_captured(spark, workdir, write_orders, conf)
    assert len(events) == 5
    app_start, *actions, app_end = events
    assert parent_of(app_start) == parent_of(app_end) == app_parent
    app_run = app_start["run"]["runId"]
    expected_root = ("default", APP, app_run) if action_root == "app" else action_root
    assert {parent_of(e) for e in actions} == {("default", APP, app_run, *expected_root)}


EVERY_EVENT = {"processing_engine", "spark_properties", "environment-properties"}
DETAILS = "spark_applicationDetails"
# (id, extra conf, run facets expected on every event, on START events besides)
FACET_CONF = [
    ("defaults", {}, EVERY_EVENT, {DETAILS}),
    ("spark_properties_disabled", {"spark.openlineage.facets.spark_properties.disabled": "true"},
     EVERY_EVENT - {"spark_properties"}, {DETAILS}),
    ("disabled_false_keeps", {"spark.openlineage.facets.spark_properties.disabled": "false"}, EVERY_EVENT, {DETAILS}),
    ("application_details_disabled", {f"spark.openlineage.facets.{DETAILS}.disabled": "true"}, EVERY_EVENT, set()),
]


@pytest.mark.parametrize("name,conf,every,starts", FACET_CONF, ids=[f[0] for f in FACET_CONF])
def test_disabled_facets(spark, workdir, name, conf, every, starts):
    events, _ = run_captured(spark, workdir, write_orders, conf)
    assert [e["eventType"] for e in events] == ["START", "START", "RUNNING", "COMPLETE", "COMPLETE"]
    assert [set(e["run"]["facets"]) - {"parent"} for e in events] == [every | starts] * 2 + [every] * 3


# (id, SparkConf entries over the file's) openlineage.yml: spark_properties off, TEST_VAR reported
YML_OVERRIDES = [("file_only", {}, EVERY_EVENT - {"spark_properties"}),
                 ("spark_conf_wins", {"spark.openlineage.facets.spark_properties.disabled": "false"}, EVERY_EVENT)]


@pytest.mark.parametrize("name,conf,every", YML_OVERRIDES, ids=[y[0] for y in YML_OVERRIDES])
def test_settings_from_openlineage_yml(spark, workdir, monkeypatch, name, conf, every):
    """The JVM integration reads its settings from openlineage.yml too, under the SparkConf's: so does the plugin."""
    Path(workdir, "openlineage.yml").write_text(
        "facets:\n  spark_properties:\n    disabled: true\n  custom_environment_variables: [TEST_VAR]\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", f"{workdir}/openlineage.yml")
    monkeypatch.setenv("TEST_VAR", "from the file's list")
    events, app = run_captured(spark, workdir, write_orders, conf)
    assert [set(e["run"]["facets"]) - {"parent", DETAILS} for e in events] == [every] * 5
    assert {json.dumps(e["run"]["facets"]["environment-properties"]["environment-properties"]) for e in events} == {
        json.dumps({"TEST_VAR": "from the file's list"})}
    assert not app.guard.failures


def test_environment_properties_and_application_details(spark, workdir, monkeypatch):
    """``SparkGenericIntegrationTest.sparkEmitsEventsWithFacets``: every event has ``environment-properties`` (the
    variables named by ``facets.custom_environment_variables``; a secret's value masked), START events have
    ``spark_applicationDetails``."""
    monkeypatch.setenv("TEST_VAR", "test value")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-secret")
    monkeypatch.delenv("NOT_SET_VAR", raising=False)
    conf = {"spark.openlineage.facets.custom_environment_variables": "[TEST_VAR; DB_PASSWORD;NOT_SET_VAR;]"}
    events, app = run_captured(spark, workdir, write_orders, conf)
    environments = [e["run"]["facets"]["environment-properties"]["environment-properties"] for e in events]
    assert environments == [{"TEST_VAR": "test value", "DB_PASSWORD": "***"}] * 5
    assert "hunter2" not in json.dumps(events)
    sc = spark.sparkContext
    details = {"master": sc.master, "appName": sc.appName, "applicationId": sc.applicationId, "deployMode": "client",
               "userName": sc.sparkUser(), "driverHost": sc.getConf().get("spark.driver.host")}
    for event in events:
        facet = event["run"]["facets"].get(DETAILS)
        if event["eventType"] == "START":
            assert {k: v for k, v in facet.items() if not k.startswith("_")} == details
        else:
            assert facet is None


def test_application_details_unreadable_costs_only_that_facet(spark, workdir, monkeypatch, caplog):
    from spark_plugin import facets

    def unreadable(sc: Any, conf: Any) -> Any:
        raise AttributeError("'NoneType' object has no attribute 'sc'")  # what a stopped context's _jsc gives

    monkeypatch.setattr(facets, "application_details", unreadable)
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        events, app = run_captured(spark, workdir, write_orders)
    assert kinds(events) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB),
                             ("COMPLETE", APP)]
    assert all(DETAILS not in e["run"]["facets"] for e in events)
    assert not app.guard.failures
    assert [r.getMessage() for r in caplog.records if DETAILS in r.getMessage()] == [
        "lineage capture: the spark_applicationDetails facet cannot be read "
        "(AttributeError: 'NoneType' object has no attribute 'sc')"]


YARN_PROXY = "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
# (id, SparkConf entries, expected (deployMode, proxyUrl, historyUrl)); "{id}": the application id, URL-encoded
APPLICATION_URLS = [
    ("plain", {}, ("client", None, None)),
    ("cluster_mode", {"spark.submit.deployMode": "cluster"}, ("cluster", None, None)),
    ("yarn_proxy_wins", {YARN_PROXY: "http://rm:8088/proxy/app_1", "spark.ui.reverseProxy": "true",
                         "spark.ui.reverseProxyUrl": "http://gw"}, ("client", "http://rm:8088/proxy/app_1", None)),
    ("reverse_proxy", {"spark.ui.reverseProxy": "true", "spark.ui.reverseProxyUrl": "https://gw/spark/"},
     ("client", "https://gw/spark/proxy/{id}", None)),
    ("reverse_proxy_off", {"spark.ui.reverseProxy": "false", "spark.ui.reverseProxyUrl": "https://gw"},
     ("client", None, None)),
    ("reverse_proxy_without_url", {"spark.ui.reverseProxy": "true"}, ("client", None, None)),
    ("history_host_port", {"spark.yarn.historyServer.address": "hist:18080"},
     ("client", None, "http://hist:18080/history/{id}")),
    ("history_url", {"spark.yarn.historyServer.address": "https://hist/"}, ("client", None, "https://hist/history/{id}")),
]


@pytest.mark.parametrize("conf,expected", [pytest.param(c, e, id=i) for i, c, e in APPLICATION_URLS])
def test_application_details_urls(spark, conf, expected):
    """The JVM's ``SparkApplicationDetailsFacet`` rules for the deploy mode, the proxy and the history server."""
    from urllib.parse import quote_plus

    from spark_plugin.facets import application_details

    sc = spark.sparkContext
    facet = application_details(sc, {**dict(sc.getConf().getAll()), **conf})
    app_id = quote_plus(sc.applicationId)
    assert (facet.deployMode, facet.proxyUrl, facet.historyUrl) == tuple(
        v.format(id=app_id) if v else v for v in expected)
    assert (facet.master, facet.appName, facet.applicationId) == (sc.master, sc.appName, sc.applicationId)


def test_captured_properties(spark, workdir):
    events, _ = run_captured(spark, workdir, count_only, {
        "spark.openlineage.capturedProperties": "spark.app.name,spark.sql.shuffle.partitions,spark.not.set"})
    assert events[0]["run"]["facets"]["spark_properties"]["properties"] == {
        "spark.app.name": "spark plugin tests", "spark.sql.shuffle.partitions": "2"}


TAGS_CONF = {"spark.openlineage.job.tags": "spark;key:value", "spark.openlineage.run.tags": "run;set:up:SERVICE",
             "spark.openlineage.job.owners.team": "MyTeam"}
JOB_TAGS = [{"key": "spark", "value": "true", "source": "CONFIG"}, {"key": "key", "value": "value", "source": "CONFIG"}]
RUN_TAGS = [{"key": "run", "value": "true", "source": "CONFIG"}, {"key": "set", "value": "up", "source": "SERVICE"}]
# (id, extra conf, expected job tags, run tags, owners on every event; None = facet absent)
TAGGED = [
    ("tags_and_owner", TAGS_CONF, JOB_TAGS, RUN_TAGS, [{"name": "MyTeam", "type": "team"}]),
    ("tags_disabled", {**TAGS_CONF, "spark.openlineage.facets.tags.disabled": "true"}, None, None,
     [{"name": "MyTeam", "type": "team"}]),
    ("unset", {}, None, None, None),
]


@pytest.mark.parametrize("name,conf,job_tags,run_tags,owners", TAGGED, ids=[t[0] for t in TAGGED])
def test_tags_and_ownership_on_every_event(spark, workdir, name, conf, job_tags, run_tags, owners):
    events, _ = run_captured(spark, workdir, write_orders, conf)
    assert len(events) == 5  # application START/COMPLETE and the write's START/RUNNING/COMPLETE
    for event in events:
        assert event["job"]["facets"].get("tags", {}).get("tags") == job_tags
        assert event["run"]["facets"].get("tags", {}).get("tags") == run_tags
        assert event["job"]["facets"].get("ownership", {}).get("owners") == owners


# (id, extra conf, env) -> no instrumentation, no events
KILL_SWITCHES = [
    ("conf", {"spark.openlineage.disabled": "true"}, {}),
    ("env", {}, {"OPENLINEAGE_DISABLED": "true"}),
]


@pytest.mark.parametrize("name,conf,env", KILL_SWITCHES, ids=[k[0] for k in KILL_SWITCHES])
def test_kill_switch(spark, workdir, monkeypatch, name, conf, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    events, app = run_captured(spark, workdir, write_orders, conf)
    assert app is None
    assert events == []


def test_unknown_keys_warned_once(spark, workdir, caplog):
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        run_captured(spark, workdir, count_only, {"spark.openlineage.nmespace": "typo",
                                                  "spark.openlineage.python.enabeld": "true"})
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("spark_plugin")]
    assert warnings == ["unknown or unsupported spark.openlineage.* keys ignored by the Python plugin: "
                        "spark.openlineage.nmespace, spark.openlineage.python.enabeld"]


def test_a_setting_not_understood_is_warned_and_lineage_stays_on(spark, workdir, caplog):
    """A typo in a number (``queueSize=lots``): one warning naming it, the default used, every event still sent."""
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        events, app = run_captured(spark, workdir, write_orders, {"spark.openlineage.python.queueSize": "lots"})
    assert app is not None and app.config.queue_size == 1000
    assert kinds(events) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB),
                             ("COMPLETE", APP)]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("spark_plugin")] == [
        "lineage capture: spark.openlineage.python.queueSize=lots is not a whole number >= 1: the default 1000 is used"]


def test_instrument_is_idempotent(spark, workdir):
    events_file = Path(workdir) / "events.jsonl"
    conf = {"spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(events_file)}
    first = spark_plugin.instrument(spark, conf)
    try:
        assert spark_plugin.instrument(spark, conf) is first
        assert lifecycle.applications() == [first]
        write_orders(spark, workdir)
    finally:
        spark_plugin.uninstrument()
        spark_plugin.uninstrument()
    assert kinds(read_events(events_file)) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB),
                                              ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]
    assert lifecycle.applications() == []


def test_plugin_failure_loses_lineage_not_the_job(spark, workdir, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("plan reader bug")

    monkeypatch.setattr(plan_lineage, "action_lineage", broken)

    def two_writes(spark: Any, workdir: str) -> None:
        write_orders(spark, workdir)
        write_orders(spark, workdir)
        assert spark.read.parquet(f"{workdir}/lake/orders").count() == 5

    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        events, _ = run_captured(spark, workdir, two_writes)
    # the read's Parquet schema-merge job does not go through the plan reader
    assert kinds(events) == [("START", APP), ("START", f"{APP}.map_partitions_parallel_collection"), ("COMPLETE", APP)]
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("spark_plugin")]
    assert len(warnings) == 1
    assert warnings[0].startswith("lineage capture: lineage failed (RuntimeError: plan reader bug)")


def test_backend_refusing_connections_spools(spark, workdir, isolated_lineage_env):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    began = time.monotonic()
    events, app = run_captured(spark, workdir, write_orders, {
        "spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": f"http://127.0.0.1:{port}",
        "spark.openlineage.transport.retry.total": "0"})  # openlineage-python's default retries take ~9s
    assert time.monotonic() - began < 30
    assert events == []  # nothing reached a file: it all went to the spool
    assert (app.delivery_counts.delivered, app.delivery_counts.spooled, app.delivery_counts.dropped) == (0, 5, 0)
    spooled = spooled_events(isolated_lineage_env)
    assert kinds(spooled) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB),
                              ("COMPLETE", APP)]


def test_silent_backend_cannot_hold_the_app(spark, workdir, caplog):
    # A backend that accepts connections and never answers: delivery blocks on the worker only;
    # uninstrument() waits python.shutdownTimeoutSeconds, then spools what is undelivered at once.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="spark_plugin"):
            events, app = run_captured(spark, workdir, write_orders, {
                "spark.openlineage.transport.type": "http",
                "spark.openlineage.transport.url": f"http://127.0.0.1:{port}",
                "spark.openlineage.transport.timeoutInMillis": "20000",
                "spark.openlineage.python.shutdownTimeoutSeconds": "1",
                "spark.openlineage.python.emitterProcess": "true"})
        elapsed = time.monotonic() - began
    assert elapsed < 15, elapsed
    assert any("the backend did not take the last lineage events in time" in r.getMessage()
               for r in caplog.records)
    assert app.spooled_at_exit >= 3  # the app's COMPLETE and the write's START/COMPLETE, maybe its START too


def test_events_that_cannot_be_kept_at_the_end_are_an_error(spark, workdir, tmp_path, caplog):
    """A backend that never answers and a spool directory that cannot be made (under a regular file, as on a
    read-only disk): the end says the events are LOST, at ERROR (an application's setLogLevel("ERROR") hid the
    warning it was, which also offered a replay of nothing)."""
    (tmp_path / "file").write_text("")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        with caplog.at_level(logging.WARNING):
            _, app = run_captured(spark, workdir, write_orders, {
                "spark.openlineage.transport.type": "http",
                "spark.openlineage.transport.url": f"http://127.0.0.1:{server.getsockname()[1]}",
                "spark.openlineage.transport.timeoutInMillis": "20000",
                "spark.openlineage.python.shutdownTimeoutSeconds": "1",
                "spark.openlineage.python.emitterProcess": "true",
                "spark.openlineage.spool.dir": str(tmp_path / "file" / "spool")})
    lost = [r for r in caplog.records if "could not be kept either" in r.getMessage()]
    assert len(lost) == 1 and lost[0].levelno == logging.ERROR and "they are LOST" in lost[0].getMessage()
    assert "went to the spool" not in lost[0].getMessage() and app.spooled_at_exit == 0


SIGTERM_OUTCOME = exit_status.Outcome(True, "the application was terminated by SIGTERM")


@pytest.mark.parametrize("interrupted", ["in_the_end_s_delivery", "before_the_end_was_queued"])
def test_sigterm_during_the_end_finishes_it(spark, workdir, interrupted):
    """SIGTERM's thread (``lifecycle._terminate_all``) while another thread is ending the application (the main
    thread, held by the signal handler until the process dies): the signal's thread finishes that end before the
    process dies, every event delivered. The worker is held by a gate (slow delivery): the end's events wait
    behind it. The end had been queued (the main thread settling), or not yet (it was still waiting for Spark's
    listener bus): then the terminal event is the signal's FAIL."""
    events_file = Path(workdir) / "events.jsonl"
    gate = threading.Event()
    app = spark_plugin.instrument(spark, {
        "spark.openlineage.python.pollIntervalSeconds": "0", "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(events_file),
        "spark.openlineage.python.shutdownTimeoutSeconds": "30"})
    ending = threading.Thread(target=app.finish, args=(exit_status.Outcome(False),))
    try:
        write_orders(spark, workdir)
        spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()
        app.worker.submit(lambda: gate.wait(20))
        if interrupted == "in_the_end_s_delivery":
            ending.start()
            assert _eventually(app._end_claim.locked)
        else:
            app._finish_claim.acquire()  # what finish() does first
        threading.Timer(0.5, gate.set).start()
        lifecycle._terminate_all(SIGTERM_OUTCOME)
        delivered = read_events(events_file)  # when the process would die
    finally:
        gate.set()
        if ending.is_alive():
            ending.join(30)
        if interrupted == "before_the_end_was_queued":  # let uninstrument end it (the process would have died)
            app._finish_claim.release()
        spark_plugin.uninstrument()
    terminal = "COMPLETE" if interrupted == "in_the_end_s_delivery" else "FAIL"
    assert kinds(delivered) == [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB),
                                ("COMPLETE", WRITE_JOB), (terminal, APP)]
    if terminal == "FAIL":
        assert delivered[-1]["run"]["facets"]["errorMessage"]["message"] == SIGTERM_OUTCOME.message


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_uninstrument_unregisters_the_listener(spark, workdir):
    _, app = run_captured(spark, workdir, write_orders)
    calls = len(app.listener.timings)
    assert calls >= 1
    write_orders(spark, workdir)
    spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()
    assert len(app.listener.timings) == calls
    assert "stop" not in spark.sparkContext.__dict__  # SparkContext.stop is pyspark's own again


def test_spark_connect_session_is_skipped_with_one_warning(monkeypatch, caplog):
    class ConnectLikeSession:  # what a Spark Connect session lacks: a JVM session in this process
        pass

    monkeypatch.setitem(lifecycle._process, "connect_warned", False)
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        assert spark_plugin.instrument(ConnectLikeSession()) is None
        assert spark_plugin.instrument(ConnectLikeSession()) is None
    assert [r.getMessage() for r in caplog.records] == [
        "lineage capture: Spark Connect sessions are not supported by the Python plugin (no JVM in this "
        "process); lineage of this application is not captured"]


def on_four_threads(work: Any) -> None:
    """``work(i)`` on four threads at once (i = 0..3), waiting for all."""
    import threading

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_rdd_actions_on_four_threads_keep_their_own_jobs(spark, workdir):
    """Four threads saving RDDs at once: their Spark job ids interleave, so each action's range of job ids holds
    the others' jobs too. Each run keeps its own: its job id is one that wrote its own output, and its output
    statistics count its own rows (100 each), not those of the jobs around it."""
    import threading

    def four_saves(s: Any, wd: str) -> None:
        start = threading.Barrier(4)

        def save(i: int) -> None:
            rdd = s.sparkContext.parallelize([f"{i}-{n}" for n in range(100)], 2)
            start.wait()
            rdd.saveAsTextFile(f"{wd}/out/t{i}")

        on_four_threads(save)

    events, app = run_captured(spark, workdir, four_saves)
    ends = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert sorted(e["outputs"][0]["name"] for e in ends) == [f"{workdir}/out/t{i}" for i in range(4)]
    assert [e["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] for e in ends] == [100] * 4
    starts = [e for e in events if e["eventType"] == "START" and e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert len({e["run"]["facets"]["spark_jobDetails"]["jobId"] for e in starts}) == 4
    assert not app.guard.failures


def test_reads_on_four_threads_report_only_their_own_jobs(spark, workdir):
    """Four threads writing, reading and aggregating Parquet at once: a read's range of job ids holds the other
    threads' SQL jobs too. The runs made of the jobs a read ran by itself (the footer job) are only those: each
    named as the JVM names that job, with the read's own directory as input; no SQL job of another thread becomes
    a run there."""
    def work(s: Any, wd: str) -> None:
        def one(i: int) -> None:
            for j in range(3):
                s.range(2000).selectExpr("id", f"id * {i} as v").write.mode("overwrite").parquet(f"{wd}/t{i}_{j}")
                s.read.parquet(f"{wd}/t{i}_{j}").count()
                s.read.parquet(f"{wd}/t{i}_{j}").groupBy("id").count().collect()

        on_four_threads(one)

    events, app = run_captured(spark, workdir, work)
    rdd_runs = {(e["job"]["name"].rsplit(".", 1)[-1], tuple(d["name"] for d in e["inputs"]))
                for e in events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"}
    assert {name for name, _ in rdd_runs} <= {"map_partitions_parallel_collection"}, rdd_runs
    assert all(len(inputs) == 1 and inputs[0].startswith(f"{workdir}/t") for _, inputs in rdd_runs), rdd_runs
    assert not app.guard.failures


def test_the_sql_jobs_a_read_skips_are_those_of_executions_around_it(spark):
    """A read's range of job ids is checked against the SQL executions from just before it on, however many began
    since (a worker behind a busy application): it read the newest ones instead, and took another thread's SQL job
    in a read's range for the read's own (a flaky four-thread test)."""
    from spark_plugin import rdd_jobs

    store = spark._jsparkSession.sharedState().statusStore()
    sc = spark.sparkContext
    before = int(store.executionsCount())
    jobs_of_action = []
    for i in range(3 * rdd_jobs.RECENT_EXECUTIONS):
        first = rdd_jobs._next_job_id(sc)
        spark.range(3).selectExpr(f"id + {i} AS v").collect()
        jobs_of_action.append(set(range(first, rdd_jobs._next_job_id(sc))))
    rdd_jobs.wait_for_listener_bus(sc)
    read_began = before + 2  # a read that began after the first two actions: the third is the first it may overlap
    found = rdd_jobs._sql_job_ids(store, read_began, earlier=1)
    assert jobs_of_action[1] | jobs_of_action[2] <= found
    assert not (jobs_of_action[0] | jobs_of_action[-1]) & found  # before the window; long after the read


def _collect_lines(spark: Any, workdir: str) -> Any:
    return _text_lines(spark, workdir).collect()  # the call site Spark must name: this line, not the plugin's


def test_collect_keeps_the_application_call_site(spark, workdir):
    """PySpark names a job after the first frame outside its package: the application's, not the wrapper's."""
    from spark_plugin import rdd_jobs

    sc = spark.sparkContext
    first_jobs: list[int] = []

    def act(spark: Any, workdir: str) -> None:
        first_jobs.append(rdd_jobs._next_job_id(sc))
        _collect_lines(spark, workdir)

    events, app = run_captured(spark, workdir, act)
    site = f"collect at {__file__}:{_collect_lines.__code__.co_firstlineno + 1}"
    job_name = sc._jsc.sc().statusStore().job(first_jobs[0]).name()
    details = [e["run"]["facets"]["spark_jobDetails"] for e in events if "spark_jobDetails" in e["run"]["facets"]]
    assert (job_name, [d["jobCallSite"] for d in details]) == (site, [site])
    assert not app.guard.failures
