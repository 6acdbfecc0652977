"""Issue 11, delivery: a real HTTP backend on 127.0.0.1 that refuses, fails, flaps, hangs, rejects one event or is
slow; ``kill -9`` of a real harvest process; a full or unwritable spool. Every test asserts the exact set of run
ids and event types that reached the backend: none lost, none twice (except after a kill, and then with the same
run ids), the order promised kept."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from emitter.cli import config_main, replay_main
from emitter.emitter import Emitter, order_records
from emitter.records import COMPLETE, START, JobRef, JobType, RunRecord, RunRef
from emitter.spool import Spool, SpoolBusy, decode_record, encode_record, spools_under

from http_backend import Backend, free_port, order_violations
from ol_schema import assert_valid_event

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)
NO_RETRY = {"transport.retry.total": "0", "transport.retry.connect": "0", "transport.retry.backoff_factor": "0"}
QUERY = JobType("QUERY", "SQLSERVER")


def conf(url: str, **extra: str) -> dict[str, str]:
    return {"transport.type": "http", "transport.url": url, **NO_RETRY, **extra}


def argv_of(overrides: dict[str, str]) -> list[str]:
    return [arg for k, v in overrides.items() for arg in ("--conf", f"{k}={v}")]


def tree_records() -> list[RunRecord]:
    """A task run with three statement runs under it, then two runs of their own, in the order a harvester
    hands them over."""
    parent = RunRef("01900000-0000-7000-8000-0000000000a0", JobRef("ns", "task"))
    out = [RunRecord(START, T0, parent.job, parent.run_id, QUERY)]
    for i in range(1, 4):
        job, run_id = JobRef("ns", f"task.s{i}"), f"01900000-0000-7000-8000-0000000000a{i}"
        out.append(RunRecord(START, T0 + timedelta(seconds=i), job, run_id, QUERY, parent=parent))
        out.append(RunRecord(COMPLETE, T0 + timedelta(seconds=i, milliseconds=5), job, run_id, QUERY, parent=parent))
    out.append(RunRecord(COMPLETE, T0 + timedelta(seconds=9), parent.job, parent.run_id, QUERY))
    for i in range(2):
        job, run_id = JobRef("ns", f"solo{i}"), f"01900000-0000-7000-8000-0000000000b{i}"
        out.append(RunRecord(START, T0 + timedelta(seconds=10 + i), job, run_id, QUERY))
        out.append(RunRecord(COMPLETE, T0 + timedelta(seconds=10 + i, milliseconds=5), job, run_id, QUERY))
    return out


def keys(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["run"]["runId"], e["eventType"]) for e in events]


REJECTED = ("01900000-0000-7000-8000-0000000000a2", "START")  # the event the 422 backend refuses
ALL = keys([{"run": {"runId": r.run_id}, "eventType": r.event_type} for r in tree_records()])

#: Fault mode -> backend options, what the emitter counts (delivered, spooled, dead-lettered), how many requests
#: the faulty backend sees at most, and whether the events wait in the spool for a replay.
FAULTS = [
    pytest.param({"port_closed": True}, (0, 12, 0), 0, id="refuse"),
    pytest.param({"status": 500}, (0, 12, 0), 1, id="500"),
    pytest.param({"hang": True}, (0, 12, 0), 1, id="hang"),
    pytest.param({"reject": lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED}, (11, 0, 1), 12,
                 id="422-for-one-event"),
    pytest.param({"delay": 0.01}, (12, 0, 0), 12, id="slow"),
    # about the destination, not the event (a wrong key, a wrong URL): every event would be set aside; they wait in
    # order instead, and reach the backend once its configuration is fixed
    pytest.param({"status": 401}, (0, 12, 0), 1, id="401-wrong-key"),
    pytest.param({"status": 404}, (0, 12, 0), 1, id="404-wrong-endpoint"),
]


@pytest.mark.parametrize("in_flight", [1, 16])
@pytest.mark.parametrize("fault, counted, max_requests", FAULTS)
def test_fault_modes_lose_nothing_and_send_nothing_twice(fault, counted, max_requests, in_flight):
    port = free_port()
    options = {k: v for k, v in fault.items() if k != "port_closed"}
    backend = Backend(port, **options)
    settings = conf(backend.url, **{"transport.timeoutInMillis": "500"})
    started = time.monotonic()
    if fault.get("port_closed"):
        emitter = Emitter.from_config(settings, in_flight=in_flight)
        emitter.emit_batch(tree_records())
        counts = emitter.close()
    else:
        with backend:
            emitter = Emitter.from_config(settings, in_flight=in_flight)
            emitter.emit_batch(tree_records())
            counts = emitter.close()
    elapsed = time.monotonic() - started
    assert (counts.delivered, counts.spooled, counts.dead_lettered, counts.dropped) == (*counted, 0)
    assert len(backend.requests) <= max_requests
    assert elapsed < 3.0  # a hanging backend costs one timeout (0.5 s), not one per event
    first = backend.events
    # the spool is replayed to a healthy backend on the same port: everything arrives once, in the order that
    # matters (the replay has requests in flight)
    with Backend(port) as healthy:
        assert replay_main(argv_of(settings)) == (3 if counted[2] else 0)
    everything = first + healthy.events
    expected = [k for k in ALL if not (counted[2] and k == REJECTED)]
    assert sorted(keys(everything)) == sorted(expected)
    assert not order_violations(everything)
    if in_flight == 1:  # one at a time: the emitter delivered in the order handed over
        handed_over = keys([{"run": {"runId": r.run_id}, "eventType": r.event_type} for r in emitter_order()])
        assert keys(first) == [k for k in handed_over if k in set(keys(first))]
    for event in everything:
        assert_valid_event(event)
    if counted[2]:
        (letter,) = emitter.spool.dead_letters()
        assert (letter["status"], keys([letter["event"]])) == (422, [REJECTED])
        assert "must not be accepted" in letter["answer"]


def emitter_order() -> list[RunRecord]:
    return order_records(tree_records())


@pytest.mark.parametrize("in_flight", [1, 16])
def test_flapping_backend_every_event_once_after_replays(in_flight):
    """Every second request fails: events spool behind the first failure, replays send them in order."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    with Backend(port, flap=2) as backend:
        emitter = Emitter.from_config(settings, retry_after=0, in_flight=in_flight)
        emitter.emit_batch(tree_records())
        emitter.close()
        for _ in range(20):
            if replay_main(argv_of(settings)) == 0:
                break
    handed_over = keys([{"run": {"runId": r.run_id}, "eventType": r.event_type} for r in emitter_order()])
    if in_flight == 1:
        assert keys(backend.events) == handed_over
    else:
        assert sorted(keys(backend.events)) == sorted(handed_over) and not order_violations(backend.events)
    assert collections.Counter(r["status"] for r in backend.requests)[201] == 12


def test_hanging_backend_gets_one_request_not_six():
    """A read timeout is not retried (openlineage-python's default retried it five times)."""
    with Backend(hang=True) as backend:
        emitter = Emitter.from_config({"transport.type": "http", "transport.url": backend.url,
                                       "transport.timeoutInMillis": "300"})
        started = time.monotonic()
        emitter.emit_batch(tree_records())
        counts = emitter.close()
        elapsed = time.monotonic() - started
    assert len(backend.requests) == 1 and counts.spooled == 12 and elapsed < 1.5


#: backend options, extra configuration, whether the request is reported stalled while the backend has not answered
STALLS = [
    pytest.param({"port_closed": True}, {"transport.retry.total": "2", "transport.retry.connect": "2",
                                         "transport.retry.backoff_factor": "1"}, True, id="refusing-retried"),
    pytest.param({"hang": True}, {"transport.timeoutInMillis": "1500"}, True, id="hanging"),
    pytest.param({}, {}, False, id="answering"),
]


