"""A composite transport (every event to every member): each member delivers, spools and replays for itself.
Real http servers on 127.0.0.1 and real files; a member that is down costs neither the others' events nor its own."""
from __future__ import annotations

import json

import pytest
from test_emitter_delivery import key, numbered_records

from emitter.cli import replay_main
from emitter.config import load_config
from emitter.emitter import Emitter
from emitter.fan_out import fan_out_members
from emitter.serialize import event_dict
from emitter.spool import Spool, describe_destination

from http_backend import Backend, free_port, order_violations
from ol_schema import assert_valid_event


def composite_conf(events_file, url: str, **extra: str) -> dict[str, str]:
    return {"transport.type": "composite",
            "transport.transports.local.type": "file", "transport.transports.local.location": str(events_file),
            "transport.transports.marquez.type": "http", "transport.transports.marquez.url": url,
            "transport.transports.marquez.retry.total": "0", **extra}


def as_argv(conf: dict[str, str]) -> list[str]:
    return [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]


def file_keys(path) -> list[tuple[str, str]]:
    return [key(json.loads(line)) for line in path.read_text().splitlines()]


def test_a_down_member_spools_its_events_and_gets_them_later_the_other_member_once(tmp_path):
    events_file, port = tmp_path / "events.jsonl", free_port()
    records = numbered_records(4)
    expected = [(r.run_id, r.event_type) for r in records]
    with Backend(port, status=503) as down:  # down: answers 503 (openlineage-python's composite swallowed it)
        emitter = Emitter.from_config(composite_conf(events_file, down.url), retry_after=3600)
        for record in records:
            emitter.emit(record)
        counts = emitter.close()
    assert len(down.requests) == 1  # then left alone for retry_after: one request, not one per event
    assert file_keys(events_file) == expected
    assert (counts.delivered, counts.spooled, counts.dropped) == (0, 8, 0)
    assert emitter.spool.pending_bytes() > 0

    with Backend(port) as backend:
        later = Emitter.from_config(composite_conf(events_file, backend.url))  # the member's spool first
        counts = later.close()
    # (replayed with requests in flight: independent runs may swap, a run's START and COMPLETE never)
    assert sorted(key(e) for e in backend.events) == sorted(expected) and not order_violations(backend.events)
    assert (counts.replayed, counts.spooled) == (8, 0)
    assert file_keys(events_file) == expected  # the file member did not get them twice
    for event in backend.events:
        assert_valid_event(event)


@pytest.mark.parametrize("to_configured", [[], ["--to-configured"]], ids=["recorded", "to-configured"])
def test_the_replay_command_sends_a_members_spool_to_that_member(tmp_path, capsys, to_configured):
    events_file, port = tmp_path / "events.jsonl", free_port()
    conf = composite_conf(events_file, f"http://127.0.0.1:{port}")
    emitter = Emitter.from_config(conf)
    records = numbered_records(2)
    for record in records:
        emitter.emit(record)
    emitter.close()
    assert replay_main(as_argv(conf)) == 1  # still down: kept
    with Backend(port) as backend:
        assert replay_main([*as_argv(conf), *to_configured]) == 0
        assert replay_main(as_argv(conf)) == 0  # nothing twice
    assert sorted(key(e) for e in backend.events) == sorted((r.run_id, r.event_type) for r in records)
    assert file_keys(events_file) == [(r.run_id, r.event_type) for r in records]
    assert "2 bytes still" not in capsys.readouterr().out


def test_events_spooled_for_the_composite_as_a_whole_reach_every_member(tmp_path):
    """A process that ended with events undelivered spooled them for the composite: each member gets them."""
    events_file = tmp_path / "events.jsonl"
    with Backend() as backend:
        conf = composite_conf(events_file, backend.url)
        config = load_config(conf)
        records = numbered_records(2)
        whole = Spool(config.spool_dir, config.spool_max_bytes, describe_destination(config.transport))
        whole.append_many([event_dict(r) for r in records])
        counts = Emitter.from_config(conf).close()
    expected = [(r.run_id, r.event_type) for r in records]
    assert sorted(key(e) for e in backend.events) == sorted(expected) and not order_violations(backend.events)
    assert file_keys(events_file) == expected
    assert counts.replayed == 4 and whole.pending_bytes() == 0


@pytest.mark.parametrize("extra, fans_out", [
    ({}, True),
    ({"transport.continue_on_failure": "true", "transport.continue_on_success": "true"}, True),
    ({"transport.continue_on_success": "false"}, False),  # first success wins: the stock composite
    ({"transport.continue_on_failure": "false"}, False),  # fail fast: the stock composite
], ids=["default", "explicit-defaults", "first-success", "fail-fast"])
def test_which_composites_fan_out(tmp_path, extra, fans_out):
    transport = load_config(composite_conf(tmp_path / "e.jsonl", "http://127.0.0.1:9", **extra)).transport
    members = fan_out_members(transport)
    assert (members is not None) == fans_out
    if fans_out:
        assert [(m["name"], m["type"]) for m in members] == [("local", "file"), ("marquez", "http")]


def test_a_member_without_a_type_is_a_configuration_error_naming_it(tmp_path):
    conf = {**composite_conf(tmp_path / "e.jsonl", "http://127.0.0.1:9"), "transport.transports.marquez.type": ""}
    with pytest.raises(ValueError, match=r"^transport\.transports\.marquez\.type is not set"):
        Emitter.from_config(conf)


def test_at_a_hosts_end_a_hanging_members_events_go_to_its_spool_only(tmp_path):
    """A process that is ending spools what is undelivered at once (the Spark plugin's end): the events a hanging
    member has not taken go to that member's spool, not to the composite's (the file member, which has them, got
    them a second time from there)."""
    from emitter.exit_spool import spool_records

    events_file, port = tmp_path / "events.jsonl", free_port()
    records = numbered_records(3)
    expected = [(r.run_id, r.event_type) for r in records]
    with Backend(port, hang=True):
        emitter = Emitter.from_config(composite_conf(events_file, f"http://127.0.0.1:{port}",
                                                     **{"transport.transports.marquez.timeout": "30"}))
        for record in records:
            emitter.emit(record)
        held, pending = emitter.undelivered()
        assert sorted(key(e) for e in pending) == sorted(expected) and held == []
        assert spool_records(emitter.spool, held, pending) == (6, 0)
    assert file_keys(events_file) == expected
    config = load_config(composite_conf(events_file, "http://127.0.0.1:9"))
    members = fan_out_members(config.transport)
    assert Spool(config.spool_dir, config.spool_max_bytes, describe_destination(config.transport)).pending_bytes() == 0
    assert Spool(config.spool_dir, config.spool_max_bytes, describe_destination(members[0])).pending_bytes() == 0
    with Backend(port) as backend:
        counts = Emitter.from_config(composite_conf(events_file, backend.url)).close()
    assert sorted(key(e) for e in backend.events) == sorted(expected) and counts.replayed == 6
    assert file_keys(events_file) == expected  # once
