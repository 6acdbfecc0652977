"""action_lineage against real local-mode Spark: one table of scenarios, exact datasets and job names.

Each case runs ``setup`` (not captured), then ``action`` under a real ``QueryExecutionListener``;
``jobs`` lists the ``job_suffix`` of every action Spark reported for it (None = not emitted, as the
JVM integration filters it), and the datasets/SQL are those of the last one. Placeholders:
``{tmp}`` per-test dir, ``{wh}`` the session warehouse, ``{id}`` the case id (unique table names),
``{url}`` a per-test Derby database, ``{cat}`` a per-test V2 JDBC catalog over it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pyspark
import pytest

from spark_plugin.plan_lineage import action_lineage

DERBY = {"driver": "org.apache.derby.jdbc.EmbeddedDriver"}
SCHEMA_KV = ("key:integer", "value:string")
W = "execute_insert_into_hadoop_fs_relation_command"


class Ds(NamedTuple):
    """A dataset as asserted: identity, top-level schema ("name:type", nested in parentheses),
    lifecycle state (and the previous identifier of a RENAME), TABLE symlink."""

    namespace: str
    name: str
    schema: tuple[str, ...] | None = None
    lifecycle: str | None = None
    symlink: tuple[str, str] | None = None
    previous: tuple[str, str] | None = None


class Case(NamedTuple):
    id: str
    setup: str
    action: str
    jobs: list[str | None]
    inputs: list[Ds]
    outputs: list[Ds]
    sql: str | None = None
    conf: dict[str, str] = {}
    row_count: int | None = None  # outputStatistics.rowCount of the output


#: Spark 4 differs from 3.5 in a few places, each as the JVM integration sees it on that version: it drops the
#: text of a plain CREATE TABLE (no `sql` facet), wraps saveAsTable in one more command (NESTED_CASES), and
#: names a V2 relation with its catalog.
SPARK_4 = int(pyspark.__version__.split(".")[0]) >= 4


def on_spark_3(value: Any) -> Any:
    """``value`` on Spark 3.5, None on Spark 4."""
    return None if SPARK_4 else value


SHOW_TABLES = "org.apache.spark.sql.catalyst.plans.logical.ShowTables"
SRC = "spark.createDataFrame([(1, 'a'), (2, 'b')], 'key int, value string').write.parquet('{tmp}/in/src')"
SRC_DS = Ds("file", "{tmp}/in/src", SCHEMA_KV)


def table(name: str, schema: tuple[str, ...] | None = SCHEMA_KV, lifecycle: str | None = None) -> Ds:
    return Ds("file", "{wh}/" + name, schema, lifecycle, ("file:{wh}", "default." + name))


CASES = [
    # --- files --------------------------------------------------------------------------------
    Case("parquet_write_from_local_data", "",
         "spark.createDataFrame([(1, 'a'), (2, 'b')], 'key int, value string').write.parquet('{tmp}/out/p')",
         [f"{W}.out_p"], [], [Ds("file", "{tmp}/out/p", SCHEMA_KV)], row_count=2),
    Case("parquet_to_csv_overwrite", SRC,
         "spark.read.parquet('{tmp}/in/src').write.mode('overwrite').csv('{tmp}/out/c')",
         [f"{W}.out_c"], [SRC_DS], [Ds("file", "{tmp}/out/c", SCHEMA_KV, "OVERWRITE")], row_count=2),
    Case("parquet_to_json_append", SRC,
         "spark.read.parquet('{tmp}/in/src').write.mode('append').json('{tmp}/out/j')",
         [f"{W}.out_j"], [SRC_DS], [Ds("file", "{tmp}/out/j", SCHEMA_KV)]),
    Case("orc_to_text", SRC + "; spark.read.parquet('{tmp}/in/src').write.orc('{tmp}/in/orc')",
         "spark.read.orc('{tmp}/in/orc').select('value').write.text('{tmp}/out/t')",
         [f"{W}.out_t"], [Ds("file", "{tmp}/in/orc", SCHEMA_KV)], [Ds("file", "{tmp}/out/t", ("value:string",))]),
    # DataFrames made from RDDs (LogicalRDD): the files the RDD lineage reads; local data reads nothing
    Case("rdd_of_a_parquet_read", SRC,
         "spark.createDataFrame(spark.read.parquet('{tmp}/in/src').rdd.map(lambda r: (r.key * 2,)), 'k int')"
         ".write.parquet('{tmp}/out/r')",
         [f"{W}.out_r"], [Ds("file", "{tmp}/in/src")], [Ds("file", "{tmp}/out/r", ("k:integer",))], row_count=2),
    Case("rdd_of_a_text_file",
         "import os; os.makedirs('{tmp}/in/txt'); open('{tmp}/in/txt/a.txt', 'w').write('x\\ny\\n')",
         "spark.createDataFrame(spark.sparkContext.textFile('{tmp}/in/txt').map(lambda l: (l,)), 'line string')"
         ".write.parquet('{tmp}/out/lines')",
         [f"{W}.out_lines"], [Ds("file", "{tmp}/in/txt")], [Ds("file", "{tmp}/out/lines", ("line:string",))],
         row_count=2),
    Case("rdd_of_local_data_reads_nothing", "",
         "spark.createDataFrame(spark.sparkContext.parallelize([(1,), (2,)]), 'k int').write.parquet('{tmp}/out/l')",
         [f"{W}.out_l"], [], [Ds("file", "{tmp}/out/l", ("k:integer",))], row_count=2),
    # a folder name as on disk, `%` included: Hadoop's path strings are not percent-encoded (its URIs are)
    Case("folder_names_with_percent_and_space", SRC.replace("in/src", "in/p%41 x"),
         "spark.read.parquet('{tmp}/in/p%41 x').write.parquet('{tmp}/out/q%42 y')",
         [f"{W}.out_q%42 y"], [Ds("file", "{tmp}/in/p%41 x", SCHEMA_KV)], [Ds("file", "{tmp}/out/q%42 y", SCHEMA_KV)]),
    Case("rdd_reads_in_a_percent_folder", SRC.replace("in/src", "in/p%41 x")
         + "; import os; os.makedirs('{tmp}/in/t%41'); open('{tmp}/in/t%41/a.txt', 'w').write('x\\n')",
         "spark.createDataFrame(spark.read.parquet('{tmp}/in/p%41 x').rdd.map(lambda r: (r.value,)).union("
         "spark.sparkContext.textFile('{tmp}/in/t%41').map(lambda l: (l,))), 'v string').write.parquet('{tmp}/out/u')",
         [f"{W}.out_u"], [Ds("file", "{tmp}/in/t%41"), Ds("file", "{tmp}/in/p%41 x")],
         [Ds("file", "{tmp}/out/u", ("v:string",))], row_count=3),
    Case("single_csv_file_is_named_by_the_file",
         "import os; os.makedirs('{tmp}/in'); open('{tmp}/in/one.csv', 'w').write('1,a\\n')",
         "spark.read.schema('_c0 string, _c1 string').csv('{tmp}/in/one.csv').write.parquet('{tmp}/out/one')",
         [f"{W}.out_one"], [Ds("file", "{tmp}/in/one.csv", ("_c0:string", "_c1:string"))],
         [Ds("file", "{tmp}/out/one", ("_c0:string", "_c1:string"))]),
    Case("partitioned_write_is_named_by_the_table_dir", SRC,
         "spark.read.parquet('{tmp}/in/src').write.partitionBy('value').parquet('{tmp}/out/part')",
         [f"{W}.out_part"], [SRC_DS], [Ds("file", "{tmp}/out/part", SCHEMA_KV)], row_count=2),
    Case("partitioned_read_is_named_by_the_table_dir",
         SRC + "; spark.read.parquet('{tmp}/in/src').write.partitionBy('value').parquet('{tmp}/in/part')",
         "spark.read.parquet('{tmp}/in/part').write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file", "{tmp}/in/part", SCHEMA_KV)], [Ds("file", "{tmp}/out/x", SCHEMA_KV)]),
    Case("partition_folder_read_is_trimmed",
         SRC + "; spark.read.parquet('{tmp}/in/src').write.partitionBy('value').parquet('{tmp}/in/part')",
         "spark.read.parquet('{tmp}/in/part/value=a').write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file", "{tmp}/in/part", ("key:integer",))],
         [Ds("file", "{tmp}/out/x", ("key:integer",))]),
    Case("nested_types",
         "",
         "spark.sql(\"select named_struct('a', 1, 'b', array(1, 2)) s, map('k', 1.5) m, cast(1 as decimal(10,2)) d,"
         " date'2025-01-01' dt, current_timestamp() ts, 1L l, 1.0D x\").write.parquet('{tmp}/out/n')",
         [f"{W}.out_n"], [],
         [Ds("file", "{tmp}/out/n", ("s:struct(a:integer,b:array(_element:integer))",
                                    "m:map(key:string,value:decimal(2,1))",
                                    "d:decimal(10,2)", "dt:date", "ts:timestamp", "l:long", "x:double"))],
         # the written DataFrame came from spark.sql: its text is the action's SQL
         sql="select named_struct('a', 1, 'b', array(1, 2)) s, map('k', 1.5) m, cast(1 as decimal(10,2)) d,"
         " date'2025-01-01' dt, current_timestamp() ts, 1L l, 1.0D x"),
    Case("join_aggregate_write_under_adaptive_execution",  # Spark 4: AdaptiveSparkPlan -> ResultQueryStage -> write
         SRC + "; spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/in/src2')",
         "spark.read.parquet('{tmp}/in/src').join(spark.read.parquet('{tmp}/in/src2'), 'key')"
         ".groupBy('key').count().write.parquet('{tmp}/out/agg')",
         [f"{W}.out_agg"], [SRC_DS, Ds("file", "{tmp}/in/src2", SCHEMA_KV)],
         [Ds("file", "{tmp}/out/agg", ("key:integer", "count:long"))], row_count=2),
    Case("filtered_read_is_emitted", SRC,
         "spark.read.parquet('{tmp}/in/src').filter('key > 1').collect()",
         ["filter"], [SRC_DS], []),
    Case("count_is_not_emitted", SRC, "spark.read.parquet('{tmp}/in/src').count()", [None], [], []),
    # the JVM's filter.allowedSparkNodes / deniedSparkNodes ([a;b] lists of root classes; SparkNodesFilter)
    Case("filter_allowed_root_is_emitted", "", "spark.sql('SHOW TABLES')", ["show_tables"], [], [],
         sql="SHOW TABLES", conf={"spark.openlineage.filter.allowedSparkNodes": f"[{SHOW_TABLES}]"}),
    Case("filter_allowed_list_leaves_the_rest_filtered", SRC, "spark.read.parquet('{tmp}/in/src').count()", [None],
         [], [], conf={"spark.openlineage.filter.allowedSparkNodes": f"[{SHOW_TABLES}]"}),
    Case("filter_denied_root_is_not_emitted", SRC, "spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/out/d')",
         [None], [], [], conf={"spark.openlineage.filter.deniedSparkNodes": "[org.apache.spark.sql.catalyst.plans."
                               "logical.ShowTables; org.apache.spark.sql.execution.datasources."
                               "InsertIntoHadoopFsRelationCommand]"}),
    Case("projection_read_is_not_emitted", SRC,
         "spark.read.parquet('{tmp}/in/src').select('key').collect()", [None], [], []),
    Case("temp_view_resolves_to_its_source",
         SRC + "; spark.read.parquet('{tmp}/in/src').createOrReplaceTempView('v_{id}')",
         "spark.table('v_{id}').write.parquet('{tmp}/out/v')",
         [f"{W}.out_v"], [SRC_DS], [Ds("file", "{tmp}/out/v", SCHEMA_KV)]),
    Case("cached_dataframe_resolves_to_its_source",
         SRC + "; global cached; cached = spark.read.parquet('{tmp}/in/src').filter('key > 0').cache(); cached.count()",
         "cached.write.json('{tmp}/out/cache')",
         [f"{W}.out_cache"], [SRC_DS], [Ds("file", "{tmp}/out/cache", SCHEMA_KV)]),
    # Spark 3.5 plans a cache over a cached DataFrame with adaptive execution (its links are under the wrapper)
    Case("cache_of_a_cached_dataframe_resolves_to_its_source",
         SRC + "; global cached2; cached2 = spark.read.parquet('{tmp}/in/src').filter('key > 0').cache()"
         ".where('key < 100').cache(); cached2.count()",
         "cached2.write.json('{tmp}/out/cache2')",
         [f"{W}.out_cache2"], [SRC_DS], [Ds("file", "{tmp}/out/cache2", SCHEMA_KV)]),
    Case("remove_path_pattern", SRC,
         "spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/out/x_v2')",
         [f"{W}.out_x_v2"], [Ds("file", "{tmp}/in", SCHEMA_KV)], [Ds("file", "{tmp}/out/x", SCHEMA_KV)],
         conf={"spark.openlineage.dataset.removePath.pattern": "(?<remove>/src|_v2)$"}),
    Case("no_dataset_name_in_job_name_and_no_schema_facet", SRC,
         "spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/out/x')",
         [W], [Ds("file", "{tmp}/in/src")], [Ds("file", "{tmp}/out/x")],
         conf={"spark.openlineage.jobName.appendDatasetName": "false",
               "spark.openlineage.facets.schema.disabled": "true"}),
    # --- session catalog tables ----------------------------------------------------------------
    Case("create_table", "", "spark.sql('create table t_{id} (a string, b string) using parquet')",
         ["execute_create_data_source_table_command.default_t_{id}"], [],
         [table("t_{id}", ("a:string", "b:string"), "CREATE")],
         sql=on_spark_3("create table t_{id} (a string, b string) using parquet")),
    Case("ctas_from_values_has_no_input", "",
         "spark.sql('create table t_{id} using parquet as select * from values (1, 2) as v(a, b)')",
         [f"{W}.warehouse_t_{{id}}", "execute_create_data_source_table_as_select_command.default_t_{id}"],
         [], [table("t_{id}", ("a:integer", "b:integer"), "CREATE")],
         sql="create table t_{id} using parquet as select * from values (1, 2) as v(a, b)"),
    Case("insert_into_select", SRC + "; spark.sql('create table t_{id} (key int, value string) using parquet')",
         "spark.sql('insert into t_{id} select * from parquet.`{tmp}/in/src`')",
         [f"{W}.warehouse_t_{{id}}"], [SRC_DS], [table("t_{id}")],
         sql="insert into t_{id} select * from parquet.`{tmp}/in/src`", row_count=2),
    Case("insert_overwrite_values", "spark.sql('create table t_{id} (key int, value string) using parquet')",
         "spark.sql(\"insert overwrite t_{id} values (1, 'x')\")",
         [f"{W}.warehouse_t_{{id}}"], [], [table("t_{id}", lifecycle="OVERWRITE")],
         sql="insert overwrite t_{id} values (1, 'x')", row_count=1),
    Case("read_table_write_file", "spark.sql(\"create table t_{id} using parquet as select 1 key, 'a' value\")",
         "spark.table('t_{id}').write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [table("t_{id}")], [Ds("file", "{tmp}/out/x", SCHEMA_KV)]),
    Case("truncate", "spark.sql(\"create table t_{id} using parquet as select 1 key, 'a' value\")",
         "spark.sql('truncate table t_{id}')",
         ["execute_truncate_table_command.warehouse_t_{id}"], [], [table("t_{id}", None, "TRUNCATE")],
         sql="truncate table t_{id}"),
    Case("alter_add_columns", "spark.sql('create table t_{id} (a string, b string) using parquet')",
         "spark.sql('alter table t_{id} add columns (c string, d string)')",
         ["execute_alter_table_add_columns_command"], [],
         [table("t_{id}", ("a:string", "b:string", "c:string", "d:string"), "ALTER")],
         sql="alter table t_{id} add columns (c string, d string)"),
    Case("drop_table", "spark.sql(\"create table t_{id} using parquet as select 1 key, 'a' value\")",
         "spark.sql('drop table t_{id}')",
         ["drop_table"], [], [table("t_{id}", None, "DROP")], sql="drop table t_{id}"),
    Case("insert_overwrite_directory", SRC + "; spark.read.parquet('{tmp}/in/src').createOrReplaceTempView('v_{id}')",
         "spark.sql(\"insert overwrite directory '{tmp}/out/d' using json select * from v_{id}\")",
         [f"{W}.out_d", "execute_insert_into_data_source_dir_command"], [SRC_DS],
         [Ds("file", "{tmp}/out/d", SCHEMA_KV, "OVERWRITE")],
         sql="insert overwrite directory '{tmp}/out/d' using json select * from v_{id}"),
    # --- JDBC (Derby from pyspark's jars) ------------------------------------------------------
    Case("jdbc_write", "spark.createDataFrame([(1, 'a')], 'K int, V string').write.parquet('{tmp}/in/src')",
         "spark.read.parquet('{tmp}/in/src').write.jdbc('{url}', 'T1', properties=DERBY)",
         ["deserialize_to_object", "execute_save_into_data_source_command.T1"],
         [Ds("file", "{tmp}/in/src", ("K:integer", "V:string"))],
         [Ds("file:{tmp}/db", "T1", ("K:integer", "V:string"), "CREATE")]),
    Case("jdbc_read_table",
         "spark.createDataFrame([(1, 'a')], 'K int, V string').write.jdbc('{url}', 'T1', properties=DERBY)",
         "spark.read.jdbc('{url}', 'T1', properties=DERBY).write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file:{tmp}/db", "T1", ("K:integer", "V:string"))],
         [Ds("file", "{tmp}/out/x", ("K:integer", "V:string"))]),
    Case("jdbc_read_query",
         "spark.createDataFrame([(1, 'a')], 'K int, V string').write.jdbc('{url}', 'T1', properties=DERBY)",
         "spark.read.format('jdbc').option('url', '{url}').options(**DERBY)"
         ".option('query', 'select T1.K from APP.T1 join T1 T2 on T1.K = T2.K').load().write.parquet('{tmp}/out/x')",
         # several tables: each gets the columns the relation's fields come from (T2 is only joined on)
         [f"{W}.out_x"], [Ds("file:{tmp}/db", "APP.T1", ("K:integer",)), Ds("file:{tmp}/db", "T1")],
         [Ds("file", "{tmp}/out/x", ("K:integer",))]),
    Case("jdbc_read_query_column_lineage",
         "spark.createDataFrame([(1, 'a')], 'K int, A string').write.jdbc('{url}', 'T1', properties=DERBY); "
         "spark.createDataFrame([(1, 'b')], 'K int, B string').write.jdbc('{url}', 'T2', properties=DERBY)",
         "spark.read.format('jdbc').option('url', '{url}').options(**DERBY).option('query', "
         "'select x.K, x.A || y.B as J from T1 x join T2 y on x.K = y.K').load().write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"],
         [Ds("file:{tmp}/db", "T1", ("K:integer", "A:string")), Ds("file:{tmp}/db", "T2", ("B:string",))],
         [Ds("file", "{tmp}/out/x", ("K:integer", "J:string"))]),
    Case("jdbc_read_subquery_dbtable",
         "spark.createDataFrame([(1, 'a')], 'K int, V string').write.jdbc('{url}', 'T1', properties=DERBY)",
         "spark.read.jdbc('{url}', '(select K from T1 where K > 0) q', properties=DERBY).write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file:{tmp}/db", "T1", ("K:integer",))], [Ds("file", "{tmp}/out/x", ("K:integer",))]),
    # --- DataSource V2: the JDBC table catalog and the V2 file sources ---------------------------
    Case("v2_create_table_as_select",
         "spark.createDataFrame([(1, 'a')], 'K int, V string').write.parquet('{tmp}/in/src')",
         "spark.sql('create table {cat}.APP.T2 as select * from parquet.`{tmp}/in/src`')",
         ["deserialize_to_object", "append_data_exec_v1.{cat}_APP_T2", "create_table_as_select.APP_T2"],
         [Ds("file", "{tmp}/in/src", ("K:integer", "V:string"))],
         [Ds("file:{tmp}/db", "APP.T2", ("K:integer", "V:string"), "CREATE")],
         sql="create table {cat}.APP.T2 as select * from parquet.`{tmp}/in/src`"),
    Case("v2_append_data",
         "spark.sql('create table {cat}.APP.T2 (K int, V string)'); "
         "spark.createDataFrame([(1, 'a')], 'K int, V string').write.parquet('{tmp}/in/src')",
         "spark.read.parquet('{tmp}/in/src').writeTo('{cat}.APP.T2').append()",
         ["deserialize_to_object", "append_data_exec_v1.{cat}_APP_T2"],
         [Ds("file", "{tmp}/in/src", ("K:integer", "V:string"))],
         [Ds("file:{tmp}/db", "APP.T2", ("K:integer", "V:string"))]),
    Case("v2_overwrite_by_expression",
         "spark.sql('create table {cat}.APP.T1 (K int, V string)'); "
         "spark.sql('create table {cat}.APP.T2 (K int, V string)')",
         "spark.sql('insert overwrite {cat}.APP.T2 select * from {cat}.APP.T1')",
         ["deserialize_to_object", "overwrite_by_expression_exec_v1." + ("{cat}_" if SPARK_4 else "") + "APP_T2"],
         [Ds("file:{tmp}/db", "APP.T1", ("K:integer", "V:string"))],
         [Ds("file:{tmp}/db", "APP.T2", ("K:integer", "V:string"), "OVERWRITE")],
         sql="insert overwrite {cat}.APP.T2 select * from {cat}.APP.T1"),
    Case("v2_create_table", "", "spark.sql('create table {cat}.APP.T3 (A int)')",
         ["create_table.APP_T3"], [], [Ds("file:{tmp}/db", "APP.T3", ("A:integer",), "CREATE")],
         sql="create table {cat}.APP.T3 (A int)"),  # on Spark 4 on a node below the root, as the JVM finds it
    Case("v2_drop_table", "spark.sql('create table {cat}.APP.T3 (A int)')", "spark.sql('drop table {cat}.APP.T3')",
         ["drop_table"], [], [Ds("file:{tmp}/db", "APP.T3", None, "DROP")], sql="drop table {cat}.APP.T3"),
    Case("v2_read", "spark.sql('create table {cat}.APP.T2 (K int, V string)')",
         "spark.table('{cat}.APP.T2').write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file:{tmp}/db", "APP.T2", ("K:integer", "V:string"))],
         [Ds("file", "{tmp}/out/x", ("K:integer", "V:string"))]),
    Case("v2_file_source_read", SRC + "; spark.conf.set('spark.sql.sources.useV1SourceList', '')",
         "spark.read.parquet('{tmp}/in/src').filter('key > 0').collect()",
         ["filter"], [SRC_DS], []),
]

HIVE_CASES = [
    Case("hive_create_serde_table", "", "spark.sql('create table h_{id} (a int, b string) stored as textfile')",
         ["execute_create_table_command.hive_warehouse_h_{id}"], [],
         [Ds("file", "{wh}/h_{id}", ("a:integer", "b:string"), "CREATE", ("file:{wh}", "default.h_{id}"))],
         sql=on_spark_3("create table h_{id} (a int, b string) stored as textfile")),
    Case("hive_insert_overwrite_serde_table",
         "spark.sql('create table h_{id} (a int, b string) stored as textfile'); "
         "spark.sql(\"create table s_{id} stored as parquet as select 1 a, 'x' b\")",
         "spark.sql('insert overwrite table h_{id} select * from s_{id}')",
         ["execute_insert_into_hive_table.hive_warehouse_h_{id}"],
         [Ds("file", "{wh}/s_{id}", ("a:integer", "b:string"), None, ("file:{wh}", "default.s_{id}"))],
         [Ds("file", "{wh}/h_{id}", ("a:integer", "b:string"), "OVERWRITE", ("file:{wh}", "default.h_{id}"))],
         sql="insert overwrite table h_{id} select * from s_{id}", row_count=1),
    Case("hive_read_serde_table",
         "spark.sql(\"create table h_{id} stored as textfile as select 1 a, 'x' b\")",
         "spark.table('h_{id}').write.parquet('{tmp}/out/x')",
         [f"{W}.out_x"], [Ds("file", "{wh}/h_{id}", ("a:integer", "b:string"), None, ("file:{wh}", "default.h_{id}"))],
         [Ds("file", "{tmp}/out/x", ("a:integer", "b:string"))]),
    Case("hive_ctas", "spark.sql(\"create table s_{id} stored as textfile as select 1 a, 'x' b\")",
         "spark.sql('create table h_{id} stored as textfile as select * from s_{id}')",
         ["execute_insert_into_hive_table.hive_warehouse_h_{id}",
          "execute_create_hive_table_as_select_command.default_h_{id}"],
         [Ds("file", "{wh}/s_{id}", ("a:integer", "b:string"), None, ("file:{wh}", "default.s_{id}"))],
         [Ds("file", "{wh}/h_{id}", ("a:integer", "b:string"), "CREATE", ("file:{wh}", "default.h_{id}"))],
         sql="create table h_{id} stored as textfile as select * from s_{id}"),
    Case("hive_rename", "spark.sql('create table h_{id} (a int) stored as textfile')",
         "spark.sql('alter table h_{id} rename to r_{id}')",
         ["execute_alter_table_rename_command"], [],
         [Ds("file", "{wh}/r_{id}", ("a:integer",), "RENAME", ("file:{wh}", "default.r_{id}"),
             ("file", "{wh}/h_{id}"))],
         sql="alter table h_{id} rename to r_{id}"),
    Case("hive_drop", "spark.sql('create table h_{id} (a int) stored as textfile')", "spark.sql('drop table h_{id}')",
         ["drop_table"], [], [Ds("file", "{wh}/h_{id}", None, "DROP", ("file:{wh}", "default.h_{id}"))],
         sql="drop table h_{id}"),
    Case("hive_load_data", "spark.sql('create table h_{id} (a int) stored as textfile'); "
         "open('{tmp}/in.txt', 'w').write('1\\n')",
         "spark.sql(\"load data local inpath '{tmp}/in.txt' into table h_{id}\")",
         ["execute_load_data_command.default_h_{id}"], [Ds("file", "{tmp}/in.txt")],
         [Ds("file", "{wh}/h_{id}", ("a:integer",), None, ("file:{wh}", "default.h_{id}"))],
         sql="load data local inpath '{tmp}/in.txt' into table h_{id}"),
    Case("hive_insert_overwrite_local_directory",
         "spark.sql(\"create table s_{id} stored as textfile as select 1 a, 'x' b\")",
         "spark.sql(\"insert overwrite local directory '{tmp}/out/d' stored as textfile select * from s_{id}\")",
         ["execute_insert_into_hive_dir_command.out_d"],
         [Ds("file", "{wh}/s_{id}", ("a:integer", "b:string"), None, ("file:{wh}", "default.s_{id}"))],
         [Ds("file", "{tmp}/out/d", ("a:integer", "b:string"), "OVERWRITE")],
         sql="insert overwrite local directory '{tmp}/out/d' stored as textfile select * from s_{id}"),
]


def _type(field: Any) -> str:
    nested = getattr(field, "fields", None)
    if nested:
        return f"{field.type}(" + ",".join(f"{n.name}:{_type(n)}" for n in nested) + ")"
    return field.type


def _seen(dataset: Any) -> Ds:
    facets = dataset.facets
    schema = facets.get("schema")
    lifecycle = facets.get("lifecycleStateChange")
    symlinks = facets.get("symlinks")
    assert facets["dataSource"].name == facets["dataSource"].uri == dataset.namespace
    return Ds(
        dataset.namespace,
        dataset.name,
        tuple(f"{x.name}:{_type(x)}" for x in schema.fields) if schema else None,
        lifecycle.lifecycleStateChange.value if lifecycle else None,
        (symlinks.identifiers[0].namespace, symlinks.identifiers[0].name) if symlinks else None,
        (previous.namespace, previous.name) if (previous := lifecycle and lifecycle.previousIdentifier) else None,
    )


def _filler(sub: dict[str, str]) -> Any:
    """A function filling the placeholders of ``sub`` into strings, also inside tuples, lists and Ds/Run rows."""

    def fill(text: Any) -> Any:
        if isinstance(text, str):
            for key, value in sub.items():
                text = text.replace(key, value)
            return text
        if isinstance(text, (Ds, Run)):
            return type(text)(*(fill(t) for t in text))
        if isinstance(text, (tuple, list)):
            return type(text)(fill(t) for t in text)
        return text

    return fill


def _run(session: Any, capture: Any, case: Case, tmp: str, wh: str) -> None:
    ident = case.id.replace("-", "_")
    sub = {"{tmp}": tmp, "{wh}": wh, "{id}": ident, "{url}": f"jdbc:derby:{tmp}/db;create=true", "{cat}": f"c_{ident}"}
    fill = _filler(sub)

    session.conf.set(f"spark.sql.catalog.c_{ident}",
                     "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog")
    session.conf.set(f"spark.sql.catalog.c_{ident}.url", sub["{url}"])
    session.conf.set(f"spark.sql.catalog.c_{ident}.driver", DERBY["driver"])
    env = {"spark": session, "DERBY": DERBY}
    try:
        if case.setup:
            exec(fill(case.setup), env)
        calls = capture.run(lambda: exec(fill(case.action), env))
        results = [action_lineage(qe, case.conf, func_name=name) for name, qe in calls]
    finally:
        session.conf.unset("spark.sql.sources.useV1SourceList")

    assert [r.job_suffix if r else None for r in results] == [fill(j) for j in case.jobs]
    last = results[-1]
    if last is None:
        return
    assert [_seen(d) for d in last.inputs] == [fill(d) for d in case.inputs]
    assert [_seen(d) for d in last.outputs] == [fill(d) for d in case.outputs]
    assert last.sql == fill(case.sql)
    assert last.processing_type == "BATCH"
    if case.row_count is not None:
        stats = last.outputs[0].io_facets["outputStatistics"]
        assert (stats.rowCount, stats.size > 0, stats.fileCount > 0) == (case.row_count, True, True)


def _warehouse(session: Any) -> str:
    return session.conf.get("spark.sql.warehouse.dir").removeprefix("file:")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_action_lineage(spark, qe_capture, workdir, case):
    _run(spark, qe_capture, case, workdir, _warehouse(spark))


@pytest.mark.parametrize("case", HIVE_CASES, ids=[c.id for c in HIVE_CASES])
def test_action_lineage_hive_catalog(hive_spark, hive_qe_capture, workdir, case):
    _run(hive_spark, hive_qe_capture, case, workdir, _warehouse(hive_spark))


# --- nested executions (Spark 3.4+): one run per SQL execution, as the JVM integration ---------------------------


class Run(NamedTuple):
    """One SQL execution of an action, as our lineage (and the JVM's) reports it: the job name part, inputs,
    outputs (symlink and lifecycleStateChange included)."""

    job: str
    inputs: list[Ds]
    outputs: list[Ds]


class Nested(NamedTuple):
    id: str
    hive: bool  # the Hive session (``{wh}`` its warehouse) or the in-memory one
    setup: str
    action: str
    runs: list[Run]  # every execution the action ran, in the order the listener reports them (inner first)


CTAS = "execute_create_data_source_table_as_select_command"
HIVE_CTAS = "execute_create_hive_table_as_select_command"
HIVE_INSERT = "execute_insert_into_hive_table"
#: Spark 4 runs saveAsTable as SaveAsV1TableCommand around the CTAS: the JVM names it by its command alone
#: (it has no visitor, and the command is a leaf: no inputs either) and so do we.
SAVE_AS_V1 = [Run("execute_save_as_v1_table_command", [], [])] if SPARK_4 else []
KV_SRC = "spark.createDataFrame([(1, 'a')], 'key int, value string')"


NESTED_CASES = [
    # the inner insert writes the table's default location before the table exists (no catalogTable): the
    # JVM names its run by path and gives no symlink; we name it the same and add the table's symlink
    Nested("ctas", False, SRC, "spark.sql('create table t_{id} using parquet as select * from parquet.`{tmp}/in/src`')",
           [Run(f"{W}.warehouse_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="OVERWRITE")]),
            Run(f"{CTAS}.default_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="CREATE")])]),
    Nested("save_as_table", False, SRC, "spark.read.parquet('{tmp}/in/src').write.saveAsTable('t_{id}')",
           [Run(f"{W}.warehouse_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="OVERWRITE")]),
            Run(f"{CTAS}.default_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="CREATE")]), *SAVE_AS_V1]),
    # overwrite drops the table and runs a CTAS: again no catalogTable on the insert
    Nested("save_as_table_overwrite", False, SRC + "; spark.read.parquet('{tmp}/in/src').write.saveAsTable('t_{id}')",
           "spark.read.parquet('{tmp}/in/src').write.mode('overwrite').saveAsTable('t_{id}')",
           [Run(f"{W}.warehouse_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="OVERWRITE")]),
            Run(f"{CTAS}.default_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="CREATE")]), *SAVE_AS_V1]),
    # append into an existing table: Spark gives the insert the table; the CTAS says CREATE (as the JVM's visitor)
    Nested("save_as_table_append", False, SRC + "; spark.read.parquet('{tmp}/in/src').write.saveAsTable('t_{id}')",
           "spark.read.parquet('{tmp}/in/src').write.mode('append').saveAsTable('t_{id}')",
           [Run(f"{W}.warehouse_t_{{id}}", [SRC_DS], [table("t_{id}")]),
            Run(f"{CTAS}.default_t_{{id}}", [SRC_DS], [table("t_{id}", lifecycle="CREATE")]), *SAVE_AS_V1]),
    Nested("ctas_in_a_database", False, SRC + "; spark.sql('create database d_{id}')",
           "spark.sql('create table d_{id}.t using parquet as select * from parquet.`{tmp}/in/src`')",
           [Run(f"{W}.d_{{id}}_db_t", [SRC_DS],
                [Ds("file", "{wh}/d_{id}.db/t", SCHEMA_KV, "OVERWRITE", ("file:{wh}", "d_{id}.t"))]),
            Run(f"{CTAS}.d_{{id}}_t", [SRC_DS],
                [Ds("file", "{wh}/d_{id}.db/t", SCHEMA_KV, "CREATE", ("file:{wh}", "d_{id}.t"))])]),
    # a table outside the warehouse has no symlink (as the JVM's PathUtils), nested or not
    Nested("ctas_with_a_location", False, SRC,
           "spark.sql(\"create table t_{id} using parquet location '{tmp}/ext' "
           "as select * from parquet.`{tmp}/in/src`\")",
           [Run(f"{W}.{{leaf}}_ext", [SRC_DS], [Ds("file", "{tmp}/ext", SCHEMA_KV, "OVERWRITE")]),
            Run(f"{CTAS}.default_t_{{id}}", [SRC_DS], [Ds("file", "{tmp}/ext", SCHEMA_KV, "CREATE")])]),
    # not nested: one run, the table's symlink and OVERWRITE
    Nested("insert_overwrite_table", False, "spark.sql('create table t_{id} (key int, value string) using parquet')",
           "spark.sql(\"insert overwrite t_{id} values (1, 'x')\")",
           [Run(f"{W}.warehouse_t_{{id}}", [], [table("t_{id}", lifecycle="OVERWRITE")])]),
    # a path written into the default location of a table that is not there (yet) is that table's location
    Nested("path_write_into_the_warehouse", False, "", KV_SRC + ".write.parquet('{wh}/p_{id}')",
           [Run(f"{W}.warehouse_p_{{id}}", [], [table("p_{id}")])]),
    # ... but not in the folder of a database that keeps its tables elsewhere
    Nested("path_write_into_a_relocated_database_folder", False,
           "spark.sql(\"create database d_{id} location '{tmp}/dbs/d'\")",
           KV_SRC + ".write.parquet('{wh}/d_{id}.db/p')",
           [Run(f"{W}.d_{{id}}_db_p", [], [Ds("file", "{wh}/d_{id}.db/p", SCHEMA_KV)])]),
    # --- the Hive session: Hive serde CTAS runs InsertIntoHiveTable (the table exists by then: symlink, no state)
    Nested("hive_ctas", True, "spark.sql(\"create table s_{id} using parquet as select 1 key, 'a' value\")",
           "spark.sql('create table h_{id} stored as textfile as select * from s_{id}')",
           [Run(f"{HIVE_INSERT}.hive_warehouse_h_{{id}}", [table("s_{id}")], [table("h_{id}")]),
            Run(f"{HIVE_CTAS}.default_h_{{id}}", [table("s_{id}")], [table("h_{id}", lifecycle="CREATE")])]),
    # stored as parquet: Spark converts the insert to a data source one, with the table
    Nested("hive_ctas_converted_to_a_datasource_insert", True,
           "spark.sql(\"create table s_{id} using parquet as select 1 key, 'a' value\")",
           "spark.sql('create table h_{id} stored as parquet as select * from s_{id}')",
           [Run(f"{W}.hive_warehouse_h_{{id}}", [table("s_{id}")], [table("h_{id}")]),
            Run(f"{HIVE_CTAS}.default_h_{{id}}", [table("s_{id}")], [table("h_{id}", lifecycle="CREATE")])]),
    Nested("hive_save_as_table_overwrite", True,
           "spark.sql(\"create table s_{id} using parquet as select 1 key, 'a' value\"); "
           "spark.table('s_{id}').write.format('hive').saveAsTable('h_{id}')",
           "spark.table('s_{id}').write.mode('overwrite').format('hive').saveAsTable('h_{id}')",
           [Run(f"{HIVE_INSERT}.hive_warehouse_h_{{id}}", [table("s_{id}")], [table("h_{id}")]),
            Run(f"{HIVE_CTAS}.default_h_{{id}}", [table("s_{id}")], [table("h_{id}", lifecycle="CREATE")]),
            *SAVE_AS_V1]),
    Nested("hive_session_datasource_save_as_table", True, "",
           KV_SRC + ".write.saveAsTable('h_{id}')",
           [Run(f"{W}.hive_warehouse_h_{{id}}", [], [table("h_{id}", lifecycle="OVERWRITE")]),
            Run(f"{CTAS}.default_h_{{id}}", [], [table("h_{id}", lifecycle="CREATE")]), *SAVE_AS_V1]),
]


@pytest.mark.parametrize("case", NESTED_CASES, ids=[c.id for c in NESTED_CASES])
def test_nested_executions(request, workdir, case):
    """Every execution of an action (inner inserts of CTAS and saveAsTable too): its job name part and its
    datasets, symlinks and lifecycle states included."""
    session = request.getfixturevalue("hive_spark" if case.hive else "spark")
    capture = request.getfixturevalue("hive_qe_capture" if case.hive else "qe_capture")
    ident = f"n_{case.id}"
    fill = _filler({"{tmp}": workdir, "{wh}": _warehouse(session), "{id}": ident,
                    "{leaf}": workdir.rsplit("/", 1)[-1]})
    env = {"spark": session}
    if case.setup:
        exec(fill(case.setup), env)
    calls = capture.run(lambda: exec(fill(case.action), env))
    results = [action_lineage(qe, {}, func_name=name) for name, qe in calls]
    seen = [Run(r.job_suffix, [_seen(d) for d in r.inputs], [_seen(d) for d in r.outputs]) if r else None
            for r in results]
    assert seen == fill(case.runs)


# --- the dataset `catalog` facet ------------------------------------------------------------------------

# (id, Hive session?, setup statements, action statement, conf, catalog facet of each input, of each output of
# the last action: "hive" = the Hive catalog facet, "hive://..." = the same with that metadataUri, None = none).
# As the JVM: Hive-only nodes always carry it, commands building from a CatalogTable only in a Hive session,
# LogicalRelation reads and InsertIntoHadoopFsRelationCommand never.
CATALOG_CASES = [
    ("hive_serde_ctas", True, ["create table s_{id} stored as textfile as select 1 a"],
     "create table t_{id} stored as textfile as select * from s_{id}", {}, ["hive"], ["hive"]),
    ("datasource_ctas", True, ["create table s_{id} using parquet as select 1 a"],
     "create table t_{id} using parquet as select * from s_{id}", {}, [None], ["hive"]),
    ("insert_into_datasource_table", True,
     ["create table s_{id} using parquet as select 1 a", "create table t_{id} (a int) using parquet"],
     "insert into t_{id} select * from s_{id}", {}, [None], [None]),
    ("create_table", True, [], "create table t_{id} (a int) using parquet", {}, [], ["hive"]),
    ("truncate_table", True, ["create table t_{id} (a int) using parquet"], "truncate table t_{id}", {}, [], ["hive"]),
    ("hive_directory", True, ["create table s_{id} using parquet as select 1 a"],
     "insert overwrite local directory '{tmp}/d' stored as textfile select * from s_{id}", {}, [None], ["hive"]),
    ("datasource_directory", True, ["create table s_{id} using parquet as select 1 a"],
     "insert overwrite local directory '{tmp}/d' using parquet select * from s_{id}", {}, [None], [None]),
    ("metastore_uri", True, [], "create table t_{id} (a int) using parquet",
     {"spark.sql.hive.metastore.uris": "thrift://ms.example:9083"}, [], ["hive://ms.example:9083"]),
    ("disabled", True, [], "create table t_{id} (a int) using parquet",
     {"spark.openlineage.facets.catalog.disabled": "true"}, [], [None]),
    ("in_memory_catalog", False, ["create table s_{id} using parquet as select 1 a"],
     "create table t_{id} using parquet as select * from s_{id}", {}, [None], [None]),
]


@pytest.mark.parametrize("name,hive,setup,action,conf,inputs,outputs", CATALOG_CASES, ids=[c[0] for c in CATALOG_CASES])
def test_catalog_facet(request, workdir, name, hive, setup, action, conf, inputs, outputs):
    session = request.getfixturevalue("hive_spark" if hive else "spark")
    capture = request.getfixturevalue("hive_qe_capture" if hive else "qe_capture")
    warehouse = f"file:{_warehouse(session)}".rstrip("/")

    def fill(text: str) -> str:
        return text.replace("{id}", f"catalog_{name}").replace("{tmp}", workdir)

    def expected(kind: str | None) -> dict[str, Any] | None:
        if kind is None:
            return None
        return {"framework": "hive", "type": "hive", "name": "default", "source": "spark", "warehouseUri": warehouse,
                "metadataUri": kind if kind.startswith("hive://") else None, "catalogProperties": None}

    def seen(dataset: Any) -> dict[str, Any] | None:
        facet = dataset.facets.get("catalog")
        return None if facet is None else {k: getattr(facet, k) for k in (
            "framework", "type", "name", "source", "warehouseUri", "metadataUri", "catalogProperties")}

    try:
        for statement in setup:
            session.sql(fill(statement))
        calls = capture.run(lambda: session.sql(fill(action)))
        last = action_lineage(calls[-1][1], conf, func_name=calls[-1][0])
    finally:
        for table in ("s", "t"):
            session.sql(f"drop table if exists {table}_catalog_{name}")
    assert [seen(d) for d in last.inputs] == [expected(k) for k in inputs]
    assert [seen(d) for d in last.outputs] == [expected(k) for k in outputs]


class _UnwritablePlan:
    """A plan whose ``toJSON()`` fails inside the JVM with an exception PySpark's handler converts into its own
    class, as ml's KMeans plans fail on Spark 4 (a SparkRuntimeException: Spark cannot write some Scala reflection
    types)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def toJSON(self) -> str:  # noqa: N802 (JVM name)
        self.spark.sql("SELECT * FROM lineage_capture_no_such_table")  # an exception PySpark converts (3.5 and 4)
        raise AssertionError("the query did not fail")

    def getClass(self) -> Any:  # noqa: N802 (JVM name)
        return self.spark._jvm.java.lang.Object().getClass()


