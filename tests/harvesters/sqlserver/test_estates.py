"""Issue 13 on real estates, through the whole `harvest sqlserver --xml` path: Synapse CTAS, drivers' prepared and
cursor calls, statements without lineage, system objects, database names, several --xml files, the compact
Airflow parent id, the mssql:// symlink.

Each row of tests/cases/sqlserver_estates.jsonl is a small event log (events written like
fn_xe_file_target_read_file's event_data), the options, and the exact outcome: exit code, every emitted event as
(eventType, job, parent job, inputs, outputs), the summary line's telling part, and for parent rows the task run's
parent and root. Every event is validated against the OpenLineage schemas (tests/harvest_cli.py).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest

from harvesters.core.tasks import compact_parent_id, parse_parent_ids

from harvest_cli import brief, run_harvest
from paths import CASES

ROWS = [json.loads(line) for line in (CASES / "sqlserver_estates.jsonl").read_text().splitlines() if line.strip()]
T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def event(spec: dict[str, Any], seq: int) -> str:
    """One event from a row's spec: name, minute, sql, db (null: no database at all), db_field (the database as
    a <data> field instead of an action), session, app."""
    name = spec.get("name", "sql_statement_completed")
    field = "batch_text" if name == "sql_batch_completed" else "statement"
    data = '<data name="duration"><value>1000</value></data>'
    data += f'<data name="{field}"><value><![CDATA[{spec["sql"]}]]></value></data>'
    db = spec.get("db", "Sales")
    if db is not None and spec.get("db_field"):
        data += f'<data name="database_name"><value>{escape(db)}</value></data>'
    actions = f'<action name="session_id" package="sqlserver"><value>{spec.get("session", 51)}</value></action>'
    if db is not None and not spec.get("db_field"):
        actions += f'<action name="database_name" package="sqlserver"><value>{escape(db)}</value></action>'
    actions += (f'<action name="client_hostname" package="sqlserver"><value>WORKER1</value></action>'
                f'<action name="client_app_name" package="sqlserver">'
                f'<value>{escape(spec.get("app", "python_task::task1"))}</value></action>'
                f'<action name="event_sequence" package="package0"><value>{seq}</value></action>')
    stamp = (T0 + timedelta(minutes=spec.get("minute", seq))).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f'<event name="{name}" package="sqlserver" timestamp="{stamp}">{data}{actions}</event>'


@pytest.mark.parametrize("row", [pytest.param(r, id=r["id"]) for r in ROWS])
def test_estate_row(tmp_path: Path, capsys: pytest.CaptureFixture[str], row: dict[str, Any]) -> None:
    files = []
    for index, events in enumerate(row["files"] if "files" in row else [row["events"]]):
        path = tmp_path / f"log{index}.xml"
        path.write_text("\n".join(event(spec, seq) for seq, spec in enumerate(events, start=1)) + "\n")
        files += ["--xml", str(path)]
    code, emitted = run_harvest(tmp_path / "events.jsonl",
                                ["sqlserver", "--server", "sqlprod01", *files, *row.get("args", [])])
    err = capsys.readouterr().err
    assert code == row["exit"], err
    assert [list(brief(e)) for e in emitted] == row["runs"], err
    for fragment in row.get("summary", []):
        assert fragment in err
    if "parent" in row:
        start = next(e for e in emitted if e["eventType"] == "START")
        facet = start["run"]["facets"].get("parent")
        assert ([facet["job"]["namespace"], facet["job"]["name"], facet["run"]["runId"],
                 facet.get("root", {}).get("job", {}).get("name"), facet.get("root", {}).get("run", {}).get("runId")]
                if facet else None) == row["parent"]
    for symlinked in row.get("symlinks", []):  # [dataset name, primary namespace, other identifier namespace]
        dataset = next(d for e in emitted for d in (*e["inputs"], *e["outputs"]) if d["name"] == symlinked[0])
        assert [dataset["namespace"], [[i["namespace"], i["name"], i["type"]]
                                       for i in dataset["facets"]["symlinks"]["identifiers"]]] == symlinked[1:]


PARENT = "airflow/etl_dag.load_task/01900000-0000-7000-8000-000000000001"
ROOT = "airflow/etl_dag/01900000-0000-7000-8000-0000000000ff"


# (parent id, root id, compact form): the compact form round-trips to the same RunRefs
@pytest.mark.parametrize(("parent", "root", "compact"), [
    (PARENT, ROOT, "ol=etl_dag/load_task/AZAAAAAAcACAAAAAAAAAAQ/AZAAAAAAcACAAAAAAAAA_w"),
    (PARENT, None, "ol=etl_dag.load_task/AZAAAAAAcACAAAAAAAAAAQ"),
    # a parent job that is not <root job>.<task> keeps its whole name and no root
    (PARENT, "airflow/other_dag/01900000-0000-7000-8000-0000000000ff", "ol=etl_dag.load_task/AZAAAAAAcACAAAAAAAAAAQ"),
])
def test_compact_parent_id_round_trip(parent: str, root: str | None, compact: str) -> None:
    assert compact_parent_id(parent, root) == compact
    got_parent, got_root, problem = parse_parent_ids(compact, None, "airflow")
    assert problem is None
    assert f"{got_parent.job.namespace}/{got_parent.job.name}/{got_parent.run_id}" == parent
    if root and compact.count("/") == 3:
        assert f"{got_root.job.namespace}/{got_root.job.name}/{got_root.run_id}" == root
    else:
        assert got_root is None


# (parent id as found, root id, problem)
@pytest.mark.parametrize(("parent", "root", "problem"), [
    ("airflow/etl_dag.load_task/01a206fd-6700-7536-b", None,
     "openlineage_parent_id run id is not a UUID (truncated application name?)"),
    ("etl_dag.load_task", None, "malformed openlineage_parent_id (<namespace>/<job>/<run id>)"),
    (PARENT, "airflow/etl_dag/01900000-0000", "malformed openlineage_root_parent_id (truncated application name?)"),
    ("ol=etl_dag/load_task/AZAAAAAAcACAAAAAAAAAAQ/AZAAAAAAcACAAA", None,
     "malformed compact parent id (ol=<dag>/<task>/<run id>/<dag run id>; truncated?)"),
    ("ol=etl_dag/load_task/AZAAAAAAcACAAAAAAAAAAQ", None,
     "malformed compact parent id (ol=<dag>/<task>/<run id>/<dag run id>; truncated?)"),
    ("ol=etl_dag/load_task/" + "0" * 32 + "/" + "1" * 32, None, None),
    (PARENT, ROOT, None),
])
def test_malformed_parent_ids_are_named(parent: str, root: str | None, problem: str | None) -> None:
    assert parse_parent_ids(parent, root, "airflow")[2] == problem


def test_the_reading_process_sends_prepared_calls_and_databases(tmp_path: Path) -> None:
    """What the second process reads of each event (prepared handle, database, system objects left out or kept)
    is what this process reads: every row's log, read both ways."""
    from harvesters.sqlserver.reading import EventReader, LineageCache, read_readings, read_readings_background

    path = tmp_path / "all.xml"
    specs = [spec for row in ROWS for events in row.get("files", [row.get("events", [])]) for spec in events]
    path.write_text("\n".join(event(spec, seq) for seq, spec in enumerate(specs, start=1)) + "\n")
    for keep in (False, True):
        lineage, there_lineage = LineageCache(), LineageCache()
        lineage.keep_system_objects = there_lineage.keep_system_objects = keep
        here = [item.value for item in read_readings(str(path), EventReader("sqlserver://h:1433", lineage))]
        there = [item.value for item in read_readings_background(str(path),
                                                                 EventReader("sqlserver://h:1433", there_lineage))]
        assert there == here
        assert any(r.prepared for r in here) and any(r.database is None for r in here)
        inputs = {name for r in here for s in [getattr(r.result, "statement", None) or r.result]
                  for name in getattr(s, "inputs", ())}
        assert ("master.sys.databases" in inputs) is keep


def test_xml_files_are_ordered_by_their_first_event_whatever_their_encoding(tmp_path: Path) -> None:
    from harvesters.sqlserver.command import time_ordered

    late, early, empty = tmp_path / "late.xml", tmp_path / "early.xml", tmp_path / "empty.xml"
    late.write_text(event({"sql": "SELECT 1", "minute": 30}, 1) + "\n")
    # sqlcmd -u writes UTF-16 with a byte-order mark
    early.write_bytes(b"\xff\xfe" + (event({"sql": "SELECT 1", "minute": 2}, 1) + "\n").encode("utf-16-le"))
    empty.write_text("no events here\n")
    names = [str(late), str(empty), str(early)]
    assert time_ordered(names) == ([str(early), str(late), str(empty)], [])
