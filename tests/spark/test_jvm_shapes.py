"""Our events against the JVM integration's expected events (../shared/openlineage-spark-expected/container/),
matched the way its tests match them: MockServer's ``ONLY_MATCHING_FIELDS`` json-unit comparison, so only fields
present in the fixture are compared, arrays ignore order and extra items, and ``${json-unit.any-string}``,
``${json-unit.any-number}``, ``${json-unit.regex}...`` match by kind or pattern. A fixture matches when one of the
events we emitted matches it (their tests look for one matching request among all that arrived).

Their PySpark test scripts' fixtures are matched by running our own equivalents of the scripts
(``apps/jvm_scripts.py``) through spark-submit with the plugin switched on by ``--conf``, as their
SparkContainerIntegrationTest runs theirs. Fixtures of their other Java tests (a Hive metastore, JDBC and Iceberg,
the generic application test) are replayed in the shared test Spark session; their warehouse (or data directory)
is replaced by ours, so paths, symlinks and job names must come out the same. A ``gap`` is a strict xfail
naming what we lack.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from test_runtime import run_captured

from ol_schema import assert_valid_event, read_events

EXPECTED = Path(__file__).resolve().parents[3] / "shared" / "openlineage-spark-expected" / "container"

# --- the matcher ------------------------------------------------------------------------------------------


def mismatches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Where ``actual`` does not match ``expected`` (json-unit with IGNORING_EXTRA_FIELDS,
    IGNORING_ARRAY_ORDER and IGNORING_EXTRA_ARRAY_ITEMS, as MockServer's ONLY_MATCHING_FIELDS)."""
    if isinstance(expected, str) and expected.startswith("${json-unit."):
        kind = expected[len("${json-unit."):]
        if kind.startswith("regex}"):
            ok = isinstance(actual, str) and re.fullmatch(kind[len("regex}"):], actual) is not None
        elif kind == "any-string}":
            ok = isinstance(actual, str)
        elif kind == "any-number}":
            ok = isinstance(actual, (int, float))
        else:
            ok = actual is not None
        return [] if ok else [f"{path}: {actual!r} does not match {expected}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        return [m for key, value in expected.items()
                for m in (mismatches(value, actual[key], f"{path}.{key}") if key in actual
                          else [f"{path}.{key}: missing"])]
    if isinstance(expected, list):
        return _array_mismatches(expected, actual, path)
    return [] if expected == actual else [f"{path}: {actual!r} != {expected!r}"]


def _array_mismatches(expected: list[Any], actual: Any, path: str) -> list[str]:
    """Each expected item must match its own actual item, in any order; extra actual items are fine."""
    if not isinstance(actual, list):
        return [f"{path}: expected an array, got {actual!r}"]
    fits = [[j for j, a in enumerate(actual) if not mismatches(e, a)] for e in expected]

    def assign(i: int, taken: frozenset[int]) -> bool:
        return i == len(fits) or any(assign(i + 1, taken | {j}) for j in fits[i] if j not in taken)

    if assign(0, frozenset()):
        return []
    unmatched = [i for i, f in enumerate(fits) if not f]
    if not unmatched:
        return [f"{path}: expected items match only the same actual items"]
    i = unmatched[0]
    closest = min((mismatches(expected[i], a, f"{path}[{i}]") for a in actual), key=len, default=None)
    return closest or [f"{path}[{i}]: no item in {actual!r}"]


# expected (fixture fragment), actual, whether they match
MATCHER_CASES = [
    ({"a": 1}, {"a": 1, "b": 2}, True),  # extra fields are fine
    ({"a": 1}, {"b": 1}, False),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, True),  # extra array items are fine
    ({"a": [2, 1]}, {"a": [1, 2]}, True),  # array order is not compared
    ({"a": [1, 1]}, {"a": [1, 2]}, False),  # each expected item needs its own actual item
    ({"a": [1, 3]}, {"a": [1, 2]}, False),
    ({"a": []}, {"a": [1]}, True),
    ({"a": [{"n": 1}]}, {"a": [{"n": 2}, {"n": 1, "x": 0}]}, True),
    ({"a": {}}, {}, False),  # an empty container ("inputFacets": {}) must be there
    ({"a": {}}, {"a": {"b": 1}}, True),  # ... and matches any object
    ({"a": {}}, {"a": []}, False),
    ({"a": {"b": 1}}, {}, False),
    ({"a": "${json-unit.any-string}"}, {"a": "x"}, True),
    ({"a": "${json-unit.any-string}"}, {"a": 3}, False),
    ({"a": "${json-unit.any-number}"}, {"a": 3.5}, True),
    ({"n": "${json-unit.regex}app\\..*_t"}, {"n": "app.cmd.db_t"}, True),
    ({"n": "${json-unit.regex}app\\..*_t"}, {"n": "other.cmd.db_t"}, False),
]


@pytest.mark.parametrize("expected, actual, match", MATCHER_CASES)
def test_partial_matcher(expected, actual, match):
    assert (mismatches(expected, actual) == []) is match


# --- the replayed operations ------------------------------------------------------------------------------

#: An operation: (session, root, tmp) -> None; ``root`` stands for their warehouse or data directory.
Op = Callable[[Any, str, str], None]