@pytest.mark.parametrize("backend_options, extra, stalls", STALLS)
def test_a_request_to_a_backend_that_has_not_answered_is_reported_stalled(backend_options, extra, stalls):
    """What an ending Spark driver reads to spool at once instead of waiting (spark_plugin.lifecycle): how long the
    one request probing a backend that has not answered yet has been in flight."""
    options = {k: v for k, v in backend_options.items() if k != "port_closed"}
    backend = Backend(**options)
    with contextlib.nullcontext() if backend_options.get("port_closed") else backend:  # closed: never started
        emitter = Emitter.from_config({"transport.type": "http", "transport.url": backend.url, **extra})
        assert emitter.stalled_for() == 0.0  # nothing sent yet
        sent = time.monotonic()
        emitter.emit_batch(tree_records())
        time.sleep(0.5)
        stalled, elapsed = emitter.stalled_for(), time.monotonic() - sent
        counts = emitter.close()
    assert emitter.stalled_for() == 0.0
    if stalls:  # (the worker may start the request a little after the batch is handed over on a busy machine)
        assert 0.25 < stalled <= elapsed < 1.5 and (counts.delivered, counts.spooled) == (0, 12)
    else:
        assert stalled == 0.0 and (counts.delivered, counts.spooled) == (12, 0)


def nested_records(tasks: int = 6, statements: int = 6) -> list[RunRecord]:
    """Task runs, each with statement runs, each with a procedure-like child: streamed as a harvester does
    (a parent's START first, children as they come, the parent's COMPLETE last)."""
    out = []
    for t in range(tasks):
        task = RunRef(f"01900000-0000-7000-8001-{t:012d}", JobRef("ns", f"task{t}"))
        out.append(RunRecord(START, T0, task.job, task.run_id, QUERY))
        for s in range(statements):
            stmt = RunRef(f"01900000-0000-7000-8002-{t:06d}{s:06d}", JobRef("ns", f"task{t}.s{s}"))
            inner = RunRef(f"01900000-0000-7000-8003-{t:06d}{s:06d}", JobRef("ns", f"task{t}.s{s}.p"))
            at = T0 + timedelta(seconds=s)
            out.append(RunRecord(START, at, stmt.job, stmt.run_id, QUERY, parent=task))
            out.append(RunRecord(START, at, inner.job, inner.run_id, QUERY, parent=stmt))
            out.append(RunRecord(COMPLETE, at, inner.job, inner.run_id, QUERY, parent=stmt))
            out.append(RunRecord(COMPLETE, at, stmt.job, stmt.run_id, QUERY, parent=task))
        out.append(RunRecord(COMPLETE, T0 + timedelta(minutes=1), task.job, task.run_id, QUERY))
    return out


@pytest.mark.parametrize("sending", ["coroutines", "threads"])
@pytest.mark.parametrize("in_flight", [2, 16, 64])
def test_requests_in_flight_finish_out_of_order_and_the_order_still_holds(monkeypatch, in_flight, sending):
    """Answers overtake each other at random: every parent's START still arrives before its children's
    events, every run's START before its COMPLETE, every parent's COMPLETE after its children's. Both ways of
    keeping requests in flight: coroutines (the direct http path) and threads (openlineage-python's stock
    transport, used e.g. when requests would read credentials from a netrc file)."""
    if sending == "threads":
        monkeypatch.setenv("NETRC", str(Path(__file__).parent / "no-such-netrc"))
    records = nested_records()
    with Backend(delay=0.001, jitter=0.02) as backend:
        emitter = Emitter.from_config(conf(backend.url), in_flight=in_flight)
        assert emitter.delivery._coroutines is None  # decided with the first event
        emitter.emit(records[0])
        assert emitter.delivery._coroutines == (sending == "coroutines")
        records = records[1:]
        for record in records:
            emitter.emit(record)
        counts = emitter.close()
    records = nested_records()
    assert (counts.delivered, counts.spooled, counts.dropped) == (len(records), 0, 0)
    got = keys(backend.events)
    assert sorted(got) == sorted((r.run_id, r.event_type) for r in records)  # each exactly once
    assert order_violations(backend.events) == []
    assert got != [(r.run_id, r.event_type) for r in records]  # requests really did overtake each other


@pytest.mark.parametrize("sending", ["coroutines", "threads"])
def test_a_replay_has_requests_in_flight_and_keeps_the_order(monkeypatch, sending):
    """Events spooled while the backend was down are replayed by the next emitter with as many requests in flight
    as fresh ones (one at a time, 2,010 spooled events took 44 s against a 20 ms backend, fresh ones 4 s): each
    arrives once, answers overtake each other, and the order that matters holds."""
    if sending == "threads":
        monkeypatch.setenv("NETRC", str(Path(__file__).parent / "no-such-netrc"))
    port = free_port()
    first = Emitter.from_config(conf(f"http://127.0.0.1:{port}"), in_flight=16)
    records = nested_records()
    first.emit_batch(records)
    assert first.close().spooled == len(records)
    with Backend(port, delay=0.001, jitter=0.02) as backend:
        later = Emitter.from_config(conf(backend.url), in_flight=16)  # replays at start
        counts = later.close()
        assert later.delivery._coroutines == (sending == "coroutines")
    assert (counts.replayed, counts.spooled, counts.dropped) == (len(records), 0, 0)
    got = keys(backend.events)
    assert sorted(got) == sorted((r.run_id, r.event_type) for r in records)  # each exactly once
    assert order_violations(backend.events) == []
    spool_order = [(r.run_id, r.event_type) for r in order_records(records)]
    assert got != spool_order  # requests really did overtake each other
    assert later.spool.pending_bytes() == 0


