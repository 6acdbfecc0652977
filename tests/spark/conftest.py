"""Shared in-process Spark fixtures: one local SparkSession for every test under tests/spark/.

Starting a JVM costs seconds on this 2-core machine, so there is exactly one SparkContext per test
session. ``spark`` uses the in-memory catalog (fast, the default of plain ``pyspark``);
``hive_spark`` is a second session on the same SparkContext with a Hive catalog backed by an
embedded Derby metastore (pyspark's wheel ships the Hive classes), created only when a test asks.
``qe_capture`` records the ``QueryExecution`` of every action through a real
``QueryExecutionListener`` (py4j callback), the way the plugin receives them.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

from py4j.java_gateway import JavaClass  # noqa: E402
from pyspark.java_gateway import ensure_callback_server_started  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def spark_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Session tmp dirs: warehouses, Derby home (derby.log and metastores land here, not in the repo)."""
    root = tmp_path_factory.mktemp("spark")
    dirs = {name: root / name for name in ("warehouse", "hive_warehouse", "derby", "local")}
    for d in dirs.values():
        d.mkdir()
    return dirs


@pytest.fixture(scope="session")
def spark(spark_dirs: dict[str, Path]) -> Iterator[SparkSession]:
    """The one local SparkSession (in-memory catalog, warehouse under a session tmp dir)."""
    java_opts = f"-Dderby.system.home={spark_dirs['derby']} -Dderby.stream.error.file={spark_dirs['derby']}/derby.log"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("spark plugin tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", str(spark_dirs["warehouse"]))
        .config("spark.local.dir", str(spark_dirs["local"]))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def hive_spark(spark: SparkSession, spark_dirs: dict[str, Path]) -> SparkSession:
    """A second session on the same SparkContext with a Hive catalog (embedded Derby metastore).

    Spark reads ``spark.sql.catalogImplementation`` when a session's SharedState is built; a session
    made with initial options gets its own SharedState, so both catalogs live in one JVM.
    """
    jvm = spark.sparkContext._jvm
    # py4j answers a JavaPackage (not a JavaClass) for a class the JVM cannot load
    if not isinstance(jvm.org.apache.hadoop.hive.conf.HiveConf, JavaClass):
        pytest.skip("pyspark without Hive classes")
    metastore = spark_dirs["derby"] / "metastore_db"
    options = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(spark_dirs["hive_warehouse"]),
        "hive.metastore.warehouse.dir": str(spark_dirs["hive_warehouse"]),
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore};create=true",
        "hive.exec.dynamic.partition.mode": "nonstrict",
    }
    joptions = jvm.java.util.HashMap()
    for key, value in options.items():
        joptions.put(key, value)
    session_class = jvm.org.apache.spark.sql.classic.SparkSession
    if not isinstance(session_class, JavaClass):  # Spark 3.5: no `classic` package yet
        session_class = jvm.org.apache.spark.sql.SparkSession
    jsession = session_class(spark._jsc.sc(), joptions)
    return SparkSession(spark.sparkContext, jsession)


class QueryCapture:
    """A real ``QueryExecutionListener``: keeps ``(funcName, qe)`` of every successful action."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def onSuccess(self, func_name: str, qe: Any, duration_ns: int) -> None:  # noqa: N802 (JVM name)
        self.calls.append((func_name, qe))

    def onFailure(self, func_name: str, qe: Any, exception: Any) -> None:  # noqa: N802 (JVM name)
        pass


class Capturer:
    """Runs an action and returns the QueryExecutions the listener saw for it."""

    def __init__(self, session: SparkSession, listener: QueryCapture) -> None:
        self._session = session
        self._listener = listener

    def _drain(self) -> None:
        # listener calls arrive asynchronously on Spark's listener bus: wait until it is empty
        self._session._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()

    def run(self, action: Callable[[], Any]) -> list[tuple[str, Any]]:
        """Run ``action`` and return the ``(funcName, qe)`` pairs of the actions it triggered."""
        self._drain()
        self._listener.calls.clear()
        action()
        self._drain()
        calls, self._listener.calls = list(self._listener.calls), []
        return calls


def _capturer(session: SparkSession) -> Capturer:
    ensure_callback_server_started(session.sparkContext._gateway)
    listener = QueryCapture()
    session._jsparkSession.listenerManager().register(listener)
    return Capturer(session, listener)


@pytest.fixture(scope="session")
def qe_capture(spark: SparkSession) -> Capturer:
    """Capture QueryExecutions of actions run on ``spark``."""
    return _capturer(spark)


@pytest.fixture(scope="session")
def hive_qe_capture(hive_spark: SparkSession) -> Capturer:
    """Capture QueryExecutions of actions run on ``hive_spark``."""
    return _capturer(hive_spark)


@pytest.fixture
def workdir(tmp_path: Path) -> str:
    """A per-test directory as an absolute path string without symlinks (Spark resolves them)."""
    return os.path.realpath(tmp_path)


@pytest.fixture(scope="session")
def class_archive(tmp_path_factory) -> Any:
    """The session's ``test_runtime.ClassArchive`` of spark-submit driver classes."""
    from test_runtime import ClassArchive

    return ClassArchive(tmp_path_factory.mktemp("jvm") / "spark-classes.jsa")


@pytest.fixture(scope="session")
def hook_pythonpath(tmp_path_factory) -> list[str]:
    """PYTHONPATH entries that make a spark-submit driver run ``lineage_capture.pth`` as an installed package would.

    Installed (``pip install [-e] .``): the .pth is in site-packages already. From a source checkout: a
    ``sitecustomize`` adds a site dir holding a copy of the .pth, so site.py processes the same line.
    """
    import shutil
    import site

    root_dir = Path(__file__).resolve().parents[2]
    if any((Path(d) / "lineage_capture.pth").exists() for d in site.getsitepackages()):
        return [str(root_dir)]
    root = tmp_path_factory.mktemp("hook")
    (root / "site").mkdir()
    shutil.copy(root_dir / "spark_plugin" / "lineage_capture.pth", root / "site" / "lineage_capture.pth")
    (root / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(root / 'site')!r})\n")
    return [str(root_dir), str(root)]