def sql(*statements: str) -> Op:
    """Statements run with ``spark.sql``; ``{root}`` and ``{tmp}`` are filled in."""
    def run(spark: Any, root: str, tmp: str) -> None:
        for statement in statements:
            spark.sql(statement.format(root=root, tmp=tmp))
    return run


def hive3_table1(spark: Any, root: str, tmp: str) -> None:
    spark.sql("create database if not exists hive3")
    spark.createDataFrame([("New York",)], "city string").write.mode("overwrite").saveAsTable("hive3.table1")


def generic_write(spark: Any, root: str, tmp: str) -> None:
    """SparkGenericIntegrationTest: ``createTempDataset(3).groupBy("a").count()`` written as CSV."""
    df = spark.createDataFrame([(i, i + 1) for i in (1, 2, 3)], "a long, b long").repartition(1)
    df.groupBy("a").count().write.mode("overwrite").csv(f"{root}/test_output/")


DERBY = "org.apache.derby.jdbc.EmbeddedDriver"


def jdbc_sources(spark: Any, root: str, tmp: str) -> None:
    """ColumnLineageIntegrationTest's two JDBC tables (Derby here, Postgres there) and two more tables (Iceberg
    there, parquet here)."""
    url = f"jdbc:derby:{tmp}/db;create=true"
    for n in (1, 2):
        spark.createDataFrame([(1, f"j{n}a"), (2, f"j{n}b")], f"k int, j{n} string").write.jdbc(
            url, f"jdbc_source{n}", properties={"driver": DERBY})
        spark.createDataFrame([(1, f"v{n}a"), (2, f"v{n}b")], f"k int, v{n} string").write.saveAsTable(
            f"v2_source_{n}")


def jdbc_write(spark: Any, root: str, tmp: str) -> None:
    url = f"jdbc:derby:{tmp}/db;create=true"
    # their query with Derby's quoting of the lower-case column names Spark created and || for CONCAT
    query = ('select js1."k", js1."j1" || js2."j2" as "j" from jdbc_source1 js1 '
             'join jdbc_source2 js2 on js1."k" = js2."k"')
    spark.read.format("jdbc").option("url", url).option("query", query).option("driver", DERBY).load() \
        .createOrReplaceTempView("jdbc_result")
    spark.sql("select v.k, concat(j, v) as value from jdbc_result j join (select vs1.k, concat(v1, v2) as v "
              "from v2_source_1 vs1 join v2_source_2 vs2 on vs1.k = vs2.k) v on j.k = v.k") \
        .write.format("jdbc").option("url", url).option("dbtable", "test").option("driver", DERBY) \
        .mode("append").save()


PARENT = {"spark.openlineage.parentJobNamespace": "parent-namespace",
          "spark.openlineage.parentJobName": "parent-job",
          "spark.openlineage.parentRunId": "bd9c2467-3ed7-4fdc-85c2-41ebf5c73b40"}
GENERIC = {**PARENT, "spark.openlineage.job.tags": "spark;key:value",
           "spark.openlineage.run.tags": "run;set:up:SERVICE",
           "spark.openlineage.job.owners.team": "MyTeam", "spark.openlineage.job.owners.person": "John Smith"}


class Case(NamedTuple):
    fixtures: tuple[str, ...]  # what their test verifies of one run, in the order it verifies them
    their_root: str  # their warehouse, or (``data``) the directory their script wrote its files under
    app: str  # their normalized application name
    namespace: str
    setup: Op | None  # not captured
    operation: Op
    session: str = "hive"  # most of their scripts call enableHiveSupport(); "spark" = in-memory catalog
    tables: tuple[str, ...] = ()  # dropped (and their directories removed) before the setup
    data: bool = False  # their_root is a data directory: ours is {tmp}/{its last segment}
    conf: dict[str, str] = {}
    ignore: tuple[str, ...] = ()  # facets we do not emit, removed from the fixture
    replace: dict[str, str] = {}  # further fixture text replacements, each for a reason given in its row
    gap: str | None = None  # what we lack: the row is a strict xfail


HMS = ("hive_metastore_integration_test", "default")
HIVE_CTAS = sql("CREATE TABLE IF NOT EXISTS hive3.table2 using hive AS SELECT * FROM hive3.table1")
GENERIC_APP = ("generic_integration_test", "generic-namespace")
# Postgres names tables `{database}.{table}` (database `test` in their URL), Derby as written; their other two
# tables are Iceberg tables of a Hadoop catalog (`{warehouse}/{db}/{table}`), ours session-catalog parquet tables.
# Columns of a JDBC query reading several tables are not traced per table: their columnLineage is left out.
JDBC_NAMES = {'"name": "test.': '"name": "', "/tmp/iceberg/default/": "/tmp/iceberg/"}

