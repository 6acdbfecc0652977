"""The helper for a task's own code (harvesters.core.airflow_tag.task_tag): the application name, QUERY_TAG and SQL
comment it gives are read back by the harvesters as the same task, parent and root.

- always: without Airflow (this environment has none), every form is the plain task name; with the ids in
  OPENLINEAGE_PARENT_ID / OPENLINEAGE_ROOT_PARENT_ID (a BashOperator-started script), the exact forms, parsed back
  by the SQL Server and Snowflake readers; an application name that would pass 128 characters keeps no id.
- against the real provider (apache-airflow + apache-airflow-providers-openlineage), only when asked:
  LINEAGE_CAPTURE_AIRFLOW_PYTHON=/path/to/python of an environment holding both and this project's dependencies
  (or LINEAGE_CAPTURE_AIRFLOW_PYTHON=install: the test creates .venv-airflow at the repository root and installs
  both and this project, editable, with pip: minutes):
  a DAG run by ``dag.test()`` calls task_tag inside its task; the ids must equal the ids of the provider's own
  events for that task run (its file transport) and the provider's OpenLineageAdapter formula (about 30 s).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv

import pytest

from emitter.records import RunRef
from harvesters.core.airflow_tag import APP_NAME_LIMIT, AirflowTag, task_tag
from harvesters.core.tasks import find_parent_ids, parse_parent_ids, task_job_name
from harvesters.snowflake.history import _tag_task

from paths import REPO

PARENT = "airflow/sales_dag.load/01900000-0000-7000-8000-000000000001"
ROOT = "airflow/sales_dag/01900000-0000-7000-8000-000000000000"


@pytest.fixture(autouse=True)
def no_airflow_ids(monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_PARENT_ID", raising=False)
    monkeypatch.delenv("OPENLINEAGE_ROOT_PARENT_ID", raising=False)


def test_without_airflow_every_form_is_the_plain_task_name():
    assert "airflow" not in sys.modules  # this environment has no Airflow: the helper must not need it
    tag = task_tag("python_task::task1")
    assert (tag.app_name, tag.query_tag, tag.sql_comment, tag.parent_id, tag.root_parent_id) == \
        ("python_task::task1", "python_task::task1", "", None, None)
    assert task_tag() == AirflowTag("unknown_task")


def read_back(app_name: str, sql: str, namespace: str = "airflow") -> tuple[RunRef | None, RunRef | None]:
    """What the SQL Server harvester makes of an application name and a statement: (parent, root)."""
    parent, root, problem = parse_parent_ids(*find_parent_ids(app_name, sql), namespace)
    assert problem is None
    return parent, root


# parent and root in the long form do not fit in 128 characters even with these short names (161): the application
# name then carries the compact form (no namespace: the harvest's --parent-namespace), the comment the long one
@pytest.mark.parametrize("parent,root,app_name,query_tag,comment", [
    (PARENT, ROOT, "python_task::task1 ol=sales_dag/load/AZAAAAAAcACAAAAAAAAAAQ/AZAAAAAAcACAAAAAAAAAAA",
     json.dumps({"openlineage_task": "python_task::task1", "openlineage_parent_id": PARENT,
                 "openlineage_root_parent_id": ROOT}, separators=(",", ":")),
     f"/* openlineage_parent_id={PARENT} openlineage_root_parent_id={ROOT} */ "),
    (PARENT, None, f"python_task::task1 openlineage_parent_id={PARENT}",
     json.dumps({"openlineage_task": "python_task::task1", "openlineage_parent_id": PARENT}, separators=(",", ":")),
     f"/* openlineage_parent_id={PARENT} */ "),
])
def test_ids_from_the_environment_are_read_back_by_the_harvesters(monkeypatch, parent, root, app_name, query_tag,
                                                                  comment):
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", parent)
    if root:
        monkeypatch.setenv("OPENLINEAGE_ROOT_PARENT_ID", root)
    tag = task_tag("python_task::task1")
    assert (tag.app_name, tag.query_tag, tag.sql_comment, tag.app_name_fits) == (app_name, query_tag, comment, True)
    expected = (RunRef.parse(parent), RunRef.parse(root) if root else None)
    # SQL Server: the application name, or the comment of a statement
    assert read_back(tag.app_name, "SELECT 1") == expected
    assert read_back("python_task::task1", tag.sql_comment + "INSERT INTO t SELECT * FROM s") == expected
    assert task_job_name(tag.app_name) == "python_task.task1"
    # Snowflake: the JSON query tag
    found = _tag_task(tag.query_tag, "ETL", "WH")
    assert (task_job_name(found.task), found.parent_id, found.root_parent_id) == ("python_task.task1", parent, root)


def test_task_name_defaults_to_the_airflow_task(monkeypatch):
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", PARENT)
    assert task_tag().task == "sales_dag::load"
    assert task_job_name(task_tag().app_name) == "sales_dag.load"


def test_ordinary_names_fit_in_the_compact_form(monkeypatch):
    """The issue's kind of names: the long form passes 128 characters, the compact form fits."""
    parent = "airflow-production-eu-west-1/warehouse_nightly_load.load_fact_sales/019a206f-d670-7536-b1c2-3d4e5f607182"
    root = "airflow-production-eu-west-1/warehouse_nightly_load/019a206f-d600-7000-8000-000000000000"
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", parent)
    monkeypatch.setenv("OPENLINEAGE_ROOT_PARENT_ID", root)
    tag = task_tag("python_task::load_fact_sales")
    assert len(f"python_task::load_fact_sales {tag.ids}") > APP_NAME_LIMIT
    assert tag.app_name == ("python_task::load_fact_sales ol=warehouse_nightly_load/load_fact_sales/"
                            "AZogb9ZwdTaxwj1OX2Bxgg/AZogb9YAcACAAAAAAAAAAA")
    assert len(tag.app_name) <= APP_NAME_LIMIT and tag.app_name_fits
    assert read_back(tag.app_name, "SELECT 1", "airflow-production-eu-west-1") == \
        (RunRef.parse(parent), RunRef.parse(root))


