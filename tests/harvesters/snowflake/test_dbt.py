"""dbt on Snowflake: dbt's JSON query comment makes the dbt node the task, named as openlineage-dbt names the
node's job, and the dbt invocation its parent when the comment carries ``invocation_id``.

openlineage-dbt (integration/common/openlineage/common/provider/dbt, ``_get_job_name`` and
``parse_execution``) names a model run ``{database}.{schema}.{node id without "model."}``, a snapshot
``... .snapshot``, and the invocation ``dbt-run-{project}``.
"""
from __future__ import annotations

import json

import pytest
from test_snowflake import AIRFLOW, NS, harvest, history, row

from harvesters.snowflake.history import dbt_job_name, row_from_mapping, task_of

INVOCATION = "4a7bd0c5-2f4e-4a59-9a39-0d3f1b2c5e61"
DEFAULT_COMMENT = {"app": "dbt", "dbt_version": "1.8.7", "profile_name": "jaffle", "target_name": "prod",
                   "node_id": "model.jaffle_shop.orders"}


def comment(**fields) -> str:
    return "/* " + json.dumps({**DEFAULT_COMMENT, **fields}) + " */\n"


CTAS = "create or replace transient table ANALYTICS.PUBLIC.orders as (select id, amount from RAW.PUBLIC.orders_raw)"


# expected: (job name, Airflow parent, dbt invocation parent as {job}/{runId})
@pytest.mark.parametrize("tag,text,database,schema,expected", [
    # dbt's default comment: the relation's database and schema are the query's (the target's)
    ("", comment() + CTAS, "ANALYTICS", "PUBLIC", ("ANALYTICS.PUBLIC.jaffle_shop.orders", None, None)),
    # a custom query-comment adds the node's relation and the invocation: that invocation is the parent
    ("", comment(node_database="analytics", node_schema="marts", invocation_id=INVOCATION.upper()) + CTAS,
     "ANALYTICS", "PUBLIC", ("analytics.marts.jaffle_shop.orders", None, f"dbt-run-jaffle_shop/{INVOCATION}")),
    # `query-comment: {append: true}`: the comment comes last
    ("", CTAS + "\n" + comment(), "ANALYTICS", "PUBLIC", ("ANALYTICS.PUBLIC.jaffle_shop.orders", None, None)),
    # a snapshot node
    ("", comment(node_id="snapshot.jaffle_shop.orders_snap") + "merge into X.Y.ORDERS_SNAP t using s on 1=1",
     "ANALYTICS", "SNAPSHOTS", ("ANALYTICS.SNAPSHOTS.jaffle_shop.orders_snap.snapshot", None, None)),
    # a model's query tag (dbt's `query_tag` config) is not the task: the node is; an Airflow parent in the tag
    # wins over the invocation
    (f"nightly openlineage_parent_id={AIRFLOW}", comment(invocation_id=INVOCATION) + CTAS, "ANALYTICS", "PUBLIC",
     ("ANALYTICS.PUBLIC.jaffle_shop.orders", AIRFLOW, None)),
    # an invocation_id that is not a UUID cannot be a run id: no parent
    ("", comment(invocation_id="latest") + CTAS, "ANALYTICS", "PUBLIC",
     ("ANALYTICS.PUBLIC.jaffle_shop.orders", None, None)),
    # a dbt JSON query tag (no comment)
    (json.dumps(DEFAULT_COMMENT), CTAS, "ANALYTICS", "PUBLIC", ("ANALYTICS.PUBLIC.jaffle_shop.orders", None, None)),
    # no database/schema known: the node part alone
    ("", comment() + CTAS, None, None, ("jaffle_shop.orders", None, None)),
    # JSON comments that are not dbt's change nothing
    ("etl", '/* {"app": "other", "node_id": "model.a.b"} */ ' + CTAS, "ANALYTICS", "PUBLIC", ("etl", None, None)),
    ("etl", "/* {node_id: not json} */ " + CTAS, "ANALYTICS", "PUBLIC", ("etl", None, None)),
])
def test_dbt_node_is_the_task(tag, text, database, schema, expected):
    values = {"QUERY_ID": "q", "QUERY_TEXT": text, "START_TIME": "2024-06-01T01:00:00Z", "QUERY_TAG": tag,
              "USER_NAME": "DBT", "WAREHOUSE_NAME": "TRANSFORMING", "DATABASE_NAME": database or "",
              "SCHEMA_NAME": schema or ""}
    found = task_of(row_from_mapping(values))
    assert (found.job_name or found.task, found.parent_id, found.dbt_parent) == expected
    assert found.root_parent_id is None


