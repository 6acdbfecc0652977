"""`harvest sqlserver --xml`: the whole path from Extended Events XML to OpenLineage events, through the CLI.

Events go to the file transport in tmp_path and are checked exactly and against the OpenLineage schemas.
"""
from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from harvesters.cli import main
from harvesters.sql.cache import statement_shape
from harvesters.sqlserver.reading import LineageCache

from harvest_cli import brief, run_harvest
from http_backend import free_port
from ol_schema import assert_valid_event
from paths import SHARED

SAMPLES = SHARED / "xevents-samples"
SERVER = "sqlprod01"
NS = "sqlserver://sqlprod01:1433"
AIRFLOW_RUN = "01900000-0000-7000-8000-000000000001"
AIRFLOW = f"airflow/etl_dag.load_task/{AIRFLOW_RUN}"


def sample_events() -> list[bytes]:
    """Every sample event, in the order the server wrote them (event_sequence; the ring buffer's last)."""
    events = []
    for path in sorted(SAMPLES.glob("*.xml")):
        for match in re.finditer(rb"<event .*?</event>", path.read_bytes(), re.S):
            seq = re.search(rb'"event_sequence".*?<value>(\d+)', match.group(0), re.S)
            events.append((int(seq.group(1)) if seq else 10**9, match.group(0)))
    return [e for _, e in sorted(events, key=lambda e: e[0])]


def xe(name: str, at: datetime, sql: str = "", *, app: str = "python_task::task1", session: int = 51,
       host: str = "WORKER1", db: str = "Sales", seq: int = 1, activity: str = "", duration_us: int = 1000,
       result: str | None = None, extra: str = "") -> bytes:
    """An event shaped like fn_xe_file_target_read_file's event_data."""
    field = "batch_text" if name == "sql_batch_completed" else "statement"
    data = f'<data name="duration"><value>{duration_us}</value></data>'
    if result is not None:
        data += f'<data name="result"><value>{1 if result == "Error" else 0}</value><text>{result}</text></data>'
    if sql:
        data += f'<data name="{field}"><value><![CDATA[{sql}]]></value></data>'
    actions = (f'<action name="session_id" package="sqlserver"><value>{session}</value></action>'
               f'<action name="database_name" package="sqlserver"><value>{escape(db)}</value></action>'
               f'<action name="client_hostname" package="sqlserver"><value>{escape(host)}</value></action>'
               f'<action name="client_app_name" package="sqlserver"><value>{escape(app)}</value></action>'
               f'<action name="event_sequence" package="package0"><value>{seq}</value></action>')
    if activity:
        actions += f'<action name="attach_activity_id" package="package0"><value>{activity}</value></action>'
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return (f'<event name="{name}" package="sqlserver" timestamp="{stamp}">{data}{extra}{actions}</event>'
            ).encode()


T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def write_log(path: Path, events: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(events) + b"\n")
    return path


def harvest(tmp_path: Path, *args: str, out: str = "events.jsonl", conf: list[str] | None = None):
    """Run the CLI; returns (exit code, events written by this run)."""
    return run_harvest(tmp_path / out, ["sqlserver", "--server", SERVER, *args], conf)


# ---- statement shapes (the lineage cache key) -----------------------------------------------------------

@pytest.mark.parametrize("sql,shape", [
    ("INSERT INTO t VALUES (1, 'a', N'b', -2.5e3)", "INSERT INTO t VALUES (?, ?, ?, ?)"),
    ("SELECT * FROM t2024 WHERE id = 42", "SELECT * FROM t2024 WHERE id = ?"),  # digits inside names stay
    ("SELECT * FROM [Sales 2024].dbo.t WHERE x = 'it''s'", "SELECT * FROM [Sales 2024].dbo.t WHERE x = ?"),
    ("SELECT * FROM #t1 JOIN @v2 ON 1=1", "SELECT * FROM #t1 JOIN @v2 ON ?=?"),
    ("exec sp_executesql N'INSERT INTO a SELECT * FROM b WHERE id = @p0 AND s = ''x''',N'@p0 int',@p0=1001",
     "sp_executesql:INSERT INTO a SELECT * FROM b WHERE id = @p0 AND s = ?"),  # shaped by the inner statement
    ("EXEC sp_executesql N'DELETE FROM c WHERE id = 7'", "sp_executesql:DELETE FROM c WHERE id = ?"),
    # dynamic SQL in a literal: the literal decides the lineage, so the text is its own shape
    ("EXEC (N'INSERT INTO a SELECT * FROM b')", "EXEC (N'INSERT INTO a SELECT * FROM b')"),
    ("execute('DELETE FROM c WHERE id = 7')", "execute('DELETE FROM c WHERE id = 7')"),
    ("EXEC sys.sp_executesql @stmt = N'INSERT INTO a SELECT 1'",
     "EXEC sys.sp_executesql @stmt = N'INSERT INTO a SELECT 1'"),
    ("exec sp_executesql N'EXEC (''DELETE FROM d'')'", "sp_executesql:EXEC ('DELETE FROM d')"),
    ("EXEC dbo.load_sales @day = '2024-05-01'", "EXEC dbo.load_sales @day = ?"),  # a procedure: literals are values
])
def test_statement_shape(sql, shape):
    assert statement_shape(sql) == shape


