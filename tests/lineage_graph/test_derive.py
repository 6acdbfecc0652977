"""Section 7 rules, one row per rule: event streams -> current graph, hierarchy and task DAG."""
from __future__ import annotations

import pytest
from graph_events import event as E
from graph_events import rid

from lineage_graph import derive, query


def current(conn) -> dict:
    """{fqn: (inputs, outputs, latest state, version, lineage_unknown)} for every job that ran, datasets by name."""
    g = derive.load_graph(conn)
    name = lambda d: g.datasets[d][1]  # noqa: E731
    return {j.fqn: (sorted(map(name, j.inputs)), sorted(map(name, j.outputs)), j.state, j.version,
                    j.lineage_unknown) for j in g.visible_jobs() if j.nruns}


def hierarchy(conn) -> dict:
    g = derive.load_graph(conn)
    return {j.key: (g.jobs[j.parent_id].key if j.parent_id is not None else None) for j in g.visible_jobs()}


def dag(conn, level="task") -> tuple[dict, list, list]:
    g = derive.load_graph(conn)
    d = derive.task_dag(g, level)
    return ({t.fqn: d.levels[i] for i, t in d.tasks.items()},
            sorted((d.tasks[a].fqn, d.tasks[b].fqn) for a, b in d.edges),
            [(sorted(d.tasks[t].fqn for t in c["tasks"]), sorted(g.datasets[x][1] for x in c["datasets"]))
             for c in d.cycles])


