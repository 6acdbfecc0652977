"""The fast ingest path gives the answers of the checking one: fast_record against parse_event on generated
events, the second reading process against one process, a schema-1 database migrated with its digests."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from graph_events import event as E
from graph_events import rid
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage_graph import background, ingest
from lineage_graph.cli import main
from lineage_graph.store import connect

# values that are right, wrong in type, empty or absent, for every field the graph reads
_TEXT = st.sampled_from(["ns", "db", "a.b", "/data/t/dt=2024-01-01", "Sales.dbo.#tmp", "x=1/y=2", ""])
_ANY = st.one_of(st.none(), st.integers(-1, 1), st.booleans(), st.just([]), st.just({}), _TEXT)
_UUIDS = st.sampled_from([rid("a"), rid("b").upper(), rid("c").replace("-", ""), "42", "not-a-uuid"])
_TIMES = st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01T01:02:03.456+02:00", "2024-01-01T00:00:00",
                          "yesterday", "2024-13-01T00:00:00Z"])


@st.composite
def _maybe(draw, strategy):
    # mostly right, so whole valid events are common, sometimes anything else
    return draw(strategy) if draw(st.integers(0, 19)) < 18 else draw(_ANY)


_SYMLINKS = st.fixed_dictionaries({"symlinks": _maybe(st.fixed_dictionaries({"identifiers": _maybe(st.lists(
    _maybe(st.fixed_dictionaries({"namespace": _maybe(_TEXT), "name": _maybe(_TEXT), "type": st.just("TABLE")})),
    max_size=2))}))})
_DATASET = st.one_of(st.fixed_dictionaries({"namespace": _maybe(_TEXT), "name": _maybe(_TEXT)},
                                           optional={"facets": st.one_of(st.just({}), _SYMLINKS)}), _ANY)
_FACET_JOB = st.fixed_dictionaries({}, optional={
    "jobType": _maybe(st.fixed_dictionaries({"jobType": _maybe(st.sampled_from(["DAG", "TASK"])),
                                             "integration": _maybe(st.just("AIRFLOW"))})),
    "sourceCodeLocation": _maybe(st.fixed_dictionaries({}, optional={"version": _maybe(_TEXT),
                                                                     "url": _maybe(_TEXT)})),
    "sourceCode": _maybe(st.fixed_dictionaries({"sourceCode": _maybe(_TEXT)}))})
_PARENT = st.fixed_dictionaries({
    "job": _maybe(st.fixed_dictionaries({"namespace": _maybe(_TEXT), "name": _maybe(_TEXT)})),
    "run": _maybe(st.fixed_dictionaries({"runId": _maybe(_UUIDS)}))})
_FACET_RUN = st.fixed_dictionaries({}, optional={
    "parent": _maybe(_PARENT), "parentRun": _maybe(_PARENT),  # (the old Airflow integration's key)
    "errorMessage": _maybe(st.fixed_dictionaries({"message": _maybe(_TEXT)}))})
EVENTS = st.one_of(st.fixed_dictionaries({
    "eventTime": _maybe(_TIMES),
    "run": _maybe(st.fixed_dictionaries({"runId": _maybe(_UUIDS)}, optional={"facets": _maybe(_FACET_RUN)})),
    "job": _maybe(st.fixed_dictionaries({"namespace": _maybe(_TEXT), "name": _maybe(_TEXT)},
                                        optional={"facets": _maybe(_FACET_JOB)}))}, optional={
    "eventType": _maybe(st.sampled_from(["START", "COMPLETE", "FAIL", "DONE", ["START"]])),
    "producer": _maybe(st.just("https://example.com/p")),
    "inputs": _maybe(st.lists(_DATASET, max_size=3)),
    "outputs": _maybe(st.lists(_DATASET, max_size=3)),
    "dataset": _ANY}), _ANY, st.just({"job": {"namespace": "n", "name": "j"}}))


def _normalized(pairs) -> list:
    # (namespace, name[, symlinks]): the dataset's own name normalised, its symlinks as the event gives them
    return [(*d, *p[2:]) for p in pairs if (d := ingest.normalize_dataset(p[0], p[1])) is not None]


@settings(max_examples=1500, deadline=None)
@given(EVENTS)
def test_fast_record_agrees_with_parse_event(event):
    fast = ingest.fast_record(event)
    try:
        slow = ingest.event_record(ingest.parse_event(event))
    except (ingest.BadEvent, ingest.NotRunEvent):
        assert fast is None  # the fast path takes only valid run events
        return
    if fast is None:
        return  # unusual but valid: parse_event's record is used
    # same fields; datasets normalised at store time give the pairs parse_event normalised (idempotently)
    assert fast[:13] == slow[:13]
    assert (_normalized(fast[13]), _normalized(fast[14])) == (list(slow[13]), list(slow[14]))
    assert (_normalized(slow[13]), _normalized(slow[14])) == (list(slow[13]), list(slow[14]))


def test_fast_path_takes_the_usual_event():
    e = E(1, "r1", "job", "START", inputs=["x", ("/t/dt=2024-01-01", "s3://b")], outputs=["#tmp"],
          parent=("dag", "d1"), job_type="TASK", code="abc", error="boom")
    assert ingest.fast_record(e) == (ingest.digest(e), rid("r1"), "START", 1704067260.0, "ns", "job", "ns", "dag",
                                     rid("d1"), "abc", "TASK", "SPARK", "boom",
                                     (("db", "x"), ("s3://b", "/t/dt=2024-01-01")), (("db", "#tmp"),))


def _lines(tmp_path: Path) -> Path:
    """A file of every kind of line: good events of runs split over chunks, duplicates, bad lines, blank lines,
    a not-run event and a last line without newline."""
    out = []
    for i in range(300):
        out.append(json.dumps(E(i % 60, f"r{i % 40}", f"job{i % 7}", "START" if i < 150 else "COMPLETE",
                                inputs=[f"in{i % 5}"], outputs=[f"out{i % 7}"])))
        if i % 50 == 0:
            out += ["", "not json", json.dumps({**E(1, "x", "a"), "eventType": "DONE"}),
                    json.dumps({"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "n", "name": "j"}})]
        if i % 90 == 0:
            out.append(out[-1])  # the same line twice
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(out))  # no newline after the last line
    return path


def test_second_process_gives_the_same_ingest(tmp_path, monkeypatch, capsys):
    path = _lines(tmp_path)
    children = []

    def counted(*args):
        children.append(args[1])
        yield from background.in_background(*args)

    monkeypatch.setattr(ingest, "in_background", counted)
    answers = []
    for min_bytes, name in ((1 << 40, "one.sqlite"), (0, "two.sqlite")):
        monkeypatch.setattr(background, "BACKGROUND_MIN_BYTES", min_bytes)
        monkeypatch.setattr(ingest, "CHUNK", 4096)  # many chunks, runs split over them
        assert main(["graph", "ingest", "--json", "--db", str(tmp_path / name), str(path)]) == 1
        report = json.loads(capsys.readouterr().out)
        assert main(["graph", "show", "--json", "--no-ingest", "--db", str(tmp_path / name)]) == 0
        answers.append((report, json.loads(capsys.readouterr().out)))
    assert answers[0] == answers[1]
    assert children == [(str(path), "0", "0")]  # the second ingest was parsed by a child process
    report = answers[0][0]
    assert (report["lines"], report["new_events"], report["duplicates"], report["ignored"], report["bad_count"]) == \
        (322, 300, 3, 7, 12)  # 6 blank lines not counted; a not-run event and 3 events written twice
    assert report["bad"][:2] == [f"{path}:3: not JSON (invalid literal, expected 'null')",
                                 f"{path}:4: eventType must be one of ABORT, COMPLETE, FAIL, OTHER, RUNNING, START"]


def test_child_that_cannot_start_reads_here(tmp_path, monkeypatch, capsys):
    path = _lines(tmp_path)
    monkeypatch.setattr(background, "BACKGROUND_MIN_BYTES", 0)
    monkeypatch.setattr(background, "_CHILD_MAIN", "raise SystemExit(3)")  # ends before its first message
    assert main(["graph", "ingest", "--json", "--db", str(tmp_path / "g.sqlite"), str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["new_events"] == 300


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE files (path TEXT PRIMARY KEY, dev INTEGER, inode INTEGER, size INTEGER, offset INTEGER, line INTEGER,
    head BLOB);
CREATE TABLE events (hash BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE datasets (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL, UNIQUE (namespace, name));
CREATE TABLE jobs (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
    parent_namespace TEXT NOT NULL, parent_name TEXT NOT NULL, parent_id INTEGER, fqn TEXT, effective_namespace TEXT,
    job_type TEXT, integration TEXT, UNIQUE (namespace, name, parent_namespace, parent_name));
CREATE TABLE dirty_jobs (job_id INTEGER PRIMARY KEY);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, job_id INTEGER NOT NULL, parent_run_id TEXT, state TEXT,
    state_rank INTEGER, state_t REAL, start_t REAL, end_t REAL, code TEXT, code_t REAL, job_type TEXT, jt_t REAL,
    integration TEXT, error TEXT, err_t REAL, inputs BLOB, outputs BLOB, nevents INTEGER NOT NULL);
CREATE INDEX runs_job ON runs (job_id, start_t);
CREATE TABLE job_versions (job_id INTEGER, version INTEGER, run_id TEXT, t REAL, code TEXT, inputs BLOB,
    outputs BLOB, lineage_unknown INTEGER, PRIMARY KEY (job_id, version)) WITHOUT ROWID;
CREATE TABLE job_current (job_id INTEGER PRIMARY KEY, version INTEGER, lineage_unknown INTEGER,
    latest_run_id TEXT, latest_state TEXT, latest_t REAL, error TEXT, nruns INTEGER);
CREATE TABLE current_io (job_id INTEGER, dataset_id INTEGER, dir INTEGER, PRIMARY KEY (job_id, dir, dataset_id))
    WITHOUT ROWID;
CREATE TABLE dataset_versions (dataset_id INTEGER, run_id TEXT, job_id INTEGER, t REAL,
    PRIMARY KEY (dataset_id, run_id)) WITHOUT ROWID;
PRAGMA user_version=1;
"""


