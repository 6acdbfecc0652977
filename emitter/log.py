"""Logging set-up: every line our packages log passes through the redaction filter."""
from __future__ import annotations

import logging

#: Loggers whose records are redacted: ours, and openlineage-python's (it logs transport configs).
REDACTED_LOGGERS = ("emitter", "harvesters", "spark_plugin", "openlineage")


def install_redaction() -> None:
    """Attach the redacting filter to every handler of the root logger and to our package loggers (idempotent).

    A filter on a logger only sees records created on that very logger, so module loggers
    (``emitter.emitter``...) are covered through the handlers that finally write the lines.
    """
    from emitter.redact import RedactingFilter

    def ensure(target: logging.Filterer) -> None:
        if not any(isinstance(f, RedactingFilter) for f in target.filters):
            target.addFilter(RedactingFilter())

    for name in REDACTED_LOGGERS:
        ensure(logging.getLogger(name))
    for handler in logging.getLogger().handlers:
        ensure(handler)


def configure_cli_logging(level: int = logging.INFO) -> None:
    """Command-line tools: plain ``level: message`` lines on stderr, redacted."""
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    logging.getLogger("openlineage").setLevel(logging.WARNING)
    install_redaction()
