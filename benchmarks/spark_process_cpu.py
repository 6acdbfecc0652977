"""Which process of a ``spark-submit`` the plugin's CPU lands in: an application of ``spark_overhead.py`` (the ETL,
or ``--app small|wide``, or ``counts``: 200 ``count()`` calls, actions the plugin does not emit), plugin off and on
(file transport), interleaved; each process's CPU (user + system, from ``/proc``, sampled every 50 ms while it runs)
and the JVM's by thread name (digits folded: ``C# CompilerThre`` is every JIT compiler thread, ``Thread-#`` the py4j
threads serving the driver's calls).

- ``jvm``: spark-submit's JVM (the driver's JVM: Spark's own work, and what the plugin's py4j calls make it do);
- ``driver``: the application's Python process;
- ``child``: the emitter's child process (``emitter.emitter_process``), with the plugin on.

Thread clocks of the driver's Python are in ``spark_plugin_cpu.py``; wall times in ``spark_overhead.py``. On a
2-core machine running ``local[2]`` both cores are busy most of the run, so every CPU-second added anywhere in the
tree costs about half a second of wall time.

    .venv/bin/python benchmarks/spark_process_cpu.py [--reps 8] [--threads] [--app etl|small|wide|counts]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_overhead  # noqa: E402 - the same application, data and spark-submit command

TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(child) for child in f.read().split()]
    except OSError:
        pass
    return found


def _cpu_and_name(stat_path: str) -> tuple[float, str]:
    with open(stat_path) as f:
        stat = f.read()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS, stat[stat.index("(") + 1:stat.rindex(")")]


def _role(pid: int, previous: str | None) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        arguments = f.read().split(b"\0")
    if arguments == [b""]:  # a zombie (ended, not yet reaped): what it was before
        return previous or "other"
    if any(b"emitter.emitter_process" in a for a in arguments):
        return "child"
    if arguments[0].endswith(b"java") and b"org.apache.spark.deploy.SparkSubmit" in arguments:
        return "jvm"
    if arguments[0].endswith(b"python") and len(arguments) > 1 and arguments[1].endswith(b"app.py"):
        return "driver"
    return "other"  # spark-submit's shell scripts, the launcher's JVM


def run(work: Path, app_args: list[str], conf: dict[str, str]) -> dict[str, float]:
    """One run: its wall time, the CPU of each role, and of each JVM thread name (``t:<name>``)."""
    began = time.perf_counter()
    process = subprocess.Popen([*spark_overhead.submit_command(conf), str(work / "app.py"), *app_args],
                               env=spark_overhead.driver_env(work / "state"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    last: dict[int, tuple[str, float]] = {}
    threads: dict[str, tuple[str, float]] = {}
    while process.poll() is None:
        pending = [process.pid]
        while pending:
            pid = pending.pop()
            try:
                role = _role(pid, last.get(pid, ("other", 0.0))[0])
                last[pid] = (role, _cpu_and_name(f"/proc/{pid}/stat")[0])
                if role == "jvm":
                    for task in os.listdir(f"/proc/{pid}/task"):
                        cpu, name = _cpu_and_name(f"/proc/{pid}/task/{task}/stat")
                        threads[task] = (re.sub(r"[0-9]+", "#", name), cpu)
            except (OSError, ValueError, IndexError):  # (it ended meanwhile)
                pass
            pending += _children(pid)
        time.sleep(0.05)
    result = {"wall": time.perf_counter() - began}
    for role, cpu in last.values():
        result[role] = result.get(role, 0.0) + cpu
    for name, cpu in threads.values():
        result[f"t:{name}"] = result.get(f"t:{name}", 0.0) + cpu
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=8, help="interleaved off/on pairs (after one warm-up pair)")
    parser.add_argument("--threads", action="store_true", help="also the JVM's CPU by thread name")
    parser.add_argument("--app", choices=["etl", "small", "wide", "counts"], default="etl")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    args = parser.parse_args()
    work, on = spark_overhead.prepare("spark_process_cpu_", args.data_dir, args.rows, 150)
    app_args = {"etl": ["etl", str(args.data_dir), str(work / "out")],
                "small": ["small", str(args.data_dir), str(work / "out"), "200"],
                "wide": ["wide", str(args.data_dir), str(work / "out"), "150"],
                "counts": ["counts", str(args.data_dir), str(work / "out"), "200"]}[args.app]
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    for rep in range(args.reps + 1):
        for variant in (("off", "on") if rep % 2 == 0 else ("on", "off")):
            result = run(work, app_args, {} if variant == "off" else on)
            if rep:
                runs[variant].append(result)
    names = sorted({k for r in runs["off"] + runs["on"] for k in r}, key=lambda k: (k.startswith("t:"), k))
    print(f"{args.app}, {args.reps} pairs: seconds (medians off / on; the on-off difference of the medians and of "
          "the means)")
    for name in names:
        if name.startswith("t:") and not args.threads:
            continue
        off, on_values = ([r.get(name, 0.0) for r in runs[v]] for v in ("off", "on"))
        if max(off + on_values) < 0.05:
            continue
        print(f"  {name:24s} {statistics.median(off):7.2f} / {statistics.median(on_values):7.2f}   "
              f"{statistics.median(on_values) - statistics.median(off):+.2f}  "
              f"{statistics.fmean(on_values) - statistics.fmean(off):+.2f}")


if __name__ == "__main__":
    main()
