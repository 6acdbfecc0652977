"""Parsing an events file in a second process, so an ingest uses both cores of a small machine.

Decoding JSON and checking each event is about half of an ingest's time; merging runs and writing SQLite is the
other half. A child process reads and parses the file and sends pickled chunks through a pipe, in order; the ingest
process stores them. The child blocks while the pipe is full, so memory stays at a few chunks whatever the file
size. It is a plain ``python -c`` process, not ``multiprocessing`` (whose spawn re-runs the caller's main script
and whose fork copies the locks of the caller's threads). lineage_graph imports no other package of the project,
so this is its own small version of the harvesters' reader.
"""
from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

#: Files with at least this much left to read are parsed in a second process (when there are two cores):
#: starting the child (~0.1 s) pays off from a few thousand events.
BACKGROUND_MIN_BYTES = 8 << 20

_CHILD_MAIN = ("import importlib, os, sys; sys.path[:] = sys.argv[1].split(os.pathsep); "
               "getattr(importlib.import_module(sys.argv[2]), sys.argv[3])(*sys.argv[4:])")


def worth_a_second_process(remaining: int) -> bool:
    """Whether parsing ``remaining`` bytes in a second process pays off: enough bytes and a second core."""
    if os.environ.get("LINEAGE_GRAPH_ONE_PROCESS"):  # tests and comparisons: the same work in one process
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores > 1 and remaining >= BACKGROUND_MIN_BYTES


def in_background(sender: Callable[..., None], args: Iterable[str], read_here: Callable[[], Iterator[Any]],
                  what: str) -> Generator[Any, None, None]:
    """The items ``sender(*args)`` sends from a child process (see :func:`send`), in order.

    ``read_here`` gives the same items in this process: used when no child can be started. The child's failure
    is raised here as OSError; closing this generator early stops the child."""
    command = [sys.executable, "-c", _CHILD_MAIN, os.pathsep.join(sys.path), sender.__module__, sender.__name__,
               *args]
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
                item = pickle.load(child.stdout)
            except EOFError:
                if not started:  # it could not even start (no lineage_graph for this interpreter)
                    yield from read_here()
                    return
                raise OSError(f"the process reading {what} ended unexpectedly (exit code {child.wait()})") \
                    from None
            if not started:
                started = True
                continue  # the child's first message only says it runs
            if item is None:
                return
            if isinstance(item, str):
                raise OSError(item)
            yield item
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        child.wait()


def send(items: Iterable[Any], what: str) -> None:
    """In the child: each item pickled on stdout, then None (or an error message)."""
    gc.set_threshold(50_000, 50, 100)  # short-lived containers, no cycles (see ingest.INGEST_GC_THRESHOLDS)
    out = sys.stdout.buffer
    try:
        pickle.dump(True, out)  # started: from here on, a silent end is a failure
        for item in items:
            pickle.dump(item, out, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(None, out)
        out.flush()
    except BrokenPipeError:
        pass  # the ingest stopped reading
    except Exception as error:  # noqa: BLE001 - reported to the ingest, which fails
        pickle.dump(f"reading {what} failed: {type(error).__name__}: {error}", out)
        out.flush()
