"""Reading and parsing an input in a second process, so a harvest uses both cores of a small machine.

Parsing a log (XML events, JSON or CSV history rows) and reading each record on its own (table lineage, times,
status) is a third to a half of a harvest's time. A reader child does that and sends the items as pickled batches
through a pipe; the harvest process does what needs the order of records (task runs, procedure and error
matching) and emits. The child blocks while the pipe is full, so memory stays at a few batches whatever the file
size.

The child is a plain ``python -c`` process, not ``multiprocessing``: multiprocessing's spawn re-runs the
caller's main script, and its fork copies the locks of the caller's threads.
"""
from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")

#: Inputs at least this large are parsed in a second process (when there are two cores): starting the child
#: (~0.1 s) only pays off from a few thousand items.
BACKGROUND_MIN_BYTES = 16 * 1024 * 1024
#: Items per message: large enough that the per-message cost vanishes, small enough that the pipe keeps
#: memory to a few batches.
BATCH = 512

#: gc thresholds of both harvest processes (allocations before a young collection, then collections of each
#: generation before the next one's): they make a few dozen short-lived containers per record and almost no
#: reference cycles, and collecting every 700 allocations (the default) cost 5-10% of the harvest process.
HARVEST_GC_THRESHOLDS = (20_000, 50, 100)

#: ``python -c _CHILD_MAIN <sys.path> <module> <function> <args...>``: runs ``module.function(*args)``.
_CHILD_MAIN = ("import importlib, os, sys; sys.path[:] = sys.argv[1].split(os.pathsep); "
               "getattr(importlib.import_module(sys.argv[2]), sys.argv[3])(*sys.argv[4:])")


def worth_a_second_process(*paths: str) -> bool:
    """Whether reading ``paths`` in a second process pays off: large files and a second core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        size = sum(os.path.getsize(path) for path in paths)
    except OSError:
        return False
    return cores > 1 and size >= BACKGROUND_MIN_BYTES


def read_in_background(sender: Callable[..., None], args: Iterable[str], unpack: Callable[[Any], Item],
                       read_here: Callable[[], Iterator[Item]], what: str) -> Generator[Item, None, None]:
    """The items ``sender(*args)`` sends from a child process (see :func:`send_items`), unpacked, in order.

    ``read_here`` gives the same items in this process: used when no child can be started. The child's
    failure is raised here as OSError; closing this generator early stops the child.
    """
    command = [sys.executable, "-c", _CHILD_MAIN, os.pathsep.join(sys.path), sender.__module__,
               sender.__name__, *args]
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
    except OSError:  # no process could be started (limits, sandbox): read here instead
        yield from read_here()
        return
    assert child.stdout is not None
    started = False
    try:
        while True:
            try:
                batch = pickle.load(child.stdout)
            except EOFError:
                if not started:  # it could not even start (no harvesters package for this interpreter)
                    yield from read_here()
                    return
                raise OSError(f"the process reading {what} ended unexpectedly (exit code {child.wait()})") \
                    from None
            started = True
            if batch is None:
                return
            if isinstance(batch, str):
                raise OSError(batch)
            yield from map(unpack, batch)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        child.wait()


def send_items(items: Iterable[Any], pack: Callable[[Any], Any], what: str) -> None:
    """In the child: pickled batches of packed items on stdout, then None (or an error message)."""
    gc.set_threshold(*HARVEST_GC_THRESHOLDS)  # this process only reads for the harvest
    out = sys.stdout.buffer
    try:
        pickle.dump([], out)  # started: from here on, a silent end is a failure
        batch: list[Any] = []
        for item in items:
            batch.append(pack(item))
            if len(batch) >= BATCH:
                pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
                batch = []
        pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(None, out)
        out.flush()
    except BrokenPipeError:
        pass  # the harvest stopped reading
    except Exception as error:  # noqa: BLE001 - reported to the harvest, which fails the reading
        pickle.dump(f"reading {what} failed: {type(error).__name__}: {error}", out)
        out.flush()
