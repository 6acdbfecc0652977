"""Ingest (incremental, idempotent, bad lines, rotation, the JVM integration's fixtures) and the command line."""
from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from graph_events import event as E

from lineage_graph.cli import main

SHARED = Path(__file__).resolve().parents[3] / "shared"
FIXTURES = sorted((SHARED / "openlineage-spark-expected" / "container").glob("*.json"))


def write(path: Path, events: list, mode: str = "w") -> Path:
    with open(path, mode) as fh:
        for e in events:
            fh.write((e if isinstance(e, str) else json.dumps(e)) + "\n")
    return path


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ingest_json(capsys, *files) -> tuple[int, dict]:
    code, out, _ = cli(capsys, "graph", "ingest", "--json", *map(str, files))
    return code, json.loads(out)


def test_incremental_idempotent_and_same_run_in_two_files(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", [E(1, "r1", "job", "START", inputs=["x"])])
    code, rep = ingest_json(capsys, a)
    assert (code, rep["new_events"], rep["duplicates"]) == (0, 1, 0)
    write(a, [E(2, "r1", "job", outputs=["y"])], "a")           # appended line: only it is read
    code, rep = ingest_json(capsys, a)
    assert (rep["lines"], rep["new_events"]) == (1, 1)
    code, rep = ingest_json(capsys, a)                           # nothing new
    assert (rep["lines"], rep["new_events"]) == (0, 0)
    # the same run in a second file, with the same START again (another key order) and a RUNNING event
    start = E(1, "r1", "job", "START", inputs=["x"])
    b = write(tmp_path / "b.jsonl", [json.dumps(dict(reversed(list(start.items())))),
                                     E(3, "r1", "job", "RUNNING", inputs=["x2"])])
    code, rep = ingest_json(capsys, b)
    assert (rep["new_events"], rep["duplicates"]) == (1, 1)
    code, out, _ = cli(capsys, "graph", "show", "--json")
    job = json.loads(out)["jobs"][0]
    assert (job["key"], job["inputs"], job["outputs"], job["latest_state"], job["runs"]) == \
        ("ns/job", ["db/x", "db/x2"], ["db/y"], "COMPLETE", 1)


def test_truncated_or_rotated_file_read_again(tmp_path, capsys):
    f = write(tmp_path / "e.jsonl", [E(1, "r1", "a", outputs=["x"]), E(2, "r2", "a", outputs=["x"])])
    assert ingest_json(capsys, f)[1]["new_events"] == 2
    f.rename(tmp_path / "e.jsonl.1")                            # rotation: a new file of the same name
    write(f, [E(3, "r3", "b", inputs=["x"])])
    assert ingest_json(capsys, f)[1]["new_events"] == 1
    write(f, [E(1, "r1", "a", outputs=["x"])])                  # truncated and rewritten
    rep = ingest_json(capsys, f)[1]
    assert (rep["lines"], rep["new_events"], rep["duplicates"]) == (1, 0, 1)


BAD = [
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({**E(1, "r", "a"), "eventTime": 5}), "eventTime must be an ISO 8601 string"),
    (json.dumps({**E(1, "r", "a"), "eventTime": "yesterday"}), "eventTime is not an ISO 8601 time: 'yesterday'"),
    (json.dumps({**E(1, "r", "a"), "eventTime": "9999-12-31T23:59:59.999999Z"}), "eventTime is out of range"),
    (json.dumps({**E(1, "r", "a"), "eventTime": "0001-01-01T00:00:00+01:00"}), "eventTime is out of range"),
    (json.dumps({**E(1, "r", "a"), "run": {"runId": "42"}}), "run.runId must be a UUID"),
    (json.dumps({**E(1, "r", "a"), "run": {"runId": "0190c5d2e5f47a3b8c1d2e3f4a5b6c7d"}}), "run.runId must be a UUID"),
    (json.dumps({**E(1, "r", "a"), "job": {"namespace": "ns"}}), "job.name must be a non-empty string"),
    (json.dumps({**E(1, "r", "a"), "eventType": "DONE"}), "eventType must be one of"),
    (json.dumps({**E(1, "r", "a"), "inputs": {"a": 1}}), "inputs must be an array"),
    (json.dumps({**E(1, "r", "a"), "outputs": [{"namespace": "db"}]}), "outputs[0].name must be a non-empty string"),
]


def test_bad_lines_counted_named_and_skipped(tmp_path, capsys):
    f = write(tmp_path / "e.jsonl", [E(1, "ok1", "a")] + [line for line, _ in BAD] + [E(2, "ok2", "a")])
    code, out, err = cli(capsys, "graph", "ingest", "--json", str(f))
    rep = json.loads(out)
    assert (code, rep["new_events"], rep["bad_count"]) == (1, 2, len(BAD))
    for n, ((_, reason), bad) in enumerate(zip(BAD, rep["bad"]), start=2):
        assert bad.startswith(f"{f}:{n}: {reason}"), bad
    assert f"bad line: {f}:2: not JSON" in err


SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"


@pytest.mark.parametrize("event", [
    {"eventTime": "2024-01-01T00:00:00Z", "producer": "p", "schemaURL": "s", "job": {"namespace": "n", "name": "j"},
     "inputs": []},
    {"eventTime": "2024-01-01T00:00:00Z", "producer": "p", "schemaURL": SPEC + "DatasetEvent",
     "dataset": {"namespace": "n", "name": "d"}},
    # Marquez's own JobEvent fixture: an eventType beside the JobEvent schemaURL (it was "run is missing")
    {"eventTime": "2024-01-01T00:00:00Z", "producer": "p", "schemaURL": SPEC + "JobEvent", "eventType": "COMPLETE",
     "job": {"namespace": "n", "name": "j"}, "inputs": [], "outputs": []},
], ids=["job-event", "dataset-event", "job-event-with-an-event-type"])
def test_job_and_dataset_events_ignored(tmp_path, capsys, event):
    f = write(tmp_path / "e.jsonl", [event])
    code, rep = ingest_json(capsys, f)
    assert (code, rep["ignored"], rep["bad_count"]) == (0, 1, 0)


