"""Our own small equivalents of the PySpark scripts OpenLineage's JVM integration tests run (their
``integration/spark/app/src/test/resources/spark_scripts/*.py``): the same Spark operations, app names and
session settings, written here (not copied), under a root directory instead of ``/``.

``jvm_scripts.py <script> <root>``: their ``/tmp/...`` is ``<root>/tmp/...`` and their ``/test_data/...`` is
``<root>/test_data/...``. The application knows nothing about lineage: spark-submit's ``--conf`` does it all.
"""
import os
import sys
import time

from pyspark.sql import SparkSession


def session(app, warehouse=None, hive=False, **conf):
    builder = SparkSession.builder.appName(app) if app else SparkSession.builder
    if warehouse:
        builder = builder.config("spark.sql.warehouse.dir", warehouse)
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    if hive:
        builder = builder.enableHiveSupport()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def word_count(t, d):
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/data.txt", "w") as f:
        f.write("a b\nb c\na b\n")
    spark = session("Open Lineage Integration Word Count")
    spark.read.text(f"{d}/data.txt").groupBy("value").count().write.mode("overwrite").csv(f"{t}/test_data/test_output/")


def rdd_to_table(t, d):
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    spark = session("Spark rdd to table")
    rows = [(f"word{i} other{i}", i % 100 + 1) for i in range(100)]
    rdd = spark.sparkContext.parallelize(rows)
    rdd.setName("list of random words and numbers")
    csv_dir = f"{t}/test_data/rdd_to_csv_output/"
    rdd.map(lambda x: ",".join(str(i) for i in x)).saveAsTextFile(csv_dir)
    schema = StructType([StructField("name", StringType(), False), StructField("age", IntegerType(), False)])
    spark.read.option("header", False).schema(schema).csv(csv_dir).createOrReplaceTempView("test_people")
    spark.sql("SELECT * FROM test_people WHERE age > 20 AND age < 65").write.mode("overwrite").option(
        "compression", "none").parquet(f"{t}/test_data/rdd_to_table/")


def _hive_insert_select(app, t):
    os.makedirs(f"{t}/warehouse", exist_ok=True)
    spark = session(app, f"{t}/warehouse", hive=True)
    spark.sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive")
    spark.sql("CREATE TABLE IF NOT EXISTS target (key INT, value STRING) USING hive")
    spark.sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("INSERT INTO target SELECT * from test WHERE key > 1")


def hive(t, d):
    _hive_insert_select("Open Lineage Integration Hive", t)


def overwrite_appname(t, d):
    _hive_insert_select(None, t)  # no app name: the plugin's appName key names the job