@pytest.mark.parametrize("node_id,database,schema,job", [
    ("model.proj.orders", "DB", "SCH", "DB.SCH.proj.orders"),
    ("snapshot.proj.snap", "DB", "SCH", "DB.SCH.proj.snap.snapshot"),
    ("seed.proj.countries", "DB", "SCH", "DB.SCH.seed.proj.countries"),  # other nodes keep their whole id
    ("model.proj.orders", None, "SCH", "proj.orders"),
])
def test_dbt_job_name(node_id, database, schema, job):
    assert dbt_job_name(node_id, database, schema) == job


def test_dbt_run_harvested_exact_events(tmp_path):
    """Two models of one dbt invocation (custom comment with invocation_id) and one of a default-comment run:
    each node is a task run named as openlineage-dbt names the model, its statements its children, the
    invocation the parent of both models' runs."""
    custom = comment(invocation_id=INVOCATION, node_database="ANALYTICS", node_schema="PUBLIC")
    rows = [
        row("q1", 0, custom + CTAS, QUERY_TAG="", USER_NAME="DBT", DATABASE_NAME="ANALYTICS"),
        row("q2", 1, comment(node_id="model.jaffle_shop.customers", invocation_id=INVOCATION,
                             node_database="ANALYTICS", node_schema="PUBLIC")
            + "create or replace view ANALYTICS.PUBLIC.customers as (select id from ANALYTICS.PUBLIC.orders)",
            QUERY_TAG="", USER_NAME="DBT", DATABASE_NAME="ANALYTICS"),
        # introspection of the same node (no lineage): part of its task run, no run of its own
        row("q3", 1.5, comment(node_id="model.jaffle_shop.customers", invocation_id=INVOCATION,
                               node_database="ANALYTICS", node_schema="PUBLIC")
            + "describe table ANALYTICS.PUBLIC.customers",
            QUERY_TAG="", USER_NAME="DBT", DATABASE_NAME="ANALYTICS", QUERY_TYPE="DESCRIBE"),
    ]
    code, events = harvest(tmp_path, "--history", str(history(tmp_path, rows)), "--namespace", "dbt")
    assert code == 0
    orders, customers = "ANALYTICS.PUBLIC.jaffle_shop.orders", "ANALYTICS.PUBLIC.jaffle_shop.customers"
    invocation = ("dbt", "dbt-run-jaffle_shop", INVOCATION)

    def parent(event):
        p = event["run"]["facets"].get("parent")
        return p and (p["job"]["namespace"], p["job"]["name"], p["run"]["runId"])

    got = [(e["eventType"], e["job"]["namespace"], e["job"]["name"], parent(e),
            [d["name"] for d in e["inputs"]], [d["name"] for d in e["outputs"]]) for e in events]
    orders_run = next(e["run"]["runId"] for e in events if e["job"]["name"] == orders)
    customers_run = next(e["run"]["runId"] for e in events if e["job"]["name"] == customers)
    assert got == [
        ("START", "dbt", orders, invocation, [], []),
        ("START", "dbt", f"{orders}.create_table_analytics_public_orders", ("dbt", orders, orders_run),
         ["RAW.PUBLIC.ORDERS_RAW"], ["ANALYTICS.PUBLIC.ORDERS"]),
        ("COMPLETE", "dbt", f"{orders}.create_table_analytics_public_orders", ("dbt", orders, orders_run),
         ["RAW.PUBLIC.ORDERS_RAW"], ["ANALYTICS.PUBLIC.ORDERS"]),
        ("START", "dbt", customers, invocation, [], []),
        ("START", "dbt", f"{customers}.create_view_analytics_public_customers", ("dbt", customers, customers_run),
         ["ANALYTICS.PUBLIC.ORDERS"], ["ANALYTICS.PUBLIC.CUSTOMERS"]),
        ("COMPLETE", "dbt", f"{customers}.create_view_analytics_public_customers",
         ("dbt", customers, customers_run), ["ANALYTICS.PUBLIC.ORDERS"], ["ANALYTICS.PUBLIC.CUSTOMERS"]),
        ("COMPLETE", "dbt", orders, invocation, ["RAW.PUBLIC.ORDERS_RAW"], ["ANALYTICS.PUBLIC.ORDERS"]),
        ("COMPLETE", "dbt", customers, invocation, ["ANALYTICS.PUBLIC.ORDERS"], ["ANALYTICS.PUBLIC.CUSTOMERS"]),
    ]
    # the root of a statement run is the invocation (the top of the hierarchy)
    statement = next(e for e in events if e["job"]["name"].startswith(f"{orders}.create"))
    root = statement["run"]["facets"]["parent"]["root"]
    assert (root["job"]["namespace"], root["job"]["name"], root["run"]["runId"]) == invocation
    assert {d["namespace"] for e in events for d in e["inputs"] + e["outputs"]} == {NS}