def test_a_run_event_without_run_is_still_bad(tmp_path, capsys):
    f = write(tmp_path / "e.jsonl", [{**E(1, "r", "j"), "run": None, "schemaURL": SPEC + "RunEvent"}])
    code, rep = ingest_json(capsys, f)
    assert (code, rep["ignored"], rep["bad"]) == (1, 0, [f"{f}:1: run is missing"])


def test_jvm_fixtures_as_they_are(tmp_path, capsys):
    """The expected-event fixtures of the JVM Spark integration are partial matchers: none carries eventTime or
    run.runId. Ingested as they are (one pretty-printed JSON document per file), each is reported, none crashes
    (two without run and eventType have
    the shape of a JobEvent and are counted as ignored)."""
    code, rep = ingest_json(capsys, *FIXTURES)
    assert len(FIXTURES) == 109
    assert (code, rep["files"], rep["new_events"], rep["bad_count"], rep["ignored"]) == (1, 109, 0, 107, 2)
    reasons = [b.split(": ", 1)[1] for b in rep["bad"]]
    assert {r: reasons.count(r) for r in set(reasons)} == \
        {"run is missing": 73, "run.runId is missing": 31, "job is missing": 3}
    assert rep["bad"][0] == f"{FIXTURES[0].resolve()}:1: run.runId is missing"  # files are named by their real path


def test_jvm_fixtures_completed_envelope_build_the_graph(tmp_path, capsys):
    """The same fixtures with only the envelope the matchers left out (eventTime, run.runId, producer) filled in:
    job and dataset names exactly as the JVM integration writes them feed one graph."""
    lines = []
    for i, path in enumerate(FIXTURES):
        ev = json.loads(path.read_text())
        ev.setdefault("eventTime", f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z")
        ev.setdefault("eventType", "COMPLETE")
        ev["run"] = {**ev.get("run", {}), "runId": f"00000000-0000-4000-8000-{i:012d}"}
        ev.setdefault("producer", "https://github.com/OpenLineage/OpenLineage/tree/1.0.0/integration/spark")
        lines.append(json.dumps(ev))
    f = write(tmp_path / "jvm.jsonl", lines)
    code, rep = ingest_json(capsys, f)
    bad = {b.split(": ", 1)[1] for b in rep["bad"]}
    # what remains are fixtures that leave out the job or a dataset namespace (matched elsewhere in their tests)
    assert bad == {"job.name must be a non-empty string", "job is missing",
                   "inputs[0].namespace must be a non-empty string"}
    assert rep["new_events"] == 109 - rep["bad_count"] and rep["new_events"] >= 60
    code, out, _ = cli(capsys, "graph", "show", "--json")
    jobs = {j["key"]: j for j in json.loads(out)["jobs"]}
    hadoop = jobs["testPysparkSQLHadoopFSTest/open_lineage_integration_hadoop_fs_relation."
                  "execute_insert_into_hadoop_fs_relation_command.warehouse_target"]
    assert (hadoop["inputs"], hadoop["outputs"]) == (["file//tmp/warehouse/test"], ["file//tmp/warehouse/target"])
    # the application run under its parent job, known only from the ParentRun facet
    assert jobs["parent-namespace/parent-job.generic_integration_test"]["parent"] == "parent-namespace/parent-job"


@pytest.fixture
def dag_events(tmp_path, isolated_lineage_env):
    """Events in the default events file of the state dir: three tasks, one failed."""
    write(isolated_lineage_env / "openlineage-events.jsonl", [
        E(1, "r1", "extract", ns="etl", inputs=[("Sales.dbo.Orders", "sqlserver://db01:1433")], outputs=["stage"]),
        E(2, "r2", "transform", "FAIL", ns="etl", inputs=["stage"], outputs=["mart"], error="boom"),
        E(3, "r3", "report", ns="etl", inputs=["mart", "stage"], outputs=["dash"])])
    return isolated_lineage_env


UPDOWN = [
    (["downstream", "sqlserver://db01:1433/Sales.dbo.Orders"],
     0, ["db/dash", "db/mart", "db/stage", "etl/extract", "etl/report", "etl/transform"]),
    (["downstream", "sqlserver://db01:1433/Sales", "--depth", "2"], 0, ["db/stage", "etl/extract"]),
    (["upstream", "db/dash", "--depth", "1"], 0, ["etl/report"]),
    (["upstream", "etl/rep"], 0, ["db/mart", "db/stage", "etl/extract", "etl/transform",
                                  "sqlserver://db01:1433/Sales.dbo.Orders"]),
]


@pytest.mark.parametrize("argv,code,keys", UPDOWN)
def test_upstream_downstream(dag_events, capsys, argv, code, keys):
    rc, out, _ = cli(capsys, "graph", *argv, "--json")
    assert rc == code
    assert sorted(n["key"] for n in json.loads(out)["nodes"][1:]) == keys


@pytest.mark.parametrize("argv,stderr", [
    (["upstream", "db/"], "'db/' matches 3 nodes; say which:\n  db/dash\n  db/mart\n  db/stage\n"),
    (["downstream", "nothing/here"], "no dataset or job matches 'nothing/here'"),
    (["history", "db/dash"], "db/dash is a dataset, not a job"),
    (["dag", "--level", "middle"], "level must be task, root, leaf or a depth number"),
])
def test_usage_errors_exit_2(dag_events, capsys, argv, stderr):
    rc, _, err = cli(capsys, "graph", *argv)
    assert rc == 2 and err.startswith(stderr), err


def test_dag_formats(dag_events, capsys):
    rc, out, _ = cli(capsys, "graph", "dag")
    assert (rc, out) == (0, "level 0:\n  etl/extract\nlevel 1:\n  etl/transform  <- etl/extract\nlevel 2:\n"
                            "  etl/report  <- etl/extract, etl/transform\n3 tasks, 3 dependencies, 0 cycles\n")
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dag-factory", "--bash-command", "python -m tasks {name}")
    assert out == """lineage_dag:
  default_args:
    owner: lineage-capture
    start_date: 2024-01-01
  schedule_interval: null
  description: "task dependencies derived from OpenLineage lineage"
  tasks:
    "extract":
      operator: airflow.operators.bash.BashOperator
      bash_command: "python -m tasks extract"
    "transform":
      operator: airflow.operators.bash.BashOperator
      bash_command: "python -m tasks transform"
      dependencies: ["extract"]
    "report":
      operator: airflow.operators.bash.BashOperator
      bash_command: "python -m tasks report"
      dependencies: ["extract", "transform"]
"""
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "mermaid")
    assert out == ('flowchart TD\n  t0["etl/extract"]\n  t1["etl/transform"]\n  t2["etl/report"]\n'
                   "  t0 --> t1\n  t0 --> t2\n  t1 --> t2\n")
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dot")
    assert '"etl/extract" -> "etl/transform" [label="stage"];' in out and "{ rank=same; \"etl/report\" }" in out
    rc, out, _ = cli(capsys, "graph", "dag", "--json")
    data = json.loads(out)
    assert [(t["task"], t["level"], t["latest_state"]) for t in data["tasks"]] == \
        [("etl/extract", 0, "COMPLETE"), ("etl/transform", 1, "FAIL"), ("etl/report", 2, "COMPLETE")]


