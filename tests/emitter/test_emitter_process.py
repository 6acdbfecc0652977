"""The emitter in a child process (emitter/emitter_process.py), as the Spark plugin's driver uses it: the same events
as an emitter in the process itself, facets described as deferred calls; nothing lost when the child cannot start,
dies, or does not answer (the records it had not taken are emitted here); the end within its budget against a
backend that refuses or hangs (everything spooled at once); the host's death leaves the child to deliver what it
was handed; setup errors reported to the host; the child's log records on the host's loggers."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from test_delivery_faults import conf, keys, nested_records

from emitter import process_launch
from emitter.config import load_config
from emitter.deferred import facet_v2
from emitter.emitter import Emitter
from emitter.emitter_process import EmitterProcess
from emitter.records import COMPLETE, START, Dataset, JobRef, JobType, RunRecord, RunRef
from emitter.spool import decode_record

from http_backend import Backend, free_port

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
APP = RunRef("01900000-0000-7000-8000-00000000a000", JobRef("ns", "app"))


def spark_like_records(n: int = 5) -> list[RunRecord]:
    """An application and ``n`` actions whose facets are deferred calls (as the Spark plugin describes them)."""
    schema = facet_v2.schema_dataset.SchemaDatasetFacet(fields=[
        facet_v2.schema_dataset.SchemaDatasetFacetFields(name="id", type="long"),
        facet_v2.schema_dataset.SchemaDatasetFacetFields(name="v", type="string", description="a value")])
    engine = {"processing_engine": facet_v2.processing_engine_run.ProcessingEngineRunFacet(
        version="4.0", name="spark", openlineageAdapterVersion="1")}
    app_type, sql_type = JobType("APPLICATION", "SPARK", "NONE"), JobType("SQL_JOB", "SPARK")
    out = [RunRecord(START, T0, APP.job, APP.run_id, app_type, run_facets=engine)]
    for i in range(n):
        run_id = f"01900000-0000-7000-8000-0000000b{i:04d}"
        output = Dataset("file", f"/out/t{i}", facets={"schema": schema}, io_facets={
            "outputStatistics": facet_v2.output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=i, size=10 * i)})
        job = JobRef("ns", f"app.write.t{i}")
        sql = {"sql": facet_v2.sql_job.SQLJobFacet(query=f"insert into t{i} select 1", dialect="spark")}
        out.append(RunRecord(START, T0, job, run_id, sql_type, parent=APP, run_facets=engine, job_facets=sql))
        out.append(RunRecord(COMPLETE, T0, job, run_id, sql_type, parent=APP, outputs=[output], run_facets=engine,
                             job_facets=sql))
    out.append(RunRecord(COMPLETE, T0, APP.job, APP.run_id, app_type, run_facets=engine))
    return out


def start(config, *, announce: str | None = None, end_timeout: float = 5.0,
          errors: list | None = None, child: subprocess.Popen | None = None) -> EmitterProcess:
    process = EmitterProcess.start(load_config(config), end_timeout=end_timeout, stall_s=0.3, announce_logger=announce,
                                   fallback=lambda: Emitter(load_config(config), announce_file=False),
                                   on_setup_error=lambda kind, message: (errors if errors is not None else []).append(
                                       (kind, message)), child=child)
    assert process is not None
    return process


def file_conf(path: Path, **extra: str) -> dict[str, str]:
    return {"transport.type": "file", "transport.log_file_path": str(path), "transport.append": "true", **extra}


def read_events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def spooled_events(path: Path) -> list[dict]:
    return [decode_record(line) for line in path.read_bytes().splitlines(keepends=True)]


def test_the_same_events_as_an_emitter_in_the_process(tmp_path):
    """Byte for byte the events an in-process emitter writes for the same records (facets built in the child)."""
    process = start(file_conf(tmp_path / "child.jsonl"))
    for record in spark_like_records():
        process.emit(record)
    counts = process.close()
    here = Emitter(load_config(file_conf(tmp_path / "here.jsonl")), announce_file=False)
    for record in spark_like_records():
        here.emit(record)
    here.close()
    assert (tmp_path / "child.jsonl").read_bytes() == (tmp_path / "here.jsonl").read_bytes()
    events = read_events(tmp_path / "child.jsonl")
    assert len(events) == counts.delivered == 12 and counts.spooled == counts.dropped == 0
    output = events[2]["outputs"][0]
    assert output["facets"]["schema"]["fields"][1] == {"name": "v", "type": "string", "description": "a value",
                                                   "fields": []}
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 0
    assert events[2]["job"]["facets"]["sql"]["query"] == "insert into t0 select 1"


@pytest.mark.parametrize("early", ["alive", "dead"])
def test_a_child_started_early_is_adopted_and_takes_the_hosts_state(tmp_path, monkeypatch, early):
    """A child launched before its settings (as the Spark plugin's start-up hook launches it) is adopted while it
    runs, and works in the host's working directory of the moment it gets them: a relative events file lands where
    the host is then. One that died meanwhile is replaced by a new child: nothing is emitted in the host."""
    child = process_launch.launch("", ["openlineage.client.facet_v2"])
    if early == "dead":
        child.kill()
        child.wait()
    monkeypatch.chdir(tmp_path)
    process = start(file_conf(Path("events.jsonl")), child=child)
    assert (process._child is child) == (early == "alive")
    records = spark_like_records()
    for record in records:
        process.emit(record)
    counts = process.close()
    assert process._fallback is None
    assert (counts.delivered, counts.spooled, counts.dropped) == (len(records), 0, 0)
    assert len(read_events(tmp_path / "events.jsonl")) == len(records)


@pytest.mark.parametrize("how", ["cannot start", "killed before taking anything", "killed at the end"])
def test_records_the_child_did_not_take_are_emitted_here(tmp_path, monkeypatch, how, caplog):
    if how == "cannot start":
        monkeypatch.setattr(process_launch, "CHILD_MAIN", "import sys; sys.exit(3)")
    process = start(file_conf(tmp_path / "events.jsonl"))
    if how == "killed before taking anything":
        process._child.kill()
        process._child.wait()
        time.sleep(0.2)
    records = spark_like_records()
    if how == "killed at the end":
        os.kill(process._child.pid, signal.SIGSTOP)  # stopped: it takes nothing, then dies at the end
    for record in records:
        process.emit(record)
    if how == "killed at the end":
        process._child.kill()
    with caplog.at_level(logging.WARNING):
        counts = process.close()
    # a child found dead before the end: emitted here; at the end (the budget spent): spooled, not sent
    events = read_events(tmp_path / "events.jsonl")
    spooled = spooled_events(process.spool.events_path) if process.spool.events_path.exists() else []
    assert counts.spooled == len(spooled)
    events += spooled
    assert sorted(keys(events)) == sorted(set(keys(events)))
    assert set(keys(events)) == {(r.run_id, r.event_type) for r in records}
    assert counts.dropped == 0
    assert "the lineage delivery process" in caplog.text


@pytest.mark.parametrize("fault", ["refuse", "hang"])
def test_the_end_spools_at_once_when_the_backend_stalls(tmp_path, fault):
    records = nested_records(tasks=2)
    extra = {"spool.dir": str(tmp_path / "spool")}
    if fault == "refuse":
        url, backend = f"http://127.0.0.1:{free_port()}", None
    else:
        backend = Backend(hang=True).__enter__()
        url = backend.url
    try:
        process = start(conf(url, **extra), end_timeout=5.0)
        for record in records:
            process.emit(record)
        began = time.monotonic()
        counts = process.close()
        took = time.monotonic() - began
    finally:
        if backend is not None:
            backend.__exit__(None, None, None)
    spooled = spooled_events(next((tmp_path / "spool").rglob("events.jsonl")))
    assert sorted(keys(spooled)) == sorted((r.run_id, r.event_type) for r in records)
    assert counts.spooled == len(records) and counts.delivered == 0 and counts.dropped == 0
    if fault == "hang":  # (a refused connection is spooled by the delivery itself, before the end)
        assert process.spooled_at_end is not None and process.spooled_at_end[:3] == (len(records), 0, [])
    assert took < 2.5, took  # the stall is seen after 0.3 s (the child may still be importing when it ends)


def test_spool_now_spools_what_the_child_holds_then_the_records_given(tmp_path):
    records = nested_records(tasks=1)
    process = start(conf(f"http://127.0.0.1:{free_port()}", **{"spool.dir": str(tmp_path / "spool")}))
    for record in records[:-3]:
        process.emit(record)
    spooled, dropped, problem, events_path = process.spool_now(records[-3:])
    counts = process.close()
    assert (spooled, dropped, problem) == (len(records), 0, [])
    assert sorted(keys(spooled_events(Path(events_path)))) == sorted((r.run_id, r.event_type) for r in records)
    assert counts.spooled == len(records) and counts.dropped == 0


def test_a_transport_it_cannot_build_is_reported_to_the_host(tmp_path):
    errors: list = []
    process = start({"transport.type": "http"}, errors=errors)
    process.emit(spark_like_records()[0])
    process.close()
    assert errors and errors[0][0] == "ValueError" and "url" in errors[0][1].lower()
    assert process.disabled


def test_the_childs_log_records_reach_the_hosts_loggers(tmp_path, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO):
        process = start({}, announce="spark_plugin")  # the default file: announced on the host's logger
        process.emit(spark_like_records()[0])
        process.close()
    announced = [r for r in caplog.records if r.name == "spark_plugin" and "appended to" in r.getMessage()]
    assert len(announced) == 1 and announced[0].levelno == logging.WARNING
    assert any(r.name.startswith("emitter") and "lineage events: 1 delivered" in r.getMessage()
               for r in caplog.records)


def test_a_host_that_dies_leaves_the_child_to_deliver_what_it_was_handed(tmp_path):
    """The host is SIGKILLed right after handing the records over: the child still writes them all, then ends."""
    events_file = tmp_path / "events.jsonl"
    host = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests" / "emitter")!r}, {str(ROOT / "tests")!r}]
        from test_emitter_process import spark_like_records, start, file_conf
        from pathlib import Path
        process = start(file_conf(Path({str(events_file)!r})))
        for record in spark_like_records():
            process.emit(record)
        process._flush_outbox()
        print(process._child.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    ran = subprocess.run([sys.executable, "-c", host], capture_output=True, text=True, timeout=60)
    assert ran.returncode == -signal.SIGKILL
    child = int(ran.stdout.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)
    assert len(read_events(events_file)) == len(spark_like_records())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_the_transport_types_a_host_checks_are_the_factorys():
    """A Spark driver checks the transport type itself (its emitter's child would say it too late): with the same
    names as the factory that builds the transports."""
    from emitter.transport import KNOWN_TYPES, _factory

    assert set(_factory().transports) == KNOWN_TYPES