@pytest.mark.parametrize("odd", [
    {"run": "r1"}, {"run": {"runId": ["r1"]}}, {"run": {"runId": "r1", "facets": {"parent": "p"}}},
    {"run": {"runId": "r1", "facets": {"parent": {"run": {"runId": 7}}}}}, {},
], ids=["run-not-an-object", "run-id-a-list", "parent-not-an-object", "parent-run-id-a-number", "empty"])
def test_an_odd_spooled_event_is_replayed_like_any_other(tmp_path, odd):
    """A spooled record that is an object but not the event shape the emitter writes (an older version's, an edited
    spool) goes to the backend with the others when a replay has requests in flight; it used to be read for its
    run ids before sending, and a non-object there stopped the replay with a traceback."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records()[:4])
    assert emitter.close().spooled == 4
    emitter.spool.append_many([{**EVENT, **odd}, EVENT])
    with Backend(port) as backend:
        assert replay_main(argv_of(settings)) == 0
    assert len(backend.requests) == 6 and {**EVENT, **odd} in [r["event"] for r in backend.requests]
    assert emitter.spool.pending_bytes() == 0


def test_a_replay_whose_batches_fail_sends_one_at_a_time(monkeypatch, caplog):
    """A bug in sending a replay's batch together costs the speed, never an event: one warning, and the spool is
    sent one event at a time, each once, in its order."""
    from emitter.delivery import Delivery

    def broken(self, events):
        raise RuntimeError("bug")

    port = free_port()
    first = Emitter.from_config(conf(f"http://127.0.0.1:{port}"), in_flight=16)
    records = nested_records(2, 2)
    first.emit_batch(records)
    first.close()
    monkeypatch.setattr(Delivery, "_replay_many", broken)
    with Backend(port) as backend:
        later = Emitter.from_config(conf(backend.url), in_flight=16)
        counts = later.close()
    assert (counts.replayed, counts.dropped) == (len(records), 0)
    assert keys(backend.events) == [(r.run_id, r.event_type) for r in order_records(records)]
    assert sum("could not be sent together" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("in_flight", [4, 16])
def test_a_backend_failing_mid_replay_gets_every_event_once(in_flight):
    """A backend answering 503 to every fifth request while a replay has requests in flight: the replay stops at
    the first failure, what was sent ahead of it is not sent again, and later replays deliver the rest: every
    event exactly once, in the order that matters."""
    port = free_port()
    first = Emitter.from_config(conf(f"http://127.0.0.1:{port}"), in_flight=in_flight)
    records = nested_records()
    first.emit_batch(records)
    first.close()
    with Backend(port, flap=5, jitter=0.01) as backend:
        for _ in range(60):
            later = Emitter.from_config(conf(backend.url), retry_after=0, in_flight=in_flight)
            later.close()
            if later.spool.pending_bytes() == 0:
                break
    got = keys(backend.events)
    assert sorted(got) == sorted((r.run_id, r.event_type) for r in records)  # each exactly once
    assert order_violations(backend.events) == []


def test_an_event_after_close_is_still_delivered():
    """The workers stop at close(); a late event (a Spark listener call after the end) goes out in the caller's
    thread instead of waiting for them forever."""
    records = tree_records()
    with Backend() as backend:
        emitter = Emitter.from_config(conf(backend.url), in_flight=8)
        emitter.emit_batch(records[:-2])
        emitter.close()
        emitter.emit_batch(records[-2:])
        counts = emitter.close()
    assert counts.delivered == 12 and sorted(keys(backend.events)) == sorted(ALL)


@pytest.mark.parametrize("stream, problems", [
    (["p:START", "c:START", "c:COMPLETE", "p:COMPLETE"], []),
    (["c:START", "p:START", "c:COMPLETE", "p:COMPLETE"], ["c START before its parent's START"]),
    (["p:START", "c:START", "p:COMPLETE", "c:COMPLETE"], ["c COMPLETE after its parent ended"]),
    (["p:COMPLETE", "p:START"], ["p START after another of its events"]),
])
def test_order_violations_finds_each_broken_promise(stream, problems):
    """The checker the order assertions above rely on can fail."""
    events = []
    for item in stream:
        who, kind = item.split(":")
        run: dict = {"runId": who}
        if who == "c":
            run["facets"] = {"parent": {"run": {"runId": "p"}, "job": {"namespace": "ns", "name": "p"}}}
        events.append({"eventType": kind, "run": run})
    assert order_violations(events) == problems


# ---- dead letters and the recorded destination ---------------------------------------------------------------


def test_dead_letters_list_retry_discard(capsys):
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    refuse_one = {"reject": lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED}
    with Backend(port, **refuse_one) as backend:
        emitter = Emitter.from_config(settings)
        emitter.emit_batch(tree_records())
        emitter.close()
        assert replay_main(argv_of(settings)) == 3  # spool empty, one dead letter: said, exit 3
        out = capsys.readouterr().out
        assert "1 dead letters" in out and "--dead-letters list" in out
        assert replay_main([*argv_of(settings), "--dead-letters", "list"]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert listed[1].startswith("1. ") and "HTTP 422: START ns/task.s2 run " + REJECTED[0] in listed[1]
        assert replay_main([*argv_of(settings), "--dead-letters", "retry"]) == 3  # refused again: kept
    assert len(emitter.spool.dead_letters()) == 1
    with Backend(port) as accepting:
        assert replay_main([*argv_of(settings), "--dead-letters", "retry"]) == 0
    assert keys(accepting.events) == [REJECTED] and emitter.spool.dead_letters() == []
    assert sorted(keys(backend.events + accepting.events)) == sorted(ALL)
    with Backend(port, **refuse_one):
        emitter = Emitter.from_config(settings)
        emitter.emit_batch(tree_records())
        emitter.close()
    assert replay_main([*argv_of(settings), "--dead-letters", "discard"]) == 0
    assert emitter.spool.dead_letters() == []


def test_dead_letters_are_listed_without_the_destinations_credentials(capsys):
    """Listing is local: a spool of a backend with an api key lists its dead letters with no configuration
    (the harvest's summary points there; it exited 2, "configure that transport with them")."""
    port = free_port()
    settings = {**conf(f"http://127.0.0.1:{port}"), "transport.auth.type": "api_key",
                "transport.auth.apiKey": "s3cr3t-key"}
    with Backend(port, reject=lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED):
        emitter = Emitter.from_config(settings)
        emitter.emit_batch(tree_records())
        emitter.close()
    capsys.readouterr()
    assert replay_main(["--dead-letters", "list"]) == 0
    out = capsys.readouterr().out
    assert "1 dead letters" in out and f"START ns/task.s2 run {REJECTED[0]}" in out and "s3cr3t" not in out


def test_a_dead_letter_set_aside_during_a_retry_stays(capsys):
    """Another harvest sets an event aside while `replay --dead-letters retry` sends the earlier ones: the retry
    rewrites the file without the letters it delivered, and the new letter stays (it was overwritten)."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    with Backend(port, reject=lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED):
        emitter = Emitter.from_config(settings)
        emitter.emit_batch(tree_records())
        emitter.close()
    (letter,) = emitter.spool.dead_letters()
    late = {**letter["event"], "eventType": "OTHER"}

    def meanwhile(event: dict) -> bool:  # as the backend receives the retried letter, a harvest sets one aside
        emitter.spool.add_dead_letter(late, 422, "refused")
        return False

    with Backend(port, reject=meanwhile) as backend:
        assert replay_main([*argv_of(settings), "--dead-letters", "retry"]) == 3  # one letter remains: exit 3
    assert keys(backend.events) == [REJECTED]
    assert [d["event"] for d in emitter.spool.dead_letters()] == [late]
    assert "re-sent 1 of 1 dead letters" in capsys.readouterr().out


def test_replay_sends_to_the_recorded_destination_and_refuses_another(tmp_path, isolated_lineage_env, capsys):
    port = free_port()
    emitter = Emitter.from_config(conf(f"http://127.0.0.1:{port}"))
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    (spool,) = spools_under(isolated_lineage_env / "spool", 1 << 20)
    assert spool.destination == {"type": "http", "url": f"http://127.0.0.1:{port}", "endpoint": "api/v1/lineage"}
    other = tmp_path / "other.jsonl"
    file_conf = ["--conf", "transport.type=file", "--conf", f"transport.location={other}"]
    assert replay_main(file_conf) == 2  # configured elsewhere: refused, nothing moved
    assert "--to-configured" in capsys.readouterr().err and not other.exists()
    with Backend(port) as backend:
        assert replay_main([]) == 0  # nothing configured: the recorded destination, not the default file
    assert capsys.readouterr().out.startswith(f"replayed 12 events to http http://127.0.0.1:{port};")
    assert sorted(keys(backend.events)) == sorted(ALL) and not order_violations(backend.events)
    default_file = isolated_lineage_env / "openlineage-events.jsonl"
    assert not default_file.exists()
    # the same again, sent where the operator explicitly says
    emitter = Emitter.from_config(conf(f"http://127.0.0.1:{port}"))
    emitter.emit_batch(tree_records())
    emitter.close()
    assert replay_main([*file_conf, "--to-configured"]) == 0
    assert len(other.read_text().splitlines()) == 12
    assert capsys.readouterr().out.startswith(f"replayed 12 events to file {other};")  # where they went


def test_api_key_is_never_written_to_the_spool(isolated_lineage_env):
    emitter = Emitter.from_config(conf(f"http://127.0.0.1:{free_port()}", **{
        "transport.auth.type": "api_key", "transport.auth.apiKey": "s3cr3t-token-value"}))
    emitter.emit_batch(tree_records())
    emitter.close()
    written = b"".join(p.read_bytes() for p in (isolated_lineage_env / "spool").rglob("*") if p.is_file())
    assert b"s3cr3t-token-value" not in written and b"127.0.0.1" in written


SECRET_PLACES = [  # (id, transport settings holding "Tok3nSecret0123456789", the destination as recorded)
    ("token_as_url_user", {"transport.url": "http://Tok3nSecret0123456789@127.0.0.1:{port}"},
     {"url": "http://***@127.0.0.1:{port}", "endpoint": "api/v1/lineage"}),
    ("user_and_password", {"transport.url": "http://etl:Tok3nSecret0123456789@127.0.0.1:{port}"},
     {"url": "http://etl:***@127.0.0.1:{port}", "endpoint": "api/v1/lineage"}),
    ("key_in_the_endpoint", {"transport.url": "http://127.0.0.1:{port}",
                             "transport.endpoint": "api/v1/lineage?api_key=Tok3nSecret0123456789"},
     {"url": "http://127.0.0.1:{port}", "endpoint": "api/v1/lineage?api_key=***"}),
    # an api key: only that there was one is recorded (a replay without it sent every event to be refused: 401s,
    # all set aside as dead letters)
    ("api_key_auth", {"transport.url": "http://127.0.0.1:{port}", "transport.auth.type": "api_key",
                      "transport.auth.apiKey": "Tok3nSecret0123456789"},
     {"url": "http://127.0.0.1:{port}", "endpoint": "api/v1/lineage", "credentials": True}),
]


@pytest.mark.parametrize("settings,recorded", [r[1:] for r in SECRET_PLACES], ids=[r[0] for r in SECRET_PLACES])
def test_credentials_in_the_url_are_never_recorded_nor_sent_masked(isolated_lineage_env, capsys, settings,
                                                                     recorded):
    port = free_port()
    settings = {k: v.format(port=port) for k, v in settings.items()}
    emitter = Emitter.from_config({**conf(settings["transport.url"]), **settings})
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    (spool,) = spools_under(isolated_lineage_env / "spool", 1 << 20)
    recorded = {k: v.format(port=port) if isinstance(v, str) else v for k, v in recorded.items()}
    assert spool.destination == {"type": "http", **recorded}
    assert config_main([f"--conf=transport.{k.split('.', 1)[1]}={v}" for k, v in settings.items()]
                       + ["--conf=transport.type=http"]) == 0
    written = b"".join(p.read_bytes() for p in (isolated_lineage_env / "spool").rglob("*") if p.is_file())
    out, err = capsys.readouterr()
    assert b"Tok3nSecret" not in written and "Tok3nSecret" not in out + err
    with Backend(port) as backend:  # nothing configured: the recorded destination would get masked credentials
        code = replay_main([])
    masked = "***" in recorded["url"] + recorded["endpoint"] or recorded.get("credentials")
    assert (code, len(backend.events)) == ((2, 0) if masked else (0, 12))
    if masked:
        assert "whose credentials are never recorded" in capsys.readouterr().err


# ---- spool records ------------------------------------------------------------------------------------------

EVENT = {"eventType": "START", "run": {"runId": "r1"}, "job": {"namespace": "ns", "name": "j"}}
GOOD = encode_record(EVENT)


@pytest.mark.parametrize("torn, decoded", [
    (GOOD, EVENT),
    (GOOD[:-1], None),  # no newline: the write never finished
    (GOOD[:20], None),  # cut in the middle
    (GOOD[:9], None),  # the checksum only
    (GOOD.replace(b'"r1"', b'"r2"'), None),  # changed after the checksum was written
    (b"zzzzzzzz " + GOOD[9:], None),  # not a checksum
    (json.dumps(EVENT).encode() + b"\n", EVENT),  # bare JSON of an older version
    (b"{not json\n", None),
    (b"\n", None),
])
def test_spool_record_decoding(torn, decoded):
    assert decode_record(torn) == decoded


@pytest.mark.parametrize("tail, replayed, corrupt", [
    (GOOD[:5], [1, 2], 1), (GOOD[:30], [1, 2], 1), (b"garbage", [1, 2], 1),
    (GOOD[:-1], [1, None, 2], 0),  # only the newline was lost: the checksum proves the record whole
])
def test_a_torn_record_never_merges_with_the_next(tmp_path, tail, replayed, corrupt):
    spool = Spool(tmp_path / "spool", 1 << 20, {"type": "http", "url": "http://x"})
    spool.append({**EVENT, "n": 1})
    with open(spool.events_path, "ab") as f:
        f.write(tail)  # a crash or a full disk in the middle of a write
    spool.append({**EVENT, "n": 2})
    sent: list[dict] = []
    assert spool.replay(sent.append) == (len(replayed), 0)
    assert [e.get("n") for e in sent] == replayed and spool.corrupt == corrupt


def numbers(spool: Spool) -> list[int]:
    return [decode_record(line)["n"] for line in spool.events_path.read_bytes().splitlines(keepends=True)]


@pytest.mark.parametrize("backend_up, sent, left", [
    (False, [], [1, 2]),  # the replay stops at the refused first event; the append waited for nothing
    (True, [1, 2, 3], None),  # the replay re-sends what came in while it ran, then empties the spool
])
def test_appends_and_dead_letters_go_on_while_a_replay_sends(tmp_path, backend_up, sent, left):
    """While a replay sends (for seconds against a backend that is down), another Spool of the same directory
    (the plugin's end has one beside its emitter's) appends at once, and the replay's own send can set a dead
    letter aside. No append lands after a finished replay's last read: the spool is emptied under the lock."""
    destination = {"type": "http", "url": "http://x"}
    spool, other = Spool(tmp_path / "spool", 1 << 20, destination), Spool(tmp_path / "spool", 1 << 20, destination)
    spool.append({**EVENT, "n": 1})
    received: list[int] = []

    def send(event: dict) -> None:
        if event["n"] == 1:
            began = time.monotonic()
            assert other.append_many([{**EVENT, "n": 2}], timeout=0) == 1
            assert time.monotonic() - began < 0.5
            assert spool.add_dead_letter({**EVENT, "n": 9}, 400, "no")
        if not backend_up:
            raise ConnectionRefusedError
        if event["n"] == 2:
            other.append({**EVENT, "n": 3})
        received.append(event["n"])

    delivered, pending = spool.replay(send)
    assert (delivered, received) == (len(sent), sent)
    assert [d["event"]["n"] for d in spool.dead_letters()] == [9]
    if left is None:
        assert pending == 0 and not spool.events_path.exists() and not spool.offset_path.exists()
    else:
        assert pending == spool.pending_bytes() > 0 and numbers(spool) == left


def test_the_end_does_not_wait_for_a_lock_held_mid_write(tmp_path):
    """A process stopped (or stuck on its disk) while holding the spool's lock: an ending application's events
    are appended without it within a tenth of a second, whole, after what was there."""
    import threading

    import filelock

    from emitter.exit_spool import LOCK_WAIT_S, spool_records

    spool = Spool(tmp_path / "spool", 1 << 20, {"type": "http", "url": "http://x"})
    spool.append({**EVENT, "n": 1})
    held, release = threading.Event(), threading.Event()

    def holder() -> None:  # another thread: filelock tells a second instance in one thread from a deadlock
        with filelock.FileLock(spool.directory / "spool.lock"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(10)
    try:
        began = time.monotonic()
        assert spool_records(spool, [], built=[{**EVENT, "n": 2}, {**EVENT, "n": 3}]) == (2, 0)
        assert time.monotonic() - began < LOCK_WAIT_S + 0.4
        with pytest.raises(SpoolBusy):
            spool.append_many([{**EVENT, "n": 4}], timeout=0)
    finally:
        release.set()
        thread.join()
    assert numbers(spool) == [1, 2, 3]


REPLAYERS = ["lineage-capture replay", "the next run's emitter", "one request at a time"]


def replay_with(replayer: str, settings: dict[str, str]) -> tuple[int | None, Any]:
    """Replay the spool as ``replayer`` does: the exit code of ``lineage-capture replay``, or the emitter that
    replayed it at its start (closed)."""
    if replayer == "lineage-capture replay":
        return replay_main(argv_of(settings)), None
    later = Emitter.from_config(settings, **({"in_flight": 1} if replayer == "one request at a time" else {}))
    later.close()
    return None, later


@pytest.mark.parametrize("replayer", REPLAYERS)
def test_a_spooled_event_refused_for_good_is_set_aside_and_the_rest_delivered(replayer):
    """Events spooled while the backend was down; it comes back and refuses one of them for good (422): that one
    is set aside as a dead letter during the replay, the others arrive once, in order (the spool's by hand, one
    at a time; the order that matters with requests in flight), and the spool is empty."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    with Backend(port, reject=lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED) as backend:
        code, later = replay_with(replayer, settings)
        if later is None:
            assert code == 3  # delivered, one dead letter: said
        else:
            counts = later.counts
            assert (counts.replayed, counts.dead_lettered, counts.dropped) == (11, 1, 0)
    expected = [k for k in keys([{"run": {"runId": r.run_id}, "eventType": r.event_type}
                                 for r in emitter_order()]) if k != REJECTED]
    if replayer == "one request at a time":
        assert keys(backend.events) == expected
    else:  # requests in flight
        assert sorted(keys(backend.events)) == sorted(expected) and not order_violations(backend.events)
    (letter,) = emitter.spool.dead_letters()
    assert (letter["status"], keys([letter["event"]])) == (422, [REJECTED])
    assert emitter.spool.pending_bytes() == 0 and not emitter.spool.events_path.exists()


POISON_RUN = "01900000-0000-7000-8000-0000000000a2"  # a statement run: its START and COMPLETE
LAST_RUN = "01900000-0000-7000-8000-0000000000b1"  # the run whose COMPLETE ends the spool
TASK_RUN, LAST_CHILD = "01900000-0000-7000-8000-0000000000a0", "01900000-0000-7000-8000-0000000000a3"
#: one bad dataset in a statement poisons its events and its task run's COMPLETE (which lists every input)
POISONED_TASK = frozenset({LAST_CHILD, (TASK_RUN, "COMPLETE")})
FIRST_CHILD = "01900000-0000-7000-8000-0000000000a1"
POISONED_SIBLINGS = frozenset({FIRST_CHILD, POISON_RUN})


def _fails(failing: str | frozenset, event: dict) -> bool:
    """Whether the backend fails on ``event``: every event ("*"), one run's, or those of a set of runs and
    (run, event type) pairs."""
    run = event["run"]["runId"]
    if isinstance(failing, str):
        return failing in ("*", run)
    return run in failing or (run, event["eventType"]) in failing


@pytest.mark.parametrize("replayer", REPLAYERS)
@pytest.mark.parametrize("failing, status, set_aside, stops_at", [
    # the backend fails (500) on both events of one run and takes the rest: those two are set aside
    (POISON_RUN, 500, [(POISON_RUN, "START"), (POISON_RUN, "COMPLETE")], None),
    (POISON_RUN, 501, [(POISON_RUN, "START"), (POISON_RUN, "COMPLETE")], None),
    # 500 on everything: the backend is broken, not an event: nothing set aside, all still spooled in order
    ("*", 500, [], 0),
    # a proxy's 502/503/504 says the backend is down, whatever the event: no witness is sent, nothing set aside
    (POISON_RUN, 503, [], (POISON_RUN, "START")),
    # the last event of the spool is the failing run's: no other run's event to tell by (a later replay will)
    (LAST_RUN, 500, [(LAST_RUN, "START")], (LAST_RUN, "COMPLETE")),
    # the task run's COMPLETE is failed on too: it is no witness for its child (it waits for it), an unrelated
    # run's event is; before, the replay took the COMPLETE's 500 for the backend's and stopped for good
    (POISONED_TASK, 500, [(LAST_CHILD, "START"), (LAST_CHILD, "COMPLETE"), (TASK_RUN, "COMPLETE")], None),
    # a sibling failed on as well: that witness is left in place (it is set aside in its turn), the next tried
    (POISONED_SIBLINGS, 500, [(FIRST_CHILD, "START"), (POISON_RUN, "START"), (FIRST_CHILD, "COMPLETE"),
                              (POISON_RUN, "COMPLETE")], None),
], ids=["500-one-run", "501-one-run", "500-everything", "503-one-run", "500-last-run", "500-run-and-its-parent",
        "500-two-siblings"])
def test_an_event_the_backend_keeps_failing_on_no_longer_blocks_the_spool(replayer, failing, status, set_aside,
                                                                          stops_at):
    """Events spooled while the backend was down; it comes back and answers 500 to one run's events (an event
    Marquez fails on) while it takes the others. Each of them is sent twice, around another run's event that the
    backend took: then it is set aside with the backend's answer, and the rest arrive once, in order. Before,
    such an event headed the spool forever and every later event of every later run queued behind it."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    in_order = keys([{"run": {"runId": r.run_id}, "eventType": r.event_type} for r in emitter_order()])
    left = 0 if stops_at is None else len(in_order) - (in_order.index(stops_at) if stops_at else 0)
    with Backend(port, reject=lambda e: _fails(failing, e), reject_status=status) as backend:
        code, later = replay_with(replayer, settings)
        if later is None:
            assert code == (1 if left else 3 if set_aside else 0)
        else:
            counts = later.counts
            assert (counts.dead_lettered, counts.dropped) == (len(set_aside), 0)
            assert later.delivery_failure == (f"the backend answered HTTP {status}" if left else None)
    delivered = [key for key in in_order[:len(in_order) - left] if key not in set_aside]
    got = keys(backend.events)
    if replayer == "one request at a time":  # the spool's order
        assert got == delivered or sorted(got) == sorted(delivered) and set_aside
    else:  # requests in flight: the order that matters; what went ahead of where the replay stopped is blanked
        assert set(delivered) <= set(got) and not order_violations(backend.events)
    assert not order_violations(backend.events)
    letters = emitter.spool.dead_letters()
    assert [keys([letter["event"]])[0] for letter in letters] == set_aside
    assert all(letter["status"] == status and "must not be accepted" in letter["answer"] for letter in letters)
    spooled = emitter.spool.events_path.read_bytes().splitlines(True) if left else []
    remaining = [event for event in map(decode_record, spooled[len(spooled) - left:]) if event is not None]
    # still spooled, in order, for a later replay: what was not delivered, each event either sent or spooled
    assert keys(remaining) == [key for key in in_order[len(in_order) - left:] if key not in got]
    assert sorted(got + keys(remaining)) == sorted(key for key in in_order if key not in set_aside)


def test_a_suspect_parent_start_is_not_overtaken_by_its_child():
    """A spooled task run's START the backend fails on once (a 500), with only its own children behind it: none of
    them may be sent ahead to tell whether the backend is up (a child's START would reach the backend before its
    parent's, and Marquez invents a parent in the child's namespace). The replay waits; the next one sends all, in
    order. Before, the child went first."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}")
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records()[:8])  # the task run and its three statements: no unrelated run
    assert emitter.close().spooled == 8
    failures = [1]

    def fail_once(event: dict) -> bool:
        if (event["run"]["runId"], event["eventType"]) == (TASK_RUN, "START") and failures[0]:
            failures[0] -= 1
            return True
        return False

    with Backend(port, reject=fail_once, reject_status=500) as backend:
        assert replay_main(argv_of(settings)) == 1  # nothing to tell by: waits, all still spooled
        assert backend.events == []
        assert replay_main(argv_of(settings)) == 0
    assert len(backend.events) == 8 and not order_violations(backend.events)


@pytest.mark.parametrize("limit", ["dead letters full", "disk full"])
def test_a_refused_spooled_event_that_cannot_be_set_aside_stays_spooled(tmp_path, limit, caplog):
    """A replay whose backend refuses an event for good (422) when it cannot be set aside (the dead letters at
    spool.maxBytes, or the disk full): the event stays in the spool, the replay stops at it and says so (exit 1),
    nothing is lost. Before, the spool was emptied all the same and the replay exited 0 or 3."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    spool = emitter.spool
    if limit == "dead letters full":
        settings["spool.maxBytes"] = "100"  # (checked when written to: the spooled events stay as they are)
    else:
        spool.dead_letters_path.mkdir()  # cannot be written: as a full disk, an OSError
    with Backend(port, reject=lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED) as backend:
        assert replay_main(argv_of(settings)) == 1
    in_order = keys([{"run": {"runId": r.run_id}, "eventType": r.event_type} for r in emitter_order()])
    stop = in_order.index(REJECTED)
    got = keys(backend.events)  # (unrelated runs' events behind it may have gone ahead: requests in flight)
    assert set(in_order[:stop]) <= set(got) and not order_violations(backend.events)
    after = spool.events_path.read_bytes().splitlines(True)
    remaining = [event for event in map(decode_record, after[stop:]) if event is not None]
    assert keys(remaining) == [key for key in in_order[stop:] if key not in got]  # what went ahead is blanked
    assert keys(remaining)[0] == REJECTED and spool.pending_bytes() == sum(len(line) for line in after[stop:])
    if limit == "dead letters full":  # the warning says what empties them (a replay does not)
        assert any("dead letters" in r.getMessage() and "--dead-letters list|retry|discard" in r.getMessage()
                   for r in caplog.records)


def test_a_producer_replay_never_blocks_behind_an_event_it_cannot_set_aside(tmp_path):
    """The next run's emitter replays the spool before its own events: a refused event that cannot be set aside
    (dead letters full) is counted lost there, and the events behind it and the run's own are delivered (a replay
    by hand keeps it instead: see the test above). Stopping there blocked every later event for good."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    with Backend(port, reject=lambda e: (e["run"]["runId"], e["eventType"]) == REJECTED) as backend:
        later = Emitter.from_config({**settings, "spool.maxBytes": "100"})
        later.emit_batch(tree_records()[8:])  # (the same run ids again: the backend takes them twice)
        counts = later.close()
    assert (counts.dropped, counts.dead_lettered) == (1, 0)
    assert len(backend.events) == 11 + 4 and later.spool.pending_bytes() == 0


def test_a_backend_asking_to_be_left_alone_is_left_alone(tmp_path):
    """A 503 with ``Retry-After: 120``: one request, not a retry every few hundred milliseconds; the events wait
    in the spool, and the emitter does not try again for those 120 s (it does after 30 s otherwise)."""
    with Backend(status=503, retry_after="120") as backend:
        emitter = Emitter.from_config(conf(backend.url, **{"transport.retry.total": "5",
                                                            "transport.retry.backoff_factor": "0.1"}),
                                      in_flight=1)
        emitter.emit_batch(tree_records()[:4])
        assert len(backend.requests) == 1
        assert emitter.delivery_failure == "the backend asked to be left alone for 120 s"
        blocked = emitter.delivery._blocked_until - time.monotonic()
        assert 110 < blocked <= 120
        emitter.emit_batch(tree_records()[4:])
        counts = emitter.close()
    assert len(backend.requests) == 1 and (counts.delivered, counts.spooled) == (0, 12)


def test_spool_dir_under_a_regular_file(tmp_path, caplog):
    """The file transport needs no spool: no traceback, nothing lost. An http backend that is down: one clear
    line, the events counted as lost."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = tmp_path / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(out),
                                   "spool.dir": str(blocker / "spool")})
    emitter.emit_batch(tree_records())
    counts = emitter.close()
    assert (counts.delivered, counts.dropped) == (12, 0) and len(out.read_text().splitlines()) == 12
    emitter = Emitter.from_config(conf(f"http://127.0.0.1:{free_port()}", **{"spool.dir": str(blocker / "spool")}))
    emitter.emit_batch(tree_records())
    counts = emitter.close()
    assert (counts.delivered, counts.spooled, counts.dropped) == (0, 0, 12)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "cannot be created (Not a directory)" in errors[0]
    assert emitter.spool_error is not None and "\n" not in emitter.spool_error