def test_an_application_name_over_128_characters_keeps_no_id(monkeypatch):
    """Names so long that even the compact form passes 128 characters: the application name is the task alone
    (never a cut run id) and the statements carry the ids in the comment."""
    dag, task = "d" * 60, "t" * 40
    parent = f"airflow/{dag}.{task}/019a206f-d670-7536-b1c2-3d4e5f607182"
    root = f"airflow/{dag}/019a206f-d600-7000-8000-000000000000"
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", parent)
    monkeypatch.setenv("OPENLINEAGE_ROOT_PARENT_ID", root)
    tag = task_tag("python_task::load_fact_sales")
    assert len(f"python_task::load_fact_sales {tag.compact_ids}") > APP_NAME_LIMIT
    assert (tag.app_name, tag.app_name_fits) == ("python_task::load_fact_sales", False)
    assert find_parent_ids(tag.app_name, tag.sql_comment + "SELECT 1") == (parent, root)


# ---- against the real provider ------------------------------------------------------------------------------

AIRFLOW_PYTHON = os.environ.get("LINEAGE_CAPTURE_AIRFLOW_PYTHON", "")
#: What the opt-in environment installs (the versions this test was last run with: 3.3.2 / 2.20.3).
#: pinned: the versions this test was written against (a new Airflow may change the macros it compares)
AIRFLOW_PACKAGES = ("apache-airflow==3.3.2", "apache-airflow-providers-openlineage==2.20.3")

