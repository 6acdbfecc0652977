"""``spark.openlineage.circuitBreaker.*``: the Java client's breakers, parsed, read, and applied by the worker to a
real application (OpenLineage's ``CircuitBreakerIntegrationTest`` among the rows)."""
from __future__ import annotations

import logging
from typing import Any

import pytest
from test_runtime import APP, WRITE_JOB, kinds, run_captured, write_orders

from spark_plugin.circuit_breaker import CircuitBreaker, Settings, settings

KEY = "circuitBreaker."


def keys(**values: str) -> dict[str, str]:
    return {KEY + k: v for k, v in values.items()}


SETTINGS = [  # (id, prefix-less keys, expected Settings or None, warning expected)
    ("none", {}, None, False),
    ("noop", keys(type="noop"), None, False),
    ("task_queue_is_the_worker", keys(type="taskQueue", queueSize="5"), None, False),
    ("simple_memory_defaults", keys(type="simpleMemory"), Settings("simpleMemory", 20, 10, None), False),
    ("simple_memory", keys(type="simpleMemory", memoryThreshold="35", timeoutInSeconds="2"),
     Settings("simpleMemory", 35, 10, 2.0), False),
    ("java_runtime", keys(type="javaRuntime", memoryThreshold="5", gcCpuThreshold="50"),
     Settings("javaRuntime", 5, 50, None), False),
    ("timeout", keys(type="timeout", timeoutInSeconds="3"), Settings("timeout", 20, 10, 3.0), False),
    ("static", keys(type="static", valuesReturned="true, false,TRUE"),
     Settings("static", values=(True, False, True)), False),
    ("timeout_without_seconds", keys(type="timeout"), None, True),
    ("threshold_not_a_percentage", keys(type="simpleMemory", memoryThreshold="120"), None, True),
    ("threshold_not_a_number", keys(type="javaRuntime", gcCpuThreshold="high"), None, True),
    ("unknown_type", keys(type="memory"), None, True),
]


@pytest.mark.parametrize(("conf", "expected", "warned"), [pytest.param(c, e, w, id=i) for i, c, e, w in SETTINGS])
def test_settings(conf, expected, warned, caplog):
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        assert settings(conf) == expected
    assert bool(caplog.records) == warned


class Runtime:
    """The three numbers of ``java.lang.Runtime`` the memory check reads (bytes)."""

    def __init__(self, free: int, total: int, maximum: int) -> None:
        self.free, self.total, self.maximum = free, total, maximum

    def freeMemory(self) -> int:  # noqa: N802 - Java's names
        return self.free

    def totalMemory(self) -> int:  # noqa: N802
        return self.total

    def maxMemory(self) -> int:  # noqa: N802
        return self.maximum


class Bean:
    def __init__(self, count: int, time_ms: int) -> None:
        self.count, self.time_ms = count, time_ms

    def getCollectionCount(self) -> int:  # noqa: N802
        return self.count

    def getCollectionTime(self) -> int:  # noqa: N802
        return self.time_ms


class Beans(list):
    """A java.util.List of beans as py4j shows it."""

    def get(self, i: int) -> Any:
        return self[i]

    def size(self) -> int:
        return len(self)


def breaker(config: Settings, runtime: Runtime, beans: Beans, clock: list[float]) -> CircuitBreaker:
    return CircuitBreaker(config, lambda: runtime, lambda: beans, lambda: clock[0])


# free % = (free + max - total) / max: (10 + 100 - 50) / 100 = 60 %
MEMORY = [  # (id, type, memoryThreshold, runtime (free, total, max), closed)
    ("plenty_free", "simpleMemory", 20, (10, 50, 100), False),
    ("at_the_threshold", "simpleMemory", 60, (10, 50, 100), True),
    ("unused_heap_counts_as_free", "simpleMemory", 59, (10, 50, 100), False),
    ("heap_full", "simpleMemory", 20, (5, 100, 100), True),
]


@pytest.mark.parametrize(("kind", "threshold", "numbers", "closed"), [pytest.param(*r[1:], id=r[0]) for r in MEMORY])
def test_simple_memory(kind, threshold, numbers, closed):
    check = breaker(Settings(kind, threshold), Runtime(*numbers), Beans(), [0.0])
    assert (check.state() is not None) == closed


