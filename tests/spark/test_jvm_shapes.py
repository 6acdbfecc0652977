"""Our events against the JVM integration's expected events (../shared/openlineage-spark-expected/container/),
matched the way its tests match them: MockServer's ``ONLY_MATCHING_FIELDS`` json-unit comparison, so only fields
present in the fixture are compared, arrays ignore order and extra items, and ``${json-unit.any-string}``,
``${json-unit.any-number}``, ``${json-unit.regex}...`` match by kind or pattern. A fixture matches when one of the
events we emitted matches it (their tests look for one matching request among all that arrived).

Their PySpark test scripts' fixtures are matched by running their scripts themselves (``openlineage_scripts/``,
copied unchanged) through spark-submit with the plugin switched on by ``--conf``, as their
SparkContainerIntegrationTest runs them, each in its own container root. Fixtures of their other Java tests (a
Hive metastore, JDBC and Iceberg, the generic application test) are replayed in the shared test Spark session;
their warehouse (or data directory) is replaced by ours, so paths, symlinks and job names must come out the same.
A ``gap`` is a strict xfail naming what we lack.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from test_runtime import driver_env, kinds, run_captured, spool_file_records, spooled_events

from ol_schema import assert_valid_event

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
JDBC_NAMES = {'"name": "test.': '"name": "', "/tmp/iceberg/default/": "/tmp/iceberg/"}

#: Fixtures of their Java tests that need a service (a Hive metastore, Postgres, Iceberg) or are not PySpark
#: scripts, replayed in the shared test session; the PySpark scripts' own fixtures are matched by running the
#: scripts (test_their_scripts_match_their_expected_events below).
CASES = [
    Case(("hiveCreateHiveTableAsSelectCommandStartEvent.json", "hiveCreateHiveTableAsSelectCommandCompleteEvent.json"),
         "/tmp/hive-metastore", *HMS, hive3_table1, HIVE_CTAS, tables=("hive3.table1", "hive3.table2")),
    Case(("hiveCreateDataSourceAsSelectCommandStartEvent.json",
          "hiveCreateDataSourceAsSelectCommandCompleteEvent.json"), "/tmp/hive-metastore", *HMS, hive3_table1,
         lambda spark, root, tmp: spark.read.table("hive3.table1").write.mode("overwrite").saveAsTable("hive3.table2"),
         tables=("hive3.table1", "hive3.table2")),
    Case(("columnLineageJDBCStart.json", "columnLineageJDBCComplete.json"), "/tmp/iceberg", "iceberg_integration_test",
         "default", jdbc_sources, jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"),
         replace=JDBC_NAMES),
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

#: their spark_scripts/ and test_data/, unchanged (openlineage_scripts/SOURCE.md)
THEIRS = Path(__file__).parent / "openlineage_scripts"


class Script(NamedTuple):
    namespace: str  # their test's namespace (the one in its transport URL)
    conf: dict[str, str]  # the --conf their test adds to the container's
    sequences: tuple[tuple[str, ...], ...]  # the fixtures of each of its verifyEvents(...) calls, in their order


#: their script -> how their test runs and verifies it (scripts needing Kafka, BigQuery or Glue are left out)
SCRIPTS: dict[str, Script] = {
    "spark_word_count": Script("testPysparkWordCountWithCliArgs", {}, ((
        "pysparkWordCountWithCliArgsStartEvent", "pysparkWordCountWithCliArgsRunningEvent",
        "pysparkWordCountWithCliArgsCompleteEvent"),)),
    "spark_rdd_to_table": Script("testPysparkRddToTable", {}, ((
        "pysparkRddToCsvStartEvent", "pysparkRddToCsvCompleteEvent", "pysparkRddToTableStartEvent",
        "pysparkRddToTableRunningEvent", "pysparkRddToTableCompleteEvent"),)),
    "spark_hive": Script("testPysparkSQLHiveTest", {}, ((
        "pysparkHiveStartEvent", "pysparkHiveRunningEvent", "pysparkHiveCompleteEvent", "pysparkHiveSelectStartEvent",
        "pysparkHiveSelectEndEvent"),)),
    "spark_hadoop_fs_relation": Script("testPysparkSQLHadoopFSTest", {}, ((
        "pysparkHadoopFSStartEvent", "pysparkHadoopFSEndEvent"),)),
    # their transport URL's ?app_name=appName (UrlParser) is this key
    "overwrite_appname": Script("testPysparkSQLHiveTest", {"spark.openlineage.appName": "appName"}, ((
        "pysparkOverwriteNameStartEvent", "pysparkOverwriteNameRunningEvent", "pysparkOverwriteNameCompleteEvent"),)),
    "spark_overwrite_hive": Script("testPysparkSQLHiveOverwriteDirTest", {}, ((
        "pysparkHiveOverwriteDirStartEvent", "pysparkHiveOverwriteDirCompleteEvent"),)),
    "spark_ctas_load": Script("testCreateAsSelectAndLoad", {}, (
        ("pysparkCTASStart", "pysparkCTASEnd", "pysparkLoadStart", "pysparkLoadComplete"),
        ("pysparkCTASWithColumnLineageEnd",))),
    "spark_cached": Script("cachedDataset", {}, (("pysparkCachedDatasetComplete",),)),
    # points Spark at a metastore (http://metastore) that Spark's Hive client never reaches
    "spark_hive_catalog": Script("symlinks", {}, (("pysparkSymlinksComplete",),)),
    "spark_create_table": Script("testCreateTable", {}, ((
        "pysparkCreateTableStartEvent", "pysparkCreateTableCompleteEvent"),)),
    "spark_drop_table": Script("testDropTable", {}, (("pysparkDropTableEvent",),)),
    "spark_truncate_table": Script("testTruncateTable", {}, (("pysparkTruncateTableCompleteEvent",),)),
    "spark_octas_load": Script("testOptimizedCreateAsSelectAndLoad", {}, (("pysparkOCTASStart", "pysparkOCTASEnd"),)),
    "spark_cll": Script("testColumnLevelLineage", {}, (("pysparkCLLStart", "pysparkCLLEnd"),)),
    "spark_alter_table": Script("testAlterTable", {}, (("pysparkAlterTableAddColumnsEnd",
                                                        "pysparkAlterTableRenameEnd"),)),
    "spark_facets_disable": Script("testFacetsDisable", {}, ()),
    "spark_input_only_rdd": Script("tesInputOnlyRdd", {}, ()),
    "spark_rdd_with_parquet": Script("testRddWithParquet", {}, (("pysparkRDDWithParquet",),)),
    "spark_single_input_rdd": Script("testSingleRddInputStats", {}, (("pysparkSingleRDDStatistics",),)),
    "spark_emit_metrics": Script("testEmitMetrics", {"spark.openlineage.facets.debug.disabled": "false"},
                                 (("pysparkMetricsEnd",),)),
    "spark_smart_debug": Script("testSmartDebugFacet", {
        "spark.openlineage.debug.smart": "true", "spark.openlineage.debug.smartMode": "output-missing",
        "spark.openlineage.filter.allowedSparkNodes": "[org.apache.spark.sql.catalyst.plans.logical.ShowTables]",
        "spark.openlineage.facets.debug.disabled": "true"}, ()),
    # SparkOpenLineageFailuresTest: a backend that refuses or answers 400/500 (test_their_failures_script)
    "spark_test_failures": Script("testFailures", {}, ()),
}
#: the --conf every one of their PySpark containers gets (SparkContainerUtils), bar the transport
CONTAINER_CONF = {
    "spark.sql.warehouse.dir": "/tmp/warehouse",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/derby",
    "spark.openlineage.facets.spark.logicalPlan.disabled": "false",
    "spark.openlineage.facets.spark_unknown.disabled": "false",
    "spark.openlineage.columnLineage.datasetLineageEnabled": "false",
    "spark.openlineage.columnLineage.descriptionsEnabled": "true",
    "spark.openlineage.dataset.namespaceResolvers.kafka-cluster-prod.type": "hostList",
    "spark.openlineage.dataset.namespaceResolvers.kafka-cluster-prod.hosts": "[kafka-host;kafka-host-other]",
    "spark.ui.enabled": "false",
}
#: words of ours that must not reach a script's output (their "Open Lineage Integration" app names aside; a
#: warning PySpark gives their script, such as registerTempTable's FutureWarning, is the host's own)
PLUGIN_WORDS = re.compile(r"(?i:lineage.capture|lineage_capture|spark_plugin|emitter|openlineage|traceback)")


def container_paths(text: str, root: str) -> str:
    """Their absolute ``/tmp/...`` and ``/test_data/...`` moved under ``root`` (``""``: left where they are)."""
    return re.sub(r"(?<![\w.])/(tmp|test_data)/", lambda m: f"{root}/{m.group(1)}/", text)


def fresh_container(script_text: str, root: str, test_data: Path) -> None:
    """What a new container of theirs has: nothing at the ``/tmp/<dir>`` paths the script names, nor at
    ``/tmp/warehouse`` and ``/tmp/derby`` (the metastore), and their test data at ``/test_data``; all under
    ``root``. With ``root=""`` this deletes those paths on this machine."""
    names = {"warehouse", "derby"} | set(re.findall(r"/tmp/([\w.-]+)", script_text))
    for path in [Path(f"{root}/tmp") / name for name in sorted(names)] + [Path(f"{root}/test_data")]:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    shutil.copytree(test_data, f"{root}/test_data")


class ScriptRun(NamedTuple):
    returncode: int
    seconds: float
    lines: list[str]  # the events file's lines, in the order the file transport wrote them
    output: list[str]  # spark-submit's stdout and stderr (the Python driver's stderr is in both)

    @property
    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]


def run_their_script(script: str, resources: Path, root: str, work: Path, env: dict[str, str],
                     conf: dict[str, str] | None = None, java_options: str = "") -> ScriptRun:
    """spark-submit one of their scripts (``resources``: their ``spark_scripts/`` and ``test_data/``) as their
    ``SparkContainerUtils.makePysparkContainerWithDefaultConf`` runs it: its test's namespace and ``--conf``, the
    plugin switched on by ``--conf``, a file transport in ``work`` in place of their MockServer (unless ``conf``
    names a transport), in a fresh container under ``root``."""
    import subprocess
    import sys
    import time

    text = container_paths((resources / "spark_scripts" / f"{script}.py").read_text(), root)
    fresh_container(text, root, resources / "test_data")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / f"{script}.py").write_text(text)
    events_file = work / "events.jsonl"
    conf = conf or {}
    transport = {"spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(events_file)}
    if any(key.startswith("spark.openlineage.transport.") for key in conf):
        transport = {}  # conf's own
    settings = {"spark.openlineage.python.enabled": "true", **transport,
                "spark.openlineage.namespace": SCRIPTS[script].namespace,
                **{key: container_paths(value, root) for key, value in CONTAINER_CONF.items()},
                **SCRIPTS[script].conf, **conf}
    settings["spark.driver.extraJavaOptions"] += f" {java_options}".rstrip()
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    began = time.perf_counter()
    result = subprocess.run([*command, str(work / f"{script}.py")], env=env, cwd=work, capture_output=True,
                            text=True, timeout=600)
    lines = events_file.read_text().splitlines() if events_file.exists() else []
    return ScriptRun(result.returncode, time.perf_counter() - began, lines,
                     result.stdout.splitlines() + result.stderr.splitlines())


def their_fixture(name: str, root: str) -> dict:
    """One of their expected events, its paths under ``root``."""
    return json.loads(container_paths((EXPECTED / f"{name}.json").read_text(), root))


def sequence_problems(script: str, events: list[dict], root: str) -> list[str]:
    """Each verifyEvents(...) call of their test: every fixture matched by one event, in the call's order
    (MockServer's verify of several requests)."""
    problems = []
    for sequence in SCRIPTS[script].sequences:
        first_missing = in_their_order([their_fixture(name, root) for name in sequence], events)
        if first_missing is not None:
            problems.append(f"{sequence[first_missing]} is not sent after {sequence[:first_missing]}")
    return problems


def our_lines(run: ScriptRun) -> list[str]:
    """The lines of spark-submit's output that come from us."""
    return [line for line in run.output if PLUGIN_WORDS.search(line) and "Open Lineage Integration" not in line]


def host_problems(run: ScriptRun) -> list[str]:
    """What the host would see of us: a non-zero exit, a line of ours in the output."""
    tail = "\n".join(run.output[-30:])
    return ([] if run.returncode == 0 else [f"exit code {run.returncode}:\n{tail}"]) + [
        f"output: {line[:200]}" for line in our_lines(run)]


def _input_only_rdd(events: list[dict], lines: list[str], root: str) -> list[str]:
    """Their testRddRepartition: the job Spark runs inside ``spark.read.parquet`` to read the footers (no SQL
    execution) is an RDD job named ``map_partitions...`` whose events have no output and the read directory as
    their only input; the RDD transformations after it run nothing."""
    jobs = [(e["eventType"], e["job"]["name"], e["job"]["facets"]["jobType"]["jobType"], [o["name"] for o in e[
        "outputs"]], [i["name"] for i in e["inputs"]]) for e in events if "map_partitions" in e["job"]["name"]]
    wanted = [("START", "open_lineage_integration_input_only_rdd.map_partitions_parallel_collection", "RDD_JOB", [],
               [f"{root}/tmp/input_rdd"])]
    return [] if jobs == wanted else [f"map_partitions events {jobs} != {wanted}"]


def _rdd_with_parquet(events: list[dict], lines: list[str], root: str) -> list[str]:
    stats = [o["outputFacets"]["outputStatistics"] for e in events for o in e["outputs"]
             if "rdd_c" in o["name"] and "outputStatistics" in o.get("outputFacets", {})]
    problems = [] if stats and stats[0].get("rowCount") == 4 else [f"rdd_c outputStatistics {stats[:1]} (rowCount 4)"]
    if any("rdd_c" in i["name"] and "inputStatistics" in i.get("inputFacets", {}) for e in events for i in e["inputs"]):
        problems.append("an rdd_c input has inputStatistics")
    return problems


def _create_table(events: list[dict], lines: list[str], root: str) -> list[str]:
    named = {e["job"]["name"] for e in events if e["job"]["name"].endswith("create_table_test")}
    return [] if len(named) == 1 else [f"job names ending with create_table_test: {sorted(named)} (one wanted)"]


def _facets_disable(events: list[dict], lines: list[str], root: str) -> list[str]:
    # their verify(request) passes when one request body mentions none of the disabled facets
    clean = re.compile(r"^((?!(spark_unknown|spark.logicalPlan|dataSource)).)*$")
    return [] if any(clean.fullmatch(line) for line in lines) else ["every event mentions a disabled facet"]


def _smart_debug(events: list[dict], lines: list[str], root: str) -> list[str]:
    debug = [e for e in events if "debug" in e["run"]["facets"]]
    if len(debug) != 1 or debug[0]["eventType"] != "COMPLETE" or "parent" not in debug[0]["run"]["facets"]:
        return [f"debug facets on {[(e['eventType'], e['job']['name']) for e in debug]} (one COMPLETE wanted)"]
    logs = debug[0]["run"]["facets"]["debug"].get("logs")
    return [] if logs == ["No input datasets detected", "No output datasets detected"] else [f"debug logs: {logs}"]


#: the assertions their tests make beyond verifyEvents: (events, event lines, root) -> problems
EXTRA_CHECKS: dict[str, Callable[[list[dict], list[str], str], list[str]]] = {
    "spark_input_only_rdd": _input_only_rdd, "spark_rdd_with_parquet": _rdd_with_parquet,
    "spark_create_table": _create_table, "spark_facets_disable": _facets_disable, "spark_smart_debug": _smart_debug}
#: the tests that read script_events (it runs only the scripts the selected ones need)
SCRIPT_TESTS = ("test_their_scripts_match_their_expected_events", "test_their_scripts_send_in_their_order",
                "test_their_scripts_extra_assertions", "test_their_scripts_leave_the_host_alone",
                "test_debug_facet_parts", "test_their_failures_script")
#: the driver of test runs only, for speed (two run side by side): its heap size does not change events
FAST_CONF = {"spark.driver.memory": "512m"}


@contextmanager
def backend_url(backend: str) -> Iterator[str]:
    """An http transport's URL: ``refusing`` (a closed port), or a real server answering that status to all."""
    from http_backend import Backend, free_port

    if backend == "refusing":
        yield f"http://127.0.0.1:{free_port()}"
    else:
        with Backend(status=int(backend)) as server:
            yield server.url


@pytest.fixture(scope="module")
def script_events(request, tmp_path_factory, hook_pythonpath, class_archive) -> dict[str, tuple[str, ScriptRun]]:
    """Each run of their scripts the selected tests need, two at a time, each in its own container root:
    ``script`` with a file transport, ``script:backend`` with an http transport to that ``backend_url``."""
    from concurrent.futures import ThreadPoolExecutor

    needed = set()
    for item in request.session.items:
        if getattr(item, "originalname", "") in SCRIPT_TESTS:
            params = item.callspec.params
            needed |= {params["script"], f"{params['script']}:{params['backend']}" if "backend" in params else ""}
    base = Path(os.path.realpath(tmp_path_factory.mktemp("their_scripts")))

    def run(key: str) -> ScriptRun:
        script, _, backend = key.partition(":")
        root = base / key.replace(":", "@")
        env = driver_env(hook_pythonpath, root / "state")
        with class_archive.java_options() as java:
            if not backend:
                return run_their_script(script, THEIRS, str(root), root / "work", env, FAST_CONF, java)
            with backend_url(backend) as url:
                return run_their_script(script, THEIRS, str(root), root / "work", env, {
                    **FAST_CONF, "spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": url},
                    java)

    keys = sorted(needed - {""}, key=_slowest_first)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(run, key) for key in keys}
        return {key: (str(base / key.replace(":", "@")), future.result()) for key, future in futures.items()}


