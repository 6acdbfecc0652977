"""Logging set-up: every line our packages log passes through the redaction filter."""
from __future__ import annotations

import logging

#: Loggers whose records are redacted: ours, and openlineage-python's (it logs transport configs).
REDACTED_LOGGERS = ("emitter", "harvesters", "spark_plugin", "openlineage")


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
    from emitter.redact import RedactingFilter

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
