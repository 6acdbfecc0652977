"""The live path of `harvest sqlserver` through pyodbc, unixODBC and a real ODBC driver (SQLite's).

A SQLite table named and shaped like ``sys.fn_xe_file_target_read_file``'s output (module_guid, package_guid,
object_name, event_data, file_name, file_offset) stands in for the server; ``--backend sqlite`` selects the
stand-in's query texts (harvesters.sqlserver.reading.BACKENDS), everything else is the code that runs against SQL
Server: connection string, parameter binding, fetching, block positions, resume, rollover, ring buffer.
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

pyodbc = pytest.importorskip("pyodbc")  # needs unixODBC's libodbc.so.2 (Debian: unixodbc)

from test_sqlserver_harvest import SAMPLES, at, xe  # noqa: E402

from harvesters.cli import main  # noqa: E402
from harvesters.sqlserver.live import connection_string, server_from_connection_string  # noqa: E402

DRIVER = "SQLite3"


def _driver_available() -> bool:
    return any(DRIVER == name for name in pyodbc.drivers())


pytestmark = pytest.mark.skipif(not _driver_available(), reason="SQLite ODBC driver not installed "
                                                                "(Debian: libsqliteodbc)")


class FakeServer:
    """The SQLite database behind the ODBC connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE fn_xe_file_target_read_file (module_guid TEXT, package_guid TEXT, "
                       "object_name TEXT, event_data TEXT, file_name TEXT, file_offset INTEGER)")
            db.execute("CREATE TABLE ring_buffer_target (name TEXT, target_data TEXT)")

    def write(self, file_name: str, offset: int, *events: bytes) -> None:
        """One buffer block of the event file: several events share its offset."""
        with sqlite3.connect(self.path) as db:
            db.executemany("INSERT INTO fn_xe_file_target_read_file VALUES ('g', 'p', ?, ?, ?, ?)",
                           [(e.split(b'"')[1].decode(), e.decode(), file_name, offset) for e in events])

    def roll_over(self, file_name: str) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("DELETE FROM fn_xe_file_target_read_file WHERE file_name = ?", (file_name,))

    def ring_buffer(self, document: str) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("DELETE FROM ring_buffer_target")
            db.execute("INSERT INTO ring_buffer_target VALUES ('openlineage', ?)", (document,))


@pytest.fixture
def server(tmp_path):
    return FakeServer(tmp_path / "xe.sqlite")


def live(tmp_path: Path, server: FakeServer, *args: str, out: str = "events.jsonl"):
    target = tmp_path / out
    before = target.read_text(encoding="utf-8").count("\n") if target.exists() else 0
    code = main(["sqlserver", "--connection-string", f"Driver={DRIVER};Database={server.path}", "--backend",
                 "sqlite", "--server", "db01", "--xe-path", r"C:\xe\openlineage*.xel", *args,
                 "--conf", "transport.type=file", "--conf", f"transport.location={target}"])
    lines = target.read_text(encoding="utf-8").split("\n")[before:-1] if target.exists() else []
    return code, [json.loads(line) for line in lines]


def children(events: list[dict]) -> list[str]:
    return [e["job"]["name"].rsplit(".", 1)[1] for e in events if e["eventType"] == "COMPLETE"
            and e["job"]["facets"]["jobType"]["jobType"] == "QUERY"]


def stmt(minute: int, table: str) -> bytes:
    return xe("sql_statement_completed", at(minute), f"INSERT INTO dbo.{table} SELECT * FROM dbo.src", seq=minute)