CURRENT = [
    pytest.param([E(1, "r1", "a", "START", inputs=["x"]), E(2, "r1", "a", outputs=["y"])],
                 {"a": (["x"], ["y"], "COMPLETE", 1, False)}, id="run-coalesced-from-its-events"),
    pytest.param([E(2, "r1", "a", outputs=["y"]), E(1, "r1", "a", "START", inputs=["x"])],
                 {"a": (["x"], ["y"], "COMPLETE", 1, False)}, id="events-out-of-order"),
    pytest.param([E(1, "r1", "a", inputs=["x"], outputs=["y"]), E(5, "r2", "a", inputs=["x"], outputs=["z"])],
                 {"a": (["x"], ["z"], "COMPLETE", 2, False)}, id="job-switched-outputs"),
    pytest.param([E(5, "r2", "a", inputs=["x"], outputs=["z"]), E(1, "r1", "a", inputs=["x"], outputs=["y"])],
                 {"a": (["x"], ["z"], "COMPLETE", 2, False)}, id="older-run-arrives-later"),
    pytest.param([E(1, "r1", "a", inputs=["x"], outputs=["y"]), E(5, "r2", "a", "FAIL", inputs=["x"], outputs=["y"])],
                 {"a": (["x"], ["y"], "FAIL", 1, False)}, id="status-is-no-version-criterion"),
    pytest.param([E(1, "r1", "a", inputs=["x"], outputs=["y"]), E(5, "r2", "a", "FAIL", inputs=["w"], outputs=["y"])],
                 {"a": (["w"], ["y"], "FAIL", 2, False)}, id="failed-run-knows-its-datasets"),
    pytest.param([E(1, "r1", "a", outputs=["y"], code="v1"), E(5, "r2", "a", outputs=["y"], code="v2")],
                 {"a": ([], ["y"], "COMPLETE", 2, False)}, id="code-version-change"),
    pytest.param([E(1, "r1", "a", outputs=["y"], code="v1"), E(5, "r2", "a", code="v2")],
                 {"a": ([], ["y"], "COMPLETE", 2, True)}, id="code-change-without-lineage-is-lineage-unknown"),
    pytest.param([E(1, "r1", "a", outputs=["y"], code="v1"), E(5, "r2", "a", code="v1"), E(6, "r3", "a")],
                 {"a": ([], ["y"], "COMPLETE", 1, False)}, id="run-without-lineage-changes-nothing"),
    pytest.param([E(1, "r1", "a")], {"a": ([], [], "COMPLETE", 1, False)}, id="new-job-without-lineage"),
    pytest.param([E(1, "r1", "a", outputs=["y"]), E(5, "r2", "a", "START", inputs=["q"])],
                 {"a": ([], ["y"], "START", 1, False)}, id="run-in-progress-makes-no-version"),
    # Marquez's testGetLineageForCompleteStreamingJob: a streaming run still RUNNING with lineage, and a finished
    # run that named no dataset: the lineage stays (it was lost: the finished run alone made the version)
    pytest.param([E(1, "r1", "s", "RUNNING", inputs=["in"], outputs=["out"]), E(2, "r2", "s")],
                 {"s": (["in"], ["out"], "COMPLETE", 1, False)}, id="streaming-run-beside-a-finished-run-without-io"),
    pytest.param([E(1, "r1", "a", inputs=[("/t/dt=2024-01-01/h=1", "s3://b")], outputs=["#tmp", "y"])],
                 {"a": (["t"], ["y"], "COMPLETE", 1, False)}, id="partitions-one-dataset-temp-table-none"),
    # one object or path, however a producer split it between namespace and name: OpenLineage's naming (the JVM
    # integration's) is scheme://authority + the path, an object store's key without its leading slash
    pytest.param([E(1, "r1", "a", outputs=[("a/b", "s3://bucket")]),
                  E(2, "r2", "b", inputs=[("b", "s3://bucket/a")], outputs=[("/a/c/", "s3a://bucket")]),
                  E(3, "r3", "c", inputs=[("c", "s3://bucket/a/")], outputs=[("x", "hdfs://nn:8020/data")]),
                  E(4, "r4", "d", inputs=[("/data/x", "hdfs://nn:8020")], outputs=[("q", "abfs://c@s.dfs/p")]),
                  E(5, "r5", "e", inputs=[("p/q", "abfss://c@s.dfs")], outputs=[("t", "kafka://k:9092/x")])],
                 {"a": ([], ["a/b"], "COMPLETE", 1, False), "b": (["a/b"], ["a/c"], "COMPLETE", 1, False),
                  "c": (["a/c"], ["/data/x"], "COMPLETE", 1, False), "d": (["/data/x"], ["p/q"], "COMPLETE", 1, False),
                  "e": (["p/q"], ["t"], "COMPLETE", 1, False)},
                 id="path-split-between-namespace-and-name-is-one-dataset"),
    pytest.param([E(1, "r1", "a", inputs=[("topic/x=1", "kafka://broker:9092"), ("/v1/items?page=2", "http://api")],
                    outputs=[("/data/report/dt=1", "file"), ("db.s.t/k=v", "postgres://h:5432")])],
                 {"a": (["/v1/items?page=2", "topic/x=1"], ["/data/report", "db.s.t/k=v"], "COMPLETE", 1, False)},
                 id="partitions-trimmed-only-in-file-systems"),
    pytest.param([E(1, "r1", "a", outputs=[("/data/x/", "file")]), E(2, "r2", "b", inputs=[("/data/x", "file")],
                                                                    outputs=[("topic/", "kafka://k:9092")])],
                 {"a": ([], ["/data/x"], "COMPLETE", 1, False), "b": (["/data/x"], ["topic/"], "COMPLETE", 1, False)},
                 id="trailing-slash-same-path"),
    # Snowflake: dbt writes the model's own spelling, SQL parsers and the harvester upper-case; accounts have no case
    pytest.param([E(1, "r1", "a", outputs=[("DEMO_DB.public.stg_orders", "snowflake://ASDF1234.eu-central-1.aws")]),
                  E(2, "r2", "b", inputs=[("DEMO_DB.PUBLIC.STG_ORDERS", "snowflake://asdf1234.eu-central-1.aws")],
                    outputs=[("p.d.t$20240101", "bigquery")]),
                  E(3, "r3", "c", inputs=[("p.d.t", "bigquery"), ("db.Public.T", "postgres://h:5432")])],
                 {"a": ([], ["DEMO_DB.PUBLIC.STG_ORDERS"], "COMPLETE", 1, False),
                  "b": (["DEMO_DB.PUBLIC.STG_ORDERS"], ["p.d.t"], "COMPLETE", 1, False),
                  "c": (["db.Public.T", "p.d.t"], [], "COMPLETE", 1, False)},
                 id="snowflake-case-and-bigquery-partition-decorator-one-dataset"),
]