def test_cycle_exit_1(isolated_lineage_env, capsys):
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "r1", "t1", inputs=["y"], outputs=["x"]), E(2, "r2", "t2", inputs=["x"], outputs=["y"])])
    rc, out, err = cli(capsys, "graph", "dag")
    assert rc == 1
    assert "CYCLE: tasks ns/t1 -> ns/t2 -> ns/t1 through datasets db/x, db/y" in out
    assert err == "cycle: tasks ns/t1, ns/t2; datasets db/x, db/y\n"


def test_a_cycle_is_written_in_the_order_its_edges_run(isolated_lineage_env, capsys):
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "r1", "t1", inputs=["y"], outputs=["x"]), E(2, "r2", "t3", inputs=["x"], outputs=["z"]),
           E(3, "r3", "t2", inputs=["z"], outputs=["y"])])
    rc, out, _ = cli(capsys, "graph", "dag")
    assert rc == 1 and "CYCLE: tasks ns/t1 -> ns/t3 -> ns/t2 -> ns/t1 through datasets db/x, db/y, db/z" in out


def test_history_and_show(isolated_lineage_env, capsys):
    write(isolated_lineage_env / "openlineage-events.jsonl", [
        E(1, "r1", "a", outputs=["x"], code="abc"), E(2, "r2", "a", outputs=["x"], code="abc"),
        E(3, "r3", "a", outputs=["y"], code="abc"), E(4, "r4", "a", code="def")])
    rc, out, _ = cli(capsys, "graph", "history", "a")
    assert (rc, out) == (0, """ns/a: 3 versions
v1  since 2024-01-01T00:01:00.000Z  2 runs  code abc
    -> db/x
v2  since 2024-01-01T00:03:00.000Z  1 runs  code abc
    + -> db/y
    - -> db/x
v3  since 2024-01-01T00:04:00.000Z  1 runs  code def  (lineage unknown)
    code abc -> def
""")
    rc, out, _ = cli(capsys, "graph", "show")
    assert out == "ns/a  [complete, v3, lineage unknown]\n    -> db/y\n1 jobs, 1 datasets\n"


def test_help_lists_exit_codes_and_module_entry(tmp_path):
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(tmp_path)}
    for sub in ("ingest", "serve", "show", "upstream", "downstream", "dag", "history", "html"):
        out = subprocess.run([sys.executable, "-m", "lineage_graph", "graph", sub, "--help"], env=env,
                             capture_output=True, text=True, check=True).stdout
        assert "exit codes:" in out and "  2  usage error" in out, sub
    res = subprocess.run([sys.executable, "-m", "lineage_graph", "show"], env=env, capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (0, "0 jobs, 0 datasets\n")
    assert (tmp_path / "lineage-graph.sqlite").exists()


@pytest.mark.parametrize(("writer", "reader"), [
    ("a \"quoted\" job", "b\\back\nslash"),
    ("ünïcödé 表 😀", "del\x7fc1\x85\x9fjob"),
    ("x" * 300, "y" * 300),
])
def test_dag_outputs_keep_unusual_names_valid(isolated_lineage_env, capsys, writer, reader):
    yaml = pytest.importorskip("yaml")
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "r1", writer, outputs=["x", "w\"é"]), E(2, "r2", reader, inputs=["x", "w\"é"])])
    template = "cd ${HOME} && run {fqn} --date {{ ds }} {0} {task}"
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dag-factory", "--dag-id", "my dag: #1",
                     "--bash-command", template)
    doc = yaml.safe_load(out)
    assert (rc, list(doc)) == (0, ["my dag: #1"])
    tasks = doc["my dag: #1"]["tasks"]
    assert len(tasks) == 2 and all(len(tid) <= 250 for tid in tasks)
    first, second = sorted(tasks.items(), key=lambda kv: "dependencies" in kv[1])
    word = shlex.quote(writer).replace("{", "{{ '{' }}")
    assert first[1]["bash_command"] == f"cd ${{HOME}} && run {word} --date {{{{ ds }}}} {{0}} {first[0]}"
    assert second[1]["dependencies"] == [first[0]]
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dot")

    def dot(text: str) -> str:  # DOT escapes only `"` and `\`; a line break is DOT's `\n`
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    assert f'  "ns/{dot(writer)}" -> "ns/{dot(reader)}" [label="w\\"é\\nx"];' in out.split("\n")


