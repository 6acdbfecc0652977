"""The kafka transport: an event counts as delivered only once the broker acknowledged it.

openlineage-python's ``KafkaTransport`` hands each event to the producer and waits (``flush``) without reading
the outcome: a broker that is unreachable, or refuses the topic, costs the event after ``message.timeout.ms``
(five minutes by default) and only a log line says so, so every event was counted delivered, nothing spooled.
Its ``flush`` is a setting (a bool), which the emitter's flush called. It keys messages only for its own event
classes: the emitter's events (dicts) went to random partitions, so a run's events could be read out of order.

Here ``emit`` waits for the broker's answer to this event and raises when it is not an acknowledgement (the
delivery spools the event), keys each run's events by its root job as openlineage-python does for its classes
(one partition per job hierarchy: read in order), and bounds the wait by ``message.timeout.ms``
(:data:`DEFAULT_MESSAGE_TIMEOUT_MS` unless configured): a dead broker costs one such wait, then the delivery's
back-off. Each event waits for its acknowledgement (``flush: false`` would count unacknowledged events delivered).
A refusal of the message itself (:data:`MESSAGE_REFUSALS`: too large, invalid) raises
:class:`~emitter.delivery.EventRefused`: the event is set aside as a dead letter and delivery goes on.
"""
from __future__ import annotations

import logging
from typing import Any

import orjson
from openlineage.client.transport.kafka import KafkaConfig
from openlineage.client.transport.transport import Transport

from emitter.delivery import EventRefused

#: How long the broker has to acknowledge an event before it is a failure for now (librdkafka's default is five
#: minutes: each event of a run with the broker down would have waited that long). ``message.timeout.ms`` sets it.
DEFAULT_MESSAGE_TIMEOUT_MS = 10_000


class _OncePerFacility(logging.Filter):
    """librdkafka repeats a line at each reconnection (every second while the broker is down): each kind
    (its facility, e.g. ``FAIL``) is logged once per process, at most as a warning (a broker that refuses the
    connection is what an http backend that refuses it is: a failure for now, the delivery's own warning)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        facility = str(record.getMessage()).split(" ", 1)[0]
        if facility in self.seen:
            return False
        self.seen.add(facility)
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _librdkafka_log() -> logging.Logger:
    logger = logging.getLogger(f"{__name__}.librdkafka")
    if not any(isinstance(f, _OncePerFacility) for f in logger.filters):
        logger.addFilter(_OncePerFacility())
    return logger


#: Kafka's refusals of one message, never of the topic or the broker (by librdkafka's names): sending it again
#: cannot help, and in the spool it would hold every later event back for ever. Set aside as dead letters under the
#: HTTP status of the same refusal.
MESSAGE_REFUSALS = {"MSG_SIZE_TOO_LARGE": 413, "INVALID_MSG_SIZE": 413, "INVALID_MSG": 400, "INVALID_RECORD": 400}


class KafkaDeliveryError(ConnectionError):
    """The broker did not acknowledge the event: a failure for now (the event is spooled)."""


def message_key(event: Any) -> str | None:
    """``run:<namespace>/<name>`` of the run's root job (else its parent's, else its own): the events of one job
    hierarchy share a partition and are read in the order sent, as openlineage-python keys its event classes."""
    if not isinstance(event, dict):
        return None
    job = event["job"] if isinstance(event.get("job"), dict) else {}
    facets = event["run"].get("facets") if isinstance(event.get("run"), dict) else None
    parent = facets.get("parent") if isinstance(facets, dict) else None
    if isinstance(parent, dict):
        for ref in (parent.get("root"), parent):
            ref_job = ref.get("job") if isinstance(ref, dict) else None
            if isinstance(ref_job, dict) and ref_job.get("namespace") and ref_job.get("name"):
                return f"run:{ref_job['namespace']}/{ref_job['name']}"
    if "run" not in event:  # a dataset or job event
        dataset = event.get("dataset")
        if isinstance(dataset, dict):
            return f"dataset:{dataset.get('namespace')}/{dataset.get('name')}"
        return f"job:{job.get('namespace')}/{job.get('name')}"
    return f"run:{job.get('namespace')}/{job.get('name')}"


class CheckedKafkaTransport(Transport):
    """openlineage-python's kafka configuration (``topic``, ``config``, ``messageKey``), delivered as the module
    docstring says."""

    kind = "kafka"
    config_class = KafkaConfig

    def __init__(self, config: KafkaConfig) -> None:
        try:
            import confluent_kafka
        except ModuleNotFoundError:
            raise ValueError("the kafka transport needs confluent-kafka: pip install "
                             "'lineage-capture[kafka]'") from None
        self.config = config
        settings: dict[str, Any] = {str(k): v for k, v in config.config.items()}
        settings.setdefault("message.timeout.ms", DEFAULT_MESSAGE_TIMEOUT_MS)
        # librdkafka writes its own log lines to stderr (a host that must print nothing, a Spark driver): through
        # Python's logging instead, where every other line of ours goes
        settings.setdefault("logger", _librdkafka_log())
        self._wait_s = float(settings["message.timeout.ms"]) / 1000 + 1.0  # (librdkafka reports by then)
        self.producer = confluent_kafka.Producer(settings)  # a bad setting raises KafkaException: said at start
        self._exception = confluent_kafka.KafkaException
        self._refusals = {getattr(confluent_kafka.KafkaError, name): status
                          for name, status in MESSAGE_REFUSALS.items()}

    def emit(self, event: Any) -> None:
        answers: list[Any] = []
        if isinstance(event, dict):
            value = orjson.dumps(event)
        else:
            from openlineage.client.serde import Serde

            value = Serde.to_json(event).encode("utf-8")
        try:  # (librdkafka refuses a message over its message.max.bytes here, before any broker sees it)
            self.producer.produce(self.config.topic, value=value, key=self.config.messageKey or message_key(event),
                                  on_delivery=lambda error, _message: answers.append(error))
        except self._exception as error:
            self._raise_if_refused(error.args[0] if error.args else None)
            raise
        if self.producer.flush(self._wait_s) or not answers:  # not even a timeout reported: taken back, a failure
            self.producer.purge()
            self.producer.flush(0)
            raise KafkaDeliveryError(f"kafka topic {self.config.topic!r}: no acknowledgement within "
                                     f"{self._wait_s:g} s")
        if answers[0] is not None:
            self._raise_if_refused(answers[0])
            raise KafkaDeliveryError(f"kafka topic {self.config.topic!r}: {answers[0].str()}")

    def _raise_if_refused(self, error: Any) -> None:
        """Raise :class:`EventRefused` when librdkafka's ``error`` (a KafkaError) refuses this one message."""
        status = self._refusals.get(error.code()) if hasattr(error, "code") else None
        if status is not None:
            raise EventRefused(status, f"kafka topic {self.config.topic!r}: {error.str()}")

    def close(self, timeout: float = -1) -> bool:
        return not self.producer.flush(max(timeout, 0.0) if timeout >= 0 else self._wait_s)