@pytest.mark.parametrize("first, second", [
    ("EXEC (N'INSERT INTO a SELECT * FROM b')", "EXEC (N'INSERT INTO c SELECT * FROM d')"),
    ("EXEC sp_executesql @stmt = N'INSERT INTO a SELECT * FROM b'",
     "EXEC sp_executesql @stmt = N'INSERT INTO c SELECT * FROM d'"),
])
def test_dynamic_sql_differing_in_its_literal_is_not_served_from_the_cache(first, second):
    cache = LineageCache()
    assert cache.lineage(first, "DW").outputs == ("DW.dbo.a",)
    assert cache.lineage(second, "DW").outputs == ("DW.dbo.c",)


# ---- each sample alone ----------------------------------------------------------------------------------

# sample -> the child runs it gives alone: (job name, inputs, outputs)
SAMPLE_CASES = [
    ("01_sql_statement_completed_insert_select.xml", [
        ("ssis_load_fact_sales.insert_dw_dbo_factsales",
         ["DW.dbo.DimDate", "DW.dbo.DimProduct", "DW.dbo.DimStore", "Staging.dbo.SalesLines"], ["DW.dbo.FactSales"])]),
    ("02_sql_statement_completed_select_into_temp.xml", [
        ("microsoft_sql_server_management_studio_query.select_into_wideworldimporters_sales_orderlines",
         ["WideWorldImporters.Sales.OrderLines", "WideWorldImporters.Sales.Orders"], [])]),
    ("03_sp_statement_completed_merge.xml", [
        ("net_sql_client_data_provider.usp_load_dim_customer.merge_dw_dbo_dimcustomer",
         ["DW.ref.Region", "DW.staging.Customer"], ["DW.dbo.DimCustomer", "DW.etl.MergeAudit"])]),
    ("04_sql_statement_completed_update_join.xml", [
        ("order_status_sync.update_ordersdb_dbo_orders", ["OrdersDb.staging.OrderStatus"], ["OrdersDb.dbo.Orders"])]),
    ("05_sql_batch_completed_cte_insert.xml", [
        ("sqlcmd.insert_wideworldimporters_reporting_customerlatestorder",
         ["WideWorldImporters.Sales.Customers", "WideWorldImporters.Sales.Orders"],
         ["WideWorldImporters.reporting.CustomerLatestOrder"])]),
    ("06_rpc_completed_exec_proc.xml", []),  # EXEC of a procedure: no lineage of its own
    ("07_module_end_proc.xml", []),  # a module end without statements
    ("08_rpc_completed_sp_executesql.xml", [
        ("core_microsoft_sql_client_data_provider.insert_ordersdb_dbo_auditlog", ["OrdersDb.dbo.Orders"],
         ["OrdersDb.dbo.AuditLog"])]),
    ("09_sql_statement_completed_insert_from_temp.xml", [
        ("microsoft_sql_server_management_studio_query.insert_reportingdb_sales_orderarchive",
         ["ReportingDb.Sales.OrderArchive"], ["ReportingDb.Sales.OrderArchive"])]),
    ("10_ring_buffer_target.xml", [  # the batch is covered by its statement (same activity id)
        ("sqlagent.job_8f1c2d3e4b5a69788796a5b4c3d2e1f0.step_2.insert_finance_dbo_glbalances",
         ["Finance.dbo.JournalLines", "MasterData.dbo.Accounts"], ["Finance.dbo.GLBalances"])]),
]


@pytest.mark.parametrize("sample,children", SAMPLE_CASES, ids=[c[0][:2] for c in SAMPLE_CASES])
def test_each_sample(tmp_path, sample, children):
    code, events = harvest(tmp_path, "--xml", str(SAMPLES / sample))
    assert code == 0
    completes = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["facets"]["jobType"]["jobType"]
                 == "QUERY"]
    assert [(e["job"]["name"], [d["name"] for d in e["inputs"]], [d["name"] for d in e["outputs"]])
            for e in completes] == children
    for event in events:
        assert_valid_event(event)
        for ds in event["inputs"] + event["outputs"]:
            assert ds["namespace"] == NS


# ---- the whole sample log -------------------------------------------------------------------------------

SSMS = "microsoft_sql_server_management_studio_query"
NET = "net_sql_client_data_provider"
AGENT = "sqlagent.job_8f1c2d3e4b5a69788796a5b4c3d2e1f0.step_2"
CORE = "core_microsoft_sql_client_data_provider"
FACT_IN = ["DW.dbo.DimDate", "DW.dbo.DimProduct", "DW.dbo.DimStore", "Staging.dbo.SalesLines"]
WWI = ["WideWorldImporters.Sales.OrderLines", "WideWorldImporters.Sales.Orders"]
MERGE_IN, MERGE_OUT = ["DW.ref.Region", "DW.staging.Customer"], ["DW.dbo.DimCustomer", "DW.etl.MergeAudit"]
CTE_IN, CTE_OUT = ["WideWorldImporters.Sales.Customers", "WideWorldImporters.Sales.Orders"], [
    "WideWorldImporters.reporting.CustomerLatestOrder"]