@pytest.mark.parametrize("name", [
    "semi; touch pwned_$(id -u)", "two words", "it's `id`", "{{ 7 * 7 }} {% if 1 %}x{% endif %} {# c #}",
    "}} ${HOME} \\ \"q\" *", "-n",
])
def test_dag_factory_names_reach_bash_as_one_word(isolated_lineage_env, capsys, tmp_path, name):
    """Airflow renders bash_command with Jinja, then bash runs it: a job name from any producer is one argument,
    exactly itself, and runs nothing."""
    yaml = pytest.importorskip("yaml")
    jinja2 = pytest.importorskip("jinja2")
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "r1", name, outputs=["x"]), E(2, "r2", "reader", inputs=["x"])])
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dag-factory", "--bash-command",
                     "printf '%s|' {name} {fqn} {namespace} {{ ds }}")
    tasks = yaml.safe_load(out)["lineage_dag"]["tasks"]
    command = next(t["bash_command"] for t in tasks.values() if "dependencies" not in t)
    rendered = jinja2.Template(command).render(ds="2024-01-02")
    res = subprocess.run(["bash", "-c", rendered], cwd=tmp_path, capture_output=True, text=True)
    assert (rc, res.returncode, res.stdout) == (0, 0, f"{name}|{name}|ns|2024-01-02|")
    assert list(tmp_path.iterdir()) == []


def test_dag_factory_task_ids_stay_within_airflow_limit_when_long_names_collide(isolated_lineage_env, capsys):
    """Two 300-character job names, one per namespace (the same task id before the collision's suffix): every id
    within Airflow's 250 characters (the suffix went after the cut: 252, and Airflow refused the whole DAG)."""
    yaml = pytest.importorskip("yaml")
    long = "j" * 300
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "r1", long, ns="nsA", outputs=["x"]), E(2, "r2", long, ns="nsB", inputs=["x"])])
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dag-factory", "--bash-command", "run {task}")
    tasks = yaml.safe_load(out)["lineage_dag"]["tasks"]
    assert rc == 0 and len(tasks) == 2 and max(map(len, tasks)) == 250
    second = next(tid for tid, task in tasks.items() if "dependencies" in task)
    assert second.endswith("_2") and tasks[second]["dependencies"] == [next(t for t in tasks if t != second)]


@pytest.mark.parametrize(("template", "command"), [
    ("echo {name}", "echo nightly.load.sh "),
    ("bash /opt/jobs/{task}.bash", "bash /opt/jobs/nightly.load.sh.bash "),
    ("echo {name} done", "echo nightly.load.sh done"),
])
def test_a_command_ending_in_sh_is_no_template_file_for_airflow(isolated_lineage_env, capsys, template, command):
    """BashOperator reads a bash_command ending in ``.sh``/``.bash`` as a template file's path (TemplateNotFound
    when the task runs): such a command gets Airflow's trailing space."""
    yaml = pytest.importorskip("yaml")
    write(isolated_lineage_env / "openlineage-events.jsonl", [E(1, "r1", "nightly.load.sh", outputs=["x"])])
    rc, out, _ = cli(capsys, "graph", "dag", "--format", "dag-factory", "--bash-command", template)
    (task,) = yaml.safe_load(out)["lineage_dag"]["tasks"].values()
    assert (rc, task["bash_command"]) == (0, command)


def _symlinked(event: dict, side: str, index: int, *identifiers) -> dict:
    event[side][index]["facets"]["symlinks"] = {
        "_producer": "p", "_schemaURL": "s",
        "identifiers": [i if isinstance(i, (dict, str)) else {"namespace": i[0], "name": i[1], "type": "TABLE"}
                        for i in identifiers]}
    return event


# (name, namespace), as graph_events' datasets are written; symlink identifiers are (namespace, name)
SQL = ("Sales.dbo.Orders", "sqlserver://db01:1433")
MSSQL = ("Sales.dbo.Orders", "mssql://db01:1433")
MSSQL_ID = MSSQL[::-1]


@pytest.mark.parametrize(("events", "dag_edges"), [
    pytest.param([_symlinked(E(1, "w", "extract", outputs=[SQL]), "outputs", 0, MSSQL_ID),
                  E(2, "r", "report", inputs=[MSSQL])], [("ns/extract", "ns/report")], id="writer-names-the-symlink"),
    pytest.param([E(1, "r", "report", inputs=[MSSQL]),
                  _symlinked(E(2, "w", "extract", outputs=[SQL]), "outputs", 0, MSSQL_ID)],
                 [("ns/extract", "ns/report")], id="reader-seen-first"),
    pytest.param([_symlinked(E(1, "w", "app.write", outputs=[("/warehouse/t", "file")]), "outputs", 0,
                             ("hive://metastore:9083", "default.t")),
                  _symlinked(E(2, "r", "app2.read", inputs=[("/warehouse/t", "file")]), "inputs", 0,
                             ("hive://metastore:9083", "default.t")),
                  E(3, "q", "query", inputs=[("default.t", "hive://metastore:9083")])],
                 [("ns/app.write", "ns/app2.read"), ("ns/app.write", "ns/query")], id="table-location-and-name"),
    pytest.param([_symlinked(E(1, "w", "extract", outputs=[SQL]), "outputs", 0, "not an object",
                             {"namespace": 1, "name": "x"}),
                  E(2, "r", "report", inputs=[MSSQL])], [], id="malformed-symlinks-ignored"),
    pytest.param([_symlinked(E(1, "w", "extract", outputs=[SQL]), "outputs", 0, ("mssql://db01:1433", "tempdb.#t")),
                  E(2, "r", "report", inputs=[SQL])], [("ns/extract", "ns/report")], id="temp-symlink-ignored"),
])
def test_symlinks_join_the_names_of_one_dataset(isolated_lineage_env, capsys, events, dag_edges):
    write(isolated_lineage_env / "openlineage-events.jsonl", events)
    rc, out, _ = cli(capsys, "graph", "dag", "--json")
    data = json.loads(out)
    assert rc == 0
    assert sorted((e["from"], e["to"]) for e in data["edges"]) == dag_edges


