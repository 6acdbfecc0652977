"""OpenLineage events from PySpark applications, without a jar.

Under ``spark-submit --conf spark.openlineage.python.enabled=true app.py`` the start-up hook installed
with the package instruments the application by itself. In a notebook or the ``pyspark`` shell::

    import spark_plugin
    spark_plugin.instrument(spark)      # optional 2nd argument: {"spark.openlineage.transport.type": ...}
    ...
    spark_plugin.uninstrument()         # or just spark.stop() / leave the interpreter

Importing this package is cheap (the start-up hook imports it in every spark-submit driver): everything
heavy loads on first use.
"""
from __future__ import annotations

# ``typing`` costs ~15 ms of imports (re, ...): this module is imported by the start-up hook, so the
# annotations stay strings and their names are imported for type checkers only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["instrument", "uninstrument"]

#: Said when PySpark is missing: the package never installs PySpark itself (a cluster brings its own).
NO_PYSPARK = ("spark_plugin needs PySpark, which this Python cannot import: run under spark-submit (the cluster's "
              "PySpark is used), or pip install 'lineage-capture[spark]'")


def _require_pyspark() -> None:
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise ImportError(NO_PYSPARK)


def instrument(spark: Any, conf: Mapping[str, str] | None = None) -> Any:
    """Capture lineage of ``spark``'s application (see :func:`spark_plugin.lifecycle.instrument`).

    Works with whatever PySpark the driver has (pip-installed or the cluster's); raises ImportError saying so
    when there is none."""
    _require_pyspark()
    from spark_plugin.lifecycle import instrument as _instrument

    return _instrument(spark, conf)


def uninstrument() -> None:
    """End the instrumented applications' runs and detach (see :func:`spark_plugin.lifecycle.uninstrument`)."""
    from spark_plugin.lifecycle import uninstrument as _uninstrument

    _uninstrument()