GL_IN, GL_OUT = ["Finance.dbo.JournalLines", "MasterData.dbo.Accounts"], ["Finance.dbo.GLBalances"]
ARCHIVE = "ReportingDb.Sales.OrderArchive"

FULL_LOG_EVENTS = [
    ("START", "ssis_load_fact_sales", None, [], []),
    ("START", "ssis_load_fact_sales.insert_dw_dbo_factsales", "ssis_load_fact_sales", FACT_IN, ["DW.dbo.FactSales"]),
    ("COMPLETE", "ssis_load_fact_sales.insert_dw_dbo_factsales", "ssis_load_fact_sales", FACT_IN,
     ["DW.dbo.FactSales"]),
    ("START", SSMS, None, [], []),
    ("START", f"{SSMS}.select_into_wideworldimporters_sales_orderlines", SSMS, WWI, []),
    ("COMPLETE", f"{SSMS}.select_into_wideworldimporters_sales_orderlines", SSMS, WWI, []),
    # reads #recent_orders: resolved to the tables that filled it
    ("START", f"{SSMS}.insert_reportingdb_sales_orderarchive", SSMS, [ARCHIVE, *WWI], [ARCHIVE]),
    ("COMPLETE", f"{SSMS}.insert_reportingdb_sales_orderarchive", SSMS, [ARCHIVE, *WWI], [ARCHIVE]),
    ("START", NET, None, [], []),
    ("START", f"{NET}.usp_load_dim_customer", NET, [], []),  # the procedure's execution
    ("START", f"{NET}.usp_load_dim_customer.merge_dw_dbo_dimcustomer", f"{NET}.usp_load_dim_customer", MERGE_IN,
     MERGE_OUT),
    ("COMPLETE", f"{NET}.usp_load_dim_customer.merge_dw_dbo_dimcustomer", f"{NET}.usp_load_dim_customer", MERGE_IN,
     MERGE_OUT),
    ("COMPLETE", f"{NET}.usp_load_dim_customer", NET, [], []),  # module_end
    ("START", "order_status_sync", None, [], []),
    ("START", "order_status_sync.update_ordersdb_dbo_orders", "order_status_sync", ["OrdersDb.staging.OrderStatus"],
     ["OrdersDb.dbo.Orders"]),
    ("COMPLETE", "order_status_sync.update_ordersdb_dbo_orders", "order_status_sync",
     ["OrdersDb.staging.OrderStatus"], ["OrdersDb.dbo.Orders"]),
    # 03:02 is more than 30 min after 02:30: the runs idle since then are completed
    ("COMPLETE", "ssis_load_fact_sales", None, FACT_IN, ["DW.dbo.FactSales"]),
    ("COMPLETE", SSMS, None, [*WWI, ARCHIVE], [ARCHIVE]),
    ("COMPLETE", NET, None, MERGE_IN, MERGE_OUT),
    ("START", "sqlcmd", None, [], []),
    ("START", "sqlcmd.insert_wideworldimporters_reporting_customerlatestorder", "sqlcmd", CTE_IN, CTE_OUT),
    ("COMPLETE", "sqlcmd.insert_wideworldimporters_reporting_customerlatestorder", "sqlcmd", CTE_IN, CTE_OUT),
    ("START", CORE, None, [], []),  # rpc_completed sp_executesql: the statement inside
    ("START", f"{CORE}.insert_ordersdb_dbo_auditlog", CORE, ["OrdersDb.dbo.Orders"], ["OrdersDb.dbo.AuditLog"]),
    ("COMPLETE", f"{CORE}.insert_ordersdb_dbo_auditlog", CORE, ["OrdersDb.dbo.Orders"], ["OrdersDb.dbo.AuditLog"]),
    ("COMPLETE", "order_status_sync", None, ["OrdersDb.staging.OrderStatus"], ["OrdersDb.dbo.Orders"]),
    ("COMPLETE", "sqlcmd", None, CTE_IN, CTE_OUT),
    ("START", AGENT, None, [], []),
    ("START", f"{AGENT}.insert_finance_dbo_glbalances", AGENT, GL_IN, GL_OUT),
    ("COMPLETE", f"{AGENT}.insert_finance_dbo_glbalances", AGENT, GL_IN, GL_OUT),
    ("COMPLETE", CORE, None, ["OrdersDb.dbo.Orders"], ["OrdersDb.dbo.AuditLog"]),
    ("COMPLETE", AGENT, None, GL_IN, GL_OUT),
]