HIVE_T = ("default.t", "hive://metastore:9083")
WAREHOUSE_T = ("/warehouse/t", "hdfs://nn:8020")


def _writes_location_only(ts: int) -> dict:  # the writer's first action (its DROP) names only the location
    return E(ts, "w0", "app.drop", outputs=[WAREHOUSE_T])


def _writes_location_and_table(ts: int) -> dict:
    return _symlinked(E(ts, "w1", "app.write", outputs=[WAREHOUSE_T]), "outputs", 0, HIVE_T[::-1])


# every order of: a reader naming the table, the writer's event naming only its location, the writer's event naming
# both; one file or one ingest per event (the merge then happens against what the database already holds)
@pytest.mark.parametrize("order", [(0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
@pytest.mark.parametrize("ingests", ["one", "each"])
def test_names_first_seen_apart_become_one_dataset_whatever_the_order(tmp_path, capsys, order, ingests):
    events = [E(1, "r", "report", inputs=[HIVE_T]), _writes_location_only(2), _writes_location_and_table(3)]
    ordered = [events[i] for i in order]
    files = [write(tmp_path / "all.jsonl", ordered)] if ingests == "one" else \
        [write(tmp_path / f"{n}.jsonl", [e]) for n, e in enumerate(ordered)]
    merged = 0
    for f in files:
        code, rep = ingest_json(capsys, f)
        assert code == 0
        merged += rep["merged_datasets"]
    rc, out, _ = cli(capsys, "graph", "dag", "--json", "--level", "leaf")
    assert rc == 0
    assert sorted((e["from"], e["to"]) for e in json.loads(out)["edges"]) == \
        [("ns/app.drop", "ns/report"), ("ns/app.write", "ns/report")]
    # merged only when the reader's and the location's datasets existed before the linking event
    assert merged == (1 if order.index(2) == 2 else 0)
    for name in ("hdfs://nn:8020/warehouse/t", "hive://metastore:9083/default.t"):  # either name finds it
        rc, out, _ = cli(capsys, "graph", "upstream", name, "--json")
        assert rc == 0, out
        assert {n["key"] for n in json.loads(out)["nodes"]} >= {"ns/app.drop", "ns/app.write"}


# an Airflow task running a Spark application whose two actions read and write; a reader downstream
CONTAINED = [E(1, "t", "dag.task", job_type="TASK", integration="AIRFLOW"),
             E(2, "app", "app", parent=("dag.task", "t"), job_type="APPLICATION"),
             E(3, "a1", "app.read_raw", inputs=["raw"], outputs=["stage"], parent=("app", "app")),
             E(4, "a2", "app.write_mart", inputs=["stage", "dim"], outputs=["mart"], parent=("app", "app")),
             E(5, "r", "report", inputs=["mart"])]


@pytest.mark.parametrize(("argv", "keys"), [
    # a job containing others reads and writes through them (it was "0 nodes")
    (["upstream", "dag.task.app"], ["db/dim", "db/raw", "db/stage", "ns/dag.task.app.read_raw"]),
    (["downstream", "dag.task.app"], ["db/mart", "db/stage", "ns/dag.task.app.write_mart", "ns/report"]),
    (["upstream", "dag.task"], ["db/dim", "db/raw", "db/stage", "ns/dag.task.app.read_raw"]),
    (["downstream", "dag.task", "--depth", "1"], ["db/mart", "db/stage"]),
    (["upstream", "dag.task.app.write_mart", "--depth", "1"], ["db/dim", "db/stage"]),  # a leaf: as before
])
def test_a_job_containing_others_walks_through_them(isolated_lineage_env, capsys, argv, keys):
    write(isolated_lineage_env / "openlineage-events.jsonl", CONTAINED)
    rc, out, _ = cli(capsys, "graph", *argv, "--json")
    walk = json.loads(out)
    assert rc == 0
    assert sorted(n["key"] for n in walk["nodes"] if n["distance"] > 0) == keys
    assert len({(e["from"]["key"], e["to"]["key"]) for e in walk["edges"]}) == len(walk["edges"])  # no twice


# (namespace, name) as a producer wrote it, how a user writes it, the key it is shown by
@pytest.mark.parametrize(("dataset", "written", "key"), [
    (("hdfs://nn:8020", "/warehouse/t"), "hdfs://nn:8020/warehouse/t", "hdfs://nn:8020//warehouse/t"),
    (("hdfs://nn:8020", "/warehouse/t"), "hdfs://nn:8020//warehouse/t", "hdfs://nn:8020//warehouse/t"),
    (("file", "/tmp/x"), "file:///tmp/x", "file//tmp/x"),
    (("file", "/tmp/x"), "file:/tmp/x", "file//tmp/x"),
    (("file", "/tmp/x"), "/tmp/x", "file//tmp/x"),
    (("s3://bucket", "a/b"), "s3a://bucket/a/b", "s3://bucket/a/b"),
    (("s3://bucket", "a/b"), "s3://bucket/a/b/", "s3://bucket/a/b"),
    (("abfss://c@acct.dfs.core.windows.net", "/d/t"), "abfs://c@acct.dfs.core.windows.net/d/t",
     "abfss://c@acct.dfs.core.windows.net/d/t"),
    (("snowflake://ACCT", "db.public.orders"), "snowflake://acct/db.public.orders", "snowflake://acct/DB.PUBLIC.ORDERS"),
])
def test_a_path_is_found_by_its_uri(isolated_lineage_env, capsys, dataset, written, key):
    write(isolated_lineage_env / "openlineage-events.jsonl", [E(1, "w", "writer", outputs=[dataset[::-1]])])
    rc, out, _ = cli(capsys, "graph", "upstream", written, "--json")
    assert rc == 0, out
    assert json.loads(out)["start"] == {"kind": "dataset", "key": key}


@pytest.mark.parametrize("replace_first", [False, True])
def test_a_table_moved_to_another_location_is_one_dataset_found_by_either_path(isolated_lineage_env, capsys,
                                                                              replace_first):
    # the JVM's CTAS then REPLACE TABLE of one Delta table: two locations, one TABLE symlink
    ctas = _symlinked(E(1, "c", "app.ctas", outputs=[("/tmp/delta/tbl", "file")]), "outputs", 0,
                      ("file:/tmp/delta", "default.tbl"))
    replace = _symlinked(E(2, "r", "app.replace", outputs=[("/tmp/delta/v2", "file")]), "outputs", 0,
                         ("file:/tmp/delta", "default.tbl"))
    write(isolated_lineage_env / "openlineage-events.jsonl", [replace, ctas] if replace_first else [ctas, replace])
    shown = "file//tmp/delta/v2" if replace_first else "file//tmp/delta/tbl"  # the name it was first seen by
    for path in ("/tmp/delta/tbl", "/tmp/delta/v2", "file:///tmp/delta/v2"):
        rc, out, _ = cli(capsys, "graph", "upstream", path, "--json")
        assert rc == 0, out
        walk = json.loads(out)
        assert (walk["start"]["key"], sorted(n["key"] for n in walk["nodes"] if n["kind"] == "job")) == \
            (shown, ["ns/app.ctas", "ns/app.replace"])


def test_a_dataset_is_found_by_its_symlink_name(isolated_lineage_env, capsys):
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [_symlinked(E(1, "w", "extract", outputs=[SQL]), "outputs", 0, MSSQL_ID), E(2, "r", "report", inputs=[SQL])])
    rc, out, _ = cli(capsys, "graph", "upstream", "mssql://db01:1433/Sales.dbo.Orders", "--json")
    assert rc == 0, out
    assert json.loads(out)["start"] == {"kind": "dataset", "key": "sqlserver://db01:1433/Sales.dbo.Orders"}


def _jsonl(events: list) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def _pretty(events: list) -> bytes:  # `jq . events.jsonl`: documents one after another, each over many lines
    return "".join(json.dumps(e, indent=2) + "\n" for e in events).encode()


TWO = [E(1, "r1", "a", outputs=["x"]), E(2, "r2", "b", inputs=["x"])]


# how the events reach `ingest`: (argument, bytes on stdin or None, file name, file bytes or None); the command is
# run as a user runs it, its stdin a pipe
@pytest.mark.parametrize(("arg", "stdin", "name", "content"), [
    ("-", _jsonl(TWO), None, None),
    ("/dev/stdin", _jsonl(TWO), None, None),
    ("-", gzip.compress(_jsonl(TWO)), None, None),
    ("-", _pretty(TWO), None, None),
    ("-", json.dumps(TWO).encode(), None, None),
    ("{dir}/e.jsonl.gz", None, "e.jsonl.gz", gzip.compress(_jsonl(TWO))),
    ("{dir}/e.json", None, "e.json", _pretty(TWO)),
    ("{dir}/e.json", None, "e.json", b"\xef\xbb\xbf" + _pretty(TWO)),
], ids=["dash", "dev-stdin", "gzip-on-stdin", "concatenated-pretty-on-stdin", "array-on-stdin", "gzip-file",
        "concatenated-pretty-file", "concatenated-pretty-file-with-bom"])
def test_events_come_in_through_pipes_compressed_and_pretty_printed(tmp_path, arg, stdin, name, content):
    if name:
        (tmp_path / name).write_bytes(content)
    command = [sys.executable, "-m", "lineage_capture", "graph", "ingest", "--json", "--state-dir",
               str(tmp_path / "st"), arg.format(dir=tmp_path)]
    for again in (False, True):
        run = subprocess.run(command, input=stdin, capture_output=True, timeout=60)
        assert (run.returncode, run.stderr) == (0, b"")
        report = json.loads(run.stdout)
        assert (report["new_events"], report["bad"]) == ((0 if again else 2), [])
        # read again: a stream's events are known; an unchanged compressed file is not read at all
        assert report["duplicates"] == (2 if again and stdin else 0)


@pytest.mark.parametrize("stdin", [False, True])
def test_a_truncated_gzip_keeps_what_it_held_and_says_so(tmp_path, stdin):
    data = gzip.compress(_jsonl([E(i, f"r{i}", "a", outputs=["x"]) for i in range(1, 2001)]))
    cut = data[:len(data) // 2]
    (tmp_path / "e.jsonl.gz").write_bytes(cut)
    arg = "-" if stdin else str(tmp_path / "e.jsonl.gz")
    run = subprocess.run([sys.executable, "-m", "lineage_capture", "graph", "ingest", "--json", "--state-dir",
                          str(tmp_path / "st"), arg], input=cut if stdin else None, capture_output=True, timeout=60)
    report = json.loads(run.stdout)
    assert run.returncode == 1
    assert 0 < report["new_events"] < 2000
    assert len(report["bad"]) == 1 and "cannot read to its end: Compressed file ended before" in report["bad"][0]


@pytest.mark.parametrize("text", [
    "\ufeff" + json.dumps(E(1, "r1", "a", outputs=["x"])) + "\n" + json.dumps(E(2, "r2", "b", inputs=["x"])) + "\n",
    "\ufeff" + json.dumps([E(1, "r1", "a", outputs=["x"]), E(2, "r2", "b", inputs=["x"])], indent=2),
], ids=["json-lines", "pretty-printed-array"])
def test_a_byte_order_mark_loses_no_event(tmp_path, capsys, text):
    f = tmp_path / "e.jsonl"
    f.write_text(text, encoding="utf-8")
    code, rep = ingest_json(capsys, f)
    assert (code, rep["new_events"], rep["bad"]) == (0, 2, [])


@pytest.mark.parametrize("layout", ["concatenated-pretty", "pretty-array", "json-lines"])
def test_a_lone_surrogate_escape_is_one_bad_event_the_others_kept(isolated_lineage_env, capsys, layout):
    """``"bad\\ud800name"`` (JSON may write it; no UTF-8 text holds it) in one event of the default events file:
    that event is a bad line, the others are read, and every command works. Pretty-printed, it stopped every
    command with a traceback (the json module's fallback read it, the database could not take it)."""
    events = [E(1, "r1", "a", outputs=["x"]), E(2, "r2", "bad\ud800name", inputs=["x"]), E(3, "r3", "c", inputs=["x"])]
    if layout == "concatenated-pretty":
        text = "".join(json.dumps(e, indent=2) + "\n" for e in events)
    elif layout == "pretty-array":
        text = json.dumps(events, indent=2)
    else:
        text = "".join(json.dumps(e) + "\n" for e in events)
    (isolated_lineage_env / "openlineage-events.jsonl").write_text(text)
    code, out, err = cli(capsys, "graph", "show")
    assert code == 1 and out.endswith("2 jobs, 1 datasets\n")
    assert ":2: not JSON" in err
    assert cli(capsys, "graph", "show")[:2] == (0, out)  # read once: the next command has nothing to complain of


def test_a_run_id_reused_by_another_job_keeps_both_jobs(tmp_path, capsys):
    f = write(tmp_path / "e.jsonl", [E(1, "shared", "jobA", "START", inputs=["a_in"]),
                                     E(2, "shared", "jobB", inputs=["b_in"], outputs=["b_out"]),
                                     E(3, "shared", "jobA", outputs=["a_out"])])
    code, rep = ingest_json(capsys, f)
    assert (code, rep["new_events"], rep["other_job_events"]) == (0, 3, 1)
    write(f, [E(4, "shared", "jobB", "COMPLETE", outputs=["b_out2"])], "a")  # later: still jobB's own run
    code, rep = ingest_json(capsys, f)
    assert (rep["new_events"], rep["duplicates"], rep["other_job_events"]) == (1, 0, 1)
    code, rep = ingest_json(capsys, tmp_path / "e.jsonl")
    rc, out, _ = cli(capsys, "graph", "show", "--json")
    jobs = {j["key"]: (j["inputs"], j["outputs"], j["runs"]) for j in json.loads(out)["jobs"]}
    assert jobs == {"ns/jobA": (["db/a_in"], ["db/a_out"], 1), "ns/jobB": (["db/b_in"], ["db/b_out", "db/b_out2"], 1)}


def test_jobs_whose_parents_form_a_cycle_are_still_shown(isolated_lineage_env, capsys):
    write(isolated_lineage_env / "openlineage-events.jsonl", [
        E(1, "a", "A", parent=("B", "b"), outputs=["a"]), E(2, "b", "B", parent=("A", "a"), inputs=["a"]),
        E(3, "c", "C", parent=("A", "a"), inputs=["b"])])
    rc, out, _ = cli(capsys, "graph", "show")
    assert rc == 0
    assert out.endswith("3 jobs, 2 datasets\n") and "in a parent cycle]" in out
    assert sorted(line.split("  [")[0].strip().rsplit(".", 1)[-1].split("/")[-1] for line in out.splitlines()
                  if "  [" in line) == ["A", "B", "C"]


@pytest.mark.parametrize("argv,code,out", [
    # the Airflow task is known only from its Spark application's parent facet: its own history is that it has none
    (["history", "dag.task"], 0, "airflow/dag.task: no runs of its own (known as the parent of the jobs under it "
                                 "in `graph show`)\n"),
    (["history", "airflow/dag.task"], 0, "airflow/dag.task: no runs of its own (known as the parent of the jobs "
                                         "under it in `graph show`)\n"),
    (["history", "dag.task.app"], 0, "airflow/dag.task.app: 1 versions\nv1  since 2024-01-01T00:01:00.000Z  1 runs\n"
                                     "    -> db/x\n"),
    (["upstream", "dag.task"], 0, "upstream of job airflow/dag.task\n0 nodes\n"),
])
def test_a_parent_known_only_from_parent_facets_is_a_job_of_its_own(isolated_lineage_env, capsys, argv, code, out):
    """Before, ``history dag.task`` answered with the history of its child (the prefix match was the only match:
    a job without runs was not looked up), and ``airflow/dag.task`` was not found (exit 2)."""
    write(isolated_lineage_env / "openlineage-events.jsonl",
          [E(1, "app-run", "app", outputs=["x"], parent=("dag.task", "task-run", "airflow"))])
    rc, printed, _ = cli(capsys, "graph", *argv)
    assert (rc, printed) == (code, out)


@pytest.mark.parametrize("event_time, latest", [
    ("2024-01-01t00:01:00z", "2024-01-01T00:01:00.000Z"),  # RFC 3339 allows lower-case t and z
    ("2024-01-01T00:01:00z", "2024-01-01T00:01:00.000Z"),
    ("2024-12-31T23:59:60Z", "2024-12-31T23:59:59.999Z"),  # a leap second: its order among events kept
    ("2024-12-31T23:59:60.5+01:00", "2024-12-31T22:59:59.999Z"),
])
def test_rfc3339_event_times_python_refuses_are_read(tmp_path, capsys, event_time, latest):
    """The spec's eventTime is an RFC 3339 date-time; these were bad lines ("not an ISO 8601 time")."""
    f = write(tmp_path / "e.jsonl", [{**E(1, "r", "a"), "eventTime": event_time}])
    code, rep = ingest_json(capsys, f)
    assert (code, rep["new_events"], rep["bad_count"]) == (0, 1, 0)
    _, out, _ = cli(capsys, "graph", "show", "--json")
    assert [job["latest_time"] for job in json.loads(out)["jobs"]] == [latest]


HOSTILE_JOB = "job\x1b]0;OWNED\x07\x1b[2J\x1b[31mRED\u202e"  # retitles the terminal, clears it, reverses the line
HOSTILE_DATASET = "dst\rFAKE\nline"  # a CR and a line break: fake lines


@pytest.mark.parametrize("argv, code", [
    (["show"], 0),
    (["upstream", f"db/{HOSTILE_DATASET}"], 0),
    (["downstream", "db/src"], 0),
    (["history", f"ns/{HOSTILE_JOB}"], 0),
    (["dag"], 1),  # (a cycle through the hostile dataset: said on stderr too)
    (["dag", "--format", "mermaid"], 1),
    (["upstream", "ns/"], 2),  # ambiguous: the candidates are listed on stderr
    (["history", f"db/{HOSTILE_DATASET}"], 2),  # a dataset, not a job
], ids=["show", "upstream", "downstream", "history", "dag", "mermaid", "candidates", "not-a-job"])
def test_names_reach_the_terminal_without_control_characters(isolated_lineage_env, capsys, argv, code):
    """A producer's job or dataset name holding escape sequences, a CR, a line break or a bidirectional control
    is written escaped (``\\x1b``, ``\\x0d``, ``\\u202e``) in every text answer and message: printed raw it cleared
    the screen, retitled the terminal or faked lines."""
    write(isolated_lineage_env / "openlineage-events.jsonl", [
        E(1, "a", HOSTILE_JOB, inputs=["src"], outputs=[HOSTILE_DATASET]),
        E(2, "b", "other", inputs=[HOSTILE_DATASET], outputs=["src"])])
    rc, out, err = cli(capsys, "graph", *argv)
    assert rc == code
    text = out + err
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text)  # (line breaks only between lines)
    assert not any(line.startswith(("FAKE", "line")) for line in text.splitlines())
    assert "\\x1b" in text or "\\x0d" in text


def test_a_parent_chain_deeper_than_python_recursion_is_shown(isolated_lineage_env, capsys):
    """1,200 runs, each the parent of the next: `show` writes them all, each indented under its parent (it
    stopped with a RecursionError beyond about 990)."""
    depth = 1200
    events = [E(1, "r0", "j0", outputs=["x"])]
    events += [E(1, f"r{i}", f"j{i}", parent=(f"j{i - 1}", f"r{i - 1}")) for i in range(1, depth)]
    write(isolated_lineage_env / "openlineage-events.jsonl", events)
    code, out, err = cli(capsys, "graph", "show")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[-1] == f"{depth} jobs, 1 datasets"
    labels = [line for line in lines[:-1] if not line.lstrip().startswith(("<-", "->"))]
    assert [len(line) - len(line.lstrip()) for line in labels] == [2 * i for i in range(depth)]


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("level", ["task", "root", "0", "leaf"])
def test_jobs_whose_parents_form_a_cycle_fold_into_one_task(isolated_lineage_env, capsys, size, level):
    """Runs naming each other as parents (P's parent Q, Q's parent P), P writing what Q reads: folded at any level
    but ``leaf`` they are one task holding all of them (each folded into the other before: the tasks swapped their
    jobs, and the generated DAG ran Q before P); at ``leaf`` P's task runs before Q's."""
    names = ["P", "Q", "R"][:size]
    events = [E(i + 1, names[i], names[i], parent=(names[i - 1], names[i - 1]),
                outputs=["x"] if i == 0 else [], inputs=["x"] if i == size - 1 else []) for i in range(size)]
    write(isolated_lineage_env / "openlineage-events.jsonl", events)
    code, out, _ = cli(capsys, "graph", "dag", "--json", "--level", level)
    tasks = json.loads(out)["tasks"]
    assert code == 0
    if level == "leaf":
        order = {t["task"].rsplit(".", 1)[-1].split("/")[-1]: t for t in tasks}
        assert order[names[-1]]["dependencies"] and order[names[-1]]["level"] > order["P"]["level"]
    else:
        assert len(tasks) == 1 and len(tasks[0]["jobs"]) == size and tasks[0]["dependencies"] == []


def test_two_jobs_shown_by_one_name_can_each_be_picked(isolated_lineage_env, capsys):
    """Job ``a.b`` under ``p`` and job ``b`` under ``p.a`` are both shown as ``ns/p.a.b``: the ambiguity lists each
    with its own namespace/name, which picks it (the list read `ns/p.a.b` twice, and neither could be typed)."""
    write(isolated_lineage_env / "openlineage-events.jsonl", [
        E(1, "p", "p"), E(2, "pa", "p.a", parent=("p", "p")),
        E(3, "ab", "a.b", parent=("p", "p"), outputs=["x"]), E(4, "b", "b", parent=("p.a", "pa"), inputs=["x"])])
    code, _, err = cli(capsys, "graph", "upstream", "ns/p.a.b")
    assert code == 2
    assert err.splitlines()[1:] == ["  ns/p.a.b  (or ns/a.b)", "  ns/p.a.b  (or ns/b)"]
    code, out, _ = cli(capsys, "graph", "upstream", "ns/b")
    assert code == 0 and out.splitlines()[0] == "upstream of job ns/p.a.b" and "db/x" in out
