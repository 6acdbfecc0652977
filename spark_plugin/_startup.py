"""The start-up hook: ``lineage_capture.pth`` calls :func:`arm` in spark-submit drivers only.

The ``.pth`` line itself checks ``PYSPARK_GATEWAY_PORT`` (set by spark-submit's PythonRunner for the
driver, never for executors' Python workers nor for plain ``python``), so every other process pays one
dictionary lookup. In a driver, :func:`arm` adds a one-shot import hook: when ``pyspark.sql.session``
has been executed, ``SparkSession.__init__`` is wrapped so that each new session whose SparkConf says
``spark.openlineage.python.enabled=true`` gets instrumented. Nothing from pyspark is imported here.

When spark-submit's command line itself enables the plugin, :func:`arm` also starts the emitter's child process
at once (:func:`prestart_emitter`): it imports openlineage-python while the driver imports pyspark, on a core that
is idle then.

``SparkContext.__init__`` is wrapped too: a context whose SparkConf enables the plugin starts its application's
run (an application may never make a session). And ``SparkContext._initialize_context``: when the context's
SparkConf enables the plugin, a daemon thread starts importing the plugin's modules (:func:`preload`) while the
JVM creates the SparkContext. That call keeps the driver's main thread waiting on py4j for about two seconds
without the GIL, so the imports (~0.1 s of CPU) do not compete with the main thread's py4j calls when the
session is instrumented, nor with the application's first actions. openlineage-python is not among them: the
driver never imports it (the events are built by the emitter's child process, :mod:`emitter.emitter_process`).
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # ``typing`` is not imported at run time: it costs more than this whole hook
if TYPE_CHECKING:
    from typing import Any

#: The module holding ``SparkSession`` (classic) in PySpark 3.5 and 4.x.
SESSION_MODULE = "pyspark.sql.session"
ENABLED_KEY = "spark.openlineage.python.enabled"
#: The modules :func:`preload` imports, in order: first what :func:`spark_plugin.lifecycle.instrument` needs on
#: the main thread (so the main thread never waits on a module lock behind the others), then what the worker
#: needs: the plan reader and the emitter process's host side (openlineage-python is imported by that child
#: process only: see :mod:`emitter.emitter_process`).
PRELOAD = ("spark_plugin.lifecycle", "emitter.emitter_process", "emitter.transport", "spark_plugin.facets",
           "spark_plugin.plan_lineage")
#: The modules the emitter's child imports, beside the emitter's own, while it waits for its settings: what building
#: the Spark plugin's events imports (:func:`prestart_emitter`).
EMITTER_WARM = ("openlineage.client.facet_v2", "spark_plugin.facet_classes")
_state: dict[str, Any] = {"armed": False, "patched": False, "preloading": None, "emitter_child": None}


def arm() -> None:
    """Arrange for SparkSessions to be instrumented once pyspark is imported (idempotent)."""
    if _state["armed"]:
        return
    _state["armed"] = True
    prestart_emitter()
    module = sys.modules.get(SESSION_MODULE)
    if module is not None:
        patch_session_module(module)
    else:
        sys.meta_path.insert(0, _PostImportFinder())


class _PostImportFinder:
    """Finds nothing itself: wraps the real loader of :data:`SESSION_MODULE` to patch it once executed."""

    def __init__(self) -> None:
        self._searching = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != SESSION_MODULE or self._searching:
            return None
        from importlib.util import find_spec

        self._searching = True  # find_spec below walks sys.meta_path again, this finder included
        try:
            spec = find_spec(fullname)
        finally:
            self._searching = False
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            # duck-typed like any loader (typeshed wants an importlib.abc.Loader subclass)
            spec.loader = _PatchingLoader(spec.loader, self)  # type: ignore[assignment]
        return spec


class _PatchingLoader:
    """Delegates to the real loader, then patches the module and retires the finder."""

    def __init__(self, loader: Any, finder: _PostImportFinder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)  # one shot: later imports cost nothing extra
        try:
            patch_session_module(module)
        except Exception as error:  # noqa: BLE001 - the boundary: pyspark's import must succeed regardless
            _warn("could not hook SparkSession creation", error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def patch_session_module(module: Any) -> None:
    """Wrap ``SparkSession.__init__`` (classic sessions) and ``Builder.getOrCreate`` (to notice Connect), and
    ``SparkContext._initialize_context`` (to start :func:`preload` early)."""
    if _state["patched"]:
        return
    _state["patched"] = True
    _patch_context_init()
    session_class = module.SparkSession
    original_init = session_class.__init__
    original_get_or_create = session_class.Builder.getOrCreate

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - it is __init__
        original_init(self, *args, **kwargs)
        on_session(self)

    def getOrCreate(self: Any) -> Any:  # noqa: N802 - pyspark's name
        session = original_get_or_create(self)
        if not hasattr(session, "_jsparkSession"):
            on_session(session)  # a Spark Connect session: warned about, not instrumented
        return session

    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    getOrCreate.__wrapped__ = original_get_or_create  # type: ignore[attr-defined]
    __init__.__doc__, getOrCreate.__doc__ = original_init.__doc__, original_get_or_create.__doc__
    session_class.__init__ = __init__
    session_class.Builder.getOrCreate = getOrCreate


def _patch_context_init() -> None:
    # pyspark's package __init__ imports the context module before pyspark.sql (4.x: pyspark.core.context,
    # 3.5: pyspark.context); a Connect-only PySpark has neither, and nothing is wrapped.
    module = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    context_class = getattr(module, "SparkContext", None)
    original = getattr(context_class, "_initialize_context", None)
    if original is None:
        return

    # SparkContext's own extension point ("to allow subclass specific initialization"): it is called with the
    # JVM SparkConf the context is made of (spark-submit's --conf included; the SparkConf that __init__ receives
    # holds only the builder's options), just before the JVM creates the context.
    def _initialize_context(self: Any, jconf: Any) -> Any:
        on_context(jconf)
        return original(self, jconf)

    _initialize_context.__wrapped__ = original  # type: ignore[attr-defined]
    _initialize_context.__doc__ = original.__doc__
    context_class._initialize_context = _initialize_context  # type: ignore[union-attr]

    # and once the context is made: its application's run begins there, as the JVM integration's (a listener on
    # the context), so an application of RDDs only, which never makes a session, is seen too
    original_init = context_class.__init__  # type: ignore[misc]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - it is __init__
        original_init(self, *args, **kwargs)
        on_context_made(self)

    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    __init__.__doc__ = original_init.__doc__
    context_class.__init__ = __init__  # type: ignore[misc]


def prestart_emitter() -> None:
    """Start the emitter's child process now when spark-submit's command line enables the plugin: it imports
    openlineage-python and the emitter while this driver imports pyspark, a second of one core during which
    spark-submit's JVM waits and the other core is idle (measured: both cores ~90% busy from the context's creation
    to the end, ~50% before). The application's run adopts it (:func:`take_emitter_child`). Never raises."""
    try:
        if _enabled_by_command_line():
            from emitter.process_launch import launch

            _state["emitter_child"] = launch("", EMITTER_WARM)
    except Exception:  # noqa: BLE001, S110 - the run starts its child itself, as without this
        pass