def test_full_sample_log_exact_events(tmp_path, capsys):
    log = write_log(tmp_path / "all.xml", sample_events())
    code, events = harvest(tmp_path, "--xml", str(log))
    assert code == 0
    assert [brief(e) for e in events] == FULL_LOG_EVENTS
    for event in events:
        assert_valid_event(event)
        assert event["job"]["namespace"] == "default"
    by_run = {}
    for event in events:
        by_run.setdefault(event["run"]["runId"], []).append(event)
    for run_events in by_run.values():  # one START and one terminal per run, same job
        assert [e["eventType"] for e in run_events] == ["START", "COMPLETE"]
        assert len({e["job"]["name"] for e in run_events}) == 1
    merge = next(e for e in events if e["job"]["name"].endswith("merge_dw_dbo_dimcustomer"))
    task = next(e for e in events if e["job"]["name"] == NET)
    parent = merge["run"]["facets"]["parent"]
    assert parent["root"]["run"]["runId"] == task["run"]["runId"]  # root = the task run
    assert merge["job"]["facets"]["sql"]["query"].startswith("MERGE dbo.DimCustomer AS tgt")
    assert merge["job"]["facets"]["jobType"] == {**merge["job"]["facets"]["jobType"], "jobType": "QUERY",
                                                 "integration": "SQLSERVER", "processingType": "BATCH"}
    assert merge["outputs"][0]["namespace"] == NS
    assert task["job"]["facets"]["jobType"]["jobType"] == "TASK"
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert summary == ("harvest sqlserver: 11 events read, 8 statements (8 with lineage), 16 runs emitted "
                       "(32 events), 0 unparsed, 0 unreadable; no state kept")


def test_same_log_twice_gives_identical_events(tmp_path):
    log = write_log(tmp_path / "all.xml", sample_events())
    _, first = harvest(tmp_path, "--xml", str(log), out="a.jsonl")
    _, second = harvest(tmp_path, "--xml", str(log), out="b.jsonl")
    assert first and json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


# ---- parents, markers, failures -------------------------------------------------------------------------

def test_airflow_parent_from_app_name_and_from_comment(tmp_path):
    log = write_log(tmp_path / "log.xml", [
        xe("sql_statement_completed", at(0), "INSERT INTO dbo.b SELECT * FROM dbo.a",
           app=f"python_task::task1 openlineage_parent_id={AIRFLOW}", seq=1),
        xe("sql_statement_completed", at(1), f"/* openlineage_parent_id={AIRFLOW[:-1]}2 */ DELETE FROM dbo.c",
           app="python_task::task2", seq=2),
    ])
    code, events = harvest(tmp_path, "--xml", str(log))
    assert code == 0
    tasks = [e for e in events if e["eventType"] == "START" and e["job"]["facets"]["jobType"]["jobType"] == "TASK"]
    assert [(t["job"]["name"], {k: t["run"]["facets"]["parent"]["job"][k] for k in ("namespace", "name")},
             t["run"]["facets"]["parent"]["run"]["runId"])
            for t in tasks] == [
        ("python_task.task1", {"namespace": "airflow", "name": "etl_dag.load_task"}, AIRFLOW_RUN),
        ("python_task.task2", {"namespace": "airflow", "name": "etl_dag.load_task"}, AIRFLOW_RUN[:-1] + "2")]
    child = next(e for e in events if e["job"]["name"] == "python_task.task1.insert_sales_dbo_b")
    assert child["run"]["facets"]["parent"]["root"]["run"]["runId"] == AIRFLOW_RUN  # the Airflow run is the root


def test_marker_and_failed_batch(tmp_path):
    log = write_log(tmp_path / "log.xml", [
        xe("sql_statement_completed", at(0), "INSERT INTO dbo.b SELECT * FROM dbo.a", seq=1),
        xe("sql_statement_completed", at(1), "-- openlineage_run_marker\nINSERT INTO dbo.b SELECT * FROM dbo.a",
           seq=2),
        xe("sql_batch_completed", at(2), "UPDATE dbo.b SET x = 1", seq=3, result="Error"),
    ])
    code, events = harvest(tmp_path, "--xml", str(log))
    assert code == 0
    task_runs = {e["run"]["runId"] for e in events if e["job"]["name"] == "python_task.task1"}
    assert len(task_runs) == 2  # the marker started a second run of the same job
    failed = [e for e in events if e["eventType"] == "FAIL"]
    assert [(e["job"]["name"], e["run"]["facets"]["errorMessage"]["message"]) for e in failed] == [
        ("python_task.task1.update_sales_dbo_b", "result: Error")]
    for event in events:
        assert_valid_event(event)


def err(when: datetime, severity: int, number: int, message: str, activity: str, seq: int = 1) -> bytes:
    """An error_reported event (TRACK_CAUSALITY on: it carries the request's attach_activity_id)."""
    data = (f'<data name="error_number"><value>{number}</value></data>'
            f'<data name="severity"><value>{severity}</value></data>'
            f'<data name="message"><value><![CDATA[{message}]]></value></data>')
    return xe("error_reported", when, extra=data, seq=seq, activity=f"{activity}-{seq}")


