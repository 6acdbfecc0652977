"""Records -> events: every event validates against the official schemas, carries jobType, and ParentRun with
root; secrets never survive into the serialized event; run ids are UUIDv7 and deterministic when harvested."""
from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from openlineage.client.facet_v2 import (
    error_message_run,
    output_statistics_output_dataset,
    schema_dataset,
    sql_job,
)

from emitter.events import PRODUCER
from emitter.records import COMPLETE, FAIL, START, Dataset, JobRef, JobType, RunRecord, RunRef
from emitter.run_ids import new_run_id, stable_run_id
from emitter.serialize import event_dict
from lineage_capture.demo import demo_records

from ol_schema import assert_valid_event

T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)
APP = RunRef("01900000-0000-7000-8000-000000000001", JobRef("default", "my_app"))
AIRFLOW = RunRef("01900000-0000-7000-8000-000000000002", JobRef("airflow", "dag.task"))
DAG = RunRef("01900000-0000-7000-8000-000000000003", JobRef("airflow", "dag"))
SPARK = JobType("SQL_JOB", "SPARK")

# id, parent, root, expected parent facet job name, expected root job name (None: no parent facet)
PARENT_CASES = [
    ("no-parent", None, None, None, None),
    ("parent-is-root", APP, None, "my_app", "my_app"),
    ("explicit-root", APP, DAG, "my_app", "dag"),
    ("airflow-parent", AIRFLOW, DAG, "dag.task", "dag"),
]


@pytest.mark.parametrize("case_id, parent, root, parent_name, root_name", PARENT_CASES,
                         ids=[c[0] for c in PARENT_CASES])
def test_parent_and_root(case_id, parent, root, parent_name, root_name):
    record = RunRecord(START, T0, JobRef("default", "my_app.x"), new_run_id(T0), SPARK, parent=parent, root=root)
    event = event_dict(record)
    assert_valid_event(event)
    facet = event["run"]["facets"].get("parent")
    if parent_name is None:
        assert facet is None
        return
    assert (facet["job"]["namespace"], facet["job"]["name"]) == (parent.job.namespace, parent_name)
    assert facet["run"]["runId"] == parent.run_id
    assert facet["root"]["job"]["name"] == root_name
    assert facet["root"]["run"]["runId"] == (root or parent).run_id
    assert facet["_schemaURL"].endswith("ParentRunFacet.json#/$defs/ParentRunFacet")