@pytest.mark.parametrize("events,expected", CURRENT)
def test_current_graph(db, events, expected):
    db(events)
    assert current(db.conn) == expected


def test_a_path_is_one_dataset_however_its_producer_split_it(db):
    """Spark's JVM integration writes ``s3://bucket`` + ``a/b``; other producers ``s3://bucket/a`` + ``b``, ``s3a``
    or a leading slash: one node, so the jobs on either side are linked (they were two nodes, both drawn as
    ``s3://bucket/a/b``, and ``upstream`` could not tell which was meant)."""
    db([E(1, "r1", "a", outputs=[("a/b", "s3://bucket")]), E(2, "r2", "b", inputs=[("b", "s3a://bucket/a/")]),
        E(3, "r3", "c", inputs=[("/a/b", "s3://bucket")])])
    g = derive.load_graph(db.conn)
    assert sorted(g.datasets.values()) == [("s3://bucket", "a/b")]
    dag = derive.task_dag(g, "task")
    assert sorted((g.jobs[a].fqn, g.jobs[b].fqn) for a, b in dag.edges) == [("a", "b"), ("a", "c")]


def test_facets_merged_last_by_event_time_wins(db):
    # the later event by eventTime wins, whatever the arrival order
    db([E(9, "r1", "a", code="new"), E(1, "r1", "a", "START", code="old")])
    assert db.conn.execute("SELECT code FROM runs").fetchall() == [("new",)]


def test_dataset_versions_one_per_completed_writing_run(db):
    db([E(1, "r1", "a", outputs=["y"]), E(2, "r2", "a", outputs=["y"]), E(3, "r3", "a", "FAIL", outputs=["y"]),
        E(4, "r4", "b", outputs=["y", "z"])])
    names = dict(db.conn.execute("SELECT id, name FROM datasets"))
    jobs = dict(db.conn.execute("SELECT id, name FROM jobs"))
    assert [(names[d], r, jobs[j], t) for d, r, j, t in query.dataset_versions(db.conn)] == [
        ("y", rid("r1"), "a", 1704067260.0), ("y", rid("r2"), "a", 1704067320.0),
        ("y", rid("r4"), "b", 1704067440.0), ("z", rid("r4"), "b", 1704067440.0)]
    y = next(i for i, n in names.items() if n == "y")
    assert [r for _d, r, _j, _t in query.dataset_versions(db.conn, y)] == [rid("r1"), rid("r2"), rid("r4")]


AIRFLOW_SPARK = [
    E(0, "dagrun", "etl", "START", ns="airflow", job_type="DAG", integration="AIRFLOW"),
    E(1, "t1", "etl.extract", "START", ns="airflow", parent=("etl", "dagrun"), job_type="TASK",
      integration="AIRFLOW"),
    E(2, "app", "spark_app", "START", ns="spark", parent=("etl.extract", "t1", "airflow"), job_type="APPLICATION"),
    E(3, "act1", "spark_app.execute_insert.warehouse_orders", ns="spark", parent=("spark_app", "app"),
      inputs=["raw"], outputs=["orders"], job_type="SQL_JOB"),
    E(4, "act2", "spark_app.execute_insert.warehouse_items", ns="spark", parent=("spark_app", "app"),
      inputs=["orders"], outputs=["items"], job_type="SQL_JOB"),
    E(5, "app", "spark_app", ns="spark", parent=("etl.extract", "t1", "airflow"), job_type="APPLICATION"),
    E(6, "t1", "etl.extract", ns="airflow", parent=("etl", "dagrun"), job_type="TASK", integration="AIRFLOW"),
    E(7, "t2", "etl.report", ns="airflow", parent=("etl", "dagrun"), inputs=["items"], outputs=["report"],
      job_type="TASK", integration="AIRFLOW"),
    E(9, "dagrun", "etl", ns="airflow", job_type="DAG", integration="AIRFLOW"),
]