ACT = "A1B2C3D4-0000-4000-8000-00000000000"
PK = "Violation of PRIMARY KEY constraint 'PK_b'. Cannot insert duplicate key in object 'dbo.b'."
INSERT = "INSERT INTO dbo.b SELECT * FROM dbo.a"
SECOND = T0 + timedelta(seconds=1)
# events of one request, expected (job name suffix, outcome, error message) of each statement run
ERROR_CASES = [
    ("error during the statement fails it", [
        err(T0 + timedelta(milliseconds=500), 14, 2627, PK, ACT + "1", 1),
        err(T0 + timedelta(milliseconds=500), 10, 3621, "The statement has been terminated.", ACT + "1", 2),
        xe("sql_statement_completed", SECOND, INSERT, seq=3, activity=ACT + "1-3", duration_us=1_000_000)],
     [("insert_sales_dbo_b", "FAIL", f"Msg 2627, Level 14: {PK}")]),
    ("informational message (severity 10) does not", [
        err(T0 + timedelta(milliseconds=500), 10, 0, "Warning: Null value is eliminated", ACT + "2"),
        xe("sql_statement_completed", SECOND, INSERT, seq=2, activity=ACT + "2-2", duration_us=1_000_000)],
     [("insert_sales_dbo_b", "COMPLETE", None)]),
    ("error of a statement that logged no completion does not fail the next one", [
        err(T0, 16, 208, "Invalid object name 'dbo.x'.", ACT + "3"),
        xe("sql_statement_completed", T0 + timedelta(seconds=5), INSERT, seq=2, activity=ACT + "3-2",
           duration_us=1_000_000)],
     [("insert_sales_dbo_b", "COMPLETE", None)]),
    ("error in another request does not", [
        err(T0 + timedelta(milliseconds=500), 16, 8134, "Divide by zero error encountered.", ACT + "9"),
        xe("sql_statement_completed", SECOND, INSERT, seq=2, activity=ACT + "4-2", duration_us=1_000_000)],
     [("insert_sales_dbo_b", "COMPLETE", None)]),
    ("caught by TRY/CATCH: the statement failed though the batch did not", [
        err(T0 + timedelta(milliseconds=500), 16, 8134, "Divide by zero error encountered.", ACT + "5"),
        xe("sql_statement_completed", SECOND, "UPDATE dbo.b SET x = 1 / 0", seq=2, activity=ACT + "5-2",
           duration_us=1_000_000),
        xe("sql_statement_completed", SECOND + timedelta(seconds=1), INSERT, seq=3, activity=ACT + "5-3"),
        xe("sql_batch_completed", SECOND + timedelta(seconds=1), "BEGIN TRY ... END CATCH", seq=4,
           activity=ACT + "5-4", result="OK")],
     [("update_sales_dbo_b", "FAIL", "Msg 8134, Level 16: Divide by zero error encountered."),
      ("insert_sales_dbo_b", "COMPLETE", None)]),
    ("a failed batch read as the statement carries the error's message", [
        err(T0 + timedelta(milliseconds=500), 16, 8134, "Divide by zero error encountered.", ACT + "6"),
        xe("sql_batch_completed", SECOND, "UPDATE dbo.b SET x = 1 / 0", seq=2, activity=ACT + "6-2",
           result="Error", duration_us=1_000_000)],
     [("update_sales_dbo_b", "FAIL", "Msg 8134, Level 16: Divide by zero error encountered.")]),
]