def test_reads_resumes_and_survives_rollover(tmp_path, server, capsys):
    state = tmp_path / "state.json"
    server.write(r"C:\xe\openlineage_0_1.xel", 0, stmt(0, "a"), stmt(1, "b"))
    server.write(r"C:\xe\openlineage_0_1.xel", 4096, stmt(2, "c"))
    code, events = live(tmp_path, server, "--state", str(state))
    assert code == 0 and children(events) == ["insert_sales_dbo_a", "insert_sales_dbo_b", "insert_sales_dbo_c"]
    position = json.loads(state.read_text())["event_file"]
    assert position == {"file": r"C:\xe\openlineage_0_1.xel", "offset": 0,
                        "partial_file": r"C:\xe\openlineage_0_1.xel", "partial_offset": 4096, "done": 1}

    code, events = live(tmp_path, server, "--state", str(state))  # nothing new
    assert code == 0 and children(events) == []

    server.write(r"C:\xe\openlineage_0_1.xel", 8192, stmt(3, "d"))
    server.write(r"C:\xe\openlineage_0_2.xel", 0, stmt(4, "e"))
    code, events = live(tmp_path, server, "--state", str(state))
    assert code == 0 and children(events) == ["insert_sales_dbo_d", "insert_sales_dbo_e"]

    # the server rolled over: the saved file is gone, newer ones exist -> read from the oldest remaining
    server.roll_over(r"C:\xe\openlineage_0_1.xel")
    server.roll_over(r"C:\xe\openlineage_0_2.xel")
    server.write(r"C:\xe\openlineage_0_3.xel", 0, stmt(5, "f"))
    server.write(r"C:\xe\openlineage_0_4.xel", 0, stmt(6, "g"))
    capsys.readouterr()
    code, events = live(tmp_path, server, "--state", str(state))
    assert code == 0 and children(events) == ["insert_sales_dbo_f", "insert_sales_dbo_g"]
    assert "rollover: 1" in capsys.readouterr().err
    assert json.loads(state.read_text())["event_file"]["partial_file"] == r"C:\xe\openlineage_0_4.xel"


def test_stop_inside_a_block_resumes_without_duplicates(tmp_path, server):
    state = tmp_path / "state.json"
    server.write(r"C:\xe\openlineage_0_1.xel", 0, stmt(0, "a"), stmt(10, "b"), stmt(20, "c"))
    code, first = live(tmp_path, server, "--state", str(state), "--until", at(15).isoformat())
    assert code == 0 and children(first) == ["insert_sales_dbo_a", "insert_sales_dbo_b"]
    code, second = live(tmp_path, server, "--state", str(state))
    assert code == 0 and children(second) == ["insert_sales_dbo_c"]
    _, whole = live(tmp_path, server, out="whole.jsonl")  # no state: everything at once
    assert sorted(json.dumps(e, sort_keys=True) for e in first + second) == \
        sorted(json.dumps(e, sort_keys=True) for e in whole)


def test_malformed_row_is_counted_and_position_kept_moving(tmp_path, server, capsys):
    state = tmp_path / "state.json"
    server.write(r"C:\xe\openlineage_0_1.xel", 0, stmt(0, "a"), stmt(1, "b")[:150], stmt(2, "c"))
    code, events = live(tmp_path, server, "--state", str(state))
    assert code == 1 and children(events) == ["insert_sales_dbo_a", "insert_sales_dbo_c"]
    assert "1 unreadable (malformed event: 1)" in capsys.readouterr().err
    assert json.loads(state.read_text())["event_file"]["done"] == 3


def test_ring_buffer_target_with_watermark(tmp_path, server):
    state = tmp_path / "state.json"
    document = (SAMPLES / "10_ring_buffer_target.xml").read_text()
    server.ring_buffer(document)
    args = ("--target", "ring_buffer", "--xe-session", "openlineage", "--state", str(state))
    code, events = live(tmp_path, server, *args)
    assert code == 0 and children(events) == ["insert_finance_dbo_glbalances"]
    code, events = live(tmp_path, server, *args)  # the same buffer again: nothing new
    assert code == 0 and events == []
    newer = xe("sql_statement_completed", at(24 * 60 * 3), "DELETE FROM dbo.old", seq=1).decode()
    server.ring_buffer(document.replace("</RingBufferTarget>", newer + "</RingBufferTarget>"))
    code, events = live(tmp_path, server, *args)
    assert code == 0 and children(events) == ["delete_sales_dbo_old"]


def test_password_comes_from_the_environment_only(tmp_path, server, monkeypatch, capsys):
    monkeypatch.setenv("XE_TEST_PASSWORD", "s3cr}et;pw")
    server.write(r"C:\xe\openlineage_0_1.xel", 0, stmt(0, "a"))
    code, events = live(tmp_path, server, "--user", "harvester", "--password-env", "XE_TEST_PASSWORD")
    assert code == 0 and children(events) == ["insert_sales_dbo_a"]
    assert "s3cr" not in capsys.readouterr().err + json.dumps(events)