class _QueryExecution:
    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def optimizedPlan(self) -> Any:  # noqa: N802 (JVM name)
        return self.plan


def test_a_plan_spark_cannot_write_is_named_without_datasets(spark):
    from pyspark.errors import PySparkException

    from spark_plugin.plan_lineage import read_plan

    with pytest.raises(PySparkException):  # the converted exception, not py4j's Py4JJavaError
        _UnwritablePlan(spark).toJSON()
    read = read_plan(_QueryExecution(_UnwritablePlan(spark)), "collect")
    assert (read.json, read.root.cls, read.root.children) == (None, "java.lang.Object", ())


def test_an_actions_end_reads_its_file_relations_no_more(spark, qe_capture, workdir, monkeypatch):
    """The end of an action takes the datasets of its file relations from its START's read of the same plan
    (~9 py4j calls a relation: 1,350 for a union of 150 reads): the same datasets, statistics included."""
    from spark_plugin import plan_lineage

    for i in range(3):
        spark.range(2).selectExpr("id", f"{i} AS part").write.parquet(f"{workdir}/in/p{i}")
    parts = [spark.read.parquet(f"{workdir}/in/p{i}") for i in range(3)]
    union = parts[0].unionByName(parts[1]).unionByName(parts[2])
    [(name, qe)] = qe_capture.run(lambda: union.write.parquet(f"{workdir}/out"))
    reads = []
    handler = plan_lineage.INPUT_HANDLERS["LogicalRelation"]
    monkeypatch.setitem(plan_lineage.INPUT_HANDLERS, "LogicalRelation",
                        lambda ctx, node: reads.append(node) or handler(ctx, node))
    start = action_lineage(qe, {}, func_name=name)
    end = action_lineage(qe, {}, func_name=name, plan=start.plan)
    assert len(reads) == 3  # the START's three, none at the end
    assert [(d.name, d.io_facets) for d in end.inputs] == [(d.name, d.io_facets) for d in start.inputs]
    assert sorted(d.name for d in end.inputs) == [f"{workdir}/in/p{i}" for i in range(3)]
    assert all("inputStatistics" in d.io_facets for d in end.inputs)