PARENT_ADDED = [E(1, "r1", "the_dag.task1", inputs=["in"], outputs=["out"]),
                E(5, "r2", "the_dag.task1", inputs=["in"], outputs=["out2"], parent=("the_dag", "d1"))]

HIERARCHY = [
    pytest.param(AIRFLOW_SPARK, {
        "airflow/etl": None, "airflow/etl.extract": "airflow/etl", "airflow/etl.report": "airflow/etl",
        "airflow/etl.extract.spark_app": "airflow/etl.extract",
        "airflow/etl.extract.spark_app.execute_insert.warehouse_orders": "airflow/etl.extract.spark_app",
        "airflow/etl.extract.spark_app.execute_insert.warehouse_items": "airflow/etl.extract.spark_app"},
        id="3-levels-dag-task-spark-app-actions-fqn-and-inherited-namespace"),
    pytest.param(list(reversed(AIRFLOW_SPARK)), {
        "airflow/etl": None, "airflow/etl.extract": "airflow/etl", "airflow/etl.report": "airflow/etl",
        "airflow/etl.extract.spark_app": "airflow/etl.extract",
        "airflow/etl.extract.spark_app.execute_insert.warehouse_orders": "airflow/etl.extract.spark_app",
        "airflow/etl.extract.spark_app.execute_insert.warehouse_items": "airflow/etl.extract.spark_app"},
        id="children-before-parents"),
    pytest.param([E(1, "p1", "load"), E(2, "p2", "other"), E(3, "c1", "step", parent=("load", "p1")),
                  E(4, "c2", "step", parent=("other", "p2"))],
                 {"ns/load": None, "ns/other": None, "ns/load.step": "ns/load", "ns/other.step": "ns/other"},
                 id="same-name-under-two-parents-is-two-jobs"),
    pytest.param([E(3, "c1", "task1.stmt1", parent=("task1", "p1", "mssql"))],
                 {"mssql/task1": None, "mssql/task1.stmt1": "mssql/task1"}, id="parent-known-only-from-facet"),
    # Marquez's AirflowAddParentForExistingJob / MissingParentForExistingJob: a job's runs with and without a parent
    # facet are one job under that parent (two were printed with one name, neither could be looked up)
    pytest.param(PARENT_ADDED, {"ns/the_dag": None, "ns/the_dag.task1": "ns/the_dag"}, id="parent-added-later"),
    pytest.param(list(reversed(PARENT_ADDED)), {"ns/the_dag": None, "ns/the_dag.task1": "ns/the_dag"},
                 id="parent-missing-later"),
]


@pytest.mark.parametrize("split", [False, True], ids=["one-ingest", "two-ingests"])
@pytest.mark.parametrize("events", [PARENT_ADDED, list(reversed(PARENT_ADDED))], ids=["added", "missing"])
def test_a_job_with_and_without_a_parent_is_one_job(db, events, split):
    """Its lineage is that of its latest run, whichever of the two names it."""
    for part in ([events[:1], events[1:]] if split else [events]):
        db(part)
    assert current(db.conn) == {"the_dag.task1": (["in"], ["out2"], "COMPLETE", 2, False)}
    assert hierarchy(db.conn) == {"ns/the_dag": None, "ns/the_dag.task1": "ns/the_dag"}


@pytest.mark.parametrize("events,expected", HIERARCHY)
def test_hierarchy(db, events, expected):
    db(events)
    assert hierarchy(db.conn) == expected