@pytest.mark.parametrize("events, expected", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_error_reported_fails_the_statement_it_interrupted(tmp_path, events, expected):
    code, out = harvest(tmp_path, "--xml", str(write_log(tmp_path / "log.xml", events)))
    assert code == 0
    ends = [e for e in out if e["eventType"] in ("COMPLETE", "FAIL") and e["job"]["name"] != "python_task.task1"]
    assert [(e["job"]["name"].removeprefix("python_task.task1."), e["eventType"],
             e["run"]["facets"].get("errorMessage", {}).get("message")) for e in ends] == expected
    for event in out:
        assert_valid_event(event)


def test_secrets_in_statements_are_redacted(tmp_path):
    log = write_log(tmp_path / "log.xml", [xe(
        "sql_statement_completed", at(0),
        "INSERT INTO dbo.b SELECT * FROM OPENROWSET('SQLNCLI', 'Server=x;UID=sa;PWD=Hunter2secret;', 'SELECT 1')")])
    _, events = harvest(tmp_path, "--xml", str(log))
    assert events and "Hunter2secret" not in json.dumps(events)


# ---- bad input and exit codes ---------------------------------------------------------------------------

GOOD = xe("sql_statement_completed", at(0), "INSERT INTO dbo.b SELECT * FROM dbo.a", seq=1)
GOOD2 = xe("sql_statement_completed", at(1), "INSERT INTO dbo.c SELECT * FROM dbo.b", seq=2)

# name -> (log lines, exit code, summary fragment); GOOD and GOOD2 are always harvested
BAD_INPUT_CASES = [
    ("clean", [GOOD, GOOD2], 0, "0 unparsed, 0 unreadable"),
    ("truncated event", [GOOD, GOOD2[:200], GOOD2], 1, "1 unreadable (truncated event: 1)"),
    ("invalid UTF-8", [GOOD, GOOD2.replace(b"dbo.c", b"dbo.\xff"), GOOD2], 1, "1 unreadable (invalid UTF-8: 1)"),
    ("unknown event", [GOOD, xe("lock_acquired", at(0.5)), GOOD2], 0, "0 unreadable"),
    ("unparseable statement", [GOOD, xe("sql_statement_completed", at(0.5), "INSERT INTO (((", seq=9), GOOD2], 1,
     "1 unparsed ("),
    ("10 MB statement", [GOOD, xe("sql_statement_completed", at(0.5), "INSERT INTO dbo.z SELECT " + "1+" * 5_000_000
                                  + "1", seq=9), GOOD2], 1,
     "1 unparsed (statement longer than 1000000 characters: 1)"),
]


@pytest.mark.parametrize("lines,code,fragment", [c[1:] for c in BAD_INPUT_CASES], ids=[c[0] for c in BAD_INPUT_CASES])
def test_bad_input_is_counted_and_skipped(tmp_path, capsys, lines, code, fragment):
    log = write_log(tmp_path / "log.xml", lines)
    got, events = harvest(tmp_path, "--xml", str(log))
    assert got == code
    children = [e["job"]["name"] for e in events if e["eventType"] == "COMPLETE"
                and e["job"]["facets"]["jobType"]["jobType"] == "QUERY"]
    assert children == ["python_task.task1.insert_sales_dbo_b", "python_task.task1.insert_sales_dbo_c"]
    assert fragment in capsys.readouterr().err


USAGE_CASES = [
    ([], "give --xml FILE"),
    (["--xml", "/nonexistent.xml"], "no such file"),
    (["--xml", "/tmp"], "/tmp: a directory; give the export file itself"),
    (["--xml", "/dev/null"], "/dev/null: not a regular file"),
    (["--xml", "x.xml", "--dsn", "prod"], "give --xml FILE"),
    (["--connection-string", "Driver=x;Server=db01;PWD=secret"], "contains a password"),
    (["--dsn", "prod", "--password-env", "NOT_SET_ANYWHERE_42"], "NOT_SET_ANYWHERE_42"),
    (["--xml", "-", "--state", "s.json"], "cannot keep a position in stdin"),
]


@pytest.mark.parametrize("args,message", USAGE_CASES)
def test_usage_errors_exit_2(tmp_path, capsys, args, message):
    assert main(["sqlserver", "--server", SERVER, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "secret" not in err.replace("secrets", "")


def test_argparse_errors_exit_2():
    with pytest.raises(SystemExit) as exit_info:
        main(["sqlserver", "--idle-gap", "soon"])
    assert exit_info.value.code == 2


def test_dry_run_prints_events_and_keeps_no_state(tmp_path, capsys, caplog):
    log = write_log(tmp_path / "log.xml", [GOOD])
    state = tmp_path / "state.json"
    with caplog.at_level("INFO"):
        assert main(["sqlserver", "--server", SERVER, "--xml", str(log), "--dry-run", "--state", str(state)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["eventType"] for line in out] == ["START", "START", "COMPLETE", "COMPLETE"]
    assert not state.exists()
    # the closing line does not say "delivered": nothing was sent
    assert "lineage events: 4 printed to stdout (dry run: none sent), 0 spooled" in caplog.text


def test_dry_run_neither_replays_nor_adds_to_the_real_spool(tmp_path, capsys):
    # a harvest with the backend down spools its events; a dry run afterwards (same configuration) must leave
    # them for the backend, not print them and empty the spool
    log = write_log(tmp_path / "log.xml", [GOOD])
    down = ["transport.type=http", f"transport.url=http://127.0.0.1:{free_port()}", "transport.retry.total=0",
            f"spool.dir={tmp_path / 'spool'}"]
    code, _ = harvest(tmp_path, "--xml", str(log), "--state", str(tmp_path / "state.json"), conf=down)
    spooled = sorted(p.read_bytes() for p in (tmp_path / "spool").rglob("*") if p.is_file())
    assert code == 3 and spooled
    capsys.readouterr()
    other = write_log(tmp_path / "other.xml", [GOOD2])
    assert main(["sqlserver", "--server", SERVER, "--xml", str(other), "--dry-run",
                 *[a for c in down for a in ("--conf", c)]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["job"]["name"] for line in out] == [  # other.xml's, none of the spool's
        "python_task.task1", "python_task.task1.insert_sales_dbo_c", "python_task.task1.insert_sales_dbo_c",
        "python_task.task1"]
    assert sorted(p.read_bytes() for p in (tmp_path / "spool").rglob("*") if p.is_file()) == spooled


def test_dry_run_into_a_reader_that_stops_early_keeps_nothing(tmp_path):
    # `harvest ... --dry-run | head -1`: the README's way to look first; the events the reader did not take are
    # neither an error nor spooled for the configured backend
    import subprocess
    import sys

    log = write_log(tmp_path / "log.xml", [GOOD, GOOD2] * 50)
    spool = tmp_path / "spool"
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(tmp_path / "state-dir"),
           "OPENLINEAGE_URL": f"http://127.0.0.1:{free_port()}"}
    pipeline = subprocess.run(
        f"{sys.executable} -m harvesters.cli sqlserver --server {SERVER} --xml {log} --dry-run "
        f"--conf spool.dir={spool} | head -1", shell=True, env=env, capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[3])
    assert json.loads(pipeline.stdout)["eventType"] == "START"
    assert "Traceback" not in pipeline.stderr and "not delivered" not in pipeline.stderr, pipeline.stderr
    assert not [p for p in spool.rglob("*") if p.is_file()] and not (tmp_path / "state-dir").exists()


@pytest.mark.parametrize("where, reason", [
    ("under-a-file", "afile is a file, not a directory"),  # mkdir said only "File exists"
    ("read-only", "Read-only file system"),
])
def test_an_unusable_state_directory_is_a_usage_error(tmp_path, capsys, where, reason):
    log = write_log(tmp_path / "log.xml", [GOOD])
    if where == "under-a-file":
        (tmp_path / "afile").write_text("")
        state = tmp_path / "afile" / "state.json"
    else:
        (tmp_path / "ro").mkdir()
        state = tmp_path / "ro" / "state.json"
        subprocess_run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(tmp_path / "ro")])
    try:
        code, events = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    finally:
        if where == "read-only":
            subprocess_run(["umount", str(tmp_path / "ro")])
    err = capsys.readouterr().err
    assert (code, events) == (2, [])
    assert err.startswith("harvest sqlserver: cannot lock the state next to") and "Traceback" not in err
    assert err.strip().endswith(reason), err


def test_a_state_that_cannot_be_written_keeps_the_old_one_and_says_so(tmp_path, capsys):
    # the disk full at the state's write: the events were delivered, the old state stays (the next harvest sends
    # them again: duplicates, nothing lost), no temp file is left behind, the summary line says it
    log = write_log(tmp_path / "log.xml", [GOOD])
    full = tmp_path / "full"
    full.mkdir()
    subprocess_run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)])
    try:
        (full / "filler").write_bytes(b"x" * 12288)
        state = full / "state.json"
        code, events = harvest(tmp_path, "--xml", str(log), "--state", str(state))
        left = sorted(p.name for p in full.iterdir())
    finally:
        subprocess_run(["umount", str(full)])
    err = capsys.readouterr().err
    assert (code, len(events)) == (1, 4)
    assert "state NOT saved to" in err and "Traceback" not in err
    assert left == ["filler", "state.json.lock", "state.json.lock.pid"]


