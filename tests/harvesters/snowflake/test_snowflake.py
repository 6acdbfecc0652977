"""`harvest snowflake --history`: Snowflake query history -> OpenLineage events, through the real CLI.

The lineage table is `tests/cases/snowflake_lineage.jsonl` (one history row + expected lineage per line); the
hand-written exports in `tests/fixtures/snowflake/` are harvested to the file transport and checked exactly and
against the OpenLineage schemas.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from emitter.run_ids import stable_run_id
from harvesters.cli import main
from harvesters.core.outcome import Skip
from harvesters.core.tasks import Statement, task_job_name
from harvesters.snowflake.history import (
    HistoryRow,
    LineageCache,
    RowConverter,
    SeenQueries,
    Unreadable,
    in_start_order,
    object_name,
    parse_time,
    prepare_row,
    procedure_name,
    read_history,
    read_history_files,
    row_from_mapping,
    task_of,
)

from harvest_cli import brief, run_harvest
from http_backend import free_port
from paths import TESTS

HERE = TESTS
FIXTURES = HERE / "fixtures" / "snowflake"
CASES = [json.loads(line) for line in (HERE / "cases" / "snowflake_lineage.jsonl").read_text().splitlines()
         if line.strip()]
ACCOUNT = "MyOrg-Acct"
NS = "snowflake://myorg-acct"
AIRFLOW_RUN = "01900000-0000-7000-8000-000000000001"
AIRFLOW = f"airflow/sales_dag.load/{AIRFLOW_RUN}"
UTC = timezone.utc


def harvest(tmp_path: Path, *args: str, conf: list[str] | None = None):
    """Run the CLI; returns (exit code, events written by this run)."""
    return run_harvest(tmp_path / "events.jsonl", ["snowflake", "--account", ACCOUNT, *args], conf)


def history(tmp_path: Path, rows: list[dict], name: str = "h.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


T0 = datetime(2024, 6, 1, 1, 0, tzinfo=UTC)


def row(qid: str, minute: float, text: str, **columns) -> dict:
    """A history row (JSON lines form) starting ``minute`` minutes after T0, lasting 10 seconds."""
    start = T0 + timedelta(minutes=minute)
    return {"QUERY_ID": qid, "QUERY_TEXT": text, "DATABASE_NAME": "SALES", "SCHEMA_NAME": "PUBLIC",
            "SESSION_ID": "1", "USER_NAME": "ETL", "WAREHOUSE_NAME": "WH", "QUERY_TAG": "etl",
            "EXECUTION_STATUS": "SUCCESS", "START_TIME": start.isoformat(),
            "END_TIME": (start + timedelta(seconds=10)).isoformat(), **columns}


# ---- rows ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("2024-06-01 01:00:00.000 +0000", datetime(2024, 6, 1, 1, tzinfo=UTC)),
    ("2024-06-01 01:00:00.123456789 -0700", datetime(2024, 6, 1, 8, 0, 0, 123456, tzinfo=UTC)),
    ("2024-06-01T01:00:00Z", datetime(2024, 6, 1, 1, tzinfo=UTC)),
    ("2024-06-01T03:00:00.5+02:00", datetime(2024, 6, 1, 1, 0, 0, 500000, tzinfo=UTC)),
    ("2024-06-01 01:00:00", datetime(2024, 6, 1, 1, tzinfo=UTC)),  # naive = UTC
    ("2024-06-01 01:00", datetime(2024, 6, 1, 1, tzinfo=UTC)),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2024-13-01 01:00:00", "01:00:00"])
def test_parse_time_rejects(text):
    with pytest.raises(ValueError):
        parse_time(text)


@pytest.mark.parametrize("values,reason", [
    ({"QUERY_TEXT": "SELECT 1", "START_TIME": "2024-06-01 01:00:00.000 +0000"}, "no QUERY_ID"),
    ({"QUERY_ID": "q", "START_TIME": "soon"}, "bad START_TIME/END_TIME"),
    ({"QUERY_ID": "q", "START_TIME": "2024-06-01T01:00:00Z", "OBJECTS_MODIFIED": "[{"},
     "malformed ACCESS_HISTORY JSON"),
])
def test_unreadable_rows(values, reason):
    assert row_from_mapping(values) == Unreadable(reason)


def test_csv_and_json_lines_read_the_same_rows():
    import io

    with open(FIXTURES / "history.csv", encoding="utf-8-sig", newline="") as f:
        csv_rows = list(read_history(f))
    as_json = "".join(json.dumps({k: v for k, v in zip(
        ["QUERY_ID", "QUERY_TEXT", "START_TIME"], [r.query_id, r.text, r.start.isoformat()])}) + "\n"
        for r in csv_rows)
    json_rows = list(read_history(io.StringIO("\n" + as_json)))
    assert [r.query_id for r in csv_rows] == [r.query_id for r in json_rows] and len(csv_rows) == 7
    assert [r.text for r in csv_rows] == [r.text for r in json_rows]
    assert csv_rows[1].text.count("\n") == 3  # a multi-line QUERY_TEXT inside CSV quotes
    assert csv_rows[6].rows_inserted is None and csv_rows[1].rows_inserted == 120


def test_rows_are_put_in_start_order_within_the_hold():
    rows = [row_from_mapping(row(q, m, "SELECT 1")) for q, m in [("a", 2), ("b", 0), ("c", 1), ("d", 5), ("e", 4)]]
    assert [r.query_id for r in in_start_order(rows, hold=2)] == ["b", "c", "a", "e", "d"]
    # a row later than the hold cannot be put back in place: it comes out when it is read
    assert [r.query_id for r in in_start_order(rows, hold=0)] == ["a", "b", "c", "d", "e"]


# ---- lineage ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_lineage_case(case):
    values = {"QUERY_ID": "q1", "DATABASE_NAME": "SALES", "SCHEMA_NAME": "PUBLIC",
              "START_TIME": "2024-06-01 01:00:00.000 +0000", **case["row"]}
    parsed = row_from_mapping(values)
    result = RowConverter(NS, LineageCache()).convert(parsed)
    if "unparsed" in case:
        assert isinstance(result, Skip) and result.unparsed and result.reason == case["unparsed"]
        return
    assert list(result.inputs) == case["inputs"]
    assert list(result.outputs) == case["outputs"]
    assert list(result.temp_outputs) == case.get("temp_outputs", [])


def test_lineage_cache_by_parameterized_hash_and_shape_but_not_for_identifier():
    cache = LineageCache()
    converter = RowConverter(NS, cache)
    results = [converter.convert(row_from_mapping(row(f"q{i}", i, text, QUERY_PARAMETERIZED_HASH=h)))
               for i, (text, h) in enumerate([
                   ("INSERT INTO a SELECT * FROM b WHERE x = 1", "H1"),
                   ("INSERT INTO a SELECT * FROM b WHERE x = 2", "H1"),  # same hash: cached
                   ("INSERT INTO a SELECT * FROM b WHERE x = 3", ""),  # no hash: by shape
                   ("INSERT INTO a SELECT * FROM b WHERE x = 4", ""),  # same shape: cached
                   ("INSERT INTO IDENTIFIER('c') SELECT * FROM b", "H2"),
                   ("INSERT INTO IDENTIFIER('d') SELECT * FROM b", "H2"),  # same hash, another table
               ])]
    assert [r.outputs for r in results] == [("SALES.PUBLIC.A",)] * 4 + [("SALES.PUBLIC.C",), ("SALES.PUBLIC.D",)]
    assert (cache.hits, cache.misses) == (2, 4)


# rows whose conversion depends on the session's temp tables, the statement limit, or a procedure
SESSION_ROWS = [
    row("t1", 0, "CREATE TEMPORARY TABLE stage_orders AS SELECT * FROM raw.orders"),
    row("t2", 1, "INSERT INTO fct.orders SELECT * FROM stage_orders"),  # reads the temp table
    row("t3", 2, "INSERT INTO fct.orders SELECT * FROM stage_orders",  # ACCESS_HISTORY lists it as a table
        DIRECT_OBJECTS_ACCESSED=json.dumps([{"objectDomain": "Table", "objectName": "SALES.PUBLIC.STAGE_ORDERS"}]),
        OBJECTS_MODIFIED=json.dumps([{"objectDomain": "Table", "objectName": "SALES.FCT.ORDERS"}])),
    row("t4", 3, "INSERT INTO other.t SELECT * FROM stage_orders", SESSION_ID="2"),  # another session's table
    row("t5", 4, "INSERT INTO fct.orders SELECT * FROM raw.orders WHERE note = '" + "x" * 200 + "'"),  # too long
    row("t6", 5, "SELEC nonsense FROM"),  # unparseable
    row("t7", 6, "SELEC nonsense FROM",
        OBJECTS_MODIFIED=json.dumps([{"objectDomain": "Table", "objectName": "A.B.C"}])),
    row("t8", 7, "SELECT 1", EXECUTION_STATUS="RUNNING"),
    row("c1", 8, "CALL etl.load_all()", QUERY_TYPE="CALL", EXECUTION_STATUS="FAILED_WITH_ERROR"),
    row("c2", 9, "INSERT INTO fct.x SELECT * FROM stage_orders", PARENT_QUERY_ID="c1"),
    row("t9", 10, "SHOW TABLES", QUERY_TYPE="SHOW"),
    # tables named by session variables (harvesters/snowflake/variables.py)
    row("v1", 11, "SET (tbl, src) = ('fct.daily', 'raw.events')", QUERY_TYPE="SET"),
    row("v2", 12, "INSERT INTO IDENTIFIER($tbl) SELECT * FROM TABLE($src)", QUERY_TYPE="INSERT"),
    row("v3", 13, "INSERT INTO IDENTIFIER($tbl) SELECT 1", SESSION_ID="2"),  # another session: not known there
    row("v4", 14, "SET tbl = 'fct.other'", EXECUTION_STATUS="FAILED_WITH_ERROR"),  # a failed SET sets nothing
    row("v5", 15, "SET x = 'db.s.t'; INSERT INTO IDENTIFIER($tbl) SELECT * FROM identifier($x)"),
]


def test_prepared_rows_convert_as_the_rows_read_here():
    # the reading process prepares rows with its own lineage cache, never seeing the session's temp tables
    rows = [r for r in read_history_files([str(FIXTURES / "history.csv"), str(FIXTURES / "access_history.jsonl")])
            if isinstance(r, HistoryRow)] + [row_from_mapping(r) for r in SESSION_ROWS]
    here, there, reader_cache = RowConverter(NS, LineageCache(), 120), RowConverter(NS, LineageCache(), 120), \
        LineageCache()
    results = [(here.convert(r), there.convert(prepare_row(r, reader_cache, 120, NS))) for r in rows]
    assert [prepared for _, prepared in results] == [read_here for read_here, _ in results]
    for statement in (s for s, _ in results if isinstance(s, Statement)):  # the id the grouper gave it before
        assert statement.run_id == stable_run_id(statement.start, "statement", NS, statement.query_id)
    by_id = dict(zip([r.query_id for r in rows], [read_here for read_here, _ in results]))
    assert by_id["t2"].temp_inputs == ("stage_orders",) and by_id["t3"].temp_inputs == ("stage_orders", "STAGE_ORDERS")
    assert by_id["t4"].inputs == ("SALES.PUBLIC.STAGE_ORDERS",)
    assert by_id["t5"] == Skip("statement longer than 120 characters", unparsed=True)
    assert by_id["c2"].module == "load_all" and by_id["c2"].temp_inputs == ("stage_orders",)
    assert (by_id["v2"].inputs, by_id["v2"].outputs) == (("SALES.RAW.EVENTS",), ("SALES.FCT.DAILY",))
    assert by_id["v2"].sql == "INSERT INTO IDENTIFIER($tbl) SELECT * FROM TABLE($src)"  # as it ran
    assert by_id["v3"].outputs == ()
    assert (by_id["v5"].inputs, by_id["v5"].outputs) == (("DB.S.T",), ("SALES.FCT.DAILY",))
    assert here.calls == there.calls and here.calls["c1"].failed


@pytest.mark.parametrize("name,expected", [
    ("DB.SCHEMA.TABLE", "DB.SCHEMA.TABLE"),
    ('DB."My Schema"."t.1"', "DB.My Schema.t.1"),
    ('"db"."s"."a""b"', 'db.s.a"b'),
])
def test_object_name(name, expected):
    assert object_name(name) == expected


@pytest.mark.parametrize("sql,expected", [
    ("CALL etl.load(1)", "load"),
    ('call "Ops"."Refresh_All"()', "Refresh_All"),
    ("CALL db.sch.p", "p"),
    ("SELECT 1", None),
])
def test_procedure_name(sql, expected):
    assert procedure_name(sql) == expected


# ---- tags ------------------------------------------------------------------------------------------------

ROOT = "airflow/sales_dag/01900000-0000-7000-8000-0000000000aa"


@pytest.mark.parametrize("tag,text,job,parent,root", [
    ("etl::load_orders", "SELECT 1", "etl.load_orders", None, None),
    ("", "SELECT 1", "etl_svc.transform_wh", None, None),  # untagged: the session's user and warehouse
    (f"etl::load openlineage_parent_id={AIRFLOW}", "SELECT 1", "etl.load", AIRFLOW, None),
    (f"openlineage_parent_id={AIRFLOW}", "SELECT 1", "sales_dag.load.snowflake", AIRFLOW, None),
    (json.dumps({"openlineage_parent_id": AIRFLOW, "openlineage_root_parent_id": ROOT}), "SELECT 1",
     "sales_dag.load.snowflake", AIRFLOW, ROOT),
    (json.dumps({"task": "load_sales", "openlineage_parent_id": AIRFLOW}), "SELECT 1", "load_sales", AIRFLOW, None),
    (json.dumps({"dbt_version": "1.8", "node_id": "model.x"}), "SELECT 1", "etl_svc.transform_wh", None, None),
    ("{not json", "SELECT 1", "not_json", None, None),  # a plain tag after all
    ("", f"/* openlineage_parent_id={AIRFLOW} */ SELECT 1", "sales_dag.load.snowflake", AIRFLOW, None),
    ("nightly", f"-- openlineage_parent_id={AIRFLOW}\nSELECT 1", "nightly", AIRFLOW, None),
])
def test_task_of(tag, text, job, parent, root):
    values = {"QUERY_ID": "q", "QUERY_TEXT": text, "START_TIME": "2024-06-01T01:00:00Z", "QUERY_TAG": tag,
              "USER_NAME": "ETL_SVC", "WAREHOUSE_NAME": "TRANSFORM_WH"}
    found = task_of(row_from_mapping(values))
    assert (task_job_name(found.task), found.parent_id, found.root_parent_id) == (job, parent, root)


# ---- whole exports, exact events -------------------------------------------------------------------------

ETL = "etl.load_orders"
JDOE = "jdoe.adhoc_wh"
FCT = "SALES.ANALYTICS.FCT_ORDERS"
HISTORY_CSV_EVENTS = [
    ("START", ETL, None, [], []),
    # the temporary table: its run lists what filled it as an input only
    ("START", f"{ETL}.create_table_as_select_sales_raw_orders", ETL, ["SALES.RAW.ORDERS"], []),
    ("COMPLETE", f"{ETL}.create_table_as_select_sales_raw_orders", ETL, ["SALES.RAW.ORDERS"], []),
    ("START", JDOE, None, [], []),  # untagged: grouped by session under user.warehouse
    ("START", f"{JDOE}.select_sales_analytics_fct_orders", JDOE, [FCT], []),
    ("COMPLETE", f"{JDOE}.select_sales_analytics_fct_orders", JDOE, [FCT], []),
    # reads the temp table: resolved to the table that filled it; quoted names exact
    ("START", f"{ETL}.insert_sales_analytics_fct_orders", ETL, ["SALES.Ref.customerMap", "SALES.RAW.ORDERS"], [FCT]),
    ("COMPLETE", f"{ETL}.insert_sales_analytics_fct_orders", ETL, ["SALES.Ref.customerMap", "SALES.RAW.ORDERS"],
     [FCT]),
    ("START", "reporting", None, [], []),
    ("START", "reporting.insert_marts_core_daily_sales", "reporting", [FCT], ["MARTS.CORE.Daily Sales"]),
    ("COMPLETE", "reporting.insert_marts_core_daily_sales", "reporting", [FCT], ["MARTS.CORE.Daily Sales"]),
    ("START", f"{ETL}.update_sales_analytics_fct_orders", ETL, [], [FCT]),
    ("FAIL", f"{ETL}.update_sales_analytics_fct_orders", ETL, [], [FCT]),
    ("COMPLETE", ETL, None, ["SALES.RAW.ORDERS", "SALES.Ref.customerMap"], [FCT]),
    ("COMPLETE", JDOE, None, [FCT], []),
    ("COMPLETE", "reporting", None, [FCT], ["MARTS.CORE.Daily Sales"]),
]


def test_history_csv_exact_events(tmp_path, capsys):
    code, events = harvest(tmp_path, "--history", str(FIXTURES / "history.csv"))
    assert code == 0
    assert [brief(e) for e in events] == HISTORY_CSV_EVENTS
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert summary == ("harvest snowflake: 7 history rows read, 7 statements (5 with lineage), "
                       "8 runs emitted (16 events), 0 unparsed, 0 unreadable; no state kept")
    queries = [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "QUERY"]
    assert {e["job"]["facets"]["jobType"]["integration"] for e in events} == {"SNOWFLAKE"}
    for event in queries:
        assert event["run"]["facets"]["externalQuery"]["source"] == NS
        assert event["job"]["facets"]["sql"]["query"]
        assert {d["namespace"] for d in event["inputs"] + event["outputs"]} == {NS}
    by_query = {e["run"]["facets"]["externalQuery"]["externalQueryId"]: e for e in queries if e["eventType"] != "START"}
    insert = by_query["01b4f1a0-0000-0001-0000-000000000003"]
    assert insert["eventTime"] == "2024-06-01T01:00:09+00:00"
    assert insert["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 120
    start = next(e for e in queries if e["eventType"] == "START" and e["run"]["runId"] == insert["run"]["runId"])
    assert start["eventTime"] == "2024-06-01T01:00:06+00:00"
    failed = by_query["01b4f1a0-0000-0001-0000-000000000004"]
    assert failed["run"]["facets"]["errorMessage"]["message"] == "Numeric value 'abc' is not recognized"
    assert "outputFacets" not in failed["outputs"][0] or not failed["outputs"][0]["outputFacets"]


LOAD, EXPORT, OPS = "load_sales", "sales_dag.export.snowflake", "scheduler.etl_wh"
PROC = f"{LOAD}.load_dim_customer"
DIM = "SALES.PUBLIC.DIM_CUSTOMER"
ACCESS_HISTORY_EVENTS = [
    ("START", LOAD, "sales_dag.load", [], []),  # JSON tag: task name and the Airflow parent
    ("START", PROC, LOAD, [], []),  # the CALL: its children's parent
    # ACCESS_HISTORY: direct objects (the view, the target read by MERGE) and the modified table
    ("START", f"{PROC}.merge_sales_public_dim_customer", PROC, ["SALES.STAGING.V_CUSTOMER", DIM], [DIM]),
    ("COMPLETE", f"{PROC}.merge_sales_public_dim_customer", PROC, ["SALES.STAGING.V_CUSTOMER", DIM], [DIM]),
    # text the parser cannot read: ACCESS_HISTORY's base objects and the quoted name, exact
    ("START", f"{PROC}.insert_sales_mart_customer_summary", PROC, [DIM], ["SALES.MART.customer Summary"]),
    ("COMPLETE", f"{PROC}.insert_sales_mart_customer_summary", PROC, [DIM], ["SALES.MART.customer Summary"]),
    ("COMPLETE", PROC, LOAD, [], []),  # at the CALL's END_TIME, once the history passed it
    ("START", EXPORT, "sales_dag.export", [], []),  # tag with only the parent id
    ("START", f"{EXPORT}.unload_sales_public_dim_customer", EXPORT, [DIM], []),  # stage output left out
    ("COMPLETE", f"{EXPORT}.unload_sales_public_dim_customer", EXPORT, [DIM], []),
    ("START", f"{EXPORT}.insert_sales_public_audit", EXPORT, [DIM], ["SALES.PUBLIC.AUDIT"]),  # failed: no
    ("FAIL", f"{EXPORT}.insert_sales_public_audit", EXPORT, [DIM], ["SALES.PUBLIC.AUDIT"]),  # ACCESS_HISTORY row
    ("START", OPS, None, [], []),
    ("START", f"{OPS}.refresh_all", OPS, [], []),
    ("START", f"{OPS}.refresh_all.insert_ops_ops_refresh_log", f"{OPS}.refresh_all", ["OPS.OPS.PENDING"],
     ["OPS.OPS.REFRESH_LOG"]),
    ("COMPLETE", f"{OPS}.refresh_all.insert_ops_ops_refresh_log", f"{OPS}.refresh_all", ["OPS.OPS.PENDING"],
     ["OPS.OPS.REFRESH_LOG"]),
    ("FAIL", f"{OPS}.refresh_all", OPS, [], []),  # the CALL failed
    ("COMPLETE", LOAD, "sales_dag.load", ["SALES.STAGING.V_CUSTOMER", DIM], [DIM, "SALES.MART.customer Summary"]),
    ("COMPLETE", EXPORT, "sales_dag.export", [DIM], ["SALES.PUBLIC.AUDIT"]),
    ("COMPLETE", OPS, None, ["OPS.OPS.PENDING"], ["OPS.OPS.REFRESH_LOG"]),
]


def test_access_history_parents_and_procedures_exact_events(tmp_path):
    code, events = harvest(tmp_path, "--history", str(FIXTURES / "access_history.jsonl"))
    assert code == 0
    assert [brief(e) for e in events] == ACCESS_HISTORY_EVENTS
    by_job = {(e["eventType"], e["job"]["name"]): e for e in events}
    load = by_job[("START", LOAD)]["run"]["facets"]["parent"]
    assert (load["run"]["runId"], load["root"]["job"]["name"]) == (AIRFLOW_RUN, "sales_dag")
    merge = by_job[("COMPLETE", f"{PROC}.merge_sales_public_dim_customer")]
    assert merge["run"]["facets"]["parent"]["root"]["run"]["runId"] == "01900000-0000-7000-8000-0000000000aa"
    assert merge["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 10  # inserted + updated
    call = by_job[("START", PROC)]
    assert call["run"]["facets"]["externalQuery"]["externalQueryId"] == "01b4f2b0-0000-0005-0000-000000000001"
    assert call["job"]["facets"]["sql"]["query"] == "CALL etl.load_dim_customer('2024-06-01')"
    assert by_job[("COMPLETE", PROC)]["eventTime"] == "2024-06-01T02:00:30+00:00"
    failed_call = by_job[("FAIL", f"{OPS}.refresh_all")]["run"]["facets"]
    assert failed_call["errorMessage"]["message"] == "Uncaught exception of type 'STATEMENT_ERROR'"
    assert failed_call["externalQuery"]["externalQueryId"] == "01b4f2b0-0000-0007-0000-000000000001"
    export = by_job[("START", EXPORT)]["run"]["facets"]["parent"]
    assert export["run"]["runId"] == "01900000-0000-7000-8000-000000000002"


def _call(qid: str, start: float, end: float, text: str, parent: str = "", failed: bool = False) -> dict:
    r = row(qid, start, text, QUERY_TYPE="CALL", PARENT_QUERY_ID=parent,
            END_TIME=(T0 + timedelta(minutes=end)).isoformat())
    return {**r, "EXECUTION_STATUS": "FAIL", "ERROR_MESSAGE": "boom"} if failed else r


def test_nested_calls_nest_their_runs(tmp_path):
    """CALL outer() runs CALL inner(): inner's run is a child of outer's, each statement a child of its CALL."""
    rows = [_call("c1", 0, 5, "CALL etl.outer_proc()"),
            _call("c2", 1, 3, "CALL etl.inner_proc(1)", parent="c1", failed=True),
            row("q1", 2, "INSERT INTO t1 SELECT * FROM a", PARENT_QUERY_ID="c2"),
            row("q2", 4, "INSERT INTO t2 SELECT * FROM t1", PARENT_QUERY_ID="c1")]
    code, events = harvest(tmp_path, "--history", str(history(tmp_path, rows)))
    assert code == 0
    outer, inner = "etl.outer_proc", "etl.outer_proc.inner_proc"
    assert [brief(e)[:3] for e in events] == [
        ("START", "etl", None),
        ("START", outer, "etl"),
        ("START", inner, outer),
        ("START", f"{inner}.insert_sales_public_t1", inner),
        ("COMPLETE", f"{inner}.insert_sales_public_t1", inner),
        ("FAIL", inner, outer),
        ("START", f"{outer}.insert_sales_public_t2", outer),
        ("COMPLETE", f"{outer}.insert_sales_public_t2", outer),
        ("COMPLETE", outer, "etl"),
        ("COMPLETE", "etl", None),
    ]
    facets = {(e["eventType"], e["job"]["name"]): e for e in events}
    assert facets[("START", inner)]["run"]["facets"]["externalQuery"]["externalQueryId"] == "c2"
    assert facets[("START", inner)]["job"]["facets"]["sql"]["query"] == "CALL etl.inner_proc(1)"
    assert facets[("FAIL", inner)]["run"]["facets"]["errorMessage"]["message"] == "boom"
    assert facets[("START", outer)]["run"]["facets"]["externalQuery"]["externalQueryId"] == "c1"


def test_same_history_twice_gives_identical_events(tmp_path):
    files = ["--history", str(FIXTURES / "history.csv"), "--history", str(FIXTURES / "access_history.jsonl")]
    _, first = harvest(tmp_path / "a", *files)
    _, second = harvest(tmp_path / "b", *files)
    assert first and json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    runs = {e["run"]["runId"] for e in first if e["job"]["facets"]["jobType"]["jobType"] == "QUERY"}
    assert len(runs) == 10  # one run per query with lineage


def test_secrets_in_query_text_are_redacted(tmp_path):
    text = "CREATE OR REPLACE STAGE s URL='s3://b/p' CREDENTIALS=(AWS_KEY_ID='AKIAIOSFODNN7EXAMPLE' " \
           "AWS_SECRET_KEY='wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'); INSERT INTO t SELECT * FROM u"
    _, events = harvest(tmp_path, "--history", str(history(tmp_path, [row("q1", 0, text)])))
    dumped = json.dumps(events)
    assert "wJalrXUtnFEMI" not in dumped and "AKIAIOSFODNN7EXAMPLE" not in dumped
    assert "SALES.PUBLIC.T" in dumped


# ---- bad input, usage ------------------------------------------------------------------------------------

GOOD = row("q1", 0, "INSERT INTO a SELECT * FROM b")
GOOD2 = row("q2", 1, "INSERT INTO c SELECT * FROM a")


@pytest.mark.parametrize("lines,code,fragment", [
    ([json.dumps(GOOD), "{not json", json.dumps(GOOD2)], 1, "1 unreadable (malformed JSON line: 1)"),
    ([json.dumps(GOOD), json.dumps(row("q9", 0.5, "INSERT INTO (((")), json.dumps(GOOD2)], 1,
     "1 unparsed (unparseable: 1)"),
    ([json.dumps(GOOD), json.dumps(row("q9", 0.5, "SELECT 1", EXECUTION_STATUS="RUNNING")), json.dumps(GOOD2)], 0,
     "3 history rows read, 2 statements (2 with lineage)"),
    ([json.dumps(GOOD), json.dumps(GOOD), json.dumps(GOOD2)], 0, "duplicate rows: 1"),
])
def test_bad_input_is_counted_and_skipped(tmp_path, capsys, lines, code, fragment):
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got, events = harvest(tmp_path, "--history", str(path))
    assert got == code
    assert fragment in capsys.readouterr().err
    assert [e["job"]["name"] for e in events if e["eventType"] == "COMPLETE"] == [
        "etl.insert_sales_public_a", "etl.insert_sales_public_c", "etl"]


@pytest.mark.parametrize("args,message", [
    ([], "give --history FILE, or --connector / --odbc CONNSTR"),
    (["--history", "x.jsonl", "--odbc", "Driver=x"], "give --history FILE, or --connector"),
    (["--history", "/nonexistent.jsonl"], "no such file"),
    (["--history", "/tmp"], "/tmp: a directory; give the export file itself"),
    (["--history", "/dev/null"], "/dev/null: not a regular file"),
    (["--history", str(Path(__file__))], "not a QUERY_HISTORY export"),
    (["--history", "-", "--state", "s.json"], "cannot be kept for stdin"),
    (["--odbc", "Driver=SnowflakeDSIIDriver;PWD=hunter2"], "contains a secret"),
    (["--connector", "--user", "u"], "give one of --password-env VAR or --private-key-file PATH"),
    (["--connector", "--user", "u", "--password-env", "SF_UNSET_PASSWORD_VAR"], "SF_UNSET_PASSWORD_VAR"),
])
def test_usage_errors_exit_2(tmp_path, capsys, args, message):
    assert main(["snowflake", "--account", ACCOUNT, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "hunter2" not in err


# ---- cron behaviour: state, overlapping windows, late rows, lock ----------------------------------------

SYNC = "crm_sync"


def test_overlapping_exports_duplicates_and_late_rows(tmp_path, capsys):
    state = tmp_path / "state.json"
    code, first = harvest(tmp_path, "--history", str(FIXTURES / "window1.jsonl"), "--state", str(state))
    assert code == 0
    assert [brief(e)[:2] for e in first] == [
        ("START", SYNC),
        ("START", f"{SYNC}.insert_ops_sync_accounts"), ("COMPLETE", f"{SYNC}.insert_ops_sync_accounts"),
        ("START", f"{SYNC}.insert_ops_sync_contacts"), ("COMPLETE", f"{SYNC}.insert_ops_sync_contacts"),
        ("START", f"{SYNC}.insert_ops_sync_deals"), ("COMPLETE", f"{SYNC}.insert_ops_sync_deals"),
        ("COMPLETE", SYNC)]  # a log from 2024: nothing stays open
    saved = json.loads(state.read_text())
    assert saved["window_end"] == "2024-06-01T03:20:00+00:00"
    assert sorted(saved["seen"]) == ["01b4f3c0-0000-0008-0000-000000000001", "01b4f3c0-0000-0008-0000-000000000002",
                                     "01b4f3c0-0000-0008-0000-000000000003"]  # all end within the 60 min overlap
    capsys.readouterr()
    # the next export overlaps: two rows again (skipped), one late row ending before 03:20 (taken), one new
    # row, and one row ending more than the overlap before the last window's end (taken to be harvested)
    code, second = harvest(tmp_path, "--history", str(FIXTURES / "window2.jsonl"), "--state", str(state))
    assert code == 0
    assert [brief(e) for e in second] == [
        ("START", SYNC, None, [], []),
        ("START", f"{SYNC}.insert_ops_sync_leads", SYNC, ["OPS.CRM.LEADS"], ["OPS.SYNC.LEADS"]),
        ("COMPLETE", f"{SYNC}.insert_ops_sync_leads", SYNC, ["OPS.CRM.LEADS"], ["OPS.SYNC.LEADS"]),
        ("START", f"{SYNC}.insert_ops_sync_tickets", SYNC, ["OPS.CRM.TICKETS"], ["OPS.SYNC.TICKETS"]),
        ("COMPLETE", f"{SYNC}.insert_ops_sync_tickets", SYNC, ["OPS.CRM.TICKETS"], ["OPS.SYNC.TICKETS"]),
        ("COMPLETE", SYNC, None, ["OPS.CRM.LEADS", "OPS.CRM.TICKETS"], ["OPS.SYNC.LEADS", "OPS.SYNC.TICKETS"])]
    err = capsys.readouterr().err
    assert "duplicate rows: 2" in err and "rows ending before the window: 1" in err
    assert json.loads(state.read_text())["window_end"] == "2024-06-01T03:30:00+00:00"
    all_ids = [e["run"]["facets"]["externalQuery"]["externalQueryId"] for e in first + second
               if e["eventType"] == "START" and "externalQuery" in e["run"]["facets"]]
    assert len(all_ids) == len(set(all_ids)) == 5  # nothing emitted twice
    # the same export again: nothing new
    code, third = harvest(tmp_path, "--history", str(FIXTURES / "window2.jsonl"), "--state", str(state))
    assert code == 0 and third == []


def test_seen_ids_are_bounded_by_the_overlap():
    seen = SeenQueries(slack=timedelta(minutes=10))
    for i in range(10_000):
        start = T0 + timedelta(seconds=i)
        assert seen.add(f"q{i}", start, start + timedelta(seconds=1))
    assert len(seen) <= 600 + 4096  # the last 10 minutes, plus what came since the last pruning
    assert not seen.add("q9999", T0, T0)
    assert sorted(seen.state(T0 + timedelta(seconds=9_991))) == [f"q{i}" for i in range(9_990, 10_000)]


def test_task_still_running_is_kept_open_and_continued(tmp_path):
    rows = [row(f"q{m}", m, f"INSERT INTO t{m} SELECT * FROM a") for m in (0, 5, 10)]
    log = history(tmp_path, rows)
    _, whole = harvest(tmp_path / "whole", "--history", str(log))
    state = tmp_path / "state.json"
    until = (T0 + timedelta(minutes=7)).isoformat()
    _, first = harvest(tmp_path, "--history", str(log), "--state", str(state), "--until", until)
    assert [brief(e)[:2] for e in first] == [("START", "etl"), ("START", "etl.insert_sales_public_t0"),
                                             ("COMPLETE", "etl.insert_sales_public_t0"),
                                             ("START", "etl.insert_sales_public_t5"),
                                             ("COMPLETE", "etl.insert_sales_public_t5")]
    assert len(json.loads(state.read_text())["open_runs"]) == 1
    _, second = harvest(tmp_path, "--history", str(log), "--state", str(state))
    assert json.dumps(first + second, sort_keys=True) == json.dumps(whole, sort_keys=True)
    assert json.loads(state.read_text())["open_runs"] == []


def test_failed_delivery_does_not_advance_the_state(tmp_path, capsys):
    log = history(tmp_path, [GOOD, GOOD2])
    state = tmp_path / "state.json"
    dead = ["transport.type=http", f"transport.url=http://127.0.0.1:{free_port()}", "transport.retry.total=0",
            f"spool.dir={tmp_path / 'spool'}", "spool.maxBytes=10"]  # backend down and the spool full: dropped
    code, _ = harvest(tmp_path, "--history", str(log), "--state", str(state), conf=dead)
    assert code == 1 and not state.exists()
    assert "could not be delivered nor spooled: state not advanced" in capsys.readouterr().err
    # the redo delivers the same queries (nothing was marked seen)
    code, events = harvest(tmp_path, "--history", str(log), "--state", str(state))
    assert code == 0 and len([e for e in events if e["eventType"] == "COMPLETE"]) == 3
    assert sorted(json.loads(state.read_text())["seen"]) == ["q1", "q2"]


def test_overlapping_run_leaves_with_exit_0(tmp_path, capsys):
    from harvesters.core.state import HarvestLock

    state = tmp_path / "state.json"
    with HarvestLock(state):
        code, events = harvest(tmp_path, "--history", str(history(tmp_path, [GOOD])), "--state", str(state))
    assert code == 0 and events == [] and not state.exists()
    assert "holds" in capsys.readouterr().err


def test_dry_run_prints_events_and_keeps_no_state(tmp_path, capsys):
    state = tmp_path / "state.json"
    log = history(tmp_path, [GOOD])
    assert main(["snowflake", "--account", ACCOUNT, "--history", str(log), "--dry-run", "--state", str(state)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["eventType"] for line in out] == ["START", "START", "COMPLETE", "COMPLETE"]
    assert not state.exists()


def test_state_of_another_account_is_refused(tmp_path, capsys):
    state = tmp_path / "state.json"
    log = history(tmp_path, [GOOD])
    assert harvest(tmp_path, "--history", str(log), "--state", str(state))[0] == 0
    assert main(["snowflake", "--account", "other-acct", "--history", str(log), "--state", str(state)]) == 2
    assert "snowflake snowflake://myorg-acct" in capsys.readouterr().err