# ---- harvests: exit codes, a full disk, kill -9 --------------------------------------------------------------


def make_log(path: Path, statements: int) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sqlserver_harvest import generate

    generate(path, statements)
    return path


def run_harvest(log: Path, state: Path, overrides: dict[str, str], env: dict[str, str] | None = None,
                limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    """``harvest sqlserver`` in a real process (optionally with its file size limited: a full disk)."""
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"  # a write past the limit fails with EFBIG instead
            f"limit = {limit_bytes!r}\n"
            "if limit: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
            "from harvesters.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, "sqlserver", "--xml", str(log), "--server", "db01",
                           "--state", str(state), *argv_of(overrides)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120)


def reference_keys(tmp_path: Path, log: Path) -> list[tuple[str, str]]:
    out = tmp_path / "reference.jsonl"
    result = run_harvest(log, tmp_path / "reference.state", {"transport.type": "file", "transport.location": str(out)})
    assert result.returncode == 0, result.stderr
    return keys([json.loads(line) for line in out.read_text().splitlines()])


@pytest.mark.parametrize("fault, code, note", [
    ({"port_closed": True}, 3, "events spooled, not delivered (backend unreachable: cannot connect to 127.0.0.1:"),
    ({"status": 500}, 3, "events spooled, not delivered (the backend answered HTTP 500"),
    ({"status": 503, "retry_after": "600"}, 3,
     "events spooled, not delivered (the backend asked to be left alone for 600 s"),
    ({"reject": "first child COMPLETE"}, 3, "1 events refused by the backend and set aside"),
    ({"status": 401}, 3, "events spooled, not delivered (the backend answered HTTP 401 (credentials refused: check "
                         "transport.auth)"),
    ({}, 0, "state saved to"),
])
def test_harvest_exit_code_says_events_did_not_reach_the_backend(tmp_path, fault, code, note):
    log = make_log(tmp_path / "log.xml", 60)
    port = free_port()
    options = {k: v for k, v in fault.items() if k != "port_closed"}
    if "reject" in options:
        refused: list[tuple[str, str]] = []

        def first_child_complete(event: dict) -> bool:
            if refused == [] and event["eventType"] == "COMPLETE" and "parent" in event["run"].get("facets", {}):
                refused.append((event["run"]["runId"], event["eventType"]))
            return (event["run"]["runId"], event["eventType"]) in refused

        options["reject"] = first_child_complete
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    if fault.get("port_closed"):
        result = run_harvest(log, tmp_path / "state.json", settings)
    else:
        with Backend(port, **options):
            result = run_harvest(log, tmp_path / "state.json", settings)
    assert result.returncode == code, result.stderr
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("harvest sqlserver: 60 events read") and note in summary
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("limit", [6_000, 20_000])
def test_full_disk_is_one_line_exit_1_and_nothing_lost_on_the_redo(tmp_path, limit):
    log = make_log(tmp_path / "log.xml", 60)
    expected = reference_keys(tmp_path, log)
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    state = tmp_path / "state.json"
    result = run_harvest(log, state, settings, limit_bytes=limit)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert not state.exists()  # not advanced: the redo harvests the same statements
    # a write cut short at the limit reads as a full disk, a write past it as EFBIG: either way one reason
    errors = [line for line in result.stderr.splitlines()
              if re.search(r"cannot be written \((No space left on device|File too large)\)", line)]
    assert len(errors) == 2 and errors[0].startswith("ERROR: ")  # the log line when it happened, the summary
    assert "could not be delivered nor spooled (lineage spool" in result.stderr.splitlines()[-1]
    (spool,) = spools_under(tmp_path / "spool", 1 << 30)
    with open(spool.events_path, "rb") as f:
        records = f.read().splitlines(keepends=True)
    assert records and all(decode_record(r) is not None for r in records)  # no torn record left behind
    with Backend(port) as backend:
        result = run_harvest(log, state, settings)
    assert result.returncode == 0, result.stderr
    # what the first run spooled is replayed first, then the redo sends everything again with the same run ids
    assert set(keys(backend.events)) == set(expected)
    spooled = len(records)
    replayed = backend.events[:spooled]  # the spool first, in the order that matters
    assert sorted(keys(replayed)) == sorted(expected[:spooled]) and not order_violations(replayed)
    redo = backend.events[spooled:]
    assert sorted(keys(redo)) == sorted(expected) and not order_violations(redo)