def subprocess_run(argv: list[str]) -> None:
    import subprocess

    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"{' '.join(argv)}: {done.stderr.strip()} (needs root, as CI is)")


# ---- cron behaviour: state, resume, lock ----------------------------------------------------------------

def test_rerun_emits_nothing_new_and_appended_events_resume(tmp_path):
    log = write_log(tmp_path / "log.xml", [GOOD, GOOD2])
    state = tmp_path / "state.json"
    code, first = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert code == 0 and len(first) == 6
    code, again = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert code == 0 and again == []
    later = xe("sql_statement_completed", at(24 * 60), "INSERT INTO dbo.d SELECT * FROM dbo.c", seq=3)
    with open(log, "ab") as f:
        f.write(later + b"\n")
    code, third = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert code == 0
    assert [brief(e)[:2] for e in third] == [("START", "python_task.task1"),
                                              ("START", "python_task.task1.insert_sales_dbo_d"),
                                              ("COMPLETE", "python_task.task1.insert_sales_dbo_d"),
                                              ("COMPLETE", "python_task.task1")]
    assert third[0]["run"]["runId"] != first[0]["run"]["runId"]  # tomorrow: a new run of the same job


def test_an_error_read_in_one_harvest_fails_its_statement_read_in_the_next(tmp_path):
    log = write_log(tmp_path / "log.xml", [err(T0 + timedelta(milliseconds=500), 16, 8134,
                                               "Divide by zero error encountered.", ACT + "7")])
    state = tmp_path / "state.json"
    assert harvest(tmp_path, "--xml", str(log), "--state", str(state)) == (0, [])
    with open(log, "ab") as f:
        f.write(xe("sql_statement_completed", SECOND, INSERT, seq=2, activity=ACT + "7-2", duration_us=1_000_000)
                + b"\n")
    code, events = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert code == 0
    assert [(e["eventType"], e["run"]["facets"].get("errorMessage", {}).get("message")) for e in events
            if e["job"]["name"] == "python_task.task1.insert_sales_dbo_b"] == [
        ("START", None), ("FAIL", "Msg 8134, Level 16: Divide by zero error encountered.")]