def _slowest_first(key: str) -> tuple[bool, int]:
    """Runs against a failing backend (seconds of retries) first, then the scripts in their table's order."""
    script = key.partition(":")[0]
    return (":" not in key, list(SCRIPTS).index(script))


@pytest.mark.parametrize("script,fixture", [pytest.param(script, fixture, id=fixture)
                                            for script, spec in SCRIPTS.items()
                                            for sequence in spec.sequences for fixture in sequence])
def test_their_scripts_match_their_expected_events(script_events, script, fixture):
    """Matched as their SparkContainerIntegrationTest matches: one event among all the run sent must match; every
    event valid against the OpenLineage schemas."""
    root, run = script_events[script]
    for event in run.events:
        assert_valid_event(event)
    assert_one_matches(their_fixture(fixture, root), run.events)


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s != "spark_test_failures"])
def test_their_scripts_send_in_their_order(script_events, script):
    """Their fixtures in the order their verifyEvents calls verify them, and every run's events in the order the
    JVM sends them (the file transport writes them in delivery order)."""
    root, run = script_events[script]
    assert sequence_problems(script, run.events, root) == []
    assert order_problems(run.events) == []


@pytest.mark.parametrize("script", list(EXTRA_CHECKS))
def test_their_scripts_extra_assertions(script_events, script):
    root, run = script_events[script]
    assert EXTRA_CHECKS[script](run.events, run.lines, root) == []


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s != "spark_test_failures"])
def test_their_scripts_leave_the_host_alone(script_events, script):
    """Exit code 0 and not a line of ours in spark-submit's output (a transport is configured, the keys known)."""
    _, run = script_events[script]
    assert host_problems(run) == []