class _PlanJsonSpy:
    """A QueryExecution whose optimized plan counts its ``toJSON()`` calls (the rest goes to the JVM object)."""

    def __init__(self, obj: Any, calls: list[str]) -> None:
        self.obj, self.calls = obj, calls

    def optimizedPlan(self) -> Any:
        return _PlanJsonSpy(self.obj.optimizedPlan(), self.calls)

    def toJSON(self) -> str:
        self.calls.append("toJSON")
        return self.obj.toJSON()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.obj, name)


AGGREGATE = "org.apache.spark.sql.catalyst.plans.logical.Aggregate"
INSERT_FILES = "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand"


@pytest.mark.parametrize("action,conf,job,serialized", [
    ("spark.read.parquet('{tmp}/in/src').count()", {}, None, 0),
    ("spark.read.parquet('{tmp}/in/src').select('key').collect()", {}, None, 0),
    ("spark.sql('SHOW TABLES')", {}, None, 0),
    ("spark.read.parquet('{tmp}/in/src').filter('key > 1').collect()", {}, "filter", 1),
    ("spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/out/s')", {}, "execute_insert_into_hadoop_fs_relation_"
     "command.out_s", 1),
    ("spark.read.parquet('{tmp}/in/src').count()", {"spark.openlineage.filter.allowedSparkNodes": f"[{AGGREGATE}]"},
     "hash_aggregate", 1),
    ("spark.read.parquet('{tmp}/in/src').write.parquet('{tmp}/out/d')",
     {"spark.openlineage.filter.deniedSparkNodes": f"[{INSERT_FILES}]"}, None, 0),
])
def test_an_action_the_jvm_integration_does_not_emit_is_not_serialized(spark, qe_capture, workdir, action, conf, job,
                                                                        serialized):
    """count(), collect() of a projection, SHOW TABLES: their plan's toJSON() (~2 ms of the JVM, and Scala
    reflection code the JIT compiles) is not paid for an action that is filtered out anyway."""
    fill = _filler({"{tmp}": workdir})
    exec(fill(SRC), {"spark": spark})
    [(name, qe)] = qe_capture.run(lambda: exec(fill(action), {"spark": spark}))
    calls: list[str] = []
    lineage = action_lineage(_PlanJsonSpy(qe, calls), conf, func_name=name)
    assert (lineage.job_suffix if lineage else None, len(calls)) == (job, serialized)