def hadoop_fs_relation(t, d):
    os.makedirs(f"{t}/warehouse", exist_ok=True)
    spark = session("Open Lineage Integration HadoopFS relation", f"{t}/warehouse", hive=True)
    spark.sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING parquet")
    spark.sql("CREATE TABLE IF NOT EXISTS target (key INT, value STRING) USING parquet")
    spark.sql("INSERT INTO test VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("INSERT INTO target SELECT * from test WHERE key > 1")


def overwrite_hive(t, d):
    spark = session("Open Lineage Integration Overwrite Hive", f"{t}/overwrite", hive=True,
                    spark__openlineage__facets__spark_unknown__disabled="true",
                    spark__openlineage__facets__spark__logicalPlan__disabled="true")
    spark.sql("CREATE TABLE IF NOT EXISTS test (key INT, value STRING) USING hive")
    spark.sql(f"INSERT OVERWRITE DIRECTORY '{t}/overwrite/table' USING hive VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("SELECT count(*) from test")


def _two_rows_temp(spark):
    spark.createDataFrame([{"a": 1, "b": 2}, {"a": 3, "b": 4}]).write.option("compression", "none").saveAsTable("temp")


def ctas_load(t, d):
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/test_data.csv", "w") as f:
        f.write("5\x016\n")
    spark = session("Open Lineage Integration CTAS Load", f"{t}/ctas_load", hive=True)
    _two_rows_temp(spark)
    spark.sql(f"CREATE TABLE tbl1 USING hive LOCATION '{t}/ctas_load/tbl1' AS SELECT a, b FROM temp")
    spark.sql(f"LOAD DATA LOCAL INPATH '{d}/test_data.csv' INTO TABLE tbl1")


def octas_load(t, d):
    spark = session("Open Lineage Integration OCTAS Load", f"{t}/ctas_load", hive=True,
                    spark__sql__parquet__compression__codec="none")
    _two_rows_temp(spark)
    spark.sql(f"CREATE TABLE tbl2 STORED AS PARQUET LOCATION '{t}/ctas_load/tbl2' AS SELECT a, b FROM temp")


def cached(t, d):
    spark = session("Open Lineage In Memory Relation", f"{t}/caching", hive=True)
    _two_rows_temp(spark)
    table = spark.read.table("temp").cache()
    table.count()
    table.select("a").write.option("compression", "none").saveAsTable("target")


def _one_table(app, directory, *statements):
    spark = session(app, f"file:{directory}/", hive=True)
    for statement in statements:
        spark.sql(statement)


def create_table(t, d):
    _one_table("Open Lineage Integration Create Table", f"{t}/create_test",
               "CREATE TABLE create_table_test (a string, b string)")


def drop_table(t, d):
    _one_table("Open Lineage Integration Drop Table", f"{t}/drop_test",
               "CREATE TABLE drop_table_test (a string, b string)", "DROP TABLE drop_table_test")


def truncate_table(t, d):
    _one_table("Open Lineage Integration Truncate Table", f"{t}/truncate_test",
               "CREATE TABLE truncate_table_test (a string, b string)", "TRUNCATE TABLE truncate_table_test")


def alter_table(t, d):
    _one_table("Open Lineage Integration Alter Table", f"{t}/alter_test",
               "CREATE TABLE alter_table_test (a string, b string)",
               "ALTER TABLE alter_table_test ADD COLUMNS (c string, d string)",
               "ALTER TABLE alter_table_test RENAME TO alter_table_test_new")


def cll(t, d):
    _one_table("Open Lineage Integration Create Table", f"{t}/cll_test",
               "CREATE TABLE cll_source1 (a int, b string)", "CREATE TABLE cll_source2 (a int, c int)",
               f"CREATE TABLE tbl1 USING hive LOCATION '{t}/cll_test/tbl1' AS SELECT t1.a as ident, "
               "CONCAT(b, 'test') as trans, SUM(c) as agg FROM (SELECT a, c from cll_source2 where a > 1) t2 "
               "JOIN cll_source1 t1 on t1.a = t2.a GROUP BY t1.a, b")


def emit_metrics(t, d):
    spark = session("Open Lineage Integration Emit Metrics", f"file:{t}/emit_test/", hive=True,
                    spark__openlineage__facets__debug__disabled="false")
    spark.sql("CREATE TABLE create_table_emit_test (a string, b string)")


def rdd_with_parquet(t, d):
    spark = session("Open Lineage Integration RDD With Parquet")
    df = spark.createDataFrame([{"a": "x", "b": "z"}, {"a": "y", "b": "z"}])
    df.write.option("compression", "none").parquet(f"{t}/rdd_a")
    df.write.option("compression", "none").parquet(f"{t}/rdd_b")
    rdd_a, rdd_b = spark.read.parquet(f"{t}/rdd_a").rdd, spark.read.parquet(f"{t}/rdd_b").rdd
    os.makedirs(f"{t}/rdd_c/20251030", exist_ok=True)
    rdd_a.union(rdd_b).map(lambda x: (x["a"] + x["b"],)).toDF().write.mode("overwrite").parquet(f"{t}/rdd_c/20251030")


def single_input_rdd(t, d):
    spark = session("Open Lineage Integration single input RDD with input statistics")
    os.makedirs(f"{t}/rdd_input", exist_ok=True)
    with open(f"{t}/rdd_input/sample.txt", "w") as f:
        f.write("\n".join(["hello world", "hello pyspark rdd", "spark rdd transforms are fun", "hello again world"]))

    def slow(x):
        time.sleep(0.1)
        return x

    os.makedirs(f"{t}/rdd_output", exist_ok=True)
    spark.sparkContext.textFile(f"{t}/rdd_input").map(slow).saveAsTextFile(f"{t}/rdd_output/20251030")


def input_only_rdd(t, d):
    spark = session("Open Lineage Integration Input Only RDD")
    spark.createDataFrame([{"a": "x", "b": "z"}, {"a": "y", "b": "z"}]).write.option("compression", "none").parquet(
        f"{t}/input_rdd")
    rdd = spark.read.parquet(f"{t}/input_rdd").rdd
    rdd.map(lambda x: (x["a"] + x["b"],)).repartition(2)  # transformations only: no action, no job


SCRIPTS = {f.__name__: f for f in (word_count, rdd_to_table, hive, overwrite_appname, hadoop_fs_relation,
                                   overwrite_hive, ctas_load, octas_load, cached, create_table, drop_table,
                                   truncate_table, alter_table, cll, emit_metrics, rdd_with_parquet,
                                   single_input_rdd, input_only_rdd)}

if __name__ == "__main__":
    name, root = sys.argv[1], sys.argv[2]
    os.makedirs(f"{root}/tmp", exist_ok=True)
    SCRIPTS[name](f"{root}/tmp", f"{root}/test_data")
