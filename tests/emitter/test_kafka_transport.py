"""The kafka transport through the real librdkafka (confluent-kafka): a broker that does not acknowledge an event
means the event is spooled, never counted delivered; messages keyed by job hierarchy; nothing on stderr."""
from __future__ import annotations

import sys

import pytest
from test_emitter_delivery import numbered_records

from emitter.emitter import Emitter
from emitter.kafka_transport import message_key
from emitter.transport import create_transport

from http_backend import free_port


def kafka_conf(port: int) -> dict[str, str]:
    return {"transport.type": "kafka", "transport.topicName": "lineage",
            "transport.properties.bootstrap.servers": f"127.0.0.1:{port}",
            "transport.properties.message.timeout.ms": "1000"}


def test_an_unreachable_broker_spools_every_event_and_prints_nothing(capfd, caplog):
    emitter = Emitter.from_config(kafka_conf(free_port()))
    for record in numbered_records(3):
        emitter.emit(record)
    counts = emitter.close()
    assert (counts.delivered, counts.spooled, counts.dropped) == (0, 6, 0)
    assert emitter.spool.pending_bytes() > 0
    assert "Message timed out" in (emitter.delivery_failure or "")
    assert capfd.readouterr().err == ""  # librdkafka's own lines go through logging, each kind once
    assert [(r.getMessage()[:4], r.levelname) for r in caplog.records if "librdkafka" in r.name] == \
        [("FAIL", "WARNING")]
    assert not [r for r in caplog.records if "flush failed" in r.getMessage()]  # (its `flush` is a bool)


def test_without_confluent_kafka_the_configuration_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # as if not installed
    with pytest.raises(ValueError, match=r"needs confluent-kafka: pip install 'lineage-capture\[kafka\]'"):
        create_transport({"type": "kafka", "topic": "t", "config": {"bootstrap.servers": "127.0.0.1:9"}})


def test_a_bad_producer_setting_is_a_configuration_error():
    with pytest.raises(ValueError, match='No such configuration property: "bootstrap"'):
        create_transport({"type": "kafka", "topic": "t", "config": {"bootstrap": "127.0.0.1:9"}})


PARENT = {"run": {"runId": "p"}, "job": {"namespace": "airflow", "name": "dag.task"}}


@pytest.mark.parametrize("event, key", [
    ({"eventType": "START", "run": {"runId": "r"}, "job": {"namespace": "ns", "name": "job"}}, "run:ns/job"),
    ({"eventType": "START", "run": {"runId": "r", "facets": {"parent": PARENT}},
      "job": {"namespace": "ns", "name": "job"}}, "run:airflow/dag.task"),
    ({"eventType": "START", "run": {"runId": "r", "facets": {"parent": {
        **PARENT, "root": {"run": {"runId": "q"}, "job": {"namespace": "airflow", "name": "dag"}}}}},
      "job": {"namespace": "ns", "name": "job"}}, "run:airflow/dag"),
    ({"eventType": "START", "run": {"runId": "r", "facets": {"parent": "odd"}},
      "job": {"namespace": "ns", "name": "job"}}, "run:ns/job"),
    ({"dataset": {"namespace": "s3://b", "name": "k"}}, "dataset:s3://b/k"),
    ({"job": {"namespace": "ns", "name": "j"}}, "job:ns/j"),
], ids=["own-job", "parent", "root", "odd-parent", "dataset-event", "job-event"])
def test_messages_are_keyed_by_job_hierarchy(event, key):
    assert message_key(event) == key
