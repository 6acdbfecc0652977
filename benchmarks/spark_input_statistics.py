"""What reading ``inputStatistics`` costs per relation of a SQL action: the py4j calls of
``plan_inputs._file_statistics`` (a file relation: size and file count) and ``plan_inputs._catalog_statistics``
(a catalog table without and with statistics), against the whole ``action_lineage`` of the same one-input action.

    .venv/bin/python benchmarks/spark_input_statistics.py [--calls 300]

Runs in one local SparkSession (no spark-submit); prints microseconds per call (median of --calls).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _median_us(fn: Callable[[], Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from spark_plugin import plan_inputs, plan_tree
    from spark_plugin.plan_lineage import action_lineage

    root = tempfile.mkdtemp(prefix="input_stats_")
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.warehouse.dir", f"{root}/warehouse").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(1000).repartition(4).write.parquet(f"{root}/files")
    spark.range(1000).repartition(4).write.format("parquet").saveAsTable("plain")
    spark.range(1000).repartition(4).write.format("parquet").saveAsTable("analyzed")
    spark.sql("analyze table analyzed compute statistics")
    conf = dict(spark.sparkContext.getConf().getAll())

    def relation(df: Any) -> tuple[Any, dict]:
        jplan = df._jdf.queryExecution().optimizedPlan()
        node = next(n for n in plan_tree.walk(plan_tree.parse(json.loads(jplan.toJSON())))
                    if n.name == "LogicalRelation")
        return plan_tree.resolve(jplan, node.path), node.fields.get("catalogTable")

    jfiles, _ = relation(spark.read.parquet(f"{root}/files"))
    jplain, plain_json = relation(spark.table("plain"))
    janalyzed, analyzed_json = relation(spark.table("analyzed"))
    # the relation and the CatalogTable objects: the plugin has them already when it reads the statistics
    files_relation, plain_table, analyzed_table = (
        jfiles.relation(), jplain.catalogTable().get(), janalyzed.catalogTable().get())
    rows = {
        "file relation (size, fileCount)": lambda: plan_inputs._file_statistics(files_relation),
        "catalog table without statistics (size)": lambda: plan_inputs._catalog_statistics(
            jplain, plain_table, plain_json),
        "catalog table with statistics (size)": lambda: plan_inputs._catalog_statistics(
            janalyzed, analyzed_table, analyzed_json),
    }
    for name, fn in rows.items():
        print(f"{name}: {_median_us(fn, args.calls):.0f} us")
    write = spark.read.parquet(f"{root}/files").write.mode("overwrite").format("noop")
    captured: list[Any] = []

    class Listener:  # the QueryExecution of one write, to time action_lineage on
        def onSuccess(self, name: str, qe: Any, duration: int) -> None:  # noqa: N802 - Java's name
            captured.append(qe)

        def onFailure(self, name: str, qe: Any, exception: Any) -> None:  # noqa: N802 - Java's name
            pass

        class Java:
            implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    listener = Listener()
    spark._jsparkSession.listenerManager().register(listener)
    write.save()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(5000)
    spark._jsparkSession.listenerManager().unregister(listener)
    print(f"action_lineage of that one-input write: {_median_us(lambda: action_lineage(captured[0], conf), 30):.0f} us")
    spark.stop()


if __name__ == "__main__":
    main()
