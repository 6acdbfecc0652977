"""`harvest sqlserver`: the columnLineage facet on a statement's outputs, from the statement text (exported XML), and
on the live path with ``*`` expanded from INFORMATION_SCHEMA.COLUMNS (the SQLite ODBC stand-in: a table
``information_schema_columns`` standing for the view); exact facets in the emitted (schema-validated) events."""
from __future__ import annotations

import sqlite3

import pytest
from test_sqlserver_harvest import SERVER, at, harvest, write_log, xe

NS = f"sqlserver://{SERVER}:1433"
LIVE_NS = "sqlserver://db01:1433"  # test_sqlserver_odbc.live harvests with --server db01


def field(name: str, column: str, subtype: str, namespace: str = NS) -> dict:
    return {"namespace": namespace, "name": name, "field": column,
            "transformations": [{"type": "DIRECT", "subtype": subtype}]}


def column_facets(events: list[dict]) -> list[tuple[str, str, str, dict | None]]:
    """(event type, job, output, its columnLineage fields) of every statement run's outputs."""
    return [(e["eventType"], e["job"]["name"], o["name"], o.get("facets", {}).get("columnLineage", {}).get("fields"))
            for e in events if e["job"]["facets"]["jobType"]["jobType"] == "QUERY" for o in e["outputs"]]


@pytest.mark.parametrize("sql,expected", [
    ("INSERT INTO dbo.FactSales (OrderID, Amount) SELECT o.OrderID, o.Qty * o.Price FROM dbo.Orders o",
     {"OrderID": {"inputFields": [field("Sales.dbo.Orders", "OrderID", "IDENTITY")]},
      "Amount": {"inputFields": [field("Sales.dbo.Orders", "Price", "TRANSFORMATION"),
                                 field("Sales.dbo.Orders", "Qty", "TRANSFORMATION")]}}),
    ("SELECT c.Region, COUNT(*) AS Orders, SUM(o.Total) AS Revenue INTO Reporting.dbo.ByRegion "
     "FROM dbo.Orders o JOIN dbo.Customers c ON c.ID = o.CustomerID GROUP BY c.Region",
     {"Region": {"inputFields": [field("Sales.dbo.Customers", "Region", "IDENTITY")]},
      "Revenue": {"inputFields": [field("Sales.dbo.Orders", "Total", "AGGREGATION")]}}),
    # sp_executesql: the statement it runs
    ("exec sp_executesql N'INSERT INTO [dbo].[Audit] ([Id], [By]) SELECT [o].[Id], @p1 FROM [dbo].[Orders] AS [o] "
     "WHERE [o].[Id] = @p0',N'@p0 int,@p1 nvarchar(4000)',@p0=5,@p1=N'x'",
     {"Id": {"inputFields": [field("Sales.dbo.Orders", "Id", "IDENTITY")]}}),
    # unknown stays unknown: no column list and no server to ask, `*`, a temp table
    ("INSERT INTO dbo.FactSales SELECT OrderID, Total FROM dbo.Orders", None),
    ("INSERT INTO dbo.FactSales (OrderID, Amount) SELECT * FROM dbo.Orders", None),
    ("INSERT INTO dbo.FactSales (OrderID, Amount) SELECT r.OrderID, r.Total FROM #recent r", None),
])
def test_column_lineage_from_the_statement(tmp_path, sql, expected):
    log = write_log(tmp_path / "x.xml", [xe("sql_statement_completed", at(0), sql)])
    code, events = harvest(tmp_path, "--xml", str(log))
    assert code == 0
    facets = column_facets(events)
    assert len(facets) == 2 and facets[0][3] == facets[1][3] == expected  # START and COMPLETE carry the same


# ---- live: `*` from INFORMATION_SCHEMA.COLUMNS -------------------------------------------------------------

pyodbc = pytest.importorskip("pyodbc")
from test_sqlserver_odbc import DRIVER, FakeServer, _driver_available, live  # noqa: E402