class _Counting:
    """A JVM object whose method calls (and those of the objects they return) are counted by name."""

    def __init__(self, obj: Any, calls: dict[str, int]) -> None:
        self.obj, self._calls = obj, calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.obj, name)

        def call(*args: Any) -> Any:
            self._calls[name] = self._calls.get(name, 0) + 1
            return _Counting(method(*args), self._calls)
        return call


def test_the_relations_of_a_wide_union_are_reached_asking_the_union_for_its_children_once(spark, workdir):
    """A relation's JVM node is reached by path from the plan's root: the union of many reads asks its children
    sequence once, not once a relation (a py4j call, and a proxy to release, each)."""
    from spark_plugin import plan_tree

    for i in range(4):
        spark.range(2).selectExpr("id", f"{i} AS part").write.parquet(f"{workdir}/in/p{i}")
    parts = [spark.read.parquet(f"{workdir}/in/p{i}") for i in range(4)]
    union = parts[0].unionByName(parts[1]).unionByName(parts[2]).unionByName(parts[3])
    jplan = union._jdf.queryExecution().optimizedPlan()
    relations = [n for n in plan_tree.walk(plan_tree.parse_plan(jplan)) if n.name == "LogicalRelation"]
    calls: dict[str, int] = {}
    nodes = plan_tree.JvmNodes(_Counting(jplan, calls))
    assert [nodes.get(n.path).obj.nodeName() for n in relations] == ["LogicalRelation"] * 4
    parents = {n.path[:i] for n in relations for i in range(len(n.path)) if n.path[i][0] == "c"}
    assert calls == {"children": len(parents), "apply": len({n.path[:i + 1] for n in relations
                                                             for i in range(len(n.path))})}
    assert calls["children"] < 4