#: Fixtures of their Java tests that need a service (a Hive metastore, Postgres, Iceberg) or are not PySpark
#: scripts, replayed in the shared test session; the PySpark scripts' own fixtures are matched by running the
#: scripts (test_their_scripts_match_their_expected_events below).
CASES = [
    # their script points Spark at a metastore it never reaches; only the plugin is told about it here
    Case(("pysparkSymlinksComplete.json",), "/tmp/warehouse", "open_lineage_integration_hive", "symlinks", None,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive"), tables=("test",),
         conf={"spark.sql.hive.metastore.uris": "http://metastore"}),
    Case(("hiveCreateHiveTableAsSelectCommandStartEvent.json", "hiveCreateHiveTableAsSelectCommandCompleteEvent.json"),
         "/tmp/hive-metastore", *HMS, hive3_table1, HIVE_CTAS, tables=("hive3.table1", "hive3.table2")),
    Case(("hiveCreateDataSourceAsSelectCommandStartEvent.json",
          "hiveCreateDataSourceAsSelectCommandCompleteEvent.json"), "/tmp/hive-metastore", *HMS, hive3_table1,
         lambda spark, root, tmp: spark.read.table("hive3.table1").write.mode("overwrite").saveAsTable("hive3.table2"),
         tables=("hive3.table1", "hive3.table2")),
    Case(("columnLineageJDBCStart.json", "columnLineageJDBCComplete.json"), "/tmp/iceberg", "iceberg_integration_test",
         "default", jdbc_sources, jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"),
         ignore=("columnLineage",), replace=JDBC_NAMES),
    Case(tuple(f"applicationLevel{kind}.json" for kind in
               ("StartApplication", "StartJob", "CompleteJob", "CompleteApplication")),
         "/tmp/test_data", *GENERIC_APP, None, generic_write, session="spark", data=True, conf=GENERIC),
]


def _strip(node: Any, facets: tuple[str, ...]) -> Any:
    """``node`` without the named facets in any ``facets``/``inputFacets``/``outputFacets`` object."""
    if isinstance(node, dict):
        return {k: _strip(v, facets) for k, v in node.items()
                if not (k in facets and isinstance(v, dict))}
    if isinstance(node, list):
        return [_strip(v, facets) for v in node]
    return node


def _drop_tables(session: Any, warehouse: str, tables: tuple[str, ...]) -> None:
    for table in tables:
        session.sql(f"drop table if exists {table}")
        database, _, name = table.rpartition(".")
        # tables created with LOCATION are external in Hive: dropping them keeps their files
        shutil.rmtree(f"{warehouse}/{database}.db/{name}" if database else f"{warehouse}/{name}", ignore_errors=True)


@pytest.mark.parametrize("case", [
    pytest.param(case, id="+".join(f.removesuffix(".json") for f in case.fixtures),
                 marks=[pytest.mark.xfail(strict=True, reason=case.gap)] if case.gap else [])
    for case in CASES])
def test_events_match_the_jvm_integrations(request, workdir, case):
    session = request.getfixturevalue("hive_spark" if case.session == "hive" else "spark")
    warehouse = session.conf.get("spark.sql.warehouse.dir").removeprefix("file:").rstrip("/")
    root = f"{workdir}/{Path(case.their_root).name}" if case.data else warehouse
    _drop_tables(session, warehouse, case.tables)
    if case.setup:
        case.setup(session, root, workdir)
    conf = {"spark.openlineage.namespace": case.namespace, "spark.openlineage.appName": case.app, **case.conf}
    events, _ = run_captured(session, workdir, lambda spark, _: case.operation(spark, root, workdir), conf)
    expected = []
    for fixture in case.fixtures:
        text = (EXPECTED / fixture).read_text()
        for theirs, ours in case.replace.items():
            text = text.replace(theirs, ours)
        # their directory's last segment starts the table part of their job names (`{app}.{command}.{dir}_{table}`)
        text = text.replace(f".{Path(case.their_root).name}_", f".{Path(root).name}_").replace(case.their_root, root)
        expected.append(_strip(json.loads(text), case.ignore))
        assert_one_matches(expected[-1], events)
    assert in_their_order(expected, events) is None  # MockServer's verify(...) of several: a sequence
    assert order_problems(events) == []


def assert_one_matches(expected: dict, events: list[dict]) -> None:
    """One of ``events`` matches ``expected`` (else the closest one's mismatches)."""
    candidates = [e for e in events if e["eventType"] == expected.get("eventType", e["eventType"])]
    assert candidates, f"no {expected.get('eventType')} event among {[e['job']['name'] for e in events]}"
    problems = min((mismatches(expected, event) for event in candidates), key=len)
    assert problems == [], "\n".join(problems)


# --- the order of events ----------------------------------------------------------------------------------


def in_their_order(expected: list[Any], events: list[dict]) -> int | None:
    """MockServer's ``verify(request1, request2, ...)`` (their ``verifyEvents``): each expected event matches an
    event sent after the one the previous expected event matched, taking the first that matches. None when all
    do; else the index of the first expected event with no match after its predecessor's."""
    position = 0
    for i, wanted in enumerate(expected):
        position = next((j + 1 for j in range(position, len(events)) if not mismatches(wanted, events[j])), -1)
        if position < 0:
            return i
    return None


