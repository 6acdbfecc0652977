"""``spark.openlineage.circuitBreaker.*``: the Java client's circuit breakers, for a configuration shared with JVM jobs.

The JVM integration runs each listener callback's lineage work inside its circuit breaker: the breaker's state is
read before the work starts (closed: the work is skipped) and again while it runs (closed, or over its timeout:
the work is cancelled, its events are not sent). The plugin does the same around each item of its worker (an
action, an RDD job, the application's START or end, an execution poll): :meth:`CircuitBreaker.state` before the
item's lineage is read and again before its events are handed over.

Types (``circuitBreaker.type``), with the Java client's keys and defaults:

- ``simpleMemory``: closed while the driver JVM's free heap (``free + max - total``, in % of ``max``) is at or
  below ``memoryThreshold`` (20);
- ``javaRuntime``: closed while that is at or below ``memoryThreshold`` (20) *and* the old generation's garbage
  collections took at least ``gcCpuThreshold`` (10) % of the time since the previous check;
- ``timeout``: never closed; the work of one item that took longer than ``timeoutInSeconds`` is dropped (the two
  above take ``timeoutInSeconds`` too);
- ``static``: test-only, the Java client's: each state read takes the next of ``valuesReturned`` (``true``:
  closed), closed once they are used up;
- ``noop``, and ``taskQueue`` (its asynchronous bounded queue is what the worker already is: see
  ``python.queueSize``): nothing.

An unknown type or a threshold that is not a percentage is warned about once and leaves lineage on.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

log = logging.getLogger("spark_plugin")

PREFIX = "circuitBreaker."
DEFAULT_MEMORY_THRESHOLD = 20
DEFAULT_GC_CPU_THRESHOLD = 10
#: Types that never close and have no timeout (``taskQueue``: the worker is already an asynchronous bounded queue).
INERT_TYPES = frozenset({"noop", "taskqueue"})


@attrs.frozen
class Settings:
    """One configured circuit breaker (the prefix-less ``circuitBreaker.*`` keys, parsed)."""

    type: str
    memory_threshold: int = DEFAULT_MEMORY_THRESHOLD
    gc_cpu_threshold: int = DEFAULT_GC_CPU_THRESHOLD
    timeout_s: float | None = None
    values: tuple[bool, ...] = ()


def settings(keys: Mapping[str, str], warn: Callable[[str], object] = log.warning) -> Settings | None:
    """The configured breaker, or None when there is none (or it can never close nor time out). What is not
    understood is told to ``warn`` (the plugin keeps it until the host's log is set up)."""
    kind = (keys.get(PREFIX + "type") or "").strip()
    if not kind or kind.lower() in INERT_TYPES:
        return None
    if kind not in ("simpleMemory", "javaRuntime", "timeout", "static"):
        warn(f"unsupported spark.openlineage.circuitBreaker.type {kind}: no circuit breaker")
        return None
    try:
        memory = _percentage(keys, "memoryThreshold", DEFAULT_MEMORY_THRESHOLD)
        gc_cpu = _percentage(keys, "gcCpuThreshold", DEFAULT_GC_CPU_THRESHOLD)
        timeout = keys.get(PREFIX + "timeoutInSeconds")
        timeout_s = float(timeout) if timeout not in (None, "") else None
    except ValueError as error:
        warn(f"spark.openlineage.circuitBreaker: {error}: no circuit breaker")
        return None
    if kind == "timeout" and timeout_s is None:
        warn("spark.openlineage.circuitBreaker.type timeout needs timeoutInSeconds: no circuit breaker")
        return None
    values = tuple(v.strip().lower() == "true" for v in (keys.get(PREFIX + "valuesReturned") or "").split(","))
    return Settings(kind, memory, gc_cpu, timeout_s, values if kind == "static" else ())


def _percentage(keys: Mapping[str, str], name: str, default: int) -> int:
    raw = keys.get(PREFIX + name)
    if raw in (None, ""):
        return default
    value = int(str(raw).strip())
    if not 0 <= value <= 100:
        raise ValueError(f"{name} {value} is not a percentage")
    return value


class CircuitBreaker:
    """The state of one configured breaker, read on the worker thread.

    ``runtime`` gives the driver JVM's ``java.lang.Runtime`` and ``gc_beans`` its garbage collectors' MX beans
    (py4j objects; plain objects with the same methods in tests). ``clock`` is ``time.monotonic``.
    """

    def __init__(self, config: Settings, runtime: Callable[[], Any], gc_beans: Callable[[], Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = config
        self._runtime = runtime
        self._gc_beans = gc_beans
        self._clock = clock
        self._static_index = 0
        self._last_gc: tuple[float, float] | None = None  # (clock, old-gen collection time in s) at the last read

    @property
    def timeout_s(self) -> float | None:
        """Work on one item that takes longer is dropped (None: no limit)."""
        return self.settings.timeout_s

    def state(self) -> str | None:
        """Why the breaker is closed now (lineage work must not run), or None when it is open."""
        kind = self.settings.type
        if kind == "static":
            return self._static()
        if kind == "timeout":
            return None
        free = self._free_memory_percent()
        memory_low = free <= self.settings.memory_threshold
        if kind == "simpleMemory":
            return (f"free memory {free:.2f}% (memoryThreshold {self.settings.memory_threshold}%)"
                    if memory_low else None)
        gc_cpu = self._gc_cpu_percent()  # read at every check, as the JVM does: the window is check to check
        if memory_low and gc_cpu >= self.settings.gc_cpu_threshold:
            return (f"free memory {free:.2f}%, GC CPU time {gc_cpu:.2f}% (memoryThreshold "
                    f"{self.settings.memory_threshold}%, gcCpuThreshold {self.settings.gc_cpu_threshold}%)")
        return None

    def _static(self) -> str | None:
        values = self.settings.values
        if self._static_index >= len(values):
            return "static circuit breaker: valuesReturned used up"
        self._static_index += 1
        return "static circuit breaker" if values[self._static_index - 1] else None

    def _free_memory_percent(self) -> float:
        runtime = self._runtime()
        max_memory = runtime.maxMemory()
        return 100.0 * (runtime.freeMemory() + max_memory - runtime.totalMemory()) / max_memory

    def _gc_cpu_percent(self) -> float:
        now, collected = self._clock(), self._old_gen_collection_s()
        last, self._last_gc = self._last_gc, (now, collected)
        if last is None or now <= last[0]:
            return 0.0
        return 100.0 * (collected - last[1]) / (now - last[0])

    def _old_gen_collection_s(self) -> float:
        # the JVM's rule: the old generation's collector is the one that has collected least often
        beans = self._gc_beans()
        counts = [(beans.get(i).getCollectionCount(), i) for i in range(beans.size())]
        if not counts:
            return 0.0
        return beans.get(min(counts)[1]).getCollectionTime() / 1000.0


def jvm_circuit_breaker(config: Settings, jvm: Any) -> CircuitBreaker:
    """A breaker reading the driver JVM through py4j's ``jvm`` view."""
    return CircuitBreaker(config, jvm.java.lang.Runtime.getRuntime,
                          jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans)
