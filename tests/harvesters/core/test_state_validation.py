"""A state file that is valid JSON with wrong types: refused before use, the field named (exit code 2, no traceback);
and what a state keeps is redacted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harvesters.core.state import Checkpoint, StateError, state_problem

from harvest_cli import run_harvest

SOURCE = "sqlserver sqlserver://h:1433"
T = "2024-05-14T02:00:00+00:00"
RUN = {"job": ["default", "python_task.task1"], "run_id": "01900000-0000-7000-8000-000000000001", "host": "W1",
       "session": "51", "start": T, "last_end": T}


def state(**fields: object) -> dict:
    return {"version": 1, "source": SOURCE, **fields}


# (state, the problem named: None = accepted)
CASES = [
    (state(), None),
    (state(open_runs=[RUN], covered_activities=["A"], pending_errors=[["A", T, "Msg 1"]],
           files={"/x.xml": {"offset": 10, "head_len": 4, "head": "ab"}},
           event_file={"file": None, "offset": None, "done": 0}, ring_buffer={"time": T, "keys": ["k"]},
           window_end=T, seen={"q1": T}, some_future_key=[1]), None),
    (state(files={"/x.xml": {"offset": 10}}), None),  # head written later
    (state(open_runs=[{**RUN, "modules": {"m": {"job": ["default", "p"], "run_id": "r", "start": T,
                                                 "last_end": T, "caller": None}}}]), None),
    ({"version": "1", "source": SOURCE}, "version must be an integer, not \"1\""),
    (state(open_runs={}), "open_runs must be a list, not {}"),
    (state(open_runs=[RUN, {**RUN, "start": 5}]),
     "open_runs[1].start must be an ISO 8601 time with its UTC offset, not 5"),
    (state(open_runs=[{**RUN, "last_end": "yesterday"}]), "open_runs[0].last_end must be an ISO 8601 time"),
    (state(open_runs=[{**RUN, "start": "2024-05-14T02:00:00"}]),
     "open_runs[0].start must be an ISO 8601 time with its UTC offset"),
    (state(open_runs=[{k: v for k, v in RUN.items() if k != "host"}]), "open_runs[0] has no 'host'"),
    (state(open_runs=[{**RUN, "job": "python_task.task1"}]), "open_runs[0].job must be a list of 2 values"),
    (state(open_runs=[{**RUN, "job": ["default", 7]}]), "open_runs[0].job[1] must be a string, not 7"),
    (state(open_runs=[{**RUN, "parent": ["ns", "job"]}]), "open_runs[0].parent must be a list of 3 values or null"),
    (state(open_runs=[{**RUN, "children": "3"}]), "open_runs[0].children must be a whole number, 0 or more"),
    (state(open_runs=[{**RUN, "children": -1}]), "open_runs[0].children must be a whole number, 0 or more, not -1"),
    (state(open_runs=[{**RUN, "started": 1}]), "open_runs[0].started must be true or false, not 1"),
    (state(open_runs=[{**RUN, "temps": {"#t": "a"}}]), "open_runs[0].temps[\"#t\"] must be a list"),
    (state(open_runs=[{**RUN, "modules": {"m": {"job": ["d", "p"], "run_id": "r", "start": T}}}]),
     "open_runs[0].modules[\"m\"] has no 'last_end'"),
    (state(files={"/x.xml": {"offset": "10"}}),
     "files[\"/x.xml\"].offset must be a whole number, 0 or more, not \"10\""),
    (state(files={"/x.xml": {"offset": True}}),
     "files[\"/x.xml\"].offset must be a whole number, 0 or more, not true"),
    (state(files={"/x.xml": {"offset": -4249}}),  # read from the start again, silently: every event twice
     "files[\"/x.xml\"].offset must be a whole number, 0 or more, not -4249"),
    (state(files={"/x.xml": {"offset": 0, "head_len": -1}}), "files[\"/x.xml\"].head_len must be a whole number"),
    (state(event_file={"file": "f.xel", "offset": -1, "done": 0}), "event_file.offset must be a whole number, 0 or "
                                                                   "more or null, not -1"),
    (state(files=["/x.xml"]), "files must be an object"),
    (state(event_file={"file": 3}), "event_file.file must be a string or null, not 3"),
    (state(ring_buffer={"time": "noon"}), "ring_buffer.time must be an ISO 8601 time"),
    (state(pending_errors=[["A", T]]), "pending_errors[0] must be a list of 3 values"),
    (state(pending_errors=[["A", "later", "Msg"]]), "pending_errors[0][1] must be an ISO 8601 time"),
    (state(covered_activities="A"), "covered_activities must be a list"),
    (state(window_end=1717200000), "window_end must be an ISO 8601 time with its UTC offset, not 1717200000"),
    (state(seen=["q1"]), "seen must be an object"),
    (state(seen={"q1": None}), "seen[\"q1\"] must be an ISO 8601 time with its UTC offset, not null"),
]


@pytest.mark.parametrize(("data", "problem"), CASES)
def test_state_problem_names_the_field(data: dict, problem: str | None) -> None:
    found = state_problem(data)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found


@pytest.mark.parametrize(("data", "problem"), [c for c in CASES if c[1] is not None])
def test_checkpoint_load_raises_state_error(tmp_path: Path, data: dict, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StateError) as raised:
        Checkpoint.load(path, SOURCE)
    assert str(raised.value).startswith(f"{path}: {problem}")


EVENT = (b'<event name="sql_statement_completed" package="sqlserver" timestamp="2024-05-14T02:00:00.000Z">'
         b'<data name="duration"><value>1000</value></data>'
         b'<data name="statement"><value><![CDATA[INSERT INTO dbo.b SELECT * FROM dbo.a]]></value></data>'
         b'<action name="session_id" package="sqlserver"><value>51</value></action>'
         b'<action name="client_app_name" package="sqlserver"><value>python_task::task1</value></action>'
         b'</event>\n')


@pytest.mark.parametrize(("source", "data", "problem"), [
    ("sqlserver", state(open_runs=[{**RUN, "start": 5}]), "open_runs[0].start must be an ISO 8601 time"),
    ("sqlserver", state(pending_errors=[["A", T, 3]]), "pending_errors[0][2] must be a string, not 3"),
    ("sqlserver", state(files={"X": {"offset": "0"}}), 'files["X"].offset must be a whole number, 0 or more'),
    ("sqlserver", state(files={"X": {"offset": -1}}), 'files["X"].offset must be a whole number, 0 or more, not -1'),
    ("snowflake", {"version": 1, "source": "snowflake snowflake://org-acct", "window_end": 5},
     "window_end must be an ISO 8601 time"),
    ("snowflake", {"version": 1, "source": "snowflake snowflake://org-acct", "seen": {"q": 5}},
     'seen["q"] must be an ISO 8601 time'),
])
def test_harvest_with_a_mistyped_state_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 source: str, data: dict, problem: str) -> None:
    state_path = tmp_path / "state.json"
    state_path.write_text(json.dumps(data))
    before = state_path.read_text()
    if source == "sqlserver":
        (tmp_path / "e.xml").write_bytes(EVENT)
        args = ["sqlserver", "--server", "h", "--xml", str(tmp_path / "e.xml")]
    else:
        (tmp_path / "h.csv").write_text("QUERY_ID,START_TIME,QUERY_TEXT\nq1,2024-06-01 01:00:00,SELECT 1\n")
        args = ["snowflake", "--account", "org-acct", "--history", str(tmp_path / "h.csv")]
    code, events = run_harvest(tmp_path / "events.jsonl", [*args, "--state", str(state_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert events == []
    assert f"harvest {source}: {state_path}: {problem}" in err
    assert "Traceback" not in err
    assert state_path.read_text() == before  # untouched


def test_commit_redacts_every_string_it_keeps(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    checkpoint = Checkpoint.load(path, SOURCE)
    checkpoint.current["pending_errors"] = [["A", T, "Login failed: password=Hunter2Secret"]]
    checkpoint.current["open_runs"] = [{**RUN, "host": "db;Pwd=Hunter2Secret"}]
    checkpoint.commit()
    text = path.read_text()
    assert "Hunter2Secret" not in text
    saved = json.loads(text)
    assert saved["pending_errors"] == [["A", T, "Login failed: password=***"]]
    assert saved["open_runs"][0]["host"] == "db;Pwd=***"
    assert saved["open_runs"][0]["start"] == T  # the rest as it was
    assert state_problem(saved) is None
