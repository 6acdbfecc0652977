"""Delivery through openlineage-python's HTTP transport to a real server on 127.0.0.1: gzip, Bearer auth,
retries on 5xx, spooling while the port is closed, replay in the original order, nothing lost, nothing twice."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from emitter.cli import replay_main
from emitter.emitter import Emitter
from emitter.records import COMPLETE, START, Dataset, JobRef, JobType, RunRecord, RunRef
from lineage_capture.demo import demo_records

from http_backend import Backend, free_port, order_violations
from ol_schema import assert_valid_event

FAST_RETRY = {"transport.retry.total": "2", "transport.retry.connect": "2", "transport.retry.backoff_factor": "0.01"}
T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)


def http_conf(url: str, **extra: str) -> dict[str, str]:
    return {"transport.type": "http", "transport.url": url, **FAST_RETRY, **extra}


def numbered_records(n: int) -> list[RunRecord]:
    """n independent runs, START + COMPLETE each, in a known order."""
    out = []
    for i in range(n):
        job = JobRef("test", f"job_{i}")
        run_id = f"01900000-0000-7000-8000-{i:012d}"
        out.append(RunRecord(START, T0 + timedelta(seconds=i), job, run_id, JobType("QUERY", "SQLSERVER")))
        out.append(RunRecord(COMPLETE, T0 + timedelta(seconds=i, milliseconds=5), job, run_id,
                             JobType("QUERY", "SQLSERVER")))
    return out


def key(event: dict) -> tuple[str, str]:
    return event["run"]["runId"], event["eventType"]


def test_gzip_and_bearer_auth_reach_the_backend():
    with Backend() as backend:
        emitter = Emitter.from_config(http_conf(backend.url, **{
            "transport.compression": "gzip", "transport.auth.type": "api_key",
            "transport.auth.apiKey": "s3cr3t-token", "transport.timeoutInMillis": "2000"}))
        records = demo_records()
        emitter.emit_batch(records)
        counts = emitter.close()
    assert (counts.delivered, counts.spooled, counts.dropped) == (4, 0, 0)
    assert [r["path"] for r in backend.requests] == ["/api/v1/lineage"] * 4
    assert {r["encoding"] for r in backend.requests} == {"gzip"}
    assert {r["headers"]["Authorization"] for r in backend.requests} == {"Bearer s3cr3t-token"}
    assert [key(e) for e in backend.events] == [(r.run_id, r.event_type) for r in records]
    for event in backend.events:
        assert_valid_event(event)


def test_5xx_answers_are_retried_by_the_transport():
    with Backend(fail_next=2) as backend:
        emitter = Emitter.from_config(http_conf(backend.url))
        emitter.emit(numbered_records(1)[0])
        counts = emitter.close()
    assert [r["status"] for r in backend.requests] == [503, 503, 201]
    assert (counts.delivered, counts.spooled) == (1, 0)


def test_closed_port_spools_then_next_start_replays_in_order_exactly_once():
    port = free_port()
    records = numbered_records(5)
    first = Emitter.from_config(http_conf(f"http://127.0.0.1:{port}"))
    for record in records:
        first.emit(record)  # never raises although nothing listens
    counts = first.close()
    assert (counts.delivered, counts.spooled, counts.dropped) == (0, 10, 0)
    assert first.spool.pending_bytes() > 0

    with Backend(port) as backend:
        second = Emitter.from_config(http_conf(backend.url))  # replays at start
        late = numbered_records(6)[-2:]
        for record in late:
            second.emit(record)
        second_counts = second.close()
    # the spool first (in the order that matters: requests in flight), then the new events
    spooled = [(r.run_id, r.event_type) for r in records]
    assert sorted(key(e) for e in backend.events[:10]) == sorted(spooled)
    assert not order_violations(backend.events[:10])
    assert [key(e) for e in backend.events[10:]] == [(r.run_id, r.event_type) for r in late]
    assert (second_counts.replayed, second_counts.delivered, second_counts.spooled) == (10, 2, 0)
    assert second.spool.pending_bytes() == 0


@pytest.mark.parametrize("in_flight", [1, 16])
def test_backend_down_mid_run_keeps_order_once_it_returns(in_flight):
    """One at a time, the backend sees the order handed over; with requests in flight, events of independent runs
    may swap, never a run's START and COMPLETE."""
    port = free_port()
    records = numbered_records(4)
    with Backend(port) as backend:
        emitter = Emitter.from_config(http_conf(backend.url), retry_after=0, in_flight=in_flight)
        emitter.emit(records[0])
        emitter.flush()
    for record in records[1:5]:  # backend gone: these spool
        emitter.emit(record)
    with Backend(port) as backend2:
        for record in records[5:]:  # spool first, then these
            emitter.emit(record)
        counts = emitter.close()
    delivered = [key(e) for e in backend.events + backend2.events]
    expected = [(r.run_id, r.event_type) for r in records]
    if in_flight == 1:
        assert delivered == expected
    else:
        assert sorted(delivered) == sorted(expected) and not order_violations(backend.events + backend2.events)
    assert counts.dropped == 0