def order_problems(events: list[dict]) -> list[str]:
    """What breaks the order the JVM integration sends events in (their LibraryTest and SparkGenericIntegrationTest:
    the application's START first and its COMPLETE last, each run's START first and its one terminal event last,
    RUNNING between them, a child run inside its parent run, event times of a run never going backwards)."""
    problems: list[str] = []
    runs: dict[str, list[int]] = {}
    for i, event in enumerate(events):
        runs.setdefault(event["run"]["runId"], []).append(i)
    apps = [run for run, at in runs.items() if "." not in events[at[0]]["job"]["name"]]
    if not events or len(apps) != 1:
        return [f"{len(apps)} application runs"]
    app = runs[apps[0]]
    if app[0] != 0 or events[0]["eventType"] != "START":
        problems.append("the application's START is not the first event")
    if app[-1] != len(events) - 1 or events[-1]["eventType"] not in ("COMPLETE", "FAIL"):
        problems.append("the application's COMPLETE is not the last event")
    for at in runs.values():
        kinds = [events[i]["eventType"] for i in at]
        name = events[at[0]]["job"]["name"]
        if kinds[0] != "START" or kinds.count("START") != 1:
            problems.append(f"{name}: {kinds}: not one START, first")
        terminals = [k for k in kinds if k in ("COMPLETE", "FAIL", "ABORT")]
        if terminals and (len(terminals) != 1 or kinds[-1] not in terminals):
            problems.append(f"{name}: {kinds}: not one terminal event, last")
        if any(k not in ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT") for k in kinds):
            problems.append(f"{name}: {kinds}: unexpected event types")
        times = [events[i]["eventTime"] for i in at]
        if [_instant(t) for t in times] != sorted(_instant(t) for t in times):
            problems.append(f"{name}: event times go backwards: {times}")
        parent = events[at[0]]["run"]["facets"].get("parent", {}).get("run", {}).get("runId")
        if parent in runs and not (runs[parent][0] < at[0] and at[-1] < runs[parent][-1]):
            problems.append(f"{name}: not inside its parent run")
    return problems


def _instant(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _event(kind: str, run: str, job: str, parent: str | None = None, time: int = 0) -> dict:
    facets = {"parent": {"run": {"runId": parent}}} if parent else {}
    return {"eventType": kind, "eventTime": f"2026-11-23T10:00:{time:02d}+00:00", "job": {"name": job},
            "run": {"runId": run, "facets": facets}}


APP_START, APP_END = _event("START", "a", "app"), _event("COMPLETE", "a", "app", time=9)
# events (as the file transport delivered them), the problems order_problems finds (as substrings)
ORDER_CASES = [
    ([APP_START, _event("START", "x", "app.x", "a", 1), _event("RUNNING", "x", "app.x", "a", 2),
      _event("COMPLETE", "x", "app.x", "a", 2), APP_END], []),
    ([_event("START", "x", "app.x", "a"), APP_START, APP_END], ["START is not the first", "inside its parent"]),
    ([APP_START, APP_END, _event("START", "x", "app.x", "a")], ["COMPLETE is not the last", "inside its parent"]),
    ([APP_START, _event("COMPLETE", "x", "app.x", "a", 2), _event("START", "x", "app.x", "a", 1), APP_END],
     ["not one START, first", "not one terminal event, last", "times go backwards"]),
    ([APP_START, _event("START", "x", "app.x", "a"), _event("COMPLETE", "x", "app.x", "a"),
      _event("RUNNING", "x", "app.x", "a"), APP_END], ["not one terminal event, last"]),
    ([APP_START, _event("START", "x", "app.x", "a"), _event("COMPLETE", "x", "app.x", "a"),
      _event("COMPLETE", "x", "app.x", "a"), APP_END], ["not one terminal event, last"]),
    ([APP_START, _event("START", "x", "app.x", "a"), APP_END], []),  # a job without an end event (the JVM's too)
    ([APP_START, _event("START", "b", "other"), APP_END], ["2 application runs"]),
]


@pytest.mark.parametrize("events, found", ORDER_CASES)
def test_order_problems(events, found):
    problems = order_problems(events)
    assert len(problems) == len(found) and all(any(f in p for p in problems) for f in found), problems


# expected, events (as letters: an expected item matches an event of the same letter), the first out of order
SEQUENCE_CASES = [
    ("abc", "xaybzc", None),
    ("abc", "acb", 2),  # c was sent before b: nothing after b's match is a c
    ("ab", "ba", 1),
    ("aa", "a", 1),  # each expected event needs its own sent event
    ("", "a", None),
]


@pytest.mark.parametrize("expected, sent, first_missing", SEQUENCE_CASES)
def test_in_their_order(expected, sent, first_missing):
    assert in_their_order([{"n": c} for c in expected], [{"n": c} for c in sent]) is first_missing


# --- their scripts, run as they run them: spark-submit, the plugin switched on by --conf ---------------------

SCRIPTS_APP = Path(__file__).parent / "apps" / "jvm_scripts.py"
#: what their container tests give every run (SparkContainerUtils): the two debug facets on
CONTAINER_CONF = {"spark.openlineage.facets.spark.logicalPlan.disabled": "false",
                  "spark.openlineage.facets.spark_unknown.disabled": "false"}
#: our script (tests/spark/apps/jvm_scripts.py) -> (their test's namespace, extra --conf, fixtures it must produce)
SCRIPT_FIXTURES: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "word_count": ("testPysparkWordCountWithCliArgs", {}, (
        "pysparkWordCountWithCliArgsStartEvent", "pysparkWordCountWithCliArgsRunningEvent",
        "pysparkWordCountWithCliArgsCompleteEvent")),
    "rdd_to_table": ("testPysparkRddToTable", {}, (
        "pysparkRddToCsvStartEvent", "pysparkRddToCsvCompleteEvent", "pysparkRddToTableStartEvent",
        "pysparkRddToTableRunningEvent", "pysparkRddToTableCompleteEvent")),
    "hive": ("testPysparkSQLHiveTest", {}, (
        "pysparkHiveStartEvent", "pysparkHiveRunningEvent", "pysparkHiveCompleteEvent", "pysparkHiveSelectStartEvent",
        "pysparkHiveSelectEndEvent")),
    "hadoop_fs_relation": ("testPysparkSQLHadoopFSTest", {}, ("pysparkHadoopFSStartEvent", "pysparkHadoopFSEndEvent")),
    "overwrite_appname": ("testPysparkSQLHiveTest", {"spark.openlineage.appName": "app_name"}, (
        "pysparkOverwriteNameStartEvent", "pysparkOverwriteNameRunningEvent", "pysparkOverwriteNameCompleteEvent")),
    "overwrite_hive": ("testPysparkSQLHiveOverwriteDirTest", {}, (
        "pysparkHiveOverwriteDirStartEvent", "pysparkHiveOverwriteDirCompleteEvent")),
    "ctas_load": ("testCreateAsSelectAndLoad", {}, (
        "pysparkCTASStart", "pysparkCTASEnd", "pysparkLoadStart", "pysparkLoadComplete",
        "pysparkCTASWithColumnLineageEnd")),
    "cached": ("cachedDataset", {}, ("pysparkCachedDatasetComplete",)),
    "create_table": ("testCreateTable", {}, ("pysparkCreateTableStartEvent", "pysparkCreateTableCompleteEvent")),
    "drop_table": ("testDropTable", {}, ("pysparkDropTableEvent",)),
    "truncate_table": ("testTruncateTable", {}, ("pysparkTruncateTableCompleteEvent",)),
    "octas_load": ("testOptimizedCreateAsSelectAndLoad", {}, ("pysparkOCTASStart", "pysparkOCTASEnd")),
    "cll": ("testColumnLevelLineage", {}, ("pysparkCLLStart", "pysparkCLLEnd")),
    "alter_table": ("testAlterTable", {}, ("pysparkAlterTableAddColumnsEnd", "pysparkAlterTableRenameEnd")),
    "rdd_with_parquet": ("testRddWithParquet", {}, ("pysparkRDDWithParquet",)),
    "single_input_rdd": ("testSingleRddInputStats", {}, ("pysparkSingleRDDStatistics",)),
    "emit_metrics": ("testEmitMetrics", {}, ("pysparkMetricsEnd",)),
    "input_only_rdd": ("tesInputOnlyRdd", {}, ()),  # their testRddRepartition asserts instead of matching
}
#: fixtures we do not match yet, and why (strict xfails)
SCRIPT_GAPS: dict[str, str] = {}
#: each script's fixtures as their test verifies them: one verifyEvents(...) call per sequence (MockServer
#: checks the events of one call arrived in that order); by default all of a script's fixtures in one call
SCRIPT_SEQUENCES = {script: (fixtures,) for script, (_, _, fixtures) in SCRIPT_FIXTURES.items()} | {
    "ctas_load": (("pysparkCTASStart", "pysparkCTASEnd", "pysparkLoadStart", "pysparkLoadComplete"),
                  ("pysparkCTASWithColumnLineageEnd",)),
}
#: the tests that read script_events (it runs only the scripts the selected ones need)
SCRIPT_TESTS = ("test_their_scripts_match_their_expected_events", "test_debug_facet_parts",
                "test_their_scripts_send_in_their_order", "test_input_only_rdd_job")
# (their spark_hive_catalog.py points Spark at a metastore that does not exist: replayed above instead)


def _run_script(script: str, root: Path, hook_pythonpath: list[str], state: Path) -> list[dict]:
    """spark-submit one script with the plugin on and a file transport; its events."""
    import os
    import subprocess
    import sys

    namespace, conf, _ = SCRIPT_FIXTURES[script]
    root.mkdir(parents=True)
    events_file = root / "events.jsonl"
    conf = {"spark.openlineage.python.enabled": "true", "spark.openlineage.namespace": namespace,
            "spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(events_file),
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "1", **CONTAINER_CONF, **conf}
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "PYSPARK_", "SPARK_"))}
    env.update(PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=os.pathsep.join(hook_pythonpath),
               LINEAGE_CAPTURE_STATE_DIR=str(state), OPENLINEAGE_CONFIG=str(state / "none.yml"))
    command = [str(venv_bin / "spark-submit"), "--master", "local[1]", "--driver-memory", "512m",
               "--driver-java-options", f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dderby.system.home={root}"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    result = subprocess.run([*command, str(SCRIPTS_APP), script, str(root)], env=env, capture_output=True,
                            text=True, timeout=300, cwd=root)
    assert result.returncode == 0, f"{script}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return read_events(events_file) if events_file.exists() else []


