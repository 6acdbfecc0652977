"""`harvest snowflake`: the columnLineage facet on a query's outputs, from ACCESS_HISTORY's column sources where
the row has them, else from the parsed QUERY_TEXT; exact facets in the emitted (schema-validated) events."""
from __future__ import annotations

import json

import pytest
from test_snowflake import NS, harvest, history, row

from harvesters.snowflake.history import access_columns


def field(name: str, column: str, subtype: str | None = None) -> dict:
    transformation = {"type": "DIRECT", **({"subtype": subtype} if subtype else {})}
    return {"namespace": NS, "name": name, "field": column, "transformations": [transformation]}


def modified(table: str, columns: dict[str, list[tuple[str, str]]], key: str = "directSources") -> list[dict]:
    return [{"objectDomain": "Table", "objectName": table, "objectId": 1, "columns": [
        {"columnId": i, "columnName": column, key: [
            {"objectDomain": "Table", "objectName": source, "objectId": 2, "columnName": source_column}
            for source, source_column in sources]}
        for i, (column, sources) in enumerate(columns.items())]}]


def objects(*names: str) -> str:
    return json.dumps([{"objectDomain": "Table", "objectName": n, "objectId": 2, "columns": []} for n in names])


def output_facet(events: list[dict], job_suffix: str) -> list[tuple[str, str, dict | None]]:
    """(event type, output name, its columnLineage facet) of the query run whose job ends with ``job_suffix``."""
    return [(e["eventType"], o["name"], o.get("facets", {}).get("columnLineage"))
            for e in events if e["job"]["name"].endswith(job_suffix) for o in e["outputs"]]


CTAS = "create or replace table SALES.MART.ORDERS as select id, amount * rate as amount_eur from SALES.RAW.ORDERS"


