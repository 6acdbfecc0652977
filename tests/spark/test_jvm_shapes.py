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
        # an empty facet container ("inputFacets": {}) is the same as none: our emitter leaves empty ones out
        return [m for key, value in expected.items()
                for m in (mismatches(value, actual[key], f"{path}.{key}") if key in actual
                          else [] if value == {} else [f"{path}.{key}: missing"])]
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
    ({"a": {}}, {}, True),  # an empty container equals an absent one
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
    fixture: str
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
    Case("pysparkSymlinksComplete.json", "/tmp/warehouse", "open_lineage_integration_hive", "symlinks", None,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive"), tables=("test",),
         conf={"spark.sql.hive.metastore.uris": "http://metastore"}),
    Case("hiveCreateHiveTableAsSelectCommandStartEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1, HIVE_CTAS,
         tables=("hive3.table1", "hive3.table2")),
    Case("hiveCreateHiveTableAsSelectCommandCompleteEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1,
         HIVE_CTAS, tables=("hive3.table1", "hive3.table2")),
    Case("hiveCreateDataSourceAsSelectCommandCompleteEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1,
         lambda spark, root, tmp: spark.read.table("hive3.table1").write.mode("overwrite").saveAsTable("hive3.table2"),
         tables=("hive3.table1", "hive3.table2")),
    Case("columnLineageJDBCStart.json", "/tmp/iceberg", "iceberg_integration_test", "default", jdbc_sources,
         jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"), ignore=("columnLineage",),
         replace=JDBC_NAMES),
    Case("columnLineageJDBCComplete.json", "/tmp/iceberg", "iceberg_integration_test", "default", jdbc_sources,
         jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"), ignore=("columnLineage",),
         replace=JDBC_NAMES),
    *[Case(f"applicationLevel{kind}.json", "/tmp/test_data", *GENERIC_APP, None, generic_write,
           session="spark", data=True, conf=GENERIC)
      for kind in ("StartApplication", "StartJob", "CompleteJob", "CompleteApplication")],
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
    pytest.param(case, id=case.fixture.removesuffix(".json"),
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
    text = (EXPECTED / case.fixture).read_text()
    for theirs, ours in case.replace.items():
        text = text.replace(theirs, ours)
    # their directory's last segment starts the table part of their job names (`{app}.{command}.{dir}_{table}`)
    text = text.replace(f".{Path(case.their_root).name}_", f".{Path(root).name}_").replace(case.their_root, root)
    expected = _strip(json.loads(text), case.ignore)
    candidates = [e for e in events if e["eventType"] == expected.get("eventType", e["eventType"])]
    assert candidates, f"no {expected.get('eventType')} event among {[e['job']['name'] for e in events]}"
    problems = min((mismatches(expected, event) for event in candidates), key=len)
    assert problems == [], "\n".join(problems)


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
}
#: fixtures we do not match yet, and why (strict xfails)
SCRIPT_GAPS = {"pysparkMetricsEnd": "the JVM's debug run facet (its Micrometer metrics) is not emitted"}
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
              if getattr(item, "originalname", "") == "test_their_scripts_match_their_expected_events"}
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
    expected = json.loads(_their_paths((EXPECTED / f"{fixture}.json").read_text(), root))
    candidates = [e for e in events if e["eventType"] == expected.get("eventType", e["eventType"])]
    assert candidates, f"no {expected.get('eventType')} event among {[e['job']['name'] for e in events]}"
    problems = min((mismatches(expected, event) for event in candidates), key=len)
    assert problems == [], "\n".join(problems)