@pytest.fixture(scope="module")
def script_events(request, tmp_path_factory, hook_pythonpath) -> dict[str, tuple[Path, list[dict]]]:
    """Each script the selected tests need, run once, two at a time (each its own driver, cwd and Derby
    metastore)."""
    from concurrent.futures import ThreadPoolExecutor

    needed = {item.callspec.params["script"] for item in request.session.items
              if getattr(item, "originalname", "") in SCRIPT_TESTS}
    base = Path(os.path.realpath(tmp_path_factory.mktemp("jvm_scripts")))
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {script: pool.submit(_run_script, script, base / script, hook_pythonpath, base / f"{script}.state")
                   for script in SCRIPT_FIXTURES if script in needed}
        return {script: (base / script, future.result()) for script, future in futures.items()}


def _their_paths(text: str, root: Path) -> str:
    """Their ``/tmp/...`` and ``/test_data/...`` as our scripts wrote them, under ``root``."""
    return re.sub(r"(?<![\w.])/(tmp|test_data)/", lambda m: f"{root}/{m.group(1)}/", text)


@pytest.mark.parametrize("script,fixture", [
    pytest.param(script, fixture, id=fixture,
                 marks=[pytest.mark.xfail(strict=True, reason=SCRIPT_GAPS[fixture])] if fixture in SCRIPT_GAPS else [])
    for script, (_, _, fixtures) in SCRIPT_FIXTURES.items() for fixture in fixtures])