def test_full_tmpfs_spool(tmp_path):
    """A real full file system (64 KiB tmpfs): one clear line, no torn record, exit 1, state kept."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount not permitted here: {done.stderr.decode().strip()}")
    try:
        log = make_log(tmp_path / "log.xml", 300)
        settings = conf(f"http://127.0.0.1:{free_port()}", **{"spool.dir": str(mount / "spool")})
        result = run_harvest(log, tmp_path / "state.json", settings)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "cannot be written (No space left on device)" in result.stderr.splitlines()[-1]
        assert not (tmp_path / "state.json").exists()
        (spool,) = spools_under(mount / "spool", 1 << 30)
        with open(spool.events_path, "rb") as f:
            assert all(decode_record(r) is not None for r in f)
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def kill_when(process: subprocess.Popen, ready, timeout: float = 60.0) -> bool:
    """SIGKILL ``process`` as soon as ``ready()`` holds; True when it was still running then."""
    deadline = time.monotonic() + timeout
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    running = process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    return running


def test_kill_9_at_random_points_loses_nothing(tmp_path):
    """A harvest killed with SIGKILL at random points (once while starting, twice after a random number of its
    events reached the backend), then run to completion: every event of the reference harvest reached the
    backend, with the same run ids; a repeat is only ever an event sent again. The kill points follow the
    harvest's progress, not the clock, so a faster harvest still dies mid-way."""
    log = make_log(tmp_path / "log.xml", 1500)
    expected = reference_keys(tmp_path, log)
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    state = tmp_path / "state.json"
    rng = random.Random(11)
    code = ("import sys\nfrom harvesters.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    argv = [sys.executable, "-c", code, "sqlserver", "--xml", str(log), "--server", "db01", "--state", str(state),
            *argv_of(settings)]
    killed_running = 0
    with Backend(port, delay=0.001) as backend:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        wait = rng.uniform(0.05, 0.4)
        killed_running += kill_when(process, lambda: time.monotonic() - started >= wait)
        for _ in range(2):
            target = len(backend.events) + rng.randrange(1, len(expected) // 2)
            process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            killed_running += kill_when(process, lambda n=target: len(backend.events) >= n)
        final = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert killed_running == 3  # the kills hit running harvests, not finished ones
    assert state.exists()
    delivered = keys(backend.events)
    assert set(delivered) == set(expected)  # nothing lost, and no run id the reference harvest does not have
    assert final.stderr.strip().splitlines()[-1].startswith("harvest sqlserver: ")


@pytest.mark.parametrize("dies", ["after_the_submits", "at_once"])
def test_a_sending_thread_that_dies_leaves_nothing_waiting_and_nothing_lost(tmp_path, dies):
    """Fault injection: the delivery's sending thread fails as it starts (its transport cannot make senders).
    flush() still returns and nothing is lost or reordered. When the thread dies after every event was handed
    over (held back by a gate until then), all of them are spooled, in order, and the next event (sent in the
    caller's thread) replays them first. When it dies at once, the submits still running meet a dead thread:
    how many are spooled first is timing, so only what holds either way is asserted."""
    import threading

    from emitter.delivery import Delivery
    from emitter.transport import create_transport

    gate = threading.Event()
    if dies == "at_once":
        gate.set()

    class BrokenSenders:
        def __init__(self, real):
            self.real = real

        def async_sender(self):
            gate.wait(30)  # on the sending thread: the caller's submits never wait for it
            raise RuntimeError("no senders today")

        def close(self):
            self.real.close()

    records = nested_records(tasks=1)
    events = [event_dict_of(r) for r in records]
    with Backend() as backend:
        config = {"type": "http", "url": backend.url}
        delivery = Delivery(create_transport(config, announce=False), Spool(tmp_path / "spool", 10**7), 0.0,
                            width=8, make_transport=lambda: BrokenSenders(create_transport(config, announce=False)))
        for event in events[:-1]:
            delivery.submit(event)
        gate.set()
        delivery.flush()  # returns: nothing waits for the dead thread
        if dies == "after_the_submits":
            assert delivery.counts.spooled == len(events) - 1 and backend.events == []
        delivery.submit(events[-1])  # in the caller's thread: the spool first, then this one
        delivery.close()
    assert keys(backend.events) == keys(events)
    counts = delivery.counts
    assert counts.replayed == counts.spooled and counts.replayed + counts.delivered == len(events)
    assert counts.spooled >= 1 and counts.dropped == counts.dead_lettered == 0
    if dies == "after_the_submits":
        assert counts.replayed == len(events) - 1 and counts.delivered == 1


def event_dict_of(record: RunRecord) -> dict:
    from emitter.serialize import event_dict

    return event_dict(record)


def test_sigterm_while_the_backend_hangs_spools_everything_quietly(tmp_path):
    """A harvest stopped with SIGTERM (cron's timeout) while the backend hangs: its delivery process keeps what
    it was handed (all of it in the spool afterwards, nothing torn) and writes no traceback into the cron log
    when it finds the harvest gone."""
    log = make_log(tmp_path / "log.xml", 300)
    expected = reference_keys(tmp_path, log)
    with Backend(hang=True) as backend:
        settings = conf(backend.url, **{"spool.dir": str(tmp_path / "spool"), "transport.timeout": "1"})
        code = "import sys\nfrom harvesters.cli import main\nsys.exit(main(sys.argv[1:]))\n"
        process = subprocess.Popen([sys.executable, "-c", code, "sqlserver", "--xml", str(log), "--server", "db01",
                                    "--state", str(tmp_path / "state.json"), *argv_of(settings)],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not backend.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)  # its pipe closes when the delivery process is done too
    assert "Traceback" not in stderr, stderr
    (spool,) = spools_under(tmp_path / "spool", 1 << 30)
    with open(spool.events_path, "rb") as f:
        spooled = [decode_record(r) for r in f]
    assert all(r is not None for r in spooled)
    assert set(keys(spooled)) <= set(expected)
    assert not (tmp_path / "state.json").exists()


def test_a_harvest_counts_the_spool_records_it_could_not_read(tmp_path):
    """A spooled record damaged on disk is skipped by the next harvest's replay (the rest is delivered, in order):
    its event is lost, which the summary line says, and the exit code asks for a look (1)."""
    log = make_log(tmp_path / "log.xml", 20)
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    first = run_harvest(log, tmp_path / "state.json", settings)
    assert first.returncode == 3, first.stderr
    (spool,) = spools_under(tmp_path / "spool", 1 << 30)
    lines = spool.events_path.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3][:20] + b"#" + lines[3][21:]  # one flipped byte: its checksum no longer holds
    spool.events_path.write_bytes(b"".join(lines))
    with Backend(port) as backend:
        second = run_harvest(log, tmp_path / "state.json", settings)
    assert second.returncode == 1, second.stderr
    assert "1 torn or corrupt spool records skipped (their events are lost)" in second.stderr.splitlines()[-1]
    assert len(backend.events) == len(lines) - 1