# the backend (backend_url), where the script's events are then kept: "spool" (to replay) or "dead-letters"
FAILURE_CASES = [("refusing", "spool"), ("500", "spool"), ("400", "dead-letters")]


@pytest.mark.parametrize("script", ["spark_test_failures"])
@pytest.mark.parametrize("backend, kept_in", FAILURE_CASES)
def test_their_failures_script(script_events, script, backend, kept_in):
    """Their SparkOpenLineageFailuresTest: with the backend refusing connections or answering 500 or 400 the
    script still prints "Spark is fine!"; here also: exit 0, a warning of ours where Spark's go (each once), and
    every event the script sends to a working backend kept (spooled for a transient failure, set aside as dead
    letters for a permanent rejection)."""
    root, ran = script_events[f"{script}:{backend}"]
    assert ran.returncode == 0, ran.output[-30:]
    assert "Spark is fine!" in ran.output, ran.output[-50:]
    # the user is told, where Spark's own warnings go, each thing once (what failed; where the events wait)
    warnings = [re.sub(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN lineage_capture: ", "", line) for line in our_lines(ran)]
    assert warnings and all(w != line for w, line in zip(warnings, our_lines(ran))), our_lines(ran)
    assert len({w[:40] for w in warnings}) == len(warnings), warnings
    state = Path(root) / "state"
    kept = spooled_events(state) if kept_in == "spool" else [
        record["event"] for record in spool_file_records(state, "dead-letters.jsonl")]
    sent = script_events[script][1].events  # the same script with a file transport
    # the poll's RUNNING events depend on timing (an INSERT outlasting the poll's interval); the rest must match
    assert all(statistics_running(e) or poll_running(e) for e in kept + sent if e["eventType"] == "RUNNING")
    kept, sent = ([e for e in events if not poll_running(e)] for events in (kept, sent))
    assert len(sent) == 7  # the application, CREATE TABLE and INSERT (with its statistics' RUNNING)
    assert sorted(kinds(kept)) == sorted(kinds(sent))


def statistics_running(event: dict) -> bool:
    """The RUNNING an action's end sends when it wrote with statistics (the JVM's event at its Spark job's end)."""
    return event["eventType"] == "RUNNING" and any(
        "outputStatistics" in o.get("outputFacets", {}) for o in event["outputs"])


def poll_running(event: dict) -> bool:
    """A RUNNING the execution poll sent while the action ran: its outputs carry no output facets."""
    return event["eventType"] == "RUNNING" and not any(o.get("outputFacets") for o in event["outputs"])
