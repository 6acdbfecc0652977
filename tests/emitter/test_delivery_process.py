"""Delivery in a second process (emitter/delivery_process.py), against a real backend on 127.0.0.1: the same
events in the same order as delivery in the process itself; nothing lost to the second process when it dies
(counted as dropped, the rest delivered in the process) or when the first process dies (the child delivers what
it was given); the transport configuration, secrets included, never on a command line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_delivery_faults import conf, keys, nested_records

from emitter.delivery_process import BATCH, DeliveryProcess
from emitter.emitter import Emitter

from http_backend import Backend, order_violations

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="delivery runs in a second process "
                                                                          "only with a second core")


def deliver(backend: Backend, tmp_path: Path, process: bool, **extra: str) -> tuple[object, list]:
    emitter = Emitter.from_config(conf(backend.url, **{"spool.dir": str(tmp_path / "spool"), **extra}),
                                  delivery_process=process)
    assert isinstance(emitter.delivery, DeliveryProcess) == process
    for record in nested_records():
        emitter.emit(record)
    return emitter.close(), backend.events


def test_the_same_events_in_the_same_order_as_in_the_process(tmp_path):
    with Backend(delay=0.001, jitter=0.01) as backend:
        counts, events = deliver(backend, tmp_path / "a", process=True)
    with Backend() as backend:
        _, reference = deliver(backend, tmp_path / "b", process=False)
    records = nested_records()
    assert (counts.delivered, counts.spooled, counts.dropped) == (len(records), 0, 0)
    assert sorted(keys(events)) == sorted(keys(reference)) == sorted((r.run_id, r.event_type) for r in records)
    assert order_violations(events) == []


def test_a_dead_backend_spools_in_the_child_and_the_counts_come_back(tmp_path):
    with Backend(status=503) as backend:
        counts, events = deliver(backend, tmp_path, process=True)
    assert events == [] and counts.spooled == len(nested_records()) and counts.dropped == 0


def test_a_dead_child_costs_only_what_it_had_not_confirmed(tmp_path, caplog):
    """The child is killed after the first batch: those events are counted as dropped (a harvest then keeps
    its state), the events after it are delivered from this process."""
    records = nested_records(tasks=40)  # 40 * 26 = 1,040 events: several batches
    with Backend() as backend:
        emitter = Emitter.from_config(conf(backend.url, **{"spool.dir": str(tmp_path / "spool")}),
                                      delivery_process=True)
        delivery = emitter.delivery
        assert isinstance(delivery, DeliveryProcess)
        for record in records[:BATCH]:
            emitter.emit(record)  # the batch goes to the child
        emitter.flush()  # ... and is confirmed
        for record in records[BATCH:2 * BATCH]:
            emitter.emit(record)  # sent, never confirmed
        delivery._child.kill()
        delivery._child.wait()
        for record in records[2 * BATCH:]:
            emitter.emit(record)
        counts = emitter.close()
    assert counts.dropped == BATCH  # the unconfirmed batch, whatever the child did with it before dying
    assert counts.delivered >= len(records) - BATCH and counts.spooled == 0
    assert set(keys(backend.events)) >= {(r.run_id, r.event_type) for r in records[:BATCH] + records[2 * BATCH:]}
    assert "delivery process ended unexpectedly" in caplog.text


def test_when_the_first_process_dies_the_child_delivers_what_it_was_given(tmp_path):
    """A harvest killed mid-run: every batch it had handed over still reaches the backend. (While the child
    starts, the harvest keeps up to START_BUFFER events itself; those die with it, like any event in its memory,
    and its state was not advanced.)"""
    with Backend() as backend:
        script = textwrap.dedent(f"""
            import os, sys
            sys.path.insert(0, {str(ROOT / 'tests' / 'emitter')!r}); sys.path.insert(0, {str(ROOT / 'tests')!r})
            from emitter.emitter import Emitter
            from test_delivery_faults import conf, nested_records
            emitter = Emitter.from_config(conf({backend.url!r}, **{{"spool.dir": {str(tmp_path / 'spool')!r}}}),
                                          delivery_process=True)
            emitter.flush()  # the child is ready: from here on every full batch goes to it at once
            for record in nested_records(tasks=40)[:{2 * BATCH + 10}]:
                emitter.emit(record)
            os._exit(0)  # no close: the last 10 events never left this process
        """)
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=60)
        deadline = time.monotonic() + 10
        while len(backend.events) < 2 * BATCH and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    expected = [(r.run_id, r.event_type) for r in nested_records(tasks=40)[:2 * BATCH]]
    assert sorted(keys(backend.events)) == sorted(expected)


def test_the_transport_configuration_is_not_on_the_command_line(tmp_path):
    with Backend() as backend:
        emitter = Emitter.from_config(conf(backend.url, **{"spool.dir": str(tmp_path / "spool"),
                                                           "transport.auth.type": "api_key",
                                                           "transport.auth.apiKey": "s3cr3t-api-key"}),
                                      delivery_process=True)
        child = emitter.delivery._child
        command_line = Path(f"/proc/{child.pid}/cmdline").read_bytes()
        for record in nested_records(tasks=1):
            emitter.emit(record)
        emitter.close()
    assert b"s3cr3t-api-key" not in command_line
    assert {r["headers"].get("Authorization") for r in backend.requests} == {"Bearer s3cr3t-api-key"}


def test_a_configuration_that_is_not_plain_data_stays_in_the_process(tmp_path):
    import attrs
    import requests

    from emitter.config import load_config

    config = load_config(conf("http://127.0.0.1:9", **{"spool.dir": str(tmp_path / "spool")}))
    config = attrs.evolve(config, transport={**config.transport, "session": requests.Session()})
    emitter = Emitter(config, delivery_process=True)
    assert not isinstance(emitter.delivery, DeliveryProcess)
    emitter.close()


def test_a_child_that_cannot_start_loses_nothing(tmp_path, monkeypatch, caplog):
    """The child cannot import the emitter (another interpreter, a broken install): no event was handed to it,
    so all are delivered from this process, and the harvest's state may advance."""
    repo = str(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.realpath(p or ".") != repo])
    with Backend() as backend:
        counts, events = deliver(backend, tmp_path, process=True)
    records = nested_records()
    assert (counts.delivered, counts.dropped) == (len(records), 0)
    assert sorted(keys(events)) == sorted((r.run_id, r.event_type) for r in records)
    assert "delivery process could not start" in caplog.text


def test_ctrl_c_is_left_to_the_harvest(tmp_path):
    """Ctrl-C reaches the whole process group: the child keeps going, and the harvest's close() still gets every
    event delivered."""
    import signal

    with Backend() as backend:
        emitter = Emitter.from_config(conf(backend.url, **{"spool.dir": str(tmp_path / "spool")}),
                                      delivery_process=True)
        emitter.flush()  # the child is up and has installed its handlers
        os.kill(emitter.delivery._child.pid, signal.SIGINT)
        for record in nested_records():
            emitter.emit(record)
        emitter.flush()
        assert emitter.delivery._fallback is None  # still delivered by the child, not by this process instead
        counts = emitter.close()
    assert emitter.delivery._child.returncode == 0
    assert (counts.delivered, counts.dropped) == (len(nested_records()), 0)
    assert sorted(keys(backend.events)) == sorted((r.run_id, r.event_type) for r in nested_records())
