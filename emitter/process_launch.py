"""Starting the emitter's child process (:mod:`emitter.emitter_process`) with the standard library only.

A Spark driver's start-up hook calls :func:`launch` as the interpreter starts, before the application imports
pyspark: while the driver's main thread imports pyspark (about a second of one core; spark-submit's JVM waits for
it, the other core is idle), the child imports openlineage-python and the emitter (~0.3 s of CPU) on that idle
core, instead of on the cores the JVM keeps busy from the SparkContext's creation on. The child then waits for its
settings (:meth:`emitter.emitter_process.EmitterProcess.start` adopts it); with them come the host's environment,
working directory and ``sys.path`` as they are then, so a child started early is the same as one started late.
This module imports nothing the interpreter has not already imported at start-up but ``subprocess`` (which
pyspark imports anyway).
"""
from __future__ import annotations

import os
import subprocess
import sys

TYPE_CHECKING = False  # ``typing`` is not imported at run time: this module runs in the start-up hook
if TYPE_CHECKING:
    from collections.abc import Iterable

#: ``python -c CHILD_MAIN <sys.path or ""> <module to import first>...``: runs
#: :func:`emitter.emitter_process.serve` on stdin and stdout. An empty path: the child's own ``sys.path``, less
#: the working directory and PySpark's archives (:func:`child_path`).
CHILD_MAIN = ("import os, sys; p = sys.argv[1]; "
              "sys.path[:] = p.split(os.pathsep) if p else [e for e in sys.path if e and not (e.endswith('.zip') "
              "and os.path.basename(e).startswith(('pyspark', 'py4j')))]; "
              "from emitter.emitter_process import serve; serve(sys.argv[2:])")
#: What a child never needs from its host's environment: spark-submit's gateway (its start-up hook would arm).
HOST_ONLY_VARIABLES = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


def child_path() -> str:
    """The host's ``sys.path`` for the child: without PySpark's and py4j's archives, of no use to the child, which
    ``importlib.metadata`` would walk (~50 ms)."""
    return os.pathsep.join(p for p in sys.path if not (
        p.endswith(".zip") and os.path.basename(p).startswith(("pyspark", "py4j"))))


def child_environment() -> dict[str, str]:
    """The host's environment as the child gets it (now, and again with its settings)."""
    return {k: v for k, v in os.environ.items() if k not in HOST_ONLY_VARIABLES}


def launch(path: str = "", warm: Iterable[str] = ()) -> subprocess.Popen[bytes]:
    """Start a child that imports the emitter and the ``warm`` modules, then waits for its settings on stdin.
    ``path``: its ``sys.path`` (``""``: its own, see :data:`CHILD_MAIN`). Raises OSError when it cannot start."""
    return subprocess.Popen([sys.executable, "-c", CHILD_MAIN, path, *warm], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_environment())


def discard(child: subprocess.Popen[bytes] | None) -> None:
    """A child started early that no host adopts: its input ends, and it exits (after its imports, at most)."""
    if child is not None and child.stdin is not None:
        try:
            child.stdin.close()
        except OSError:
            pass
