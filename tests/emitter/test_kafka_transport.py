"""The kafka transport through the real librdkafka (confluent-kafka): a broker that does not acknowledge an event
means the event is spooled, never counted delivered; messages keyed by job hierarchy; nothing on stderr. A broker
that acknowledges is librdkafka's own mock cluster (``test.mock.num.brokers``: the Kafka protocol served on
127.0.0.1 in this process), read back with a consumer."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from test_emitter_delivery import numbered_records

from emitter.emitter import Emitter
from emitter.kafka_transport import message_key
from emitter.transport import create_transport

from harvest_cli import brief, run_harvest
from http_backend import free_port
from ol_schema import assert_valid_event
from paths import SHARED


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


@pytest.fixture
def kafka_broker() -> Iterator[str]:
    """``host:port`` of a broker that acknowledges: librdkafka's mock cluster, alive while its creator is."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    creator = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    brokers = creator.list_topics(timeout=10).brokers.values()
    yield ",".join(f"{broker.host}:{broker.port}" for broker in brokers)
    del creator


def consumed(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[tuple[int, str, dict]]:
    """The first ``count`` messages of every partition of ``topic``: (partition, key, event), each partition's in
    its order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False,
                         "log_level": 0})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[tuple[int, str, dict]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append((message.partition(), message.key().decode(), json.loads(message.value())))
        assert not consumer.poll(0.5), "more messages than were emitted"
        return out
    finally:
        consumer.close()


def test_a_broker_that_acknowledges_gets_every_event_once_keyed_by_run_in_order(kafka_broker, capfd):
    conf = {"transport.type": "kafka", "transport.topicName": "lineage",
            "transport.properties.bootstrap.servers": kafka_broker}
    emitter = Emitter.from_config(conf)
    records = numbered_records(4)
    for record in records:
        emitter.emit(record)
    counts = emitter.close()
    assert (counts.delivered, counts.spooled, counts.dropped) == (8, 0, 0)
    assert emitter.spool.pending_bytes() == 0
    messages = consumed(kafka_broker, "lineage", 8)
    for _, key, event in messages:
        assert_valid_event(event)
        assert key == message_key(event) == f"run:test/{event['job']['name']}"
    assert sorted((e["run"]["runId"], e["eventType"]) for _, _, e in messages) == \
        sorted((r.run_id, r.event_type) for r in records)
    # one key, one partition: a run's events are read in the order they were emitted
    for key in {key for _, key, _ in messages}:
        assert len({p for p, k, _ in messages if k == key}) == 1
        assert [e["eventType"] for _, k, e in messages if k == key] == ["START", "COMPLETE"]
    assert capfd.readouterr().err == ""


def test_a_message_refused_for_its_size_is_set_aside_and_the_rest_go_on(kafka_broker):
    """A permanent refusal of one message (here librdkafka's: over its ``message.max.bytes``, 1 MB; the mock
    broker enforces no limit of its own, a real broker answers the same error) must not hold the events behind it
    in the spool for ever (it did: every later event was spooled, and each replay stopped at it): it goes to the
    dead letters."""
    conf = {"transport.type": "kafka", "transport.topicName": "lineage",
            "transport.properties.bootstrap.servers": kafka_broker}
    records = numbered_records(3)
    huge = attrs.evolve(records[2], run_facets={"big": {"_producer": "p", "_schemaURL": "https://x/y#/$defs/Big",
                                                        "blob": "x" * 1_500_000}})
    emitter = Emitter.from_config(conf)
    for record in [*records[:2], huge, *records[3:]]:
        emitter.emit(record)
    counts = emitter.close()
    assert (counts.delivered, counts.dead_lettered, counts.spooled, counts.dropped) == (5, 1, 0, 0)
    letters = emitter.spool.dead_letters()
    assert [(letter["status"], letter["event"]["run"]["runId"], letter["event"]["eventType"]) for letter in letters] \
        == [(413, huge.run_id, "START")]
    assert "Message size too large" in letters[0]["answer"]
    delivered = [(e["run"]["runId"], e["eventType"]) for _, _, e in consumed(kafka_broker, "lineage", 5)]
    assert sorted(delivered) == sorted((r.run_id, r.event_type) for r in records if r is not records[2])


def test_a_harvest_delivered_to_kafka_advances_its_state(kafka_broker, tmp_path: Path):
    """The cron path end to end: ``harvest sqlserver`` with the kafka transport delivers the events a file
    transport gets, and its state advances (it advances only after delivery)."""
    log = SHARED / "xevents-samples" / "01_sql_statement_completed_insert_select.xml"
    args = ["sqlserver", "--server", "db01:1433", "--xml", str(log)]
    code, expected = run_harvest(tmp_path / "file.jsonl", args)
    assert code == 0 and expected
    state = tmp_path / "state.json"
    conf = ["transport.type=kafka", "transport.topicName=lineage",
            f"transport.properties.bootstrap.servers={kafka_broker}"]
    code, _ = run_harvest(tmp_path / "unused.jsonl", [*args, "--state", str(state)], conf)
    assert code == 0
    assert json.loads(state.read_text())["files"][str(log)]["offset"] == log.stat().st_size
    events = [event for _, _, event in consumed(kafka_broker, "lineage", len(expected))]
    assert sorted(map(str, map(brief, events))) == sorted(map(str, map(brief, expected)))