def test_dsn(tmp_path, server, monkeypatch):
    odbc_ini = tmp_path / "odbc.ini"
    odbc_ini.write_text(f"[xe_test]\nDriver={DRIVER}\nDatabase={server.path}\n")
    monkeypatch.setenv("ODBCINI", str(odbc_ini))
    server.write(r"C:\xe\openlineage_0_1.xel", 0, stmt(0, "a"))
    target = tmp_path / "dsn.jsonl"
    code = main(["sqlserver", "--dsn", "xe_test", "--backend", "sqlite", "--server", "db01", "--conf",
                 "transport.type=file", "--conf", f"transport.location={target}"])
    assert code == 0 and children([json.loads(x) for x in target.read_text().splitlines()]) == ["insert_sales_dbo_a"]


def test_unreachable_server_is_exit_2_and_state_untouched(tmp_path, capsys):
    state = tmp_path / "state.json"
    code = main(["sqlserver", "--connection-string", "Driver={No Such Driver};Server=db01", "--state", str(state),
                 "--conf", "transport.type=file", "--conf", f"transport.location={tmp_path / 'e.jsonl'}"])
    assert code == 2 and not state.exists()
    assert "reading failed" in capsys.readouterr().err


@pytest.mark.parametrize("source", [["sqlserver", "--connection-string", "Driver={X};Server=db01"],
                                    ["snowflake", "--odbc", "Driver={X};Server=acct", "--account", "org-acct"]])
def test_without_pyodbc_a_live_harvest_says_what_to_install(tmp_path, capsys, monkeypatch, source):
    """It was a ModuleNotFoundError traceback (an ImportError when unixODBC's libodbc is missing)."""
    monkeypatch.setitem(sys.modules, "pyodbc", None)  # as if not installed
    state = tmp_path / "state.json"
    code = main([*source, "--state", str(state), "--conf", "transport.type=file",
                 "--conf", f"transport.location={tmp_path / 'e.jsonl'}"])
    err = capsys.readouterr().err
    assert code == 2 and not state.exists() and "Traceback" not in err
    assert "needs pyodbc and unixODBC: pip install 'lineage-capture[sqlserver]'" in err


@pytest.mark.parametrize("conn,expected", [
    ("Driver={ODBC Driver 18 for SQL Server};Server=tcp:db01.corp,1433;Encrypt=yes", ("db01.corp", "1433")),
    ("DRIVER=FreeTDS;SERVER=db01;PORT=1433", ("db01", "1433")),
    (r"Driver=x;Data Source=SQLPROD01\DW", (r"SQLPROD01\DW", None)),
    ("Driver=x;Database=y", None),
    # ODBC's braces around a value, and OLE DB's key (both once read as no server or as "{host")
    ("Driver={ODBC Driver 18 for SQL Server};Server={tcp:db01.corp,1433};Encrypt=yes", ("db01.corp", "1433")),
    ("Provider=MSOLEDBSQL;Network Address=db02.corp,1450;Initial Catalog=DW", ("db02.corp", "1450")),
    ("Driver=x;Addr= db03 ;Database=y", ("db03", None)),
    # read as --server is: a named instance's fixed port, a named pipe; FreeTDS's Port key
    ("Driver=x;Server=db04\\DW,1450", ("db04\\DW", "1450")),
    ("Driver=x;Server=np:\\\\db05\\pipe\\sql\\query", ("db05", None)),
    ("DRIVER=FreeTDS;SERVER=db06;PORT=1450", ("db06", "1450")),
    ("DRIVER=FreeTDS;SERVER=db07,1451;PORT=1450", ("db07", "1451")),
])
def test_server_from_connection_string(conn, expected):
    assert server_from_connection_string(conn) == expected


@pytest.mark.parametrize("conn,dsn,user,env,expected", [
    ("Driver=x;Server=db01;", None, "u", "PW", "Driver=x;Server=db01;APP=openlineage-harvest;UID=u;PWD={a}}b;c};"),
    (None, "prod", None, "PW", "DSN=prod;APP=openlineage-harvest;PWD={a}}b;c};"),
    ("Driver=x;App=nightly", None, None, None, "Driver=x;App=nightly;"),  # the user's own APP= is kept
])
def test_connection_string(monkeypatch, conn, dsn, user, env, expected):
    monkeypatch.setenv("PW", "a}b;c")
    assert connection_string(conn, dsn, user, env) == expected