def _enabled_by_command_line() -> bool:
    """Whether the driver's parent, spark-submit's JVM, was given ``--conf spark.openlineage.python.enabled=true``
    (the last one wins). A guess, read from ``/proc`` (Linux): the conf may come from a properties file instead (no
    child started early: the run starts it), and an application argument may look like it (a child started for
    nothing, closed when the context says otherwise)."""
    import os

    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().split(b"\0")
    except OSError:
        return False
    prefix = ENABLED_KEY.encode() + b"="
    enabled = False
    for argument in arguments:
        argument = argument.removeprefix(b"--conf=")
        if argument.startswith(prefix):
            enabled = _flag(argument[len(prefix):].decode(errors="replace"))
    return enabled


def take_emitter_child() -> Any:
    """The emitter's child started by :func:`prestart_emitter` (once; None when none was)."""
    child, _state["emitter_child"] = _state["emitter_child"], None
    return child


def discard_emitter_child() -> None:
    """No run will adopt the child: its input ends, and it exits."""
    child = take_emitter_child()
    if child is not None:
        from emitter.process_launch import discard

        discard(child)


def on_context(jconf: Any) -> None:
    """The JVM is about to create a SparkContext of ``jconf`` (a JVM SparkConf): start :func:`preload` when it
    enables the plugin (once per process). Never raises."""
    try:
        if _state["preloading"] is None and jconf is not None and _flag(jconf.get(ENABLED_KEY, "false")):
            import threading

            thread = threading.Thread(target=preload, name="lineage-capture-preload", daemon=True)
            _state["preloading"] = thread
            thread.start()
        elif _state["preloading"] is None:
            discard_emitter_child()
    except Exception as error:  # noqa: BLE001 - the boundary between pyspark's context creation and us
        _warn("could not prepare lineage capture", error)


def on_context_made(sc: Any) -> None:
    """A SparkContext was made: start its application's run when its SparkConf enables the plugin. Never raises."""
    try:
        value = sc._conf.get(ENABLED_KEY, "false")
        if _flag(value):
            from spark_plugin.lifecycle import instrument_context

            instrument_context(sc)
        elif str(value).strip().lower() != "false":  # `yes`, `1`, `on`: the user meant it on, and would see nothing
            sc._jvm.org.slf4j.LoggerFactory.getLogger("lineage_capture").warn(
                f"lineage capture: {ENABLED_KEY}={value} is not true: lineage capture stays off (say true)")
    except Exception as error:  # noqa: BLE001 - the boundary between pyspark's context creation and us
        _warn("could not instrument the Spark context", error)


def preload() -> None:
    """Import :data:`PRELOAD` (on the preload thread). A module that fails to import is left to the part that needs
    it, which reports it: nothing is said here."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - see the docstring: the worker's warm-up reports it
            continue


def _flag(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _enabled(session: Any) -> bool:
    sc = getattr(session, "_sc", None)
    conf = sc._conf if sc is not None else session.conf  # Spark Connect: the server's conf, over gRPC
    return _flag(conf.get(ENABLED_KEY, "false"))


def on_session(session: Any) -> None:
    """A session was created: instrument it when its SparkConf enables the plugin. Never raises."""
    try:
        if _enabled(session):
            from spark_plugin.lifecycle import instrument

            instrument(session)
    except Exception as error:  # noqa: BLE001 - the boundary between pyspark's session creation and us
        _warn("could not instrument the Spark session", error)


def _warn(what: str, error: Exception) -> None:
    import logging

    logging.getLogger("spark_plugin").warning("lineage capture: %s (%s: %s); the application is not affected",
                                              what, type(error).__name__, error)
