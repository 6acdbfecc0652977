"""harvesters.core.tasks: task names, parent ids, grouping into task runs, child runs, temp tables, modules, state."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import attrs
import pytest

from emitter.records import RunRecord
from harvesters.core.tasks import Statement, TaskGrouper, find_parent_ids, statement_job_suffix, task_job_name

NS = "sqlserver://db01:1433"
T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)
AIRFLOW = "airflow/etl_dag.load_task/01900000-0000-7000-8000-000000000001"
AIRFLOW_ROOT = "airflow/etl_dag/01900000-0000-7000-8000-0000000000aa"


@pytest.mark.parametrize("task,job", [
    ("python_task::task1", "python_task.task1"),  # the seed convention
    ("python_task::task1 openlineage_parent_id=" + AIRFLOW, "python_task.task1"),  # parent hint removed
    ("etl::load;openlineage_parent_id=" + AIRFLOW, "etl.load"),
    ("OrderStatusSync", "order_status_sync"),  # Spark NameNormalizer rules
    ("SSIS-LoadFactSales-{7C1E2B40-5A3D-4F0E-9C11-3B8E2D6A9F01}", "ssis_load_fact_sales"),  # execution GUID cut
    ("SQLAgent - TSQL JobStep (Job 0x8F1C2D3E4B5A69788796A5B4C3D2E1F0 : Step 2)",
     "sqlagent.job_8f1c2d3e4b5a69788796a5b4c3d2e1f0.step_2"),
    (".Net SqlClient Data Provider", "net_sql_client_data_provider"),
    ("", "unknown_task"),
])
def test_task_job_name(task, job):
    assert task_job_name(task) == job


@pytest.mark.parametrize("types,outputs,suffix", [
    (("INSERT",), ("db.dbo.b",), "insert_db_dbo_b"),
    (("SET", "INSERT"), ("db.dbo.b",), "insert_db_dbo_b"),  # SET NOCOUNT ON first
    (("BEGIN TRANSACTION", "INSERT", "COMMIT"), ("db.dbo.b",), "insert_db_dbo_b"),
    (("RETURN", "UPDATE"), ("db.dbo.b",), "update_db_dbo_b"),  # IF @@ROWCOUNT = 0 RETURN, then an UPDATE
    (("DISABLE", "UPDATE", "ENABLE"), ("db.dbo.b",), "update_db_dbo_b"),  # DISABLE TRIGGER ... ENABLE TRIGGER
    (("GOTO", "THROW", "RAISERROR", "WAITFOR", "END", "BREAK"), (), "query"),
    (("DECLARE", "OPEN", "FETCH", "INSERT", "CLOSE", "DEALLOCATE"), ("db.dbo.b",), "insert_db_dbo_b"),  # a cursor loop
    (("EXECUTE",), (), "execute"),
])
def test_statement_job_suffix(types, outputs, suffix):
    statement = Statement(query_id="q1", start=T0, end=T0, task="app", host="h", session="1", sql="", namespace=NS,
                          outputs=outputs, statement_types=types)
    assert statement_job_suffix(statement, ()) == suffix


@pytest.mark.parametrize("task,sql,expected", [
    ("app openlineage_parent_id=" + AIRFLOW, "INSERT INTO t SELECT 1", (AIRFLOW, None)),
    ("app", "/* openlineage_parent_id=" + AIRFLOW + " */ INSERT INTO t SELECT 1", (AIRFLOW, None)),
    ("app", "-- openlineage_parent_id=" + AIRFLOW + "\nINSERT INTO t SELECT 1", (AIRFLOW, None)),
    ("app", f"/* openlineage_parent_id={AIRFLOW} openlineage_root_parent_id={AIRFLOW_ROOT} */ SELECT 1",
     (AIRFLOW, AIRFLOW_ROOT)),
    ("app", "SELECT 'openlineage_parent_id=" + AIRFLOW + "'", (None, None)),  # a string, not a comment
    ("app", "SELECT 1", (None, None)),
])
def test_find_parent_ids(task, sql, expected):
    assert find_parent_ids(task, sql) == expected


def stmt(minute: float, sql: str = "x", *, inputs=(), outputs=(), task="python_task::task1", host="h1", session="51",
         seconds: float = 10, **kw) -> Statement:
    start = T0 + timedelta(minutes=minute)
    return Statement(query_id=f"q{minute}{sql}{host}{session}", start=start, end=start + timedelta(seconds=seconds),
                     task=task, host=host, session=session, sql=sql, namespace=NS, inputs=tuple(inputs),
                     outputs=tuple(outputs), statement_types=kw.pop("types", ("INSERT",)), **kw)


def run_all(statements, idle=30, restore_after: int | None = None) -> list[RunRecord]:
    records: list[RunRecord] = []
    grouper = TaskGrouper(records.append, "default", "SQLSERVER", timedelta(minutes=idle))
    for index, s in enumerate(statements):
        if restore_after is not None and index == restore_after:
            saved = grouper.open_runs_state()
            grouper = TaskGrouper(records.append, "default", "SQLSERVER", timedelta(minutes=idle))
            grouper.restore(saved)
        grouper.add(s)
    grouper.close_all()
    return records


def shape(records: list[RunRecord]) -> list[tuple]:
    """(event, job, parent job, inputs, outputs) with run ids replaced by the order they appeared in."""
    ids: dict[str, int] = {}

    def rid(run_id):
        return ids.setdefault(run_id, len(ids))

    return [(r.event_type, r.job.name, rid(r.run_id), r.parent and (r.parent.job.name, rid(r.parent.run_id)),
             [d.name for d in r.inputs], [d.name for d in r.outputs]) for r in records]


TASK, INS_B = "python_task.task1", "python_task.task1.insert_db_dbo_b"

# statements -> expected task runs: list of (task run index, child job names) in emission order
GROUPING_CASES = [
    ("one run", [stmt(0, outputs=["db.dbo.b"]), stmt(5, outputs=["db.dbo.b"])], [[INS_B, INS_B]]),
    ("gap of exactly 30 min continues", [stmt(0, outputs=["db.dbo.b"], seconds=0), stmt(30, outputs=["db.dbo.b"])],
     [[INS_B, INS_B]]),
    ("idle gap > 30 min splits", [stmt(0, outputs=["db.dbo.b"]), stmt(41, outputs=["db.dbo.b"])], [[INS_B], [INS_B]]),
    ("same task tomorrow", [stmt(0, outputs=["db.dbo.b"]), stmt(24 * 60, outputs=["db.dbo.b"])], [[INS_B], [INS_B]]),
    ("run marker splits", [stmt(0, outputs=["db.dbo.b"]), stmt(1, "/* openlineage_run_marker */", outputs=["db.dbo.b"],
                                                                marker=True)], [[INS_B], [INS_B]]),
    ("other session = other run", [stmt(0, outputs=["db.dbo.b"]), stmt(1, outputs=["db.dbo.b"], session="52")],
     [[INS_B], [INS_B]]),
    ("other host = other run", [stmt(0, outputs=["db.dbo.b"]), stmt(1, outputs=["db.dbo.b"], host="h2")],
     [[INS_B], [INS_B]]),
    ("new Airflow parent splits", [stmt(0, outputs=["db.dbo.b"], parent_id=AIRFLOW),
                                   stmt(1, outputs=["db.dbo.b"], parent_id=AIRFLOW[:-1] + "2")], [[INS_B], [INS_B]]),
    ("no parent on a later statement continues", [stmt(0, outputs=["db.dbo.b"], parent_id=AIRFLOW),
                                                  stmt(1, outputs=["db.dbo.b"])], [[INS_B, INS_B]]),
    ("statements without lineage emit nothing", [stmt(0, "SET NOCOUNT ON", types=("SET",)), stmt(1, "SELECT 1")], []),
]


@pytest.mark.parametrize("statements,expected", [c[1:] for c in GROUPING_CASES], ids=[c[0] for c in GROUPING_CASES])
def test_grouping(statements, expected):
    records = run_all(statements)
    tasks = [r for r in records if r.job.name == TASK]
    task_ids = list(dict.fromkeys(r.run_id for r in tasks))
    assert [[r.event_type for r in tasks if r.run_id == tid] for tid in task_ids] == [["START", "COMPLETE"]] * len(
        task_ids)
    children = [[r.job.name for r in records if r.parent and r.parent.run_id == tid and r.event_type == "START"]
                for tid in task_ids]
    assert children == expected
    for r in records:  # every child: START before COMPLETE, after its task's START, before its COMPLETE
        if r.parent and r.parent.run_id in task_ids:
            pos = records.index(r)
            task_start = next(i for i, t in enumerate(records) if t.run_id == r.parent.run_id)
            task_end = max(i for i, t in enumerate(records) if t.run_id == r.parent.run_id)
            assert task_start < pos < task_end


def test_child_runs_and_task_union_with_temp_tables():
    records = run_all([
        stmt(0, "SELECT * INTO #t FROM a", inputs=["db.dbo.a"], temp_outputs=["#t"], types=("SELECT INTO",)),
        stmt(1, "INSERT INTO b SELECT * FROM #t", outputs=["db.dbo.b"], temp_inputs=["#T"]),
        stmt(2, "UPDATE c SET x = 1 FROM d", inputs=["db.dbo.d"], outputs=["db.dbo.c"], types=("UPDATE",)),
    ])
    assert shape(records) == [
        ("START", TASK, 0, None, [], []),
        ("START", "python_task.task1.select_into_db_dbo_a", 1, (TASK, 0), ["db.dbo.a"], []),
        ("COMPLETE", "python_task.task1.select_into_db_dbo_a", 1, (TASK, 0), ["db.dbo.a"], []),
        # the temp table is resolved to what filled it (case-insensitively): the child shows input a
        ("START", INS_B, 2, (TASK, 0), ["db.dbo.a"], ["db.dbo.b"]),
        ("COMPLETE", INS_B, 2, (TASK, 0), ["db.dbo.a"], ["db.dbo.b"]),
        ("START", "python_task.task1.update_db_dbo_c", 3, (TASK, 0), ["db.dbo.d"], ["db.dbo.c"]),
        ("COMPLETE", "python_task.task1.update_db_dbo_c", 3, (TASK, 0), ["db.dbo.d"], ["db.dbo.c"]),
        ("COMPLETE", TASK, 0, None, ["db.dbo.a", "db.dbo.d"], ["db.dbo.b", "db.dbo.c"]),
    ]
    start, end = records[0], records[-1]
    assert (start.event_time, end.event_time) == (T0, T0 + timedelta(minutes=2, seconds=10))
    child = records[3]
    assert (child.job_type.job_type, child.job_type.integration) == ("QUERY", "SQLSERVER")
    assert (start.job_type.job_type, start.job_type.integration) == ("TASK", "SQLSERVER")
    assert child.job_facets["sql"].query == "INSERT INTO b SELECT * FROM #t"
    assert child.root is not None and child.root.run_id == start.run_id  # the task run is the root


def test_airflow_parent_and_root():
    records = run_all([stmt(0, outputs=["db.dbo.b"], parent_id=AIRFLOW, root_parent_id=AIRFLOW_ROOT)])
    task_start, child = records[0], records[1]
    assert (task_start.parent.job.namespace, task_start.parent.job.name, task_start.parent.run_id) == \
        ("airflow", "etl_dag.load_task", "01900000-0000-7000-8000-000000000001")
    assert task_start.root.job.name == "etl_dag"
    assert child.parent.run_id == task_start.run_id and child.root.job.name == "etl_dag"
    # without a root id, the Airflow parent is the root of everything below
    records = run_all([stmt(0, outputs=["db.dbo.b"], parent_id=AIRFLOW)])
    assert records[0].root is None and records[1].root.job.name == "etl_dag.load_task"


def test_failed_statement_is_fail_with_error_message():
    records = run_all([stmt(0, outputs=["db.dbo.b"], failed=True, error_message="result: Error", row_count=5)])
    assert [r.event_type for r in records] == ["START", "START", "FAIL", "COMPLETE"]
    assert records[2].run_facets["errorMessage"].message == "result: Error"
    assert records[2].outputs[0].io_facets == {}  # no row count for a failed statement


def test_row_count_becomes_output_statistics():
    records = run_all([stmt(0, outputs=["db.dbo.b"], row_count=125034)])
    assert records[2].outputs[0].io_facets["outputStatistics"].rowCount == 125034


def test_module_runs():
    records: list[RunRecord] = []
    grouper = TaskGrouper(records.append, "default", "SQLSERVER")
    grouper.add(stmt(0, outputs=["db.dbo.b"], module="usp_LoadDimCustomer", module_key="G/7/13"))
    grouper.add(stmt(0.5, outputs=["db.dbo.c"], module="usp_LoadDimCustomer", module_key="G/7/13"))
    grouper.end_module("G/7/13", T0 + timedelta(minutes=1))
    grouper.end_module("unknown", T0 + timedelta(minutes=1))  # a module without lineage: nothing
    grouper.close_all()
    mod = "python_task.task1.usp_load_dim_customer"
    assert shape(records) == [
        ("START", TASK, 0, None, [], []),
        ("START", mod, 1, (TASK, 0), [], []),
        ("START", mod + ".insert_db_dbo_b", 2, (mod, 1), [], ["db.dbo.b"]),
        ("COMPLETE", mod + ".insert_db_dbo_b", 2, (mod, 1), [], ["db.dbo.b"]),
        ("START", mod + ".insert_db_dbo_c", 3, (mod, 1), [], ["db.dbo.c"]),
        ("COMPLETE", mod + ".insert_db_dbo_c", 3, (mod, 1), [], ["db.dbo.c"]),
        ("COMPLETE", mod, 1, (TASK, 0), [], []),
        ("COMPLETE", TASK, 0, None, [], ["db.dbo.b", "db.dbo.c"]),
    ]
    assert records[6].event_time == records[7].event_time == T0 + timedelta(minutes=1)
    assert records[4].root.run_id == records[0].run_id  # root of a module's statement: the task run


STATEMENTS = [
    stmt(0, "SELECT * INTO #t FROM a", inputs=["db.dbo.a"], temp_outputs=["#t"]),
    stmt(1, outputs=["db.dbo.b"], temp_inputs=["#t"], module="p", module_key="K"),
    stmt(2, outputs=["db.dbo.c"], session="52"),
    stmt(3, outputs=["db.dbo.d"], module="p", module_key="K"),
    stmt(50, outputs=["db.dbo.e"]),
]


def test_same_statements_give_the_same_records():
    assert run_all(STATEMENTS) == run_all(STATEMENTS)


@pytest.mark.parametrize("split", range(1, len(STATEMENTS)))
def test_open_runs_saved_and_restored_continue_the_same_runs(split):
    # a harvest ending after `split` statements and the next one continuing from the saved open runs emit
    # the same records as one harvest (modules and temp tables included)
    one = run_all(STATEMENTS)
    two = run_all(STATEMENTS, restore_after=split)
    key = lambda r: (r.run_id, r.event_type)  # noqa: E731 - emission order differs only in when runs close
    assert sorted(one, key=key) == sorted(two, key=key)


def test_close_idle():
    records: list[RunRecord] = []
    grouper = TaskGrouper(records.append, "default", "SQLSERVER")
    grouper.add(stmt(0, outputs=["db.dbo.b"]))
    grouper.add(stmt(20, outputs=["db.dbo.b"], session="52"))
    grouper.close_idle(T0 + timedelta(minutes=40))  # session 51 idle for 39m50s, 52 for 19m50s
    assert [(r.event_type, r.job.name) for r in records if r.job.name == TASK] == \
        [("START", TASK), ("START", TASK), ("COMPLETE", TASK)]
    assert records[-1].run_id == records[0].run_id  # session 51's run completed
    assert grouper.open_count == 1
    assert attrs.asdict(grouper.counts) == {"statements": 2, "with_lineage": 2, "without_lineage": 0, "runs": 4,
                                            "records": 7}