def test_their_scripts_match_their_expected_events(script_events, script, fixture):
    """Matched as their SparkContainerIntegrationTest matches: one event among all the run sent must match."""
    root, events = script_events[script]
    for event in events:
        assert_valid_event(event)
    assert_one_matches(json.loads(_their_paths((EXPECTED / f"{fixture}.json").read_text(), root)), events)


@pytest.mark.parametrize("script", list(SCRIPT_FIXTURES))
def test_their_scripts_send_in_their_order(script_events, script):
    """Their fixtures in the order their verifyEvents calls verify them, and every run's events in the order the
    JVM sends them (the file transport writes them in delivery order)."""
    root, events = script_events[script]
    for sequence in SCRIPT_SEQUENCES[script]:
        expected = [json.loads(_their_paths((EXPECTED / f"{f}.json").read_text(), root)) for f in sequence]
        if not any(f in SCRIPT_GAPS for f in sequence):
            out_of_order = in_their_order(expected, events)
            assert out_of_order is None, f"{sequence[out_of_order]} is not sent after {sequence[:out_of_order]}"
    assert order_problems(events) == []


@pytest.mark.parametrize("script", ["input_only_rdd"])
def test_input_only_rdd_job(script_events, script):
    """Their testRddRepartition: the job Spark runs inside ``spark.read.parquet`` to read the footers (no SQL
    execution) is an RDD job named ``map_partitions...`` whose events have no output and the read directory as
    their only input; the RDD transformations after it run nothing."""
    root, events = script_events[script]
    jobs = [e for e in events if "map_partitions" in e["job"]["name"]]
    assert [(e["eventType"], e["job"]["name"], e["job"]["facets"]["jobType"]["jobType"]) for e in jobs] == [
        ("START", "open_lineage_integration_input_only_rdd.map_partitions_parallel_collection", "RDD_JOB")]
    assert [o for e in jobs for o in e["outputs"]] == []
    assert [i["name"] for e in jobs for i in e["inputs"]] == [f"{root}/tmp/input_rdd"]


# --- the debug facet --------------------------------------------------------------------------------------

#: The ``debug`` facet of their emit-metrics script's events, beyond their fixture: (event, path, check).
#: Events: "app" START/COMPLETE, "action" the CREATE TABLE's START/COMPLETE; paths are into the facet.
DEBUG_PARTS: list[tuple[str, str, Callable[[Any], bool]]] = [
    ("*", "classpath.openLineageVersion", lambda v: v == _adapter_version()),
    ("*", "classpath.sparkVersion", lambda v: v == _pyspark_version()),
    ("*", "classpath.scalaVersion", lambda v: re.fullmatch(r"2\.1[23]\.\d+", v) is not None),
    ("*", "classpath.classDetails", lambda v: [(c["className"].rsplit(".", 1)[1], c["onClasspath"]) for c in v] == [
        ("DeltaCatalog", False), ("Catalog", False), ("BigQueryRelation", False)]),
    ("*", "system.sparkDeployMode", lambda v: v == "client"),
    ("*", "system.javaVersion", lambda v: re.match(r"\d+", v) is not None),
    ("*", "system.userTimezone", lambda v: isinstance(v, str) and v != ""),
    ("*", "config.catalogClass", lambda v: v in ("org.apache.spark.sql.internal.CatalogImpl",  # Spark 3.5
                                                "org.apache.spark.sql.classic.Catalog")),  # Spark 4
    ("*", "config.openLineageConfig", lambda v: v["facets.debug.disabled"] == "false" and v["transport.type"] ==
     "file" and v["namespace"] == "testEmitMetrics"),
    ("*", "logs", lambda v: v == []),
    ("app", "logicalPlan", lambda v: v is None),  # no plan behind an application event, as in the JVM
    # CreateDataSourceTableCommand on Spark 4, CreateTableCommand (a Hive table by default) on 3.5
    ("action", "logicalPlan.nodes", lambda v: len(v) == 1 and v[0]["children"] == [] and re.fullmatch(
        r"Create(DataSource)?TableCommand@-?\d+", v[0]["id"]) is not None and "create_table_emit_test" in v[0]["desc"]),
    # meters, as they stand when each event is sent
    ("app START", "metrics.metrics", lambda v: _meters(v) == {"openlineage.spark.event.app.start": 1.0}),
    # START: sent by the execution poll while the command ran (no end yet) or at its end
    ("action START", "metrics.metrics", lambda v: {k: n for k, n in _meters(v).items() if k.endswith("start")} == {
        "openlineage.spark.event.app.start": 1.0, "openlineage.spark.event.sql.start": 1.0}),
    ("action COMPLETE", "metrics.metrics", lambda v: {k: n for k, n in _meters(v).items() if "time" not in k} == {
        "openlineage.spark.event.app.start": 1.0, "openlineage.spark.event.sql.start": 1.0,
        "openlineage.spark.event.sql.end": 1.0} and _meters(v)["openlineage.spark.unknownFacet.time"] > 0),
    ("app COMPLETE", "metrics.metrics", lambda v: {k: n for k, n in _meters(v).items() if "time" not in k} == {
        "openlineage.spark.event.app.start": 1.0, "openlineage.spark.event.sql.start": 1.0,
        "openlineage.spark.event.sql.end": 1.0, "openlineage.spark.event.app.end": 1.0}),
    ("*", "metrics.metrics", lambda v: all(
        [t["key"] for t in m["tags"]] == ["openlineage.spark.disabled.facets", "openlineage.spark.integration.version",
                                          "openlineage.spark.version"]
        and [t["value"] for t in m["tags"]] == ["", _adapter_version(), _pyspark_version()] for m in v)),
]


