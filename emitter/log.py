"""Logging set-up: every line our packages log passes through the redaction filter."""
from __future__ import annotations

import logging

#: Loggers whose records are redacted: ours, and openlineage-python's (it logs transport configs).
REDACTED_LOGGERS = ("emitter", "harvesters", "spark_plugin", "openlineage")


class RedactingFilter(logging.Filter):
    """Logging filter that redacts the formatted message, exception text and stack of each record.

    Attach it to *handlers* (``handler.addFilter(RedactingFilter())``): logger-level filters do not
    see records propagated from child loggers. The message is formatted here once (``msg % args``)
    and ``args`` cleared, so secrets passed as arguments are masked too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - bad format args: still never let the raw text through unredacted
            message = f"{record.msg} {record.args!r}"
        from emitter.redact import redact  # compiled on the first line logged: start-up stays cheap

        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            # formatters reuse exc_text when set: format it now so the traceback is redacted too
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _our_module_loggers() -> list[str]:
    """``package.module`` for every module of our packages, imported or not (modules log under their name),
    so a module imported after this call logs through a filtered logger too."""
    import importlib
    import pkgutil

    names = []
    for package in ("emitter", "harvesters", "spark_plugin"):
        path = importlib.import_module(package).__path__
        names += [f"{package}.{module.name}" for module in pkgutil.iter_modules(path)]
    return names


def install_redaction(*, root_handlers: bool) -> None:
    """Attach the redacting filter to our loggers and, in our own command-line processes, to the root
    logger's handlers (idempotent).

    A filter on a logger only sees records created on that very logger, so each of our module loggers
    (``emitter.emitter``, ``spark_plugin.lifecycle``...) gets one. Inside a host process (a Spark driver) the
    host's handlers are left alone: redacting the application's own log lines is not ours to do.
    """
    def ensure(target: logging.Filterer) -> None:
        if not any(isinstance(f, RedactingFilter) for f in target.filters):
            target.addFilter(RedactingFilter())

    for name in {*REDACTED_LOGGERS, *_our_module_loggers(),
                 *(n for n in list(logging.Logger.manager.loggerDict) if n.split(".", 1)[0] in REDACTED_LOGGERS)}:
        ensure(logging.getLogger(name))
    if root_handlers:
        for handler in logging.getLogger().handlers:
            ensure(handler)


def configure_cli_logging(level: int = logging.INFO) -> None:
    """Command-line tools: plain ``level: message`` lines on stderr, redacted."""
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    logging.getLogger("openlineage").setLevel(logging.WARNING)
    install_redaction(root_handlers=True)