def test_every_event_has_job_type_and_our_producer():
    facets = {
        "run": {"errorMessage": error_message_run.ErrorMessageRunFacet(message="boom", programmingLanguage="SQL")},
        "job": {"sql": sql_job.SQLJobFacet(query="INSERT INTO b SELECT * FROM a", dialect="tsql")},
    }
    out = Dataset("file", "/data/out", facets={"schema": schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name="id", type="long")])},
        io_facets={"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=3, size=120, fileCount=1)})
    record = RunRecord(FAIL, T0, JobRef("ns", "job"), new_run_id(), JobType("QUERY", "SQLSERVER", "BATCH"),
                       parent=APP, inputs=[Dataset("file", "/data/in")], outputs=[out],
                       run_facets=facets["run"], job_facets=facets["job"])
    event = event_dict(record)
    assert_valid_event(event)
    assert event["job"]["facets"]["jobType"]["jobType"] == "QUERY"
    assert event["job"]["facets"]["jobType"]["integration"] == "SQLSERVER"
    assert event["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert event["producer"] == PRODUCER
    assert {f["_producer"] for f in [*event["run"]["facets"].values(), *event["job"]["facets"].values()]} == \
        {PRODUCER}
    assert event["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert event["inputs"] == [{"namespace": "file", "name": "/data/in", "facets": {}}]


STATS = {"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=3)}
# io_containers, the output's io facets, what the input and the output carry besides namespace, name, facets
CONTAINER_CASES = [
    (False, {}, {}, {}),  # a harvest's events: no empty containers
    (False, STATS, {}, {"outputFacets": {"outputStatistics": {"rowCount": 3}}}),
    (True, {}, {"inputFacets": {}}, {"outputFacets": {}}),  # the JVM's SQL events: always a container
    (True, STATS, {"inputFacets": {}}, {"outputFacets": {"outputStatistics": {"rowCount": 3}}}),
]


@pytest.mark.parametrize("containers, io_facets, input_extra, output_extra", CONTAINER_CASES)
def test_empty_io_facet_containers_only_when_asked(containers, io_facets, input_extra, output_extra):
    inputs, outputs = [Dataset("file", "/in")], [Dataset("file", "/out", io_facets=io_facets)]
    for _ in range(2):  # the second time from the dataset memos: the container is not remembered into them
        event = event_dict(RunRecord(COMPLETE, T0, JobRef("n", "j"), new_run_id(), SPARK, inputs=inputs,
                                     outputs=outputs, io_containers=containers))
        assert_valid_event(event)
        assert event["inputs"] == [{"namespace": "file", "name": "/in", "facets": {}, **input_extra}]
        output = dict(event["outputs"][0])  # a copy: the event's datasets are shared with the memos
        if "outputFacets" in output:  # without the statistics facet's _producer and _schemaURL
            output["outputFacets"] = {k: {f: v for f, v in facet.items() if not f.startswith("_")}
                                      for k, facet in output["outputFacets"].items()}
        assert [output] == [{"namespace": "file", "name": "/out", "facets": {}, **output_extra}]
    assert "inputFacets" not in event_dict(RunRecord(START, T0, JobRef("n", "j"), new_run_id(), SPARK,
                                                     inputs=inputs))["inputs"][0]


def test_written_out_shell_equals_the_generic_walk():
    """event_dict writes the RunEvent/Run/Job shells out by hand: it must give what the generic walk of the whole
    RunEvent gives, and a field openlineage-python adds to those classes must fail here, not vanish."""
    import attrs
    from openlineage.client import event_v2

    from emitter import events, serialize
    from emitter.records import unvalidated

    for cls, written in serialize.SHELL_FIELDS.items():
        assert tuple(f.name for f in attrs.fields(cls)) == written, cls
    for record in demo_records():
        with unvalidated():
            whole = events._core_event(record, serialize._job(record)[0])
            whole.inputs = [events._input(ds) for ds in record.inputs]
            whole.outputs = [events._output(ds) for ds in record.outputs]
            if record.parent is not None:
                whole.run.facets["parent"] = events.parent_facet(record.parent, record.root)
        assert isinstance(whole, event_v2.RunEvent)
        assert event_dict(record) == serialize._plain(whole)


def test_demo_events_are_valid():
    for record in demo_records():
        assert_valid_event(event_dict(record))


def test_naive_event_time_is_taken_as_utc():
    record = RunRecord(START, datetime(2026, 1, 2, 3, 4, 5), JobRef("n", "j"), new_run_id(), SPARK)
    assert event_dict(record)["eventTime"] == "2026-01-02T03:04:05+00:00"


SECRETS_IN_RECORDS = [
    # (where, a record field holding a secret, the secret)
    ("sql facet", {"job_facets": {"sql": sql_job.SQLJobFacet(
        query="CREATE LOGIN etl WITH PASSWORD = 'Tr0ub4dor&3'")}}, "Tr0ub4dor&3"),
    ("error message", {"run_facets": {"errorMessage": error_message_run.ErrorMessageRunFacet(
        message="login failed for Server=db;UID=sa;PWD=hunter2;", programmingLanguage="python")}}, "hunter2"),
    ("dataset namespace", {"inputs": [Dataset("postgres://etl:pa55word@db:5432", "sales.public.orders")]},
     "pa55word"),
    ("dataset name", {"outputs": [Dataset("s3://bucket", "AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI@x/y")]},
     "AKIAIOSFODNN7EXAMPLE"),
]


@pytest.mark.parametrize("where, fields, secret", SECRETS_IN_RECORDS, ids=[c[0] for c in SECRETS_IN_RECORDS])
def test_secrets_never_reach_the_event(where, fields, secret):
    record = RunRecord(START, T0, JobRef("n", "j"), new_run_id(), SPARK, **fields)
    text = json.dumps(event_dict(record))
    assert secret not in text


def test_run_ids_are_uuid7_and_stable_for_harvested_runs():
    assert uuid.UUID(new_run_id()).version == 7
    a = stable_run_id(T0, "sqlserver", "q-1")
    assert uuid.UUID(a).version == 7
    assert a == stable_run_id(T0, "sqlserver", "q-1")
    assert a != stable_run_id(T0, "sqlserver", "q-2")
    assert a != stable_run_id(T0 + timedelta(milliseconds=1), "sqlserver", "q-1")
    assert stable_run_id(T0, "a", "bc") != stable_run_id(T0, "ab", "c")  # key parts do not run together
    later = stable_run_id(T0 + timedelta(hours=1), "sqlserver", "q-1")
    assert later > a  # time-ordered, as UUIDv7 promises


def test_our_log_lines_are_redacted_without_touching_the_hosts(caplog):
    import logging

    from emitter.log import install_redaction

    install_redaction(root_handlers=False)
    with caplog.at_level(logging.INFO):
        logging.getLogger("emitter.emitter").warning("delivery to %s failed", "http://etl:hunter2@marquez:5000")
        logging.getLogger("spark_plugin.lifecycle").warning("conf PWD=%s", "s3cr3t;")
        logging.getLogger("someones.app").warning("app says password=visible")  # not ours: left alone
    assert "hunter2" not in caplog.text and "s3cr3t" not in caplog.text
    assert "password=visible" in caplog.text


def test_a_facet_shared_by_start_and_complete_serializes_the_same_in_both():
    sql = sql_job.SQLJobFacet(query="INSERT INTO t SELECT * FROM s -- password=hunter2", dialect="tsql")
    run_id = new_run_id()
    start, complete = (event_dict(RunRecord(state, T0, JobRef("n", "j"), run_id, SPARK, job_facets={"sql": sql}))
                       for state in (START, COMPLETE))
    assert start["job"]["facets"]["sql"] == complete["job"]["facets"]["sql"]
    assert "hunter2" not in json.dumps(complete)


def test_each_facet_instance_serializes_to_its_own_content():
    # thousands of short-lived facets: ids get reused once instances are freed, contents must not be
    for i in range(3000):
        record = RunRecord(START, T0, JobRef("n", "j"), new_run_id(), SPARK,
                           job_facets={"sql": sql_job.SQLJobFacet(query=f"SELECT {i}")})
        assert event_dict(record)["job"]["facets"]["sql"]["query"] == f"SELECT {i}"


def test_a_facet_changed_after_it_was_handed_over_is_caught():
    """The memo rule (emitter/serialize.py): a facet instance is serialized once while recent; changing it after
    handing it over would make later events stale. The tests run with LINEAGE_CAPTURE_CHECK_MEMOS=1, which
    re-serializes every memo hit and raises MemoStale instead of sending the stale form."""
    from emitter import serialize

    assert serialize.CHECK_MEMOS
    facet = sql_job.SQLJobFacet(query="SELECT 1")
    job = JobRef("default", "memo_rule")
    first = RunRecord(START, T0, job, new_run_id(T0), SPARK, job_facets={"sql": facet})
    assert event_dict(first)["job"]["facets"]["sql"]["query"] == "SELECT 1"
    facet.query = "SELECT 2"  # the producer breaks the rule
    second = RunRecord(COMPLETE, T0, job, first.run_id, SPARK, job_facets={"sql": facet})
    with pytest.raises(serialize.MemoStale, match="changed after it was handed to the emitter"):
        event_dict(second)
