"""Where the plugin's warnings go inside a Spark driver: where Spark's own warnings go.

spark-submit copies the Python driver's stderr into its stdout, so a Python warning printed by logging's
last-resort handler lands in the application's output. While an application is instrumented, the plugin's
loggers (``spark_plugin``, ``emitter``) and openlineage-python's get one :class:`Log4jHandler`: when the host
has configured no Python logging (no handler on the root logger), each record goes to the JVM's log4j logger
``lineage_capture``, so it appears formatted like Spark's lines, obeys ``sc.setLogLevel`` and the
application's log4j configuration.
When the host did configure Python logging, our warnings and errors reach its handlers (as propagation would
take them) and nothing else is written; our INFO records do not (an application logging at INFO did it for its own
lines), nor do the INFO lines of py4j's callback server, which runs only for the plugin. Without a reachable
JVM (it stopped) a record falls back to one stderr line.

The emitter's file transport announces its file on stderr once per process; the plugin builds its emitter with
``announce_file=False`` when the transport was configured (:func:`configured_file`), so a configured run prints
nothing.
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

#: The loggers that log inside a Spark driver for the plugin: ours, and openlineage-python's (its transports and
#: helpers warn through logging too: a bad transport class name, a failed request).
LOGGERS = ("spark_plugin", "emitter", "openlineage")
#: The log4j (slf4j) logger name our records are written under.
JVM_LOGGER = "lineage_capture"

#: py4j's loggers, and the start of the messages its callback server logs below WARNING: the server runs only for
#: the plugin's listener, so an application logging at INFO would see lines it never had without the plugin.
PY4J_LOGGERS = ("py4j.java_gateway", "py4j.clientserver")
CALLBACK_NOISE = ("Callback Server Starting", "Socket listening on", "Received command ",
                  "Python Server ready to receive messages", "Callback Connection ready to receive messages")

_state: dict[str, Any] = {"handler": None, "filters": None}


class _ToHostLogging(logging.Handler):
    """Our records that reach the host's own Python logging: warnings and errors only. Our loggers do not
    propagate while the plugin runs; this handler hands those records to the root logger, as propagation would
    have. An application that configured INFO logging did it for its own lines: our INFO records (the end's
    delivery summary) go only to Spark's log4j (:class:`Log4jHandler`), where they went without such logging."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        root = logging.getLogger()
        if root.handlers:  # (none: Log4jHandler writes it; the root's last-resort stderr line would be ours)
            root.handle(record)


class _CallbackNoise(logging.Filter):
    """On py4j's loggers: its callback server's INFO/DEBUG lines (see :data:`CALLBACK_NOISE`) are dropped, and the
    closing of connections that only the plugin opened: those of its threads and of the callback server's (threads
    py4j starts outside ``threading``: ``Dummy-N``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        message = record.getMessage()
        if message.startswith(CALLBACK_NOISE):
            return False
        return not (message.startswith("Closing down clientserver connection")
                    and (record.threadName or "").startswith(("Dummy-", "lineage-capture")))


class Log4jHandler(logging.Handler):
    """Writes records to the JVM's slf4j logger when the host has no Python logging of its own."""

    def __init__(self, jvm: Any) -> None:
        super().__init__(logging.DEBUG)
        self._jvm = jvm
        self._logger: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:  # the host configured Python logging: propagation reaches it
            return
        try:
            message = self.format(record)
            if self._logger is None:
                self._logger = self._jvm.org.slf4j.LoggerFactory.getLogger(JVM_LOGGER)
            if record.levelno >= logging.ERROR:
                self._logger.error(message)
            elif record.levelno >= logging.WARNING:
                self._logger.warn(message)
            elif record.levelno >= logging.INFO:
                self._logger.info(message)
            else:
                self._logger.debug(message)
        except Exception:  # noqa: BLE001 - the JVM is gone (or py4j is closed): one plain line instead
            try:
                sys.stderr.write(f"WARN {JVM_LOGGER}: {record.getMessage()}\n")
            except Exception:  # noqa: BLE001 - stderr closed at shutdown: nothing more to do
                pass


def install(jvm: Any) -> None:
    """Attach the log4j handler to our loggers (idempotent; the first application's JVM is used)."""
    if _state["handler"] is not None:
        return
    from emitter.log import RedactingFilter

    handler = Log4jHandler(jvm)
    handler.setFormatter(logging.Formatter("%(message)s"))
    # here as well as on the loggers: a module logger openlineage-python creates after the plugin started (its
    # modules are imported on a thread meanwhile) has no filter of its own
    handler.addFilter(RedactingFilter())
    _state["handler"] = handler
    to_host = _ToHostLogging()
    to_host.addFilter(RedactingFilter())
    noise = _CallbackNoise()
    _state["filters"] = (to_host, noise, {name: logging.getLogger(name).propagate for name in LOGGERS})
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.addHandler(to_host)
        logger.propagate = False
    for name in PY4J_LOGGERS:
        logging.getLogger(name).addFilter(noise)


def uninstall() -> None:
    """Detach the handler (idempotent)."""
    handler = _state["handler"]
    if handler is None:
        return
    to_host, noise, propagate = _state["filters"]
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.removeHandler(handler)
        logger.removeHandler(to_host)
        logger.propagate = propagate[name]
    for name in PY4J_LOGGERS:
        logging.getLogger(name).removeFilter(noise)
    _state["handler"] = _state["filters"] = None


def configured_file(transport: Mapping[str, Any] | None, source: str) -> bool:
    """Whether events go to a file transport the user configured (not the embedded default), alone or as a member
    of a composite: its path needs no announcement, the user knows where events go."""
    return bool(transport) and str((transport or {}).get("type", "")).lower() in ("file", "composite") \
        and source != "embedded default"