def _adapter_version() -> str:
    from spark_plugin.facets import adapter_version

    return adapter_version()


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _meters(nodes: list[dict]) -> dict[str, float]:
    return {m["name"]: m["value"] for m in nodes}


def _at(node: Any, path: str) -> Any:
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


@pytest.mark.parametrize("script", ["emit_metrics"])
@pytest.mark.parametrize("which, path, check", DEBUG_PARTS, ids=[f"{w}:{p}" for w, p, _ in DEBUG_PARTS])
def test_debug_facet_parts(script_events, script, which, path, check):
    """Every event of their emit-metrics run carries the debug facet (facets.debug.disabled=false), its parts
    read from the driver as the JVM's DebugRunFacetBuilderDelegate reads them."""
    _, events = script_events[script]
    assert [(e["eventType"], e["job"]["name"].count(".")) for e in events] == [
        ("START", 0), ("START", 2), ("COMPLETE", 2), ("COMPLETE", 0)]
    for event in events:
        kind = "app" if "." not in event["job"]["name"] else "action"
        if which in ("*", kind, f"{kind} {event['eventType']}"):
            value = _at(event["run"]["facets"]["debug"], path)
            assert check(value), f"{kind} {event['eventType']}: {path} = {value!r}"


def _two_writes(spark: Any, root: str) -> None:
    """A write with no input dataset (a range), then one with an input and an output."""
    spark.range(3).write.mode("overwrite").parquet(f"{root}/a")
    spark.read.parquet(f"{root}/a").write.mode("overwrite").parquet(f"{root}/b")


FULL = ("classpath", "config", "logicalPlan", "logs", "metrics", "system")  # an action's facet when enabled
APP_FULL = tuple(p for p in FULL if p != "logicalPlan")
ACTION_EVENTS = ("START", "RUNNING", "COMPLETE")  # a write's events (RUNNING: its statistics)
#: conf -> the debug facet of each event as (facet parts, logs) or None, by (event type, what it is); the
#: events: the application (app), the range write (a), the read-and-write (b).
DEBUG_CASES = [
    ("off_by_default", {}, {}),
    ("on", {"facets.debug.disabled": "false"}, {("START", "app"): (APP_FULL, []), ("COMPLETE", "app"): (APP_FULL, []),
                                                 **{(t, w): (FULL, []) for t in ACTION_EVENTS for w in "ab"}}),
    # the JVM's facets.disabled list replaces its default list (spark_unknown;spark.logicalPlan;debug)
    ("on_by_list", {"facets.disabled": "[spark_unknown]"}, {
        ("START", "app"): (APP_FULL, []), ("COMPLETE", "app"): (APP_FULL, []),
        **{(t, w): (FULL, []) for t in ACTION_EVENTS for w in "ab"}}),
    ("metrics_disabled", {"facets.debug.disabled": "false", "debug.metricsDisabled": "true"}, {
        ("START", "app"): (tuple(p for p in APP_FULL if p != "metrics"), []),
        ("COMPLETE", "app"): (tuple(p for p in APP_FULL if p != "metrics"), []),
        **{(t, w): (tuple(p for p in FULL if p != "metrics"), []) for t in ACTION_EVENTS for w in "ab"}}),
    ("over_payload_limit", {"facets.debug.disabled": "false", "debug.payloadSizeLimitInKilobytes": "0"}, {
        k: (("logs",), ["Skipping debug facet due to payload size: N kilobytes"]) for k in [
            ("START", "app"), ("COMPLETE", "app"), *((t, w) for t in ACTION_EVENTS for w in "ab")]}),
    # smart debug: only an action's COMPLETE lacking inputs (any-missing) or outputs, with the reasons
    ("smart", {"debug.smart": "true"}, {("COMPLETE", "a"): (FULL, ["No input datasets detected"])}),
    ("smart_when_disabled", {"debug.smart": "true", "facets.debug.disabled": "true"},
     {("COMPLETE", "a"): (FULL, ["No input datasets detected"])}),
    ("smart_output_missing", {"debug.smart": "true", "debug.smartMode": "output-missing"}, {}),
]