HARVESTED = [  # a harvested task with two statements; a temp table flows between them
    E(1, "task1", "python_task::task1", "START", ns="mssql"),
    E(2, "s1", "python_task::task1.stmt.1", ns="mssql", parent=("python_task::task1", "task1"),
      inputs=["Sales.dbo.Orders"], outputs=["#stage"]),
    E(3, "s2", "python_task::task1.stmt.2", ns="mssql", parent=("python_task::task1", "task1"),
      inputs=["#stage"], outputs=["Sales.dbo.Daily"]),
    E(4, "task1", "python_task::task1", ns="mssql"),
    E(5, "task2", "python_task::task2", "START", ns="mssql"),
    E(6, "s3", "python_task::task2.stmt.1", ns="mssql", parent=("python_task::task2", "task2"),
      inputs=["Sales.dbo.Daily"], outputs=["Sales.dbo.Report"]),
    E(7, "task2", "python_task::task2", ns="mssql"),
    E(8, "task3", "python_task::task3", ns="mssql", inputs=["Sales.dbo.Daily", "Sales.dbo.Report"],
      outputs=["Sales.dbo.Mart"]),
]

def _dbt(parent: tuple[str, str] | None = None) -> list[dict]:
    """dbt-ol's events of one `dbt run` (the project's run, jobType JOB / DBT, and its models, MODEL), between two
    harvested SQL Server tasks: m1 reads what task1 writes, task2 reads m1's table, m2 reads task2's."""
    run = E(10, "dbtrun", "dbt-run-proj", ns="dbt", job_type="JOB", integration="DBT", parent=parent)
    model = {"parent": ("dbt-run-proj", "dbtrun", "dbt"), "ns": "dbt", "job_type": "MODEL", "integration": "DBT"}
    return [E(1, "t1", "task1", ns="mssql", job_type="TASK", inputs=["X"], outputs=["A"]), run,
            E(11, "m1", "Stage.dbo.m1", inputs=["A"], outputs=["B"], **model),
            E(12, "m2", "Stage.dbo.m2", inputs=["C"], outputs=["D"], **model),
            E(20, "t2", "task2", ns="mssql", job_type="TASK", inputs=["B"], outputs=["C"])]