def test_replay_command_drains_the_spool():
    port = free_port()
    emitter = Emitter.from_config(http_conf(f"http://127.0.0.1:{port}"))
    records = numbered_records(2)
    for record in records:
        emitter.emit(record)
    emitter.close()
    argv = [arg for k, v in http_conf(f"http://127.0.0.1:{port}").items() for arg in ("--conf", f"{k}={v}")]
    assert replay_main(argv) == 1  # still down: exit 1, events kept
    with Backend(port) as backend:
        assert replay_main(argv) == 0
        assert replay_main(argv) == 0  # nothing left, nothing sent twice
    # requests in flight: unrelated runs may swap (README, "Delivered"), a run's own events may not
    assert sorted(key(e) for e in backend.events) == sorted((r.run_id, r.event_type) for r in records)
    assert order_violations(backend.events) == []


def test_failing_backend_is_not_hammered_while_backing_off():
    with Backend(status=500) as backend:
        emitter = Emitter.from_config(http_conf(backend.url, **{"transport.retry.total": "0"}), retry_after=3600)
        for record in numbered_records(3):
            emitter.emit(record)
        counts = emitter.close()
    assert len(backend.requests) == 1  # one failed try, then straight to the spool
    assert (counts.delivered, counts.spooled) == (0, 6)


def test_full_spool_drops_with_a_warning_and_a_count(caplog):
    port = free_port()
    conf = http_conf(f"http://127.0.0.1:{port}", **{"spool.maxBytes": "1500"})
    emitter = Emitter.from_config(conf)
    for record in numbered_records(3):
        emitter.emit(record)
    counts = emitter.close()
    assert counts.spooled >= 1 and counts.dropped >= 1 and counts.spooled + counts.dropped == 6
    assert "is full" in caplog.text


@pytest.mark.parametrize("events_in, delivered_order", [
    # a parent's terminal event waits for the children it started
    (["p:START", "c:START", "p:COMPLETE", "c:COMPLETE"], ["p:START", "c:START", "c:COMPLETE", "p:COMPLETE"]),
    (["p:START", "c:START", "d:START", "p:FAIL", "c:COMPLETE", "d:FAIL"],
     ["p:START", "c:START", "d:START", "c:COMPLETE", "d:FAIL", "p:FAIL"]),
    # children already finished: nothing is held
    (["p:START", "c:START", "c:COMPLETE", "p:COMPLETE"], ["p:START", "c:START", "c:COMPLETE", "p:COMPLETE"]),
])
def test_parent_terminal_waits_for_children(tmp_path, events_in, delivered_order):
    out = tmp_path / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(out)})
    ids = {"p": "01900000-0000-7000-8000-00000000000a", "c": "01900000-0000-7000-8000-00000000000b",
           "d": "01900000-0000-7000-8000-00000000000c"}
    parent = RunRef(ids["p"], JobRef("ns", "task"))
    for i, spec in enumerate(events_in):
        who, state = spec.split(":")
        job = parent.job if who == "p" else JobRef("ns", f"task.{who}")
        emitter.emit(RunRecord(state, T0 + timedelta(seconds=i), job, ids[who], JobType("QUERY", "SQLSERVER"),
                               parent=None if who == "p" else parent))
    emitter.close()
    from ol_schema import read_events

    names = {v: k for k, v in ids.items()}
    assert [f"{names[e['run']['runId']]}:{e['eventType']}" for e in read_events(out)] == delivered_order


def test_flush_releases_held_terminals_deepest_first(tmp_path):
    """A grandchild never finishes: at flush its parent's and grandparent's held terminals still go child-first."""
    out = tmp_path / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(out)})
    runs = {name: RunRef(f"01900000-0000-7000-8000-00000000000{i}", JobRef("ns", name))
            for i, name in enumerate(["p", "p.c", "p.c.g"], start=1)}
    parent_of = {"p": None, "p.c": runs["p"], "p.c.g": runs["p.c"]}
    steps = [("p", START), ("p.c", START), ("p.c.g", START), ("p", COMPLETE), ("p.c", COMPLETE)]
    for i, (name, state) in enumerate(steps):
        emitter.emit(RunRecord(state, T0 + timedelta(seconds=i), runs[name].job, runs[name].run_id,
                               JobType("QUERY", "SQLSERVER"), parent=parent_of[name]))
    emitter.close()
    from ol_schema import read_events

    assert [(e["job"]["name"], e["eventType"]) for e in read_events(out)] == [
        ("p", "START"), ("p.c", "START"), ("p.c.g", "START"), ("p.c", "COMPLETE"), ("p", "COMPLETE")]


