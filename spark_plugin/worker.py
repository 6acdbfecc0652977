"""The worker thread: everything slow (plan inspection over py4j, event delivery) happens here.

A bounded queue sits between Spark's listener thread and the worker. ``submit`` never blocks: when the
queue is full the item is dropped and counted (one warning). The thread is a daemon, so it can never
keep the interpreter alive; ``drain`` and ``stop`` take a time budget for the same reason.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_plugin.guard import Guard

log = logging.getLogger("spark_plugin")

_STOP = object()


class _Barrier:
    """Queued behind everything submitted so far; set when the worker reaches it."""

    def __init__(self) -> None:
        self.reached = threading.Event()


class Worker:
    """A daemon thread applying ``handle`` to each submitted item, in order, inside the guard.

    The hand-off is a deque plus an Event rather than a ``queue.Queue``: appending to a deque takes no
    lock, so the listener thread never waits for the worker (not even for the GIL, which a contended
    lock would release), which keeps the callback's tail latency low.
    """

    def __init__(self, handle: Callable[[Any], object], guard: Guard, queue_size: int,
                 name: str = "lineage-capture-worker", tick: Callable[[], object] | None = None,
                 tick_interval: float = 1.0) -> None:
        self._handle = handle
        #: called on the worker about every ``tick_interval`` seconds, between items (the execution poll)
        self._tick = tick
        self._tick_interval = tick_interval
        self._next_tick = 0.0
        self._guard = guard
        self._items: collections.deque[Any] = collections.deque()
        self._max_items = max(1, queue_size)
        self._wake = threading.Event()
        self._hand = threading.Lock()  # taking an item and closing the queue exclude each other
        self.dropped = 0
        #: the item being handled (None between items); read by :meth:`take_remaining`'s caller
        self.current: Any = None
        #: set by :meth:`take_remaining`: the worker takes no further item
        self.closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: Any, *, always: bool = False) -> bool:
        """Queue ``item``; False (and counted) when the queue is full or the worker stopped.

        ``always`` skips the bound, for the few items that must not be lost to a burst of actions
        (the application's own START and terminal event)."""
        if self.closed or not self._thread.is_alive():
            self._count_drop("the lineage worker has stopped")
            return False
        if not always and len(self._items) >= self._max_items:
            self._count_drop("the lineage queue is full (backend slow or down?)")
            return False
        self._enqueue(item)
        return True

    def _enqueue(self, item: Any) -> None:
        self._items.append(item)
        if not self._wake.is_set():  # set means the worker has not started draining yet: it will see it
            self._wake.set()

    def _count_drop(self, why: str) -> None:
        self.dropped += 1
        if self.dropped == 1:
            log.warning("lineage capture: %s; dropping lineage of further actions until it catches up "
                        "(counted, reported at the end)", why)

    def _run(self) -> None:
        while True:
            self._wake.wait(self._tick_interval if self._tick is not None else None)
            self._wake.clear()  # before draining: an item appended from now on sets it again
            self._maybe_tick()
            while self._items and not self.closed:
                with self._hand:
                    if self.closed or not self._items:
                        break
                    item = self._items.popleft()
                    if not isinstance(item, _Barrier) and item is not _STOP:
                        self.current = item
                if item is _STOP:
                    return
                if isinstance(item, _Barrier):
                    item.reached.set()
                    continue
                self._guard.call("worker", self._handle, item)
                self.current = item = None  # release py4j proxies (QueryExecution, exception) before waiting
                self._maybe_tick()
            if self.closed:
                return

    def _maybe_tick(self) -> None:
        if self._tick is None or self.closed:
            return
        now = time.monotonic()
        if now >= self._next_tick:
            self._next_tick = now + self._tick_interval
            with self._hand:
                if self.closed:
                    return
                self.current = self._tick
            self._guard.call("execution poll", self._tick)
            self.current = None

    def drain(self, timeout: float) -> bool:
        """Wait until everything submitted before this call is handled; False if ``timeout`` ran out."""
        if self.closed or not self._thread.is_alive():
            return not self._items and self.current is None
        barrier = _Barrier()
        self._enqueue(barrier)  # control items are never refused: they cost nothing to hold
        return barrier.reached.wait(max(0.0, timeout))

    def stop(self, timeout: float) -> None:
        """Ask the thread to end after the queued items; give up waiting after ``timeout``."""
        if not self._thread.is_alive():
            return
        self._enqueue(_STOP)
        self._thread.join(timeout)

    def take_remaining(self) -> list[Any]:
        """Close the queue and return the work items nobody handled yet, oldest first (control items are
        released, not returned). The item in hand (:attr:`current`) stays the worker's."""
        taken = []
        with self._hand:
            self.closed = True
            while self._items:
                item = self._items.popleft()
                if isinstance(item, _Barrier):
                    item.reached.set()
                elif item is not _STOP:
                    taken.append(item)
        self._enqueue(_STOP)  # lets an idle worker end; a busy one ends after its item
        return taken

    def pending(self) -> int:
        """Work items still queued (approximate; control items not counted)."""
        return sum(1 for item in list(self._items)
                   if item is not _STOP and not isinstance(item, _Barrier) and not callable(item))
