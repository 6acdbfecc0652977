"""Logging set-up: every line our packages log passes through the redaction filter."""
from __future__ import annotations

import logging

#: Loggers whose records are redacted: ours, and openlineage-python's (it logs transport configs).
REDACTED_LOGGERS = ("emitter", "harvesters", "spark_plugin", "openlineage")


def install_redaction(*, root_handlers: bool) -> None:
    """Attach the redacting filter to our loggers and, in our own command-line processes, to the root
    logger's handlers (idempotent).

    A filter on a logger only sees records created on that very logger, so each of our module loggers
    (``emitter.emitter``, ``spark_plugin.lifecycle``...) gets one. Inside a host process (a Spark driver) the
    host's handlers are left alone: redacting the application's own log lines is not ours to do.
    """
    from emitter.redact import RedactingFilter

    def ensure(target: logging.Filterer) -> None:
        if not any(isinstance(f, RedactingFilter) for f in target.filters):
            target.addFilter(RedactingFilter())

    names = [name for name in list(logging.Logger.manager.loggerDict)
             if name.split(".", 1)[0] in REDACTED_LOGGERS]
    for name in {*REDACTED_LOGGERS, *names}:
        ensure(logging.getLogger(name))
    if root_handlers:
        for handler in logging.getLogger().handlers:
            ensure(handler)


def configure_cli_logging(level: int = logging.INFO) -> None:
    """Command-line tools: plain ``level: message`` lines on stderr, redacted."""
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    logging.getLogger("openlineage").setLevel(logging.WARNING)
    install_redaction(root_handlers=True)
