"""Our events against the JVM integration's expected events (../shared/openlineage-spark-expected/container/),
matched the way its tests match them: MockServer's ``ONLY_MATCHING_FIELDS`` json-unit comparison, so only fields
present in the fixture are compared, arrays ignore order and extra items, and ``${json-unit.any-string}``,
``${json-unit.any-number}``, ``${json-unit.regex}...`` match by kind or pattern. A fixture matches when one of the
events we emitted matches it (their tests look for one matching request among all that arrived).

Each row replays the operation of one fixture (from the JVM repository's ``spark_scripts/*.py`` and Java
integration tests) in the shared test Spark session: the Hive-catalog session for scripts that call
``enableHiveSupport()``, the in-memory one otherwise. Their warehouse (or data directory) is replaced by ours, so
paths, symlinks and job names must come out the same. A row with a ``gap`` is a strict xfail naming what we lack.
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from test_runtime import run_captured

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


def steps(*ops: Op) -> Op:
    def run(spark: Any, root: str, tmp: str) -> None:
        for op in ops:
            op(spark, root, tmp)
    return run


def save_temp_table(spark: Any, root: str, tmp: str) -> None:
    """Their ``spark.createDataFrame([{"a": 1, "b": 2}, {"a": 3, "b": 4}]).write.saveAsTable("temp")``."""
    spark.createDataFrame([{"a": 1, "b": 2}, {"a": 3, "b": 4}]).write.option("compression", "none").saveAsTable("temp")


def cached_write(spark: Any, root: str, tmp: str) -> None:
    cached = spark.read.table("temp").cache()
    try:
        cached.count()
        cached.select("a").write.option("compression", "none").saveAsTable("target")
    finally:
        cached.unpersist()


def hive3_table1(spark: Any, root: str, tmp: str) -> None:
    spark.sql("create database if not exists hive3")
    spark.createDataFrame([("New York",)], "city string").write.mode("overwrite").saveAsTable("hive3.table1")


def generic_write(spark: Any, root: str, tmp: str) -> None:
    """SparkGenericIntegrationTest: ``createTempDataset(3).groupBy("a").count()`` written as CSV."""
    df = spark.createDataFrame([(i, i + 1) for i in (1, 2, 3)], "a long, b long").repartition(1)
    df.groupBy("a").count().write.mode("overwrite").csv(f"{root}/test_output/")


def rdd_to_csv(spark: Any, root: str, tmp: str) -> None:
    rdd = spark.sparkContext.parallelize([("word one", 30), ("word two", 70)])
    rdd.setName("list of random words and numbers")
    rdd.map(lambda x: ",".join(str(i) for i in x)).saveAsTextFile(f"{root}/rdd_to_csv_output/")


def word_count(spark: Any, root: str, tmp: str) -> None:
    """spark_word_count.py: a text file grouped by line, written as CSV."""
    Path(root).mkdir(parents=True, exist_ok=True)
    Path(root, "data.txt").write_text("a\nb\na\n")
    spark.read.text(f"{root}/data.txt").groupBy("value").count().write.mode("overwrite").csv(f"{root}/test_output/")


def rdd_to_csv_and_table(spark: Any, root: str, tmp: str) -> None:
    """spark_rdd_to_table.py: an RDD saved as text, read back as CSV through a temp view, written as parquet."""
    rdd_to_csv(spark, root, tmp)
    rdd_to_table(spark, root, tmp)


def single_input_rdd(spark: Any, root: str, tmp: str) -> None:
    """spark_single_input_rdd.py: textFile -> map -> saveAsTextFile into a partition folder."""
    Path(root, "rdd_input").mkdir(parents=True, exist_ok=True)
    Path(root, "rdd_input", "sample.txt").write_text(
        "\n".join(["hello world", "hello pyspark rdd", "spark rdd transforms are fun", "hello again world"]))
    Path(root, "rdd_output").mkdir(exist_ok=True)
    spark.sparkContext.textFile(f"{root}/rdd_input").map(lambda x: x).saveAsTextFile(f"{root}/rdd_output/20251030")


def people_csv(spark: Any, root: str, tmp: str) -> None:
    spark.createDataFrame([("ann lee", 30), ("bob ray", 70)], "name string, age int").write.mode("overwrite").csv(
        f"{root}/rdd_to_csv_output")


def rdd_to_table(spark: Any, root: str, tmp: str) -> None:
    spark.read.option("header", False).schema("name string not null, age int not null").csv(
        f"{root}/rdd_to_csv_output").createOrReplaceTempView("test_people")
    spark.sql("SELECT * FROM test_people WHERE age > 20 AND age < 65").write.mode("overwrite").option(
        "compression", "none").parquet(f"{root}/rdd_to_table/")


def rdd_with_parquet(spark: Any, root: str, tmp: str) -> None:
    df = spark.createDataFrame([{"a": "x", "b": "z"}, {"a": "y", "b": "z"}])
    df.write.mode("overwrite").parquet(f"{root}/rdd_a")
    df.write.mode("overwrite").parquet(f"{root}/rdd_b")
    rdd_a, rdd_b = spark.read.parquet(f"{root}/rdd_a").rdd, spark.read.parquet(f"{root}/rdd_b").rdd
    # their .toDF(), bound to this session (toDF() takes the active one, which may be the other test session)
    spark.createDataFrame(rdd_a.union(rdd_b).map(lambda x: (x["a"] + x["b"],))).write.mode("overwrite").parquet(
        f"{root}/rdd_c/20251030")


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
#: JVM facets disabled by default there (``spark.openlineage.facets.disabled``) and not implemented here
JVM_DEBUG_FACETS = ("spark_unknown",)
#: what their container tests add to every run (SparkContainerUtils): the two debug facets on
DEBUG_ON = {"spark.openlineage.facets.spark.logicalPlan.disabled": "false",
            "spark.openlineage.facets.spark_unknown.disabled": "false"}
NO_CLL = "the columnLineage dataset facet is not emitted"


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


CTAS = sql("CREATE TABLE tbl1 USING hive LOCATION '{root}/tbl1' AS SELECT a, b FROM temp")
OCTAS = sql("CREATE TABLE tbl2 STORED AS PARQUET LOCATION '{root}/tbl2' AS SELECT a, b FROM temp")
ALTER = ("open_lineage_integration_alter_table", "testAlterTable")
HIVE_TABLES = sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive",
                  "CREATE TABLE IF NOT EXISTS target (key INT, value STRING) USING hive")
HIVE = ("open_lineage_integration_hive", "testPysparkSQLHiveTest")
HADOOP_FS = ("open_lineage_integration_hadoop_fs_relation", "testPysparkSQLHadoopFSTest")
OVERWRITE_DIR = ("open_lineage_integration_overwrite_hive", "testPysparkSQLHiveOverwriteDirTest")
HMS = ("hive_metastore_integration_test", "default")
HIVE_CTAS = sql("CREATE TABLE IF NOT EXISTS hive3.table2 using hive AS SELECT * FROM hive3.table1")
GENERIC_APP = ("generic_integration_test", "generic-namespace")
RDD_TO_TABLE = ("spark_rdd_to_table", "testPysparkRddToTable")
# Postgres names tables `{database}.{table}` (database `test` in their URL), Derby as written; their other two
# tables are Iceberg tables of a Hadoop catalog (`{warehouse}/{db}/{table}`), ours session-catalog parquet tables
JDBC_NAMES = {'"name": "test.': '"name": "', "/tmp/iceberg/default/": "/tmp/iceberg/"}

CASES = [
    Case("pysparkTruncateTableCompleteEvent.json", "/tmp/truncate_test", "open_lineage_integration_truncate_table",
         "testTruncateTable", sql("CREATE TABLE truncate_table_test (a string, b string)"),
         sql("TRUNCATE TABLE truncate_table_test"), tables=("truncate_table_test",)),
    Case("pysparkDropTableEvent.json", "/tmp/drop_test", "open_lineage_integration_drop_table", "testDropTable",
         sql("CREATE TABLE drop_table_test (a string, b string)"), sql("DROP TABLE drop_table_test"),
         tables=("drop_table_test",)),
    Case("pysparkCreateTableStartEvent.json", "/tmp/create_test", "open_lineage_integration_create_table",
         "testCreateTable", None, sql("CREATE TABLE create_table_test (a string, b string)"),
         tables=("create_table_test",)),
    Case("pysparkCreateTableCompleteEvent.json", "/tmp/create_test", "open_lineage_integration_create_table",
         "testCreateTable", None, sql("CREATE TABLE create_table_test (a string, b string)"),
         tables=("create_table_test",)),
    Case("pysparkAlterTableAddColumnsEnd.json", "/tmp/alter_test", *ALTER,
         sql("CREATE TABLE alter_table_test (a string, b string)"),
         sql("ALTER TABLE alter_table_test ADD COLUMNS (c string, d string)"), tables=("alter_table_test",)),
    Case("pysparkAlterTableRenameEnd.json", "/tmp/alter_test", *ALTER,
         sql("CREATE TABLE alter_table_test (a string, b string)",
             "ALTER TABLE alter_table_test ADD COLUMNS (c string, d string)"),
         sql("ALTER TABLE alter_table_test RENAME TO alter_table_test_new"),
         tables=("alter_table_test", "alter_table_test_new")),
    Case("pysparkCTASStart.json", "/tmp/ctas_load", "open_lineage_integration_ctas_load", "testCreateAsSelectAndLoad",
         save_temp_table, CTAS, tables=("temp", "tbl1")),
    Case("pysparkCTASEnd.json", "/tmp/ctas_load", "open_lineage_integration_ctas_load", "testCreateAsSelectAndLoad",
         save_temp_table, CTAS, tables=("temp", "tbl1")),
    Case("pysparkCTASWithColumnLineageEnd.json", "/tmp/ctas_load", "open_lineage_integration_ctas_load",
         "testCreateAsSelectAndLoad", save_temp_table, CTAS, tables=("temp", "tbl1"), gap=NO_CLL),
    # their LOAD DATA reads /test_data/test_data.csv; ours a file of the test's tmp dir
    Case("pysparkLoadStart.json", "/tmp/ctas_load", "open_lineage_integration_ctas_load", "testCreateAsSelectAndLoad",
         steps(save_temp_table, CTAS, lambda spark, root, tmp: Path(tmp, "load.csv").write_text("5\x016\n")),
         sql("LOAD DATA LOCAL INPATH '{tmp}/load.csv' INTO TABLE tbl1"), tables=("temp", "tbl1")),
    Case("pysparkLoadComplete.json", "/tmp/ctas_load", "open_lineage_integration_ctas_load",
         "testCreateAsSelectAndLoad",
         steps(save_temp_table, CTAS, lambda spark, root, tmp: Path(tmp, "load.csv").write_text("5\x016\n")),
         sql("LOAD DATA LOCAL INPATH '{tmp}/load.csv' INTO TABLE tbl1"), tables=("temp", "tbl1")),
    Case("pysparkOCTASStart.json", "/tmp/ctas_load", "open_lineage_integration_octas_load",
         "testOptimizedCreateAsSelectAndLoad", save_temp_table, OCTAS, tables=("temp", "tbl2")),
    Case("pysparkOCTASEnd.json", "/tmp/ctas_load", "open_lineage_integration_octas_load",
         "testOptimizedCreateAsSelectAndLoad", save_temp_table, OCTAS, tables=("temp", "tbl2")),
    Case("pysparkHadoopFSStartEvent.json", "/tmp/warehouse", *HADOOP_FS,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING parquet",
             "CREATE TABLE IF NOT EXISTS target (key INT, value STRING) USING parquet",
             "INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')"),
         sql("INSERT INTO target SELECT * from test WHERE key > 1"), tables=("test", "target")),
    Case("pysparkHadoopFSEndEvent.json", "/tmp/warehouse", *HADOOP_FS,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING parquet",
             "CREATE TABLE IF NOT EXISTS target (key INT, value STRING) USING parquet",
             "INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')"),
         sql("INSERT INTO target SELECT * from test WHERE key > 1"), tables=("test", "target")),
    Case("pysparkHiveStartEvent.json", "/tmp/warehouse", *HIVE, HIVE_TABLES,
         sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')"), tables=("test", "target"),
         ignore=JVM_DEBUG_FACETS, conf=DEBUG_ON),
    Case("pysparkHiveRunningEvent.json", "/tmp/warehouse", *HIVE, HIVE_TABLES,
         sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')"), tables=("test", "target"),
         ignore=JVM_DEBUG_FACETS, conf=DEBUG_ON),
    Case("pysparkHiveCompleteEvent.json", "/tmp/warehouse", *HIVE, HIVE_TABLES,
         sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')"), tables=("test", "target"),
         ignore=JVM_DEBUG_FACETS, conf=DEBUG_ON),
    *[Case(f"pysparkOverwriteName{kind}Event.json", "/tmp/warehouse", "app_name", "testPysparkSQLHiveTest",
           steps(HIVE_TABLES, sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')")),
           sql("INSERT INTO target SELECT * from test WHERE key > 1"), tables=("test", "target"),
           ignore=JVM_DEBUG_FACETS, conf=DEBUG_ON) for kind in ("Start", "Running", "Complete")],
    *[Case(f"pysparkWordCountWithCliArgs{kind}Event.json", "/tmp/test_data", "open_lineage_integration_word_count",
           "testPysparkWordCountWithCliArgs", None, word_count, session="spark", data=True,
           replace={"/test_data/data.txt": "/tmp/test_data/data.txt"}) for kind in ("Start", "Running", "Complete")],
    Case("pysparkHiveSelectStartEvent.json", "/tmp/warehouse", *HIVE,
         steps(HIVE_TABLES, sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')")),
         sql("INSERT INTO target SELECT * from test WHERE key > 1"), tables=("test", "target")),
    Case("pysparkHiveSelectEndEvent.json", "/tmp/warehouse", *HIVE,
         steps(HIVE_TABLES, sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')")),
         sql("INSERT INTO target SELECT * from test WHERE key > 1"), tables=("test", "target")),
    Case("pysparkHiveOverwriteDirStartEvent.json", "/tmp/overwrite", *OVERWRITE_DIR,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive"),
         sql("INSERT OVERWRITE DIRECTORY '{root}/table' USING hive VALUES (1, 'a'), (2, 'b'), (3, 'c')"),
         tables=("test",)),
    Case("pysparkHiveOverwriteDirCompleteEvent.json", "/tmp/overwrite", *OVERWRITE_DIR,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive"),
         sql("INSERT OVERWRITE DIRECTORY '{root}/table' USING hive VALUES (1, 'a'), (2, 'b'), (3, 'c')"),
         tables=("test",)),
    # their script points Spark at a metastore it never reaches; only the plugin is told about it here
    Case("pysparkSymlinksComplete.json", "/tmp/warehouse", "open_lineage_integration_hive", "symlinks", None,
         sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive"), tables=("test",),
         conf={"spark.sql.hive.metastore.uris": "http://metastore"}),
    Case("pysparkCachedDatasetComplete.json", "/tmp/caching", "open_lineage_in_memory_relation", "cachedDataset",
         save_temp_table, cached_write, tables=("temp", "target")),
    Case("hiveCreateHiveTableAsSelectCommandStartEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1, HIVE_CTAS,
         tables=("hive3.table1", "hive3.table2"), ignore=("columnLineage",)),
    Case("hiveCreateHiveTableAsSelectCommandCompleteEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1,
         HIVE_CTAS, tables=("hive3.table1", "hive3.table2"), ignore=("columnLineage",)),
    Case("hiveCreateDataSourceAsSelectCommandCompleteEvent.json", "/tmp/hive-metastore", *HMS, hive3_table1,
         lambda spark, root, tmp: spark.read.table("hive3.table1").write.mode("overwrite").saveAsTable("hive3.table2"),
         tables=("hive3.table1", "hive3.table2"), ignore=("columnLineage",)),
    Case("columnLineageJDBCStart.json", "/tmp/iceberg", "iceberg_integration_test", "default", jdbc_sources,
         jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"), ignore=("columnLineage",),
         replace=JDBC_NAMES),
    Case("columnLineageJDBCComplete.json", "/tmp/iceberg", "iceberg_integration_test", "default", jdbc_sources,
         jdbc_write, session="spark", tables=("v2_source_1", "v2_source_2"), ignore=("columnLineage",),
         replace=JDBC_NAMES),
    Case("applicationLevelStartApplication.json", "/tmp/test_data", *GENERIC_APP, None, generic_write,
         session="spark", data=True, conf=GENERIC),
    Case("applicationLevelStartJob.json", "/tmp/test_data", *GENERIC_APP, None, generic_write,
         session="spark", data=True, conf=GENERIC),
    Case("applicationLevelCompleteJob.json", "/tmp/test_data", *GENERIC_APP, None, generic_write,
         session="spark", data=True, conf=GENERIC),
    Case("applicationLevelCompleteApplication.json", "/tmp/test_data", *GENERIC_APP, None, generic_write,
         session="spark", data=True, conf=GENERIC),
    Case("pysparkRddToTableCompleteEvent.json", "/tmp/test_data", *RDD_TO_TABLE, people_csv, rdd_to_table,
         session="spark", data=True),
    *[Case(fixture, "/tmp/test_data", *RDD_TO_TABLE, None, rdd_to_csv_and_table, session="spark", data=True)
      for fixture in ("pysparkRddToCsvStartEvent.json", "pysparkRddToCsvCompleteEvent.json",
                      "pysparkRddToTableStartEvent.json", "pysparkRddToTableRunningEvent.json")],
    Case("pysparkSingleRDDStatistics.json", "/tmp", "open_lineage_integration_single_input_rdd_with_input_statistics",
         "default", None, single_input_rdd, session="spark", data=True),
    Case("pysparkRDDWithParquet.json", "/tmp", "open_lineage_integration_rdd_with_parquet", "testRddWithParquet",
         None, rdd_with_parquet, session="spark", data=True),
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