def test_file_transport_writes_utf8_json_lines_that_read_back_exactly(tmp_path):
    out = tmp_path / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(out)})
    names = ["Ventes.dbo.Clients_été", "売上.公開.注文", 'quote"and\\backslash', "tab\tnew\nline",
             "line\u2028separator"]
    for i, name in enumerate(names):
        emitter.emit(RunRecord(START, T0, JobRef("ns", f"job_{i}"), f"01900000-0000-7000-8000-{i:012d}",
                               JobType("QUERY", "SQLSERVER"), inputs=[Dataset("mssql://db:1433", name)]))
    emitter.close()
    raw = out.read_bytes()
    assert raw.count(b"\n") == len(names) and raw.endswith(b"\n")  # one event per line
    from ol_schema import read_events

    events = read_events(out)
    assert [e["inputs"][0]["name"] for e in events] == names
    for event in events:
        assert_valid_event(event)


@pytest.mark.parametrize("location", ["{tmp}/not/yet/events.jsonl", "file://{tmp}/not/yet/events.jsonl"])
def test_file_transport_makes_its_directory(tmp_path, location, monkeypatch):
    """A location in a directory that does not exist yet is written there, the directory made (as the JVM client's
    file transport does); every event went to the spool, each run, before. Nothing is made in the working
    directory (a `file:` URI made ./file:/...)."""
    monkeypatch.chdir(_empty_dir(tmp_path / "cwd"))
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": location.format(tmp=tmp_path)})
    records = numbered_records(2)
    for record in records:
        emitter.emit(record)
    counts = emitter.close()
    from ol_schema import read_events

    assert (counts.delivered, counts.spooled) == (4, 0)
    assert len(read_events(tmp_path / "not" / "yet" / "events.jsonl")) == 4
    assert list((tmp_path / "cwd").iterdir()) == []


def _empty_dir(path):
    path.mkdir()
    return path


def test_file_transport_debug_mode_names_each_file_by_job_and_event_type(tmp_path):
    """debug_mode: a file per event, named as openlineage-python names them (they were all
    ``...-unknown_job_name-unknown_event_type.json``: the stock transport reads the name from an event object)."""
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(tmp_path / "ev"),
                                   "transport.debug_mode": "true"})
    records = numbered_records(1)
    for record in records:
        emitter.emit(record)
    assert emitter.close().delivered == 2
    names = sorted(re.sub(r"-\d{6}T\d{6}\.\d{6}-", "-<time>-", path.name) for path in tmp_path.iterdir())
    assert names == ["ev-<time>-job_0-COMPLETE.json", "ev-<time>-job_0-START.json"]


def test_file_transport_lines_reach_the_file_without_a_next_event(tmp_path):
    """Two events in quick succession (an application's START, then its first action's): the second is buffered
    behind the first's flush, and must reach the file within the flush interval although no event follows (a long
    action's next event may come an hour later); the emitter is neither flushed nor closed meanwhile."""
    import time

    from emitter.transport import FLUSH_EVERY_SECONDS

    from ol_schema import read_events

    out = tmp_path / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(out)})
    records = numbered_records(2)
    for record in records:
        emitter.emit(record)
    deadline = time.monotonic() + FLUSH_EVERY_SECONDS + 2.0
    while time.monotonic() < deadline and len(read_events(out) if out.exists() else []) < len(records):
        time.sleep(0.05)
    assert [e["run"]["runId"] for e in read_events(out)] == [r.run_id for r in records]
    emitter.close()


@pytest.mark.parametrize("damage", [b"garbage{", b"", b"[]", b'{"type": "http"}', b'{"url": "http://x"}'])
def test_a_spool_whose_destination_is_damaged_is_not_replayed_elsewhere(tmp_path, capsys, damage):
    # its events were going to some backend: a damaged destination.json must not send them to whatever the
    # replay happens to have configured (the embedded default file), nor crash; --to-configured is the way out
    port = free_port()
    conf = {**http_conf(f"http://127.0.0.1:{port}"), "spool.dir": str(tmp_path / "spool")}
    emitter = Emitter.from_config(conf)
    records = numbered_records(2)
    for record in records:
        emitter.emit(record)
    emitter.close()
    (destination,) = (tmp_path / "spool").glob("http-*/destination.json")
    destination.write_bytes(damage)
    with Backend(port) as backend:
        assert replay_main(["--conf", f"spool.dir={tmp_path / 'spool'}"]) == 2
        err = capsys.readouterr().err
        assert "does not say where its events were going" in err and "Traceback" not in err
        assert backend.events == []
        argv = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
        assert replay_main([*argv, "--to-configured"]) == 0
    assert sorted(key(e) for e in backend.events) == sorted((r.run_id, r.event_type) for r in records)
    assert not order_violations(backend.events)