DAGS = [
    pytest.param(_dbt(), "task", ({"task1": 0, "dbt-run-proj.Stage.dbo.m1": 1, "task2": 2,
                                   "dbt-run-proj.Stage.dbo.m2": 3},
                                  [("dbt-run-proj.Stage.dbo.m1", "task2"), ("task1", "dbt-run-proj.Stage.dbo.m1"),
                                   ("task2", "dbt-run-proj.Stage.dbo.m2")], []),
                 id="dbt-models-are-tasks-beside-harvested-ones"),
    pytest.param([E(0, "dr", "dag", ns="dbt", job_type="DAG", integration="AIRFLOW"),
                  E(1, "at", "dag.dbt_task", ns="dbt", job_type="TASK", integration="AIRFLOW", parent=("dag", "dr")),
                  *_dbt(parent=("dag.dbt_task", "at"))[1:4]], "task",
                 ({"dag.dbt_task": 0}, [], []), id="dbt-run-under-an-airflow-task-folds-into-it"),
    pytest.param(HARVESTED, "task", ({"python_task::task1": 0, "python_task::task2": 1, "python_task::task3": 2},
                                     [("python_task::task1", "python_task::task2"),
                                      ("python_task::task1", "python_task::task3"),
                                      ("python_task::task2", "python_task::task3")], []),
                 id="statements-fold-into-their-task-levels"),
    pytest.param(AIRFLOW_SPARK, "task", ({"etl.extract": 0, "etl.report": 1}, [("etl.extract", "etl.report")], []),
                 id="airflow-tasks-spark-actions-folded"),
    pytest.param(AIRFLOW_SPARK, "leaf", (
        {"etl.extract.spark_app.execute_insert.warehouse_orders": 0,
         "etl.extract.spark_app.execute_insert.warehouse_items": 1, "etl.report": 2, "etl": 0, "etl.extract": 0,
         "etl.extract.spark_app": 0},
        [("etl.extract.spark_app.execute_insert.warehouse_items", "etl.report"),
         ("etl.extract.spark_app.execute_insert.warehouse_orders",
          "etl.extract.spark_app.execute_insert.warehouse_items")], []), id="leaf-level"),
    pytest.param([E(1, "t1", "task1", inputs=["Orders", "Stage"], outputs=["Stage", "Daily"]),  # its statements'
                  E(2, "s1", "task1.stmt.1", parent=("task1", "t1"), inputs=["Orders"], outputs=["Stage"]),
                  E(3, "s2", "task1.stmt.2", parent=("task1", "t1"), inputs=["Stage"], outputs=["Daily"]),
                  E(4, "t2", "task2", inputs=["Daily"], outputs=["Report"])], "leaf",
                 ({"task1.stmt.1": 0, "task1.stmt.2": 1, "task2": 2},
                  [("task1.stmt.1", "task1.stmt.2"), ("task1.stmt.2", "task2")], []),
                 id="leaf-level-a-task-with-its-statements-lineage-is-drawn-as-them"),
    pytest.param(AIRFLOW_SPARK, "root", ({"etl": 0}, [], []), id="root-level"),
    pytest.param(AIRFLOW_SPARK, 2, ({"etl.extract.spark_app": 0, "etl.report": 1, "etl": 0, "etl.extract": 0},
                                    [("etl.extract.spark_app", "etl.report")], []), id="depth-2"),
    pytest.param([E(1, "r1", "t1", inputs=["y"], outputs=["x"]), E(2, "r2", "t2", inputs=["x"], outputs=["y"]),
                  E(3, "r3", "t3", inputs=["y"], outputs=["z"])], "task",
                 ({"t1": 0, "t2": 0, "t3": 1}, [("t1", "t2"), ("t2", "t1"), ("t2", "t3")],
                  [(["t1", "t2"], ["x", "y"])]), id="cycle-reported-with-tasks-and-datasets"),
    pytest.param([E(1, "r1", "t1", inputs=["x"], outputs=["x"]), E(2, "r2", "t2", inputs=["x"])], "task",
                 ({"t1": 0, "t2": 1}, [("t1", "t2")], []), id="task-reading-its-own-output-is-no-cycle"),
]


@pytest.mark.parametrize("events,level,expected", DAGS)
def test_task_dag(db, events, level, expected):
    db(events)
    assert dag(db.conn, level) == expected


def _with_parent_facet(key: str, facet: dict) -> dict:
    e = E(1, "r1", "the_dag.task1", inputs=["in"], outputs=["out"])
    e["run"]["facets"][key] = facet
    return e


@pytest.mark.parametrize("key, facet, parent", [
    # the old Airflow integration: a run id that is no UUID (Marquez makes a name-based UUID of it)
    ("parent", {"job": {"namespace": "ns", "name": "the_dag"}, "run": {"runId": "scheduled__2022-04-25T00:20:00"}},
     "ns/the_dag"),
    ("parentRun", {"job": {"namespace": "ns", "name": "the_dag"}, "run": {"runId": rid("d1")}}, "ns/the_dag"),
    # a parent job without a name: no parent, the run and its datasets stay
    ("parent", {"job": {"namespace": "ns"}, "run": {"runId": rid("d1")}}, None),
    ("parent", "not an object", None),
], ids=["run-id-not-a-uuid", "legacy-parentRun-key", "job-without-name", "not-an-object"])
def test_an_odd_parent_facet_keeps_the_run_and_its_datasets(db, key, facet, parent):
    """The ParentRun facet is optional: an odd one was a bad line, the run and its lineage lost."""
    report = db([_with_parent_facet(key, facet)])
    assert report.new_events == 1
    assert current(db.conn) == {("the_dag.task1"): (["in"], ["out"], "COMPLETE", 1, False)}
    assert hierarchy(db.conn)["ns/the_dag.task1"] == parent