@pytest.mark.parametrize("conf, expected", [c[1:] for c in DEBUG_CASES], ids=[c[0] for c in DEBUG_CASES])
def test_debug_facet_keys(spark, workdir, conf, expected):
    events, _ = run_captured(spark, workdir, _two_writes, {f"spark.openlineage.{k}": v for k, v in conf.items()})
    found = {}
    for event in events:
        outputs = [o["name"].rstrip("/").rsplit("/", 1)[1] for o in event["outputs"]]
        what = outputs[0] if outputs else "app"
        debug = event["run"]["facets"].get("debug")
        if debug is not None:
            logs = [re.sub(r"\d+ kilobytes", "N kilobytes", log) for log in debug["logs"]]
            found[(event["eventType"], what)] = (tuple(sorted(k for k in debug if not k.startswith("_"))), logs)
    assert found == expected


# --- inputStatistics of SQL actions -----------------------------------------------------------------------


def _data_files(directory: str) -> list[str]:
    """The files Spark's file index lists under ``directory`` (hidden and ``_``-prefixed ones left out)."""
    return [str(p) for p in Path(directory).rglob("*") if p.is_file() and not p.name.startswith(("_", "."))]


def _parquet_dir(spark: Any, root: str, tmp: str) -> None:
    spark.range(10).repartition(2).write.mode("overwrite").parquet(f"{tmp}/src")


def _table(spark: Any, root: str, tmp: str, analyze: bool = False) -> None:
    spark.sql("drop table if exists stats_src")
    spark.range(10).repartition(3).write.format("parquet").saveAsTable("stats_src")
    if analyze:  # then one file more behind Spark's back: the catalog's size and the files' size now differ
        spark.sql("analyze table stats_src compute statistics")
        first = _data_files(_table_location(spark))[0]
        shutil.copy(first, first.replace("part-", "part-copy-"))
        spark.catalog.refreshTable("stats_src")


def _table_location(spark: Any) -> str:
    return spark.sql("describe table extended stats_src").where("col_name = 'Location'").first()[1].removeprefix(
        "file:")


def _table_size(spark: Any) -> int:
    return sum(os.path.getsize(f) for f in _data_files(_table_location(spark)))


def _catalog_size(spark: Any) -> int:
    """The size ANALYZE TABLE recorded (``Statistics: N bytes``), not what the files hold now."""
    row = spark.sql("describe table extended stats_src").where("col_name = 'Statistics'").first()
    recorded = int(row[1].split()[0])
    assert recorded < _table_size(spark)
    return recorded


# setup, read-and-write, inputStatistics of the input as (tmp, session) -> fields (None: no facet)
INPUT_STATS_CASES = [
    # a file relation: its size and file count (the JVM's handleHadoopFsRelation)
    ("files", _parquet_dir, lambda spark, tmp: spark.read.parquet(f"{tmp}/src").write.mode("overwrite").parquet(
        f"{tmp}/out"), lambda spark, tmp: {"size": sum(os.path.getsize(f) for f in _data_files(f"{tmp}/src")),
                                           "fileCount": len(_data_files(f"{tmp}/src"))}),
    # a catalog table without statistics: the relation's size only (handleCatalogTable)
    ("table", _table, lambda spark, tmp: spark.table("stats_src").write.mode("overwrite").parquet(f"{tmp}/out"),
     lambda spark, tmp: {"size": _table_size(spark)}),
    # a catalog table with statistics: theirs
    ("analyzed_table", lambda spark, root, tmp: _table(spark, root, tmp, analyze=True),
     lambda spark, tmp: spark.table("stats_src").write.mode("overwrite").parquet(f"{tmp}/out"),
     lambda spark, tmp: {"size": _catalog_size(spark)}),
]


@pytest.mark.parametrize("setup, action, expected", [c[1:] for c in INPUT_STATS_CASES],
                         ids=[c[0] for c in INPUT_STATS_CASES])
def test_input_statistics_of_sql_actions(spark, workdir, setup, action, expected):
    """inputStatistics as the JVM's LogicalRelationDatasetBuilder reports them, on every event of the action
    (they come from the plan, not from the run)."""
    setup(spark, workdir, workdir)
    events, _ = run_captured(spark, workdir, lambda s, _: action(s, workdir))
    want = expected(spark, workdir)
    # the SQL action (a read's Parquet schema-merge job is an RDD job of its own)
    actions = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"]
    assert [e["eventType"] for e in actions] == ["START", "RUNNING", "COMPLETE"]
    for event in actions:
        stats = [{k: v for k, v in i["inputFacets"]["inputStatistics"].items() if not k.startswith("_")}
                 for i in event["inputs"]]
        assert stats == [want], event["eventType"]