live_only = pytest.mark.skipif(not _driver_available(), reason="SQLite ODBC driver not installed (libsqliteodbc)")


def with_columns(server: FakeServer, tables: dict[tuple[str, str, str], list[str]]) -> None:
    with sqlite3.connect(server.path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS information_schema_columns (table_catalog TEXT, table_schema TEXT, "
                   "table_name TEXT, column_name TEXT, ordinal_position INTEGER)")
        db.executemany("INSERT INTO information_schema_columns VALUES (?, ?, ?, ?, ?)",
                       [(*table, column, i + 1) for table, columns in tables.items()
                        for i, column in enumerate(columns)])


@live_only
def test_live_star_expanded_from_information_schema(tmp_path):
    server = FakeServer(tmp_path / "xe.sqlite")
    with_columns(server, {("Sales", "dbo", "Orders"): ["OrderID", "Total"],
                          ("Sales", "dbo", "OrdersCopy"): ["ID", "Amount"]})
    server.write(r"C:\xe\openlineage_0_1.xel", 0,
                 xe("sql_statement_completed", at(0), "INSERT INTO dbo.OrdersCopy SELECT * FROM dbo.Orders", seq=1),
                 # a table the server does not describe: unknown, no facet
                 xe("sql_statement_completed", at(1), "INSERT INTO dbo.Other SELECT * FROM dbo.Elsewhere", seq=2))
    code, events = live(tmp_path, server)
    assert code == 0
    assert column_facets(events) == [
        (kind, "python_task.task1.insert_sales_dbo_orderscopy", "Sales.dbo.OrdersCopy", {
            "ID": {"inputFields": [field("Sales.dbo.Orders", "OrderID", "IDENTITY", LIVE_NS)]},
            "Amount": {"inputFields": [field("Sales.dbo.Orders", "Total", "IDENTITY", LIVE_NS)]}})
        for kind in ("START", "COMPLETE")] + [
        (kind, "python_task.task1.insert_sales_dbo_other", "Sales.dbo.Other", None) for kind in ("START", "COMPLETE")]


@live_only
def test_table_columns_are_read_once_per_table(tmp_path):
    from harvesters.sqlserver.live import BACKENDS, TableColumns

    server = FakeServer(tmp_path / "xe.sqlite")
    with_columns(server, {("Sales", "dbo", "Orders"): ["OrderID", "Total"], ("Sales", "dbo", "t.2024"): ["Y"]})
    columns = TableColumns(f"Driver={DRIVER};Database={server.path};", BACKENDS["sqlite"])
    try:
        assert columns("Sales.dbo.Orders") == ("OrderID", "Total")
        assert columns("Sales.dbo.[t.2024]") == ("Y",)  # a part holding a dot, as the harvest's engine names it
        assert columns("Sales.dbo.Missing") is None
        with sqlite3.connect(server.path) as db:  # the server changes: the harvest keeps what it read
            db.execute("DELETE FROM information_schema_columns")
            db.execute("INSERT INTO information_schema_columns VALUES ('Sales', 'dbo', 'Missing', 'X', 1)")
        assert columns("Sales.dbo.Orders") == ("OrderID", "Total")
        assert columns("Sales.dbo.Missing") is None
        assert columns("dbo.Orders") is None  # not database.schema.table: not asked
    finally:
        columns.close()


@live_only
def test_a_server_without_the_view_gives_no_columns(tmp_path):
    from harvesters.sqlserver.live import BACKENDS, TableColumns

    server = FakeServer(tmp_path / "xe.sqlite")  # no information_schema_columns: the query fails
    columns = TableColumns(f"Driver={DRIVER};Database={server.path};", BACKENDS["sqlite"])
    try:
        assert columns("Sales.dbo.Orders") is None
        with_columns(server, {("Sales", "dbo", "Orders"): ["OrderID"]})
        assert columns("Sales.dbo.Other") is None  # after an error, no more queries this harvest
    finally:
        columns.close()
