"""What both harvester benchmarks measure of one `harvest` run in their child process: wall time, CPU of this
process and of the reader process it started, peak RSS of each, events written."""
from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(who: int) -> float:
    """User + system CPU of this process (RUSAGE_SELF) or of its ended children (RUSAGE_CHILDREN)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure_harvest(argv: list[str], events: Path, state_dir: str, count: int, log: Path) -> dict[str, Any]:
    """Run ``harvest *argv`` in this process, writing to the file transport at ``events``; ``count`` is how
    many statements or queries ``log`` holds (rates and CPU are per one of them)."""
    sys.path.insert(0, str(ROOT))
    from harvesters.cli import main

    events.unlink(missing_ok=True)
    os.environ["LINEAGE_CAPTURE_STATE_DIR"] = state_dir
    started, cpu = time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF)
    code = main([*argv, "--conf", "transport.type=file", "--conf", f"transport.location={events}"])
    elapsed, cpu = time.perf_counter() - started, cpu_seconds(resource.RUSAGE_SELF) - cpu
    with open(events, "rb") as f:
        emitted = sum(1 for _ in f)
    return {"exit": code, "seconds": elapsed, "rate": count / elapsed,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "events": emitted,
            "log_mb": log.stat().st_size / 1e6, "cpu_us": cpu / count * 1e6,
            "reader_cpu_us": cpu_seconds(resource.RUSAGE_CHILDREN) / count * 1e6,
            "reader_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