def test_task_still_running_is_kept_open_and_continued(tmp_path):
    # --until bounds the first harvest in the middle of a task: its run stays open in the state, the second
    # harvest continues it; together they emit exactly what one harvest of the whole log emits
    events = [xe("sql_statement_completed", at(m), f"INSERT INTO dbo.t{m} SELECT * FROM dbo.a", seq=m + 1)
              for m in (0, 5, 10)]
    log = write_log(tmp_path / "log.xml", events)
    state = tmp_path / "state.json"
    _, whole = harvest(tmp_path, "--xml", str(log), out="whole.jsonl")
    _, first = harvest(tmp_path, "--xml", str(log), "--state", str(state), "--until", at(7).isoformat())
    assert [brief(e)[:2] for e in first] == [("START", "python_task.task1"),
                                             ("START", "python_task.task1.insert_sales_dbo_t0"),
                                             ("COMPLETE", "python_task.task1.insert_sales_dbo_t0"),
                                             ("START", "python_task.task1.insert_sales_dbo_t5"),
                                             ("COMPLETE", "python_task.task1.insert_sales_dbo_t5")]
    assert len(json.loads(state.read_text())["open_runs"]) == 1
    _, second = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert json.dumps(first + second, sort_keys=True) == json.dumps(whole, sort_keys=True)
    assert json.loads(state.read_text())["open_runs"] == []


def test_failed_delivery_does_not_advance_the_state(tmp_path, capsys):
    log = write_log(tmp_path / "log.xml", [GOOD])
    state = tmp_path / "state.json"
    dead = ["transport.type=http", f"transport.url=http://127.0.0.1:{free_port()}", "transport.retry.total=0",
            f"spool.dir={tmp_path / 'spool'}", "spool.maxBytes=10"]  # backend down and the spool full: dropped
    code, _ = harvest(tmp_path, "--xml", str(log), "--state", str(state), conf=dead)
    assert code == 1 and not state.exists()
    assert "could not be delivered nor spooled: state not advanced" in capsys.readouterr().err
    # spooled counts as safe: the state advances and the spool replays later
    spooling = dead[:-1]
    code, _ = harvest(tmp_path, "--xml", str(log), "--state", str(state), conf=spooling)
    assert code == 3 and json.loads(state.read_text())["files"][str(log)]["offset"] == log.stat().st_size


def test_overlapping_run_leaves_with_exit_0(tmp_path, capsys):
    from harvesters.core.state import HarvestLock

    log = write_log(tmp_path / "log.xml", [GOOD])
    state = tmp_path / "state.json"
    with HarvestLock(state):
        code, events = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert code == 0 and events == [] and not state.exists()
    assert "holds" in capsys.readouterr().err


def test_replaced_file_is_read_from_the_start(tmp_path):
    log = write_log(tmp_path / "log.xml", [GOOD, GOOD2])
    state = tmp_path / "state.json"
    harvest(tmp_path, "--xml", str(log), "--state", str(state))
    write_log(log, [xe("sql_statement_completed", at(3000), "INSERT INTO dbo.z SELECT * FROM dbo.y", seq=1)]
              + [GOOD, GOOD2])
    _, events = harvest(tmp_path, "--xml", str(log), "--state", str(state))
    assert "python_task.task1.insert_sales_dbo_z" in [e["job"]["name"] for e in events]


def test_unparseable_marker_statement_still_starts_a_new_run(tmp_path):
    log = write_log(tmp_path / "log.xml", [
        GOOD,
        xe("sql_statement_completed", at(0.5), "/* openlineage_run_marker */ INSERT INTO (((", seq=5),
        GOOD2,
    ])
    code, events = harvest(tmp_path, "--xml", str(log))
    assert code == 1  # the unparseable statement is counted ...
    runs = [e["run"]["runId"] for e in events if e["job"]["name"] == "python_task.task1"]
    assert len(set(runs)) == 2  # ... and still marks the start of a new task run


@pytest.mark.parametrize(("where", "disabled"), [("env", True), ("conf", True), ("none", False)])
def test_a_disabled_emission_says_nothing_was_sent(tmp_path, capsys, monkeypatch, where, disabled):
    """'runs emitted' alone read as if the events had gone out, with OPENLINEAGE_DISABLED or disabled: true set."""
    if where == "env":
        monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    log = write_log(tmp_path / "all.xml", sample_events())
    extra = ["--conf", "disabled=true"] if where == "conf" else []
    code, events = harvest(tmp_path, "--xml", str(log), *extra)
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert (code, len(events) == 0) == (0, disabled)
    assert ("emission disabled (OPENLINEAGE_DISABLED or disabled: true): no event was sent" in summary) == disabled