def test_an_unreadable_event_asks_for_a_look_even_when_the_backend_is_down(tmp_path):
    """A cut event in the log (counted unreadable) and a backend down: exit 1, not 3 (the spool is sent again by
    the next run by itself; the unreadable event is never said again)."""
    log = make_log(tmp_path / "log.xml", 20)
    with open(log, "ab") as f:
        f.write(log.read_bytes()[:200] + b"\n")  # half an event
    settings = conf(f"http://127.0.0.1:{free_port()}", **{"spool.dir": str(tmp_path / "spool")})
    done = run_harvest(log, tmp_path / "state.json", settings)
    assert done.returncode == 1, done.stderr
    assert "spooled" in done.stderr.splitlines()[-1]


def test_replay_asks_for_a_look_when_it_skipped_a_damaged_record(tmp_path, capsys):
    """`lineage-capture replay` skipping a damaged record loses its event: exit 1, as a harvest (it was 0)."""
    port = free_port()
    settings = conf(f"http://127.0.0.1:{port}", **{"spool.dir": str(tmp_path / "spool")})
    emitter = Emitter.from_config(settings)
    emitter.emit_batch(tree_records())
    assert emitter.close().spooled == 12
    lines = emitter.spool.events_path.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3][:20] + b"#" + lines[3][21:]
    emitter.spool.events_path.write_bytes(b"".join(lines))
    with Backend(port) as backend:
        assert replay_main(argv_of(settings)) == 1
    assert len(backend.events) == 11 and "1 torn or corrupt records skipped" in capsys.readouterr().out


