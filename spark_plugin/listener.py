"""The Python ``QueryExecutionListener`` Spark calls (through py4j's callback server) after every action.

Spark calls it on its listener-bus thread, one action at a time, so the callback only notes what
it was given (names, timestamps, the ``QueryExecution`` and exception proxies) and hands that to
the worker; all py4j traffic about the plan happens on the worker. Its own cost is measured per call
(``timings``) for the overhead benchmark.
"""
from __future__ import annotations

import collections
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from spark_plugin.guard import Guard

#: The JVM interface implemented here.
LISTENER_INTERFACE = "org.apache.spark.sql.util.QueryExecutionListener"


@attrs.frozen
class Captured:
    """One finished action as the callback saw it."""

    func_name: str  # command, count, collect, save, ... ("analyze" for an analysis failure)
    qe: Any  # py4j proxy of the QueryExecution; lives until the worker drops it
    end: datetime
    start: datetime
    exception: Any = None  # py4j proxy of the JVM exception when the action failed

    @property
    def failed(self) -> bool:
        return self.exception is not None


class QueryListener:
    """py4j implementation of ``QueryExecutionListener``; ``submit`` must never block."""

    class Java:
        implements = [LISTENER_INTERFACE]

    def __init__(self, submit: Callable[[Captured], object], guard: Guard, timing_samples: int = 100_000) -> None:
        self._submit = submit
        self._guard = guard
        self.active = True
        #: nanoseconds spent in each callback, most recent last (bounded)
        self.timings: collections.deque[int] = collections.deque(maxlen=timing_samples)

    # The JVM compares listeners when it removes one (CopyOnWriteArrayList.remove calls equals on each
    # registered listener, ours included, whatever its position): py4j forwards those calls here.
    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802 - JVM name
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:  # noqa: N802 - JVM name
        return f"lineage-capture QueryListener@{id(self):x}"

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:  # noqa: N802,N803 - JVM names
        began = time.perf_counter_ns()
        if self.active:
            self._guard.call("listener", self._success, funcName, qe, durationNs)
        self.timings.append(time.perf_counter_ns() - began)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:  # noqa: N802,N803 - JVM names
        began = time.perf_counter_ns()
        if self.active:
            self._guard.call("listener", self._failure, funcName, qe, exception)
        self.timings.append(time.perf_counter_ns() - began)

    def _success(self, func_name: str, qe: Any, duration_ns: int) -> None:
        end = datetime.now(timezone.utc)
        self._submit(Captured(func_name, qe, end=end, start=end - timedelta(microseconds=duration_ns // 1000)))

    def _failure(self, func_name: str, qe: Any, exception: Any) -> None:
        # Spark gives no duration on failure: START and FAIL share the instant the failure was reported.
        end = datetime.now(timezone.utc)
        self._submit(Captured(func_name, qe, end=end, start=end, exception=exception))


class JvmProxy:
    """One JVM-side proxy of a Python listener, reused for ``register`` and ``unregister``.

    py4j builds a new JVM proxy each time a Python object is passed, and proxies compare by identity,
    so ``unregister(listener)`` would never find what ``register(listener)`` added. Holding the proxy in
    a JVM array and calling both methods by reflection with that array passes the same proxy twice.
    """

    def __init__(self, gateway: Any, listener: QueryListener) -> None:
        holder = gateway.jvm.java.util.ArrayList()
        holder.add(listener)
        self._args = holder.toArray()  # Object[] in the JVM: the proxy never comes back to Python
        self._types = gateway.new_array(gateway.jvm.java.lang.Class, 1)
        self._types[0] = gateway.jvm.py4j.reflection.ReflectionUtil.classForName(LISTENER_INTERFACE)

    def call(self, listener_manager: Any, method: str) -> None:
        """``listener_manager.<method>(proxy)``: ``register`` or ``unregister``."""
        listener_manager.getClass().getMethod(method, self._types).invoke(listener_manager, self._args)