def test_schema_1_database_keeps_its_events(tmp_path):
    """A database of the first version (a run received over HTTP exists nowhere else) is migrated in place: its
    run stays, the event it knew is still a duplicate, a new event of that run is new."""
    start = E(1, "r1", "job", "START", inputs=["x"])
    old = sqlite3.connect(tmp_path / "g.sqlite")
    old.executescript(SCHEMA_1)
    old.execute("INSERT INTO jobs (id, namespace, name, parent_namespace, parent_name) VALUES (1, 'ns', 'job', '', '')")
    old.execute("INSERT INTO datasets VALUES (1, 'db', 'x')")
    old.execute("INSERT INTO runs VALUES (?, 1, NULL, 'START', 1, 1704067260.0, 1704067260.0, NULL, NULL, NULL, "
                "NULL, NULL, NULL, NULL, NULL, ?, X'', 1)", (rid("r1"), (1).to_bytes(4, "little")))
    old.execute("INSERT INTO events VALUES (?)", (ingest.digest(start),))
    old.commit()
    old.close()
    conn = connect(tmp_path / "g.sqlite")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3  # schema 1 -> 2 -> 3 (dataset_aliases)
    report = ingest.ingest_decoded(conn, [start, E(2, "r1", "job", outputs=["y"])])
    assert (report.new_events, report.duplicates) == (1, 1)
    report = ingest.ingest_decoded(conn, [start, E(2, "r1", "job", outputs=["y"])])
    assert (report.new_events, report.duplicates) == (0, 2)
    assert conn.execute("SELECT state, nevents FROM runs").fetchall() == [("COMPLETE", 2)]
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'dataset_versions'").fetchone() == (0,)