def linked_servers(server: FakeServer, *rows: tuple[str, str, str], local_name: str = "DB01") -> None:
    """``sys.servers``' rows as the stand-in's table (server_id, name, data_source, provider, is_linked): the server
    itself (server_id 0, named ``local_name``) and the linked servers ``rows``."""
    with sqlite3.connect(server.path) as db:
        db.execute("CREATE TABLE sys_servers (server_id INTEGER, name TEXT, data_source TEXT, provider TEXT, "
                   "is_linked INTEGER)")
        db.execute("INSERT INTO sys_servers VALUES (0, ?, ?, 'SQLNCLI11', 0)", (local_name, local_name))
        db.executemany("INSERT INTO sys_servers VALUES (?, ?, ?, ?, 1)",
                       [(i, *row) for i, row in enumerate(rows, start=1)])


def statement_inputs(events: list[dict]) -> list[list[tuple[str, str]]]:
    return [[(d["namespace"], d["name"]) for d in e["inputs"]] for e in events
            if e["eventType"] == "COMPLETE" and e["job"]["facets"]["jobType"]["jobType"] == "QUERY"]


def read_from(table: str) -> bytes:
    return xe("sql_statement_completed", at(0), f"INSERT INTO dbo.t SELECT * FROM {table}", seq=0)


# linked servers in sys.servers, the statement's source table, extra arguments -> the dataset it reads
CATALOG_CASES = [
    # an alias: its data_source says where it is (tcp: and the port as SQL Server clients write them)
    ([("REPORTS", "tcp:sqlprod05.corp,1450", "SQLNCLI11")], "REPORTS.sales.dbo.orders", [],
     ("sqlserver://sqlprod05.corp:1450", "sales.dbo.orders")),
    ([("DW2", r"sqlprod06\DW", "MSOLEDBSQL19")], "[dw2].sales.dbo.orders", [],
     ("sqlserver://sqlprod06/DW", "sales.dbo.orders")),
    # --linked-server wins over the catalog
    ([("REPORTS", "sqlprod05.corp", "SQLNCLI11")], "REPORTS.sales.dbo.orders",
     ["--linked-server", "reports=other:1500"], ("sqlserver://other:1500", "sales.dbo.orders")),
    # not a SQL Server provider, or no host to name: the linked server's name stays the host
    ([("ORA", "orcl.corp", "OraOLEDB.Oracle")], "ORA.sales.dbo.orders", [],
     ("sqlserver://ora:1433", "sales.dbo.orders")),
    # a loopback link: the statement's own server
    ([("LOOP", "(local)", "SQLNCLI11")], "LOOP.sales.dbo.orders", [], ("sqlserver://db01:1433", "sales.dbo.orders")),
]


@pytest.mark.parametrize("rows, table, args, expected", CATALOG_CASES)
def test_a_live_harvest_names_linked_servers_by_the_servers_catalog(tmp_path, server, rows, table, args, expected):
    linked_servers(server, *rows)
    server.write(r"C:\xe\openlineage_0_1.xel", 0, read_from(table))
    code, events = live(tmp_path, server, *args)
    assert code == 0 and statement_inputs(events) == [[expected]]


@pytest.mark.parametrize("table, args, expected", [
    # the local server named by its own name (@@SERVERNAME) where --server names it by another (a DNS alias)
    ("SQLPROD01.sales.dbo.orders", [], ("sqlserver://db01:1433", "sales.dbo.orders")),
    ("[sqlprod01].sales..orders", [], ("sqlserver://db01:1433", "sales.dbo.orders")),  # as sales..orders
    # --linked-server still wins
    ("SQLPROD01.sales.dbo.orders", ["--linked-server", "SQLPROD01=sqlprod01.corp"],
     ("sqlserver://sqlprod01.corp:1433", "sales.dbo.orders")),
])
def test_a_four_part_name_of_the_local_server_names_a_local_table(tmp_path, server, table, args, expected):
    linked_servers(server, ("REPORTS", "sqlprod05", "SQLNCLI11"), local_name="SQLPROD01")
    server.write(r"C:\xe\openlineage_0_1.xel", 0, read_from(table))
    code, events = live(tmp_path, server, *args)
    assert code == 0 and statement_inputs(events) == [[expected]]


def test_a_catalog_that_cannot_be_read_leaves_linked_servers_named_by_their_names(tmp_path, server, caplog):
    server.write(r"C:\xe\openlineage_0_1.xel", 0, read_from("REPORTS.sales.dbo.orders"))  # no sys_servers table
    code, events = live(tmp_path, server)
    assert code == 0 and statement_inputs(events) == [[("sqlserver://reports:1433", "sales.dbo.orders")]]
    assert [r.getMessage()[:46] for r in caplog.records if r.levelname == "WARNING"] == [
        "cannot read the linked servers (sys.servers): "]