DAG_SCRIPT = textwrap.dedent('''
    import json, os, sys
    from datetime import datetime, timezone
    from airflow.sdk import DAG, task

    from harvesters.core.airflow_tag import task_tag

    with DAG("sales_dag", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc)) as dag:
        @task(task_id="load")
        def load(**context):
            from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
            from airflow.providers.openlineage import conf
            ti = context["ti"]
            dag_run = context["dag_run"]
            logical = dag_run.logical_date or dag_run.run_after
            run_id = OpenLineageAdapter.build_task_instance_run_id(
                dag_id=ti.dag_id, task_id=ti.task_id, try_number=ti.try_number, logical_date=logical,
                map_index=ti.map_index)
            dag_run_id = OpenLineageAdapter.build_dag_run_id(dag_id=ti.dag_id, logical_date=logical,
                                                             clear_number=dag_run.clear_number)
            tag = task_tag("python_task::task1")
            with open(os.environ["RESULT"], "w") as out:
                json.dump({"app_name": tag.app_name, "query_tag": tag.query_tag, "comment": tag.sql_comment,
                           "parent": tag.parent_id, "root": tag.root_parent_id,
                           "expected_parent": f"{conf.namespace()}/sales_dag.load/{run_id}",
                           "expected_root": f"{conf.namespace()}/sales_dag/{dag_run_id}",
                           "default_task": task_tag().task}, out)
        load()

    if __name__ == "__main__":  # not when the DAG processor parses the file (airflow dags reserialize)
        dag.test(logical_date=datetime(2026, 1, 2, tzinfo=timezone.utc))
''')


def _airflow_python() -> str:
    if AIRFLOW_PYTHON != "install":
        return AIRFLOW_PYTHON
    target = REPO / ".venv-airflow"
    python = target / "bin" / "python"
    if not python.exists():
        venv.create(target, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *AIRFLOW_PACKAGES, "-e", str(REPO)], check=True,
                       timeout=1800)
    return str(python)


@pytest.mark.skipif(not AIRFLOW_PYTHON, reason="set LINEAGE_CAPTURE_AIRFLOW_PYTHON to run against the real provider")
def test_ids_are_the_providers_own(tmp_path):
    python = _airflow_python()
    events = tmp_path / "ol-events.jsonl"
    result = tmp_path / "result.json"
    script = tmp_path / "dag_under_test.py"
    script.write_text(DAG_SCRIPT)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW"))},
           "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path), "AIRFLOW__OPENLINEAGE__NAMESPACE": "airflow-test",
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events),
                                                          "append": True}),
           "PYTHONPATH": str(REPO), "RESULT": str(result)}
    subprocess.run([python, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    # Airflow 3 runs only serialized DAGs, also under dag.test()
    subprocess.run([python, "-m", "airflow", "dags", "reserialize"], env=env, check=True, capture_output=True,
                   timeout=600)
    run = subprocess.run([python, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert result.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    found = json.loads(result.read_text())
    assert found["parent"] == found["expected_parent"]
    assert found["root"] == found["expected_root"]
    assert found["default_task"] == "sales_dag::load"
    parent, root = found["parent"], found["root"]
    assert found["comment"] == f"/* openlineage_parent_id={parent} openlineage_root_parent_id={root} */ "
    expected = (RunRef.parse(parent), RunRef.parse(root))
    assert read_back("python_task::task1", found["comment"] + "SELECT 1", "airflow-test") == expected
    assert found["app_name"].startswith("python_task::task1 ol=sales_dag/load/")
    assert read_back(found["app_name"], "SELECT 1", "airflow-test") == expected
    found_tag = _tag_task(found["query_tag"], "ETL", "WH")
    assert (found_tag.parent_id, found_tag.root_parent_id) == (parent, root)
    # the provider's own events for this task run (its listener, file transport) carry the same ids
    task_events = [e for e in map(json.loads, events.read_text().splitlines()) if e["job"]["name"] == "sales_dag.load"]
    assert [e["eventType"] for e in task_events] == ["START", "COMPLETE"]
    assert {(e["job"]["namespace"], e["run"]["runId"]) for e in task_events} == \
        {("airflow-test", parent.rsplit("/", 1)[1])}
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in task_events} == {root.rsplit("/", 1)[1]}
