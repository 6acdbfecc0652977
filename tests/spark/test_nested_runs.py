"""Nested executions (Spark 3.4+) through the whole plugin: instrument() on the shared local session, a CTAS or
saveAsTable, the events the file transport delivered (validated against the OpenLineage schemas).

Like the JVM integration, every SQL execution is its own run under the application run: the inner insert first
(it ends first), then the CTAS, then (Spark 4) saveAsTable's SaveAsV1TableCommand, which carries no datasets. Every
output that is a catalog table carries the table's symlink, the nested insert's too (the JVM gives that one none).
See the table in spark_plugin/plan_lineage.py (above DELEGATING_ROOTS) and NESTED_CASES in test_plan_lineage.py.
"""
from __future__ import annotations

from typing import Any

import pyspark
import pytest
from test_runtime import APP, run_captured

SPARK_4 = int(pyspark.__version__.split(".")[0]) >= 4

INSERT = f"{APP}.execute_insert_into_hadoop_fs_relation_command.warehouse_{{t}}"
CTAS = f"{APP}.execute_create_data_source_table_as_select_command.default_{{t}}"
SAVE_AS_V1 = f"{APP}.execute_save_as_v1_table_command"


def _ctas(spark: Any, workdir: str, table: str) -> None:
    spark.sql(f"create table {table} using parquet as select 1 as key, 'a' as value")


def _save_as_table_overwrite(spark: Any, workdir: str, table: str) -> None:
    spark.createDataFrame([(1, "a")], "key int, value string").write.mode("overwrite").saveAsTable(table)


# (id, action, per run in delivery order: (job name, event types, (symlink name, lifecycle) of each output))
CASES = [
    ("ctas", _ctas, [
        (INSERT, ["START", "RUNNING", "COMPLETE"], [("default.{t}", "OVERWRITE")]),
        (CTAS, ["START", "COMPLETE"], [("default.{t}", "CREATE")])]),
    ("save_as_table_overwrite", _save_as_table_overwrite, [
        (INSERT, ["START", "RUNNING", "COMPLETE"], [("default.{t}", "OVERWRITE")]),
        (CTAS, ["START", "COMPLETE"], [("default.{t}", "CREATE")]),
        *([(SAVE_AS_V1, ["START", "COMPLETE"], [])] if SPARK_4 else [])]),
]


@pytest.mark.parametrize("name,action,runs", CASES, ids=[c[0] for c in CASES])
def test_one_run_per_execution_with_the_tables_symlink(spark, workdir, name, action, runs):
    table = f"nested_{name}"
    events, _ = run_captured(spark, workdir, lambda s, w: action(s, w, table))
    app_run = events[0]["run"]["runId"]
    assert (events[0]["job"]["name"], events[-1]["job"]["name"]) == (APP, APP)
    seen: dict[str, tuple[str, list[str], list[tuple[str, str | None]]]] = {}
    for event in events[1:-1]:
        assert event["run"]["facets"]["parent"]["run"]["runId"] == app_run
        job, kinds, outputs = seen.setdefault(event["run"]["runId"], (event["job"]["name"], [], []))
        assert event["job"]["name"] == job  # one name per run
        kinds.append(event["eventType"])
        if event["eventType"] == "COMPLETE":
            outputs += [(o["facets"]["symlinks"]["identifiers"][0]["name"],
                         o["facets"].get("lifecycleStateChange", {}).get("lifecycleStateChange"))
                        for o in event["outputs"]]
    expected = [(job.format(t=table), kinds, [(s.format(t=table), lc) for s, lc in outputs])
                for job, kinds, outputs in runs]
    assert list(seen.values()) == expected