@pytest.mark.parametrize("line,reason", [
    (json.dumps({**E(1, "r", "a"), "eventType": ["START"]}), "eventType must be one of"),
    (json.dumps({**E(1, "r", "a"), "inputs": [{"namespace": "db", "name": ["t"]}]}),
     "inputs[0].name must be a non-empty string"),
    (json.dumps({**E(1, "r", "a"), "outputs": ["db.t"]}), "outputs[0] must be an object"),
])
def test_unusual_values_are_bad_lines_not_crashes(tmp_path, capsys, line, reason):
    f = tmp_path / "e.jsonl"
    f.write_text(line + "\n")
    assert main(["graph", "ingest", "--json", "--db", str(tmp_path / "g.sqlite"), str(f)]) == 1
    assert json.loads(capsys.readouterr().out)["bad"] == [f"{f}:1: {reason}" + (
        ", ".join([""] + sorted(ingest.EVENT_TYPES))[1:] if reason.endswith("one of") else "")]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 7)), st.sampled_from([None, "DAG", "TASK"]),
                          st.integers(0, 2), st.booleans()), min_size=1, max_size=8))
def test_task_fold_agrees_with_fold_target(spec):
    """task_dag's per-job memo of the top-most non-container ancestor gives fold_target's answer, parent cycles
    and parents that are not loaded included."""
    from lineage_graph.derive import Graph, Job, fold_target, task_dag

    jobs = {}
    for i, (parent, job_type, nruns, io) in enumerate(spec):
        j = Job(i, "ns", f"j{i}", f"j{i}", "ns", parent, job_type, None, nruns=nruns)
        if io:
            j.outputs.add(i)
        jobs[i] = j
    graph = Graph(jobs, {i: ("db", f"d{i}") for i in range(len(spec))})
    expected: dict[int, list[int]] = {}
    for j in jobs.values():
        if j.nruns and (t := fold_target(graph, j, "task")) is not None:
            expected.setdefault(t, []).append(j.id)
    assert task_dag(graph, "task").members == expected