def test_java_runtime_needs_low_memory_and_busy_old_generation_gc():
    """The old generation's collector is the one that collected least often; its time between two checks over
    the time between them is the GC CPU share."""
    clock, runtime = [100.0], Runtime(5, 100, 100)  # 5 % free
    young, old = Bean(40, 1000), Bean(3, 2000)
    check = breaker(Settings("javaRuntime", memory_threshold=20, gc_cpu_threshold=30), runtime, Beans([young, old]),
                    clock)
    assert check.state() is None  # first read: no window yet
    clock[0], old.time_ms, young.time_ms = 110.0, 2000 + 4000, 9000  # 4 s of old-gen GC in 10 s: 40 %
    assert "GC CPU time 40.00%" in check.state()
    clock[0], old.time_ms = 120.0, 6000 + 1000  # 10 % since the last check
    assert check.state() is None
    clock[0], old.time_ms, runtime.free, runtime.total = 130.0, 7000 + 5000, 80, 100  # 50 % GC, 80 % free
    assert check.state() is None


def test_static_takes_one_value_per_read_then_stays_closed():
    check = breaker(Settings("static", values=(False, True, False)), Runtime(0, 1, 1), Beans(), [0.0])
    assert [check.state() is not None for _ in range(5)] == [False, True, False, True, True]


APPLIED = [  # (id, conf, expected (eventType, job) of a run writing one parquet dataset)
    # OpenLineage's CircuitBreakerIntegrationTest: static true,true -> no request at all
    ("static_closed", {"spark.openlineage.circuitBreaker.type": "static",
                       "spark.openlineage.circuitBreaker.valuesReturned": "true,true"}, []),
    ("memory_threshold_100_is_always_closed", {"spark.openlineage.circuitBreaker.type": "simpleMemory",
                                                "spark.openlineage.circuitBreaker.memoryThreshold": "100"}, []),
    ("java_runtime_always_closed", {"spark.openlineage.circuitBreaker.type": "javaRuntime",
                                    "spark.openlineage.circuitBreaker.memoryThreshold": "100",
                                    "spark.openlineage.circuitBreaker.gcCpuThreshold": "0"}, []),
    ("timeout_zero_drops_every_item", {"spark.openlineage.circuitBreaker.type": "timeout",
                                       "spark.openlineage.circuitBreaker.timeoutInSeconds": "0"}, []),
    ("memory_threshold_0_never_closes", {"spark.openlineage.circuitBreaker.type": "simpleMemory",
                                         "spark.openlineage.circuitBreaker.memoryThreshold": "0"},
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
    ("timeout_not_reached", {"spark.openlineage.circuitBreaker.type": "timeout",
                             "spark.openlineage.circuitBreaker.timeoutInSeconds": "60"},
     [("START", APP), ("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
    # closed for the application's START only (two reads: before and after its work), open for the rest
    ("static_open_after_the_first_item", {"spark.openlineage.circuitBreaker.type": "static",
                                          "spark.openlineage.circuitBreaker.valuesReturned":
                                          ",".join(["true"] + ["false"] * 40)},
     [("START", WRITE_JOB), ("RUNNING", WRITE_JOB), ("COMPLETE", WRITE_JOB), ("COMPLETE", APP)]),
]


@pytest.mark.parametrize(("conf", "expected"), [pytest.param(c, e, id=i) for i, c, e in APPLIED])
def test_the_worker_stops_lineage_work_while_the_breaker_is_closed(spark, workdir, conf, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="spark_plugin"):
        events, app = run_captured(spark, workdir, write_orders, conf)
    assert kinds(events) == expected
    assert not app.guard.failures
    stops = [r.getMessage() for r in caplog.records if "circuit breaker" in r.getMessage()]
    if expected and len(expected) == 5:
        assert stops == [] and app.breaker_stops == 0
    else:  # one warning when it first closes, one count at the end
        assert app.breaker_stops >= 1
        assert len(stops) == 2 and stops[-1].endswith(f"stopped lineage work {app.breaker_stops} times")
