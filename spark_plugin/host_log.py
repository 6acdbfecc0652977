"""Where the plugin's warnings go inside a Spark driver: where Spark's own warnings go.

spark-submit copies the Python driver's stderr into its stdout, so a Python warning printed by logging's
last-resort handler lands in the application's output. While an application is instrumented, the plugin's
loggers (``spark_plugin``, ``emitter``) and openlineage-python's get one :class:`Log4jHandler`: when the host
has configured no Python logging (no handler on the root logger), each record goes to the JVM's log4j logger
``lineage_capture``, so it appears formatted like Spark's lines, obeys ``sc.setLogLevel`` and the
application's log4j configuration.
When the host did configure Python logging, records propagate to its handlers as usual and nothing else is
written. Without a reachable JVM (it stopped) a record falls back to one stderr line.

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

_state: dict[str, Any] = {"handler": None}


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
    for name in LOGGERS:
        logging.getLogger(name).addHandler(handler)


def uninstall() -> None:
    """Detach the handler (idempotent)."""
    handler = _state["handler"]
    if handler is None:
        return
    for name in LOGGERS:
        logging.getLogger(name).removeHandler(handler)
    _state["handler"] = None


def configured_file(transport: Mapping[str, Any] | None, source: str) -> bool:
    """Whether events go to a file transport the user configured (not the embedded default): its path needs no
    announcement, the user knows where events go."""
    return bool(transport) and str((transport or {}).get("type", "")).lower() == "file" \
        and source != "embedded default"
