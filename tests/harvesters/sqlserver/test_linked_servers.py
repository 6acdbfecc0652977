"""Tables of linked servers (T-SQL four-part names ``srv.db.schema.t``) through the whole `harvest sqlserver --xml`
path: each is a dataset of the linked server's namespace, named ``db.schema.t``, in the statement's run, its task's
run, the column lineage that reads it and the symlinks of the other naming."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_estates import event

from harvesters.sqlserver.linked_servers import LOCAL, catalog_hosts

from harvest_cli import run_harvest

HERE = "sqlserver://sqlprod01:1433"

# sql, extra arguments, the statement's inputs and outputs as (namespace, name)
CASES: list[tuple[str, list[str], list[tuple[str, str]], list[tuple[str, str]]]] = [
    ("INSERT INTO dbo.local_t SELECT * FROM remote_srv.salesdb.dbo.orders", [],
     [("sqlserver://remote_srv:1433", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO dbo.local_t SELECT * FROM REMOTE_SRV.salesdb.dbo.orders", ["--linked-server",
                                                                             "remote_srv=sqlprod02.corp:14330"],
     [("sqlserver://sqlprod02.corp:14330", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO dbo.local_t SELECT * FROM [Remote Srv].salesdb.dbo.orders", ["--linked-server",
                                                                               "[Remote Srv]=10.0.0.7,1444"],
     [("sqlserver://10.0.0.7:1444", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("UPDATE [REMOTE-SRV\\INST].[sales db].dbo.orders SET amount = 0 WHERE id = 1", [],
     [], [("sqlserver://remote-srv/INST", "sales db.dbo.orders")]),
    # the linked login's default database: the name a table without database takes
    ("INSERT INTO dbo.local_t SELECT * FROM srv..dbo.orders", [],
     [("sqlserver://srv:1433", "dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    # the empty schema part is dbo, as in db..t
    ("INSERT INTO srv.archive..orders SELECT * FROM Sales..orders", [],
     [(HERE, "Sales.dbo.orders")], [("sqlserver://srv:1433", "archive.dbo.orders")]),
    ("SELECT a.id INTO #t FROM srv1.db.dbo.a a JOIN db.dbo.b b ON a.id = b.id; INSERT INTO dbo.c SELECT * FROM #t", [],
     [("sqlserver://srv1:1433", "db.dbo.a"), (HERE, "db.dbo.b")], [(HERE, "Sales.dbo.c")]),
    # a linked server named by its address or its host's full name: the dots are the name's, not the parts'
    ("INSERT INTO dbo.local_t SELECT * FROM [10.0.0.5].salesdb.dbo.orders", [],
     [("sqlserver://10.0.0.5:1433", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO [SQL02.corp.local]..dbo.orders SELECT * FROM dbo.local_t", ["--linked-server",
                                                                              "sql02.corp.local=sql02.corp.local,1450"],
     [(HERE, "Sales.dbo.local_t")], [("sqlserver://sql02.corp.local:1450", "dbo.orders")]),
    # a query or a batch the linked server runs (OPENQUERY, EXEC ... AT): its tables are the linked server's
    ("INSERT INTO dbo.local_t SELECT * FROM OPENQUERY(REPORTS, 'SELECT id FROM salesdb.dbo.orders')",
     ["--linked-server", "reports=sqlprod05.corp"],
     [("sqlserver://sqlprod05.corp:1433", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO OPENQUERY([10.0.0.5], 'SELECT id FROM archive..orders') SELECT id FROM dbo.local_t", [],
     [(HERE, "Sales.dbo.local_t")], [("sqlserver://10.0.0.5:1433", "archive.dbo.orders")]),
    ("EXEC ('INSERT INTO salesdb.dbo.totals SELECT * FROM dbo.orders') AT REPORTS", [],
     [("sqlserver://reports:1433", "dbo.orders")], [("sqlserver://reports:1433", "salesdb.dbo.totals")]),
    # an ad hoc connection to a SQL Server (OPENROWSET, OPENDATASOURCE): the server its connection string names
    ("INSERT INTO dbo.local_t SELECT * FROM OPENROWSET('SQLNCLI11', "
     "'Server=tcp:sql03.corp,1450;Trusted_Connection=yes;', 'SELECT id FROM salesdb.dbo.orders')", [],
     [("sqlserver://sql03.corp:1450", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO dbo.local_t SELECT * FROM OPENDATASOURCE('MSOLEDBSQL', 'Data Source=sql04\\DW;').salesdb.dbo.orders",
     [], [("sqlserver://sql04/DW", "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    ("INSERT INTO dbo.local_t SELECT * FROM OPENROWSET('SQLNCLI', 'Server=(local);', "
     "'SELECT id FROM salesdb.dbo.orders')", [], [(HERE, "salesdb.dbo.orders")], [(HERE, "Sales.dbo.local_t")]),
    # a table holding a dot in its name is the statement's server's, named without brackets
    ("INSERT INTO dbo.[t.2024] SELECT * FROM [stage.v1].[orders]", [],
     [(HERE, "Sales.stage.v1.orders")], [(HERE, "Sales.dbo.t.2024")]),
]


def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((d["namespace"], d["name"]) for d in datasets)


@pytest.mark.parametrize("sql, args, inputs, outputs", CASES)
def test_a_linked_servers_table_is_named_on_that_server(tmp_path: Path, sql: str, args: list[str],
                                                        inputs: list[tuple[str, str]],
                                                        outputs: list[tuple[str, str]]) -> None:
    log = tmp_path / "log.xml"
    log.write_text(event({"sql": sql}, 1) + "\n")
    code, emitted = run_harvest(tmp_path / "events.jsonl",
                                ["sqlserver", "--server", "sqlprod01", "--xml", str(log), *args])
    assert code == 0
    statement_complete = [e for e in emitted if e["eventType"] == "COMPLETE" and "." in e["job"]["name"]]
    assert [(names(e["inputs"]), names(e["outputs"])) for e in statement_complete][-1:] == [
        (sorted(inputs), sorted(outputs))]
    task_complete = emitted[-1]
    assert (names(task_complete["inputs"]), names(task_complete["outputs"])) == (sorted(inputs), sorted(outputs))


def test_column_lineage_and_symlinks_name_the_linked_server(tmp_path: Path) -> None:
    log = tmp_path / "log.xml"
    log.write_text(event({"sql": "INSERT INTO dbo.totals (amount) SELECT o.amount FROM srv.db.dbo.orders o"}, 1))
    code, emitted = run_harvest(tmp_path / "events.jsonl", ["sqlserver", "--server", "sqlprod01", "--xml", str(log),
                                                            "--dataset-scheme", "mssql"])
    assert code == 0
    complete = next(e for e in emitted if e["eventType"] == "COMPLETE" and "." in e["job"]["name"])
    [read] = complete["inputs"]
    assert (read["namespace"], read["name"]) == ("mssql://srv:1433", "db.dbo.orders")
    assert [(i["namespace"], i["name"]) for i in read["facets"]["symlinks"]["identifiers"]] == [
        ("sqlserver://srv:1433", "db.dbo.orders")]
    [written] = complete["outputs"]
    assert (written["namespace"], written["name"]) == ("mssql://sqlprod01:1433", "Sales.dbo.totals")
    fields = written["facets"]["columnLineage"]["fields"]
    assert [(f["namespace"], f["name"], f["field"]) for f in fields["amount"]["inputFields"]] == [
        ("mssql://srv:1433", "db.dbo.orders", "amount")]


@pytest.mark.parametrize("sql, read", [
    # a linked server named by its address
    ("INSERT INTO dbo.[t.2024] (amount) SELECT o.amount FROM [10.0.0.5].db.dbo.orders o",
     ("sqlserver://10.0.0.5:1433", "db.dbo.orders", "amount")),
    # the query a linked server runs: the column of its table there
    ("INSERT INTO dbo.[t.2024] (amount) SELECT q.amount FROM OPENQUERY([10.0.0.5], 'SELECT total AS amount "
     "FROM db.dbo.orders') AS q", ("sqlserver://10.0.0.5:1433", "db.dbo.orders", "total")),
])
def test_column_lineage_names_a_linked_servers_column(tmp_path: Path, sql: str, read: tuple[str, str, str]) -> None:
    log = tmp_path / "log.xml"
    log.write_text(event({"sql": sql}, 1))
    code, emitted = run_harvest(tmp_path / "events.jsonl", ["sqlserver", "--server", "sqlprod01", "--xml", str(log)])
    assert code == 0
    complete = next(e for e in emitted if e["eventType"] == "COMPLETE" and "." in e["job"]["name"])
    assert names(complete["inputs"]) == [read[:2]]
    [written] = complete["outputs"]
    assert (written["namespace"], written["name"]) == (HERE, "Sales.dbo.t.2024")
    fields = written["facets"]["columnLineage"]["fields"]
    assert [(f["namespace"], f["name"], f["field"]) for f in fields["amount"]["inputFields"]] == [read]


@pytest.mark.parametrize("value", ["srv", "=host", "srv="])
def test_a_malformed_linked_server_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    value: str) -> None:
    log = tmp_path / "log.xml"
    log.write_text(event({"sql": "SELECT 1"}, 1))
    code, emitted = run_harvest(tmp_path / "events.jsonl", ["sqlserver", "--server", "sqlprod01", "--xml", str(log),
                                                            "--linked-server", value])
    assert (code, emitted) == (2, [])
    assert "expected NAME=HOST[:PORT]" in capsys.readouterr().err


# sys.servers rows (name, data_source, provider) -> where each linked SQL Server is
CATALOG_ROWS = [
    (("REPORTS", "tcp:sqlprod05.corp,1450", "SQLNCLI11"), {"reports": ("sqlprod05.corp", "1450")}),
    (("Dw", "sqlprod06\\DW", "MSOLEDBSQL19"), {"dw": ("sqlprod06\\DW", None)}),
    (("OLD", "10.0.0.9", "SQLOLEDB"), {"old": ("10.0.0.9", None)}),
    (("ORA", "orcl.corp", "OraOLEDB.Oracle"), {}),  # not a SQL Server
    (("ODBC", "dsn", "MSDASQL"), {}),
    (("PIPE", "np:\\\\host\\pipe\\sql\\query", "SQLNCLI11"), {"pipe": ("host", None)}),  # a named pipe's host
    (("SHM", "lpc:sqlprod01", "SQLNCLI11"), {"shm": LOCAL}),  # shared memory reaches the local server only
    (("VIA", "via:sqlprod01,1433", "SQLNCLI"), {}),  # no host to name
    (("FIXED", "sqlprod07\\DW,1450", "MSOLEDBSQL"), {"fixed": ("sqlprod07\\DW", "1450")}),
    (("LOOP", "(local)", "SQLNCLI11"), {"loop": LOCAL}),  # the local server itself
    (("SELF", "tcp:.,1433", "SQLNCLI11"), {"self": LOCAL}),
    (("LOCALDB", "localhost\\SQLEXPRESS", "MSOLEDBSQL"), {"localdb": LOCAL}),
    (("BARE", "", "SQLNCLI11"), {}),  # no data source: the name is the host, as without the catalog
    (("NULLS", None, None), {}),
]


@pytest.mark.parametrize("row, expected", CATALOG_ROWS, ids=[r[0][0] for r in CATALOG_ROWS])
def test_the_servers_catalog_says_where_a_linked_sql_server_is(row: tuple[Any, ...], expected: dict[str, Any]) -> None:
    assert catalog_hosts([row]) == expected