@pytest.mark.parametrize(("make_spool", "reason"), [
    (lambda tmp: Spool(tmp / "afile" / "spool", 10**6, {"type": "http", "url": "http://x"}), "Not a directory"),
    (lambda tmp: Spool(tmp / "spool", 150, {"type": "http", "url": "http://x"}), "the spool is full"),
], ids=["under-a-regular-file", "full"])
def test_what_cannot_be_spooled_at_exit_is_counted_with_its_reason(tmp_path, make_spool, reason):
    from emitter.exit_spool import spool_records

    (tmp_path / "afile").write_text("")
    problem: list[str] = []
    spooled, dropped = spool_records(make_spool(tmp_path), [], [{**EVENT, "n": i} for i in range(3)], problem)
    assert spooled + dropped == 3 and dropped >= 1
    assert len(problem) == 1 and reason in problem[0]


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (root only: skipped where mounting is not allowed)."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_replay_on_a_full_disk_keeps_its_position(full_disk):
    """The spool filled its disk; the backend is back: the replay's position is saved in place (no room for the
    atomic temp file) and the next replay goes on from it: every spooled event once, in order. It stopped at the
    first save instead, and every run re-sent the same first events while new ones were dropped."""
    spool = Spool(full_disk / "spool", 1 << 30, {"type": "http", "url": "http://127.0.0.1:1", "endpoint": "x"})
    events = [{**EVENT, "run": {"runId": f"r{i}"}, "pad": "x" * 200} for i in range(1000)]
    kept = 0
    with pytest.raises(Exception, match="No space left"):
        for event in events:
            spool.append_many([event])
            kept += 1
    assert kept > 50
    sent: list[str] = []

    def send_until(limit: int) -> Callable[[dict], None]:
        def send(event: dict) -> None:
            if len(sent) == limit:
                raise ConnectionError("backend gone again")
            sent.append(event["run"]["runId"])
        return send

    assert spool.replay(send_until(20))[0] == 20  # stopped: the position is saved on the full disk
    spool.replay(send_until(10 ** 6))
    assert sent == [e["run"]["runId"] for e in events[:kept]]