@pytest.mark.parametrize("columns,expected_fields", [
    # ACCESS_HISTORY's directSources, as Snowflake recorded them (no subtype: the view does not say how)
    (dict(OBJECTS_MODIFIED=json.dumps(modified("SALES.MART.ORDERS", {
        "ID": [("SALES.RAW.ORDERS", "ID")],
        "AMOUNT_EUR": [("SALES.RAW.ORDERS", "AMOUNT"), ("SALES.RAW.ORDERS", "RATE")]})),
        DIRECT_OBJECTS_ACCESSED=objects("SALES.RAW.ORDERS")),
     {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID")]},
      "AMOUNT_EUR": {"inputFields": [field("SALES.RAW.ORDERS", "AMOUNT"), field("SALES.RAW.ORDERS", "RATE")]}}),
    # baseSources when a column has no directSources
    (dict(OBJECTS_MODIFIED=json.dumps(modified("SALES.MART.ORDERS", {"ID": [("SALES.RAW.ORDERS", "ID")]},
                                               key="baseSources")),
          DIRECT_OBJECTS_ACCESSED=objects("SALES.RAW.ORDERS")),
     {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID")]}}),
    # a row with base objects only: the inputs are the base tables, so are the columns' sources
    (dict(OBJECTS_MODIFIED=json.dumps([{"objectDomain": "Table", "objectName": "SALES.MART.ORDERS", "columns": [
        {"columnName": "ID",
         "directSources": [{"objectDomain": "View", "objectName": "SALES.RAW.ORDERS_V", "columnName": "ID"}],
         "baseSources": [{"objectDomain": "Table", "objectName": "SALES.RAW.ORDERS", "columnName": "ID"}]}]}]),
          BASE_OBJECTS_ACCESSED=objects("SALES.RAW.ORDERS")),
     {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID")]}}),
    # a source that is not one of the query's datasets (here: not in DIRECT_OBJECTS_ACCESSED) is not trusted
    (dict(OBJECTS_MODIFIED=json.dumps(modified("SALES.MART.ORDERS", {
        "ID": [("SALES.RAW.ORDERS", "ID")], "AMOUNT_EUR": [("SALES.RAW.OTHER", "AMOUNT")]})),
        DIRECT_OBJECTS_ACCESSED=objects("SALES.RAW.ORDERS")),
     {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID")]}}),
    # ACCESS_HISTORY without column sources: the parsed text's column lineage
    (dict(OBJECTS_MODIFIED=objects("SALES.MART.ORDERS"), DIRECT_OBJECTS_ACCESSED=objects("SALES.RAW.ORDERS")),
     {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID", "IDENTITY")]},
      "AMOUNT_EUR": {"inputFields": [field("SALES.RAW.ORDERS", "AMOUNT", "TRANSFORMATION"),
                                     field("SALES.RAW.ORDERS", "RATE", "TRANSFORMATION")]}}),
    # no ACCESS_HISTORY: the parsed text's
    ({}, {"ID": {"inputFields": [field("SALES.RAW.ORDERS", "ID", "IDENTITY")]},
          "AMOUNT_EUR": {"inputFields": [field("SALES.RAW.ORDERS", "AMOUNT", "TRANSFORMATION"),
                                         field("SALES.RAW.ORDERS", "RATE", "TRANSFORMATION")]}}),
], ids=["direct sources", "base sources", "base objects only", "foreign source dropped",
         "access history without columns", "parsed"])
def test_column_lineage_facet_on_output(tmp_path, columns, expected_fields):
    code, events = harvest(tmp_path, "--history", str(history(tmp_path, [row("q1", 0, CTAS, **columns)])))
    assert code == 0
    facet = {"_producer": events[0]["producer"],
             "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
                           "#/$defs/ColumnLineageDatasetFacet",
             "fields": expected_fields, "dataset": []}
    assert output_facet(events, "_sales_mart_orders") == [
        ("START", "SALES.MART.ORDERS", facet), ("COMPLETE", "SALES.MART.ORDERS", facet)]
    # the task run's COMPLETE lists the table without facets (column lineage belongs to the query that wrote it)
    assert [(e["eventType"], o.get("facets")) for e in events if e["job"]["name"] == "etl" for o in e["outputs"]] \
        == [("COMPLETE", {})]


@pytest.mark.parametrize("text", [
    "insert into SALES.MART.ORDERS select * from SALES.RAW.ORDERS",  # positions unknown without the columns
    "update SALES.MART.ORDERS set amount = 0",  # not covered
    "create temporary table STAGE as select id from SALES.RAW.ORDERS",  # a temp table is not a dataset
])
def test_no_column_lineage_where_the_text_does_not_tell(tmp_path, text):
    code, events = harvest(tmp_path, "--history", str(history(tmp_path, [row("q1", 0, text)])))
    assert code == 0
    assert not [o for e in events for o in e["outputs"] if "columnLineage" in o.get("facets", {})]


def test_temp_table_columns_are_left_out(tmp_path):
    """A column fed from the session's temp table has no column lineage (the temp table is not a dataset and its
    own sources are known only table by table); the other columns keep theirs."""
    rows = [
        row("q1", 0, "create temporary table STAGE as select id, amount from SALES.RAW.ORDERS"),
        row("q2", 1, "insert into SALES.MART.ORDERS (id, amount, region) "
                     "select s.id, s.amount, r.name from STAGE s join SALES.REF.REGIONS r on r.id = s.id"),
    ]
    code, events = harvest(tmp_path, "--history", str(history(tmp_path, rows)))
    assert code == 0
    [(_, _, facet), _] = output_facet(events, ".insert_sales_mart_orders")
    assert facet["fields"] == {"REGION": {"inputFields": [field("SALES.REF.REGIONS", "NAME", "IDENTITY")]}}


@pytest.mark.parametrize("modified_value,expected", [
    (modified("DB.S.T", {"A": [("DB.S.U", "X")]}), (("DB.S.T", (("A", (("DB.S.U", "X", ""),)),)),)),
    ([{"objectDomain": "Stage", "objectName": "@ST", "columns": [
        {"columnName": "A", "directSources": [{"objectDomain": "Table", "objectName": "DB.S.U", "columnName": "X"}]}]}],
     ()),  # a stage is not a dataset
    ([{"objectDomain": "Table", "objectName": "DB.S.T", "columns": [{"columnName": "A"}]}], ()),  # no sources
    ([{"objectDomain": "Table", "objectName": 'DB.S."Mixed"', "columns": [
        {"columnName": "a b", "directSources": [
            {"objectDomain": "View", "objectName": "DB.S.V", "columnName": "X"},
            {"objectDomain": "Table", "objectName": "DB.S.V", "columnName": "X"}]}]}],
     (("DB.S.Mixed", (("a b", (("DB.S.V", "X", ""),)),)),)),  # quoted names exact, repeated sources once
])
def test_access_columns(modified_value, expected):
    assert access_columns(modified_value) == expected