class _MetricsSpy:
    """An executed plan whose ``metrics()`` map records the calls made on it; ``text`` (when given) is what the
    map's ``toString()`` answers instead of its own text."""

    def __init__(self, plan: Any, calls: list[str], text: Callable[[str], str] | None = None) -> None:
        self.plan, self.calls, self.text = plan, calls, text

    def metrics(self) -> Any:
        self.calls.append("metrics")
        spy = self

        class Map:
            def toString(self) -> str:  # noqa: N802 - the JVM's name
                spy.calls.append("toString")
                own = spy.plan.metrics().toString()
                return spy.text(own) if spy.text else own

            def get(self, key: str) -> Any:
                spy.calls.append(f"get {key}")
                return spy.plan.metrics().get(key)
        return Map()


_ASKED = ["metrics", "toString", "get numOutputRows", "get numOutputBytes", "get numFiles"]


@pytest.mark.parametrize("text,calls", [
    (None, ["metrics", "toString"]),
    (lambda own: own.replace("SQLMetric(", "SQLMetricV9("), _ASKED),  # another form: each metric asked
    (lambda own: "SQLMetrics" + own, _ASKED),
    (lambda own: own.replace("value: ", "value: x", 1), _ASKED),  # one entry not understood: all asked
], ids=["its-text", "other-class", "other-prefix", "one-entry-unread"])
def test_a_writes_statistics_are_read_from_its_metrics_text(spark, qe_capture, workdir, text, calls):
    """rowCount/size/fileCount come from the map's text in one py4j call (not four a metric, each leaving proxies
    for py4j to release); a text not in the form Spark 3.5 / 4 give is not guessed at: each metric is asked."""
    from spark_plugin.plan_lineage import _executed_root, _output_statistics

    df = spark.range(30).repartition(3)
    [(_, qe)] = qe_capture.run(lambda: df.write.parquet(f"{workdir}/out"))
    executed, name = _executed_root(qe)
    size = int(executed.metrics().get("numOutputBytes").get().value())
    asked: list[str] = []
    stats = _output_statistics(_MetricsSpy(executed, asked, text))
    assert (name, stats, asked) == ("Execute InsertIntoHadoopFsRelationCommand",
                                    {"rowCount": 30, "size": size, "fileCount": 3}, calls)
    assert size > 0