def test_the_file_transport_on_a_full_disk_counts_what_it_could_not_write(full_disk, tmp_path):
    """Events file on a full disk, spool elsewhere: every event is written whole, spooled, or counted dropped
    (a harvest then keeps its state); no torn line. It counted lines still in its buffer delivered, lost them
    when the buffer's write failed, and left a torn line the replay glued the next event onto."""
    location = full_disk / "events.jsonl"
    emitter = Emitter.from_config({"transport.type": "file", "transport.location": str(location),
                                   "spool.dir": str(tmp_path / "spool")})
    records = [r for _ in range(40) for r in tree_records()]
    emitter.emit_batch(records)
    counts = emitter.close()
    assert counts.spooled and counts.delivered + counts.spooled + counts.dropped == len(records)
    lines = location.read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b"\n") for line in lines) and len(lines) == counts.delivered
    subprocess.run(["mount", "-o", "remount,size=4m", str(full_disk)], check=True)  # room again: replayed whole
    assert replay_main(["--conf", "transport.type=file", "--conf", f"transport.location={location}",
                        "--conf", f"spool.dir={tmp_path / 'spool'}"]) == 0
    events = [json.loads(line) for line in location.read_text().splitlines()]
    assert len(events) == counts.delivered + counts.spooled


def test_ctrl_c_ends_a_harvest_with_one_line_and_its_state_untouched(tmp_path):
    """SIGINT (Ctrl-C) while the harvest waits on a hanging backend: it ends at once with exit 130 and one line,
    no traceback; no state written (it advances only once the events are delivered or spooled)."""
    import signal

    log = make_log(tmp_path / "log.xml", 20)
    errors = tmp_path / "stderr.txt"
    with Backend(hang=True) as backend, open(errors, "w") as stderr:
        settings = conf(backend.url, **{"spool.dir": str(tmp_path / "spool"), "transport.timeout": "30"})
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from harvesters.cli import main; sys.exit(main(sys.argv[1:]))",
             "sqlserver", "--xml", str(log), "--server", "db01", "--state", str(tmp_path / "state.json"),
             *argv_of(settings)], stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
        deadline = time.monotonic() + 60
        while not backend.requests and time.monotonic() < deadline:  # it is waiting on the backend now
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        assert process.wait(timeout=60) == 130
        assert time.monotonic() - interrupted < 5  # (its delivery child may still wait on the backend)
    text = errors.read_text()
    assert "harvest: interrupted" in text and "Traceback" not in text
    assert not (tmp_path / "state.json").exists()


def test_a_failed_witness_keeps_its_children_behind_it(tmp_path):
    """A suspect's first witness is failed on too (a task run's START): it stays in place, and so does its child,
    which is no witness either; an unrelated run's event is. The child's START went ahead of its parent's."""
    from emitter.delivery import _other_run
    from emitter.spool import Suspect

    def event(run: str, kind: str, parent: str | None = None) -> dict:
        facets = {"parent": {"run": {"runId": parent}, "job": {"namespace": "ns", "name": "p"}}} if parent else {}
        return {"eventType": kind, "run": {"runId": run, "facets": facets}, "job": {"namespace": "ns", "name": run}}

    spool = Spool(tmp_path / "spool", 10_000_000)
    spool.append_many([event("x", "START"), event("t", "START"), event("c", "START", parent="t"),
                       event("u", "START")])
    sent: list[tuple[str, str]] = []
    failing = {("x", "START"), ("t", "START")}

    def send(e: dict) -> None:
        if (e["run"]["runId"], e["eventType"]) in failing:
            raise Suspect(RuntimeError("500"))
        sent.append((e["run"]["runId"], e["eventType"]))

    set_aside: list[str] = []
    spool.replay(send, lambda e, _: set_aside.append(e["run"]["runId"]), _other_run)
    assert sent[0] == ("u", "START")  # the witness: not t's child
    assert ("c", "START") not in sent[:sent.index(("u", "START")) + 1]
    assert set_aside[0] == "x"
