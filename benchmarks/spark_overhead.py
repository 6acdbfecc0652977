"""What the PySpark lineage plugin costs a whole application: wall time of ``spark-submit`` processes.

Applications (written to a temp dir; they know nothing about lineage):

- ``etl``: two parquet inputs of ``--rows`` rows (generated once into ``--data-dir``), a join, an aggregate and a
  parquet write: a few seconds of Spark work;
- ``small``: ``--small-actions`` tiny parquet writes (every one a lineage-bearing action: the worst case per action);
- ``wide``: one write of a union of ``--wide-inputs`` parquet directories (a plan with that many relations).

The plugin's own modules are byte-compiled first, as ``pip install`` leaves them. Each application runs as its
own ``spark-submit`` process, plugin off and plugin on (file transport), the two
interleaved (off/on, then on/off next repetition, to cancel drift), after one warm-up of each. The ETL application
also runs with an http transport to a backend refusing connections (``down``) and to one accepting connections
and never answering (``hang``). Every run's end is timed too, from the application's ``spark.stop()`` call to its
process's exit: what the plugin (and a backend down or hanging) adds to the application's end, in seconds, apart
from the rest of the run's noise. So is the CPU of each run's whole process tree (the JVM, the Python driver, the
plugin's emitter child): on this VM it is no steadier than wall time (a run the host slows burns more CPU too: the
ETL's pairs differ by 1.5 s of CPU against 1.0 s of wall, correlated 0.95), but its mean over the pairs says what the
plugin's work costs in CPU beside what it costs in time (its threads' own clocks: ``spark_plugin_cpu.py``). The
plugin-on runs of the small-actions application write the listener callback's own times (Spark's listener thread)
to a file at exit, reported as p50/p99. Column lineage is whatever the plugin emits by default.

    .venv/bin/python benchmarks/spark_overhead.py [--reps 5] [--small-actions 200] [--wide-inputs 150] [--rows 2000000]

Whole-process times are quantized: ``spark.stop()`` returns when PySpark's accumulator server (``serve_forever``,
0.5 s poll) next wakes, so a process ends on a 0.5 s grid counted from its SparkContext's start, and any added
time moves some runs one step up. The ratio of medians can hide that (or show a whole step); the ratio of means is
printed beside it: over enough repetitions it is the added time a user pays on average. Single runs of the same
application vary by +-0.5 s on this VM (JIT, GC, the grid), so the added time is also given as the mean of the
interleaved pairs' differences with a 90% bootstrap interval: a target is met when the interval's upper end is.
The median of the differences (with its interval) is printed beside it: an outlier pair, one run slowed by seconds
by this VM's host, moves the mean but not the median.

Targets: ETL <= 1.02, small actions <= 1.10, wide plan <= 1.05, backend down or hanging <= +0.5 s, callback
p99 <= 2 ms.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

APP = r'''
import atexit, json, os, sys, time
marks = [("start", time.time())]  # the benchmark's phase marks, written to BENCH_MARKS after spark.stop()
from pyspark.sql import SparkSession
marks.append(("import", time.time()))

kind, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
if os.environ.get("BENCH_IMPORT_ONLY"):  # spark_phases --variant imports: the plugin's preload alone, no plugin,
    import threading, spark_plugin._startup as startup  # on a thread while the JVM creates the context, as the
    threading.Thread(target=startup.preload, daemon=True).start()  # plugin's start-up hook runs it
spark = SparkSession.builder.appName(f"overhead {kind}").getOrCreate()
marks.append(("session", time.time()))
spark.sparkContext.setLogLevel("ERROR")
timings_file = os.environ.get("BENCH_TIMINGS")
if timings_file:  # the benchmark's probe: the listener callback's own times, read before the app ends
    import spark_plugin.lifecycle as lifecycle
    apps = lifecycle.applications()
    atexit.register(lambda: open(timings_file, "w").write(json.dumps(
        [t for app in apps for t in app.listener.timings])))
if kind == "generate":
    rows = int(sys.argv[4])
    spark.range(rows).selectExpr("id AS order_id", "id % 50000 AS customer_id", "rand(1) * 100 AS amount") \
        .write.mode("overwrite").parquet(f"{data}/orders")
    spark.range(rows).selectExpr("id % 50000 AS customer_id", "concat('c', id) AS name", "id % 7 AS segment") \
        .write.mode("overwrite").parquet(f"{data}/customers")
    for i in range(int(sys.argv[5])):
        spark.range(3).selectExpr("id", f"{i} AS part").write.mode("overwrite").parquet(f"{data}/wide/p{i}")
elif kind == "etl":
    orders = spark.read.parquet(f"{data}/orders")
    customers = spark.read.parquet(f"{data}/customers").dropDuplicates(["customer_id"])
    marks.append(("reads", time.time()))
    orders.join(customers, "customer_id").groupBy("segment").agg({"amount": "sum", "order_id": "count"}) \
        .write.mode("overwrite").parquet(f"{out}/etl_out")
elif kind == "small":
    df = spark.range(10)
    for i in range(int(sys.argv[4])):
        df.write.mode("overwrite").parquet(f"{out}/small_{i % 10}")
elif kind == "counts":  # actions the JVM integration does not emit (Aggregate roots): the plugin's cost of those
    df = spark.range(10)
    for i in range(int(sys.argv[4])):
        df.count()
elif kind == "wide":
    from functools import reduce
    parts = [spark.read.parquet(f"{data}/wide/p{i}") for i in range(int(sys.argv[4]))]
    marks.append(("reads", time.time()))
    reduce(lambda a, b: a.unionByName(b), parts).write.mode("overwrite").parquet(f"{out}/wide_out")
marks.append(("write", time.time()))  # the application's end is timed from here: its spark.stop() to its exit
spark.stop()
marks.append(("stop", time.time()))
if os.environ.get("BENCH_MARKS"):
    open(os.environ["BENCH_MARKS"], "w").write(json.dumps(marks))
'''


def driver_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "PYSPARK_", "SPARK_"))}
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, LINEAGE_CAPTURE_STATE_DIR=str(state),
               OPENLINEAGE_CONFIG=str(state / "none.yml"), PYTHONPATH=str(ROOT))
    return env


def submit_command(conf: dict[str, str]) -> list[str]:
    """The benchmarks' ``spark-submit`` command (local[2], no UI, 4 shuffle partitions) with ``conf``, before the
    application and its arguments."""
    command = [str(VENV_BIN / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
               "--conf", "spark.sql.shuffle.partitions=4"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def submit(app: Path, args: list[str], conf: dict[str, str], state: Path, extra_env: dict[str, str] | None = None
           ) -> float:
    """Seconds of one ``spark-submit`` process, start to exit."""
    began = time.perf_counter()
    result = subprocess.run([*submit_command(conf), str(app), *args], env={**driver_env(state), **(extra_env or {})},
                            capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"spark-submit failed ({result.returncode}):\n{result.stdout[-3000:]}")
    return elapsed


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's ended children so far: a ``spark-submit`` tree's (its JVM, the
    Python driver, the plugin's emitter child) once it has exited."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def http_conf(on: dict[str, str], url: str) -> dict[str, str]:
    """The plugin-on conf with an http transport to ``url`` in place of the file transport (no file location
    left over: the plugin would warn about an unknown key in the driver's output)."""
    return {**{k: v for k, v in on.items() if k != "spark.openlineage.transport.location"},
            "spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": url}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hanging_backend() -> int:
    """A server accepting connections and never answering (its sockets stay open until the process ends)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held = []

    def accept() -> None:
        while True:
            held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _bootstrap(values: list[float], statistic: Callable[[list[float]], float] = statistics.fmean,
               rounds: int = 10_000, seed: int = 1) -> tuple[float, float]:
    """The 5th and 95th percentiles of ``statistic`` (the mean) of ``values`` resampled with replacement."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    rng = random.Random(seed)
    estimates = sorted(statistic(rng.choices(values, k=len(values))) for _ in range(rounds))
    return estimates[int(0.05 * rounds)], estimates[int(0.95 * rounds) - 1]


def _added(differences: list[float]) -> str:
    """The pairs' differences as the mean and the median, each with its 90% bootstrap interval. The median is
    robust to this VM's outlier pairs (one run of a pair slowed by seconds by the host); the mean is what a user
    pays on average over many runs."""
    mean_low, mean_high = _bootstrap(differences)
    median_low, median_high = _bootstrap(differences, statistics.median)
    return (f"mean {statistics.fmean(differences):+.2f}s (90% interval {mean_low:+.2f}..{mean_high:+.2f}), "
            f"median {statistics.median(differences):+.2f}s ({median_low:+.2f}..{median_high:+.2f})")


def prepare(prefix: str, data_dir: Path, rows: int, wide_inputs: int) -> tuple[Path, dict[str, str]]:
    """Byte-compile the plugin, write the applications to a new work directory (``app.py``; ``state`` and ``out``
    below it), generate the inputs once into ``data_dir``; the work directory and the plugin-on conf (file
    transport into it)."""
    # pip compiles an installed package's modules; an editable checkout (PYTHONDONTWRITEBYTECODE set, or a fresh
    # clone) would compile the plugin's ~35 modules from source in every driver (~50 ms of CPU a user never pays)
    compileall.compile_dir(ROOT / "spark_plugin", quiet=1)
    compileall.compile_dir(ROOT / "emitter", quiet=1)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    app = work / "app.py"
    app.write_text(APP)
    marker = data_dir / f"_generated_{rows}_{wide_inputs}"
    if not marker.exists():
        print("generating the inputs once...", flush=True)
        submit(app, ["generate", str(data_dir), str(work / "out"), str(rows), str(wide_inputs)], {}, work / "state")
        marker.touch()
    return work, {"spark.openlineage.python.enabled": "true", "spark.openlineage.transport.type": "file",
                  "spark.openlineage.transport.location": str(work / "events.jsonl")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="interleaved off/on pairs per application")
    parser.add_argument("--small-actions", type=int, default=200)
    parser.add_argument("--wide-inputs", type=int, default=150)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--only", nargs="*", default=["etl", "small", "wide", "down", "hang"])
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    args = parser.parse_args()

    work, on = prepare("spark_overhead_", args.data_dir, args.rows, args.wide_inputs)
    app, state, out = work / "app.py", work / "state", work / "out"
    apps = {"etl": ["etl", str(args.data_dir), str(out)],
            "small": ["small", str(args.data_dir), str(out), str(args.small_actions)],
            "wide": ["wide", str(args.data_dir), str(out), str(args.wide_inputs)]}
    variants = {"on": on,
                "down": http_conf(on, f"http://127.0.0.1:{closed_port()}"),
                "hang": http_conf(on, f"http://127.0.0.1:{_hanging_backend()}")}
    plan = [(name, "on") for name in ("etl", "small", "wide") if name in args.only]
    plan += [("etl", variant) for variant in ("down", "hang") if variant in args.only]
    timings: list[int] = []
    results = []
    for name, variant in plan:
        print(f"{name} ({variant})", flush=True)
        conf = variants[variant]
        submit(app, apps[name], {}, state)  # warm-up: file system caches
        submit(app, apps[name], conf, state)
        offs: list[float] = []
        ons: list[float] = []
        ends: dict[bool, list[float]] = {False: [], True: []}  # spark.stop() to exit, off and on
        cpus: dict[bool, list[float]] = {False: [], True: []}  # CPU of the whole process tree, off and on
        marks_file = work / "marks.json"
        for rep in range(args.reps):
            for plugin in ((False, True) if rep % 2 == 0 else (True, False)):
                extra = {"BENCH_MARKS": str(marks_file)}
                if plugin and name == "small":
                    extra["BENCH_TIMINGS"] = str(work / f"timings_{rep}.json")
                cpu_before = children_cpu()
                (ons if plugin else offs).append(submit(app, apps[name], conf if plugin else {}, state, extra))
                cpus[plugin].append(children_cpu() - cpu_before)
                ends[plugin].append(time.time() - dict(json.loads(marks_file.read_text()))["write"])
                if plugin and name == "small":
                    timings += json.loads((work / f"timings_{rep}.json").read_text())
            print(f"    rep {rep + 1}: off {offs[-1]:.2f}s  on {ons[-1]:.2f}s  ratio {ons[-1] / offs[-1]:.3f}  "
                  f"(end: off {ends[False][-1]:.2f}s  on {ends[True][-1]:.2f}s; "
                  f"CPU: off {cpus[False][-1]:.1f}s  on {cpus[True][-1]:.1f}s)", flush=True)
        results.append((name, variant, offs, ons, ends, cpus))
    print("\nresults (whole spark-submit processes; the end is from spark.stop() to the process's exit)")
    for name, variant, offs, ons, ends, cpus in results:
        off_median, on_median = statistics.median(offs), statistics.median(ons)
        differences = [on - off for on, off in zip(ons, offs)]
        low, high = _bootstrap(differences)
        print(f"  {name:6s} {variant:5s}: off {off_median:.2f}s  on {on_median:.2f}s  ratio of medians "
              f"{on_median / off_median:.3f}, of means {statistics.fmean(ons) / statistics.fmean(offs):.3f}, "
              f"90% interval of the mean added as a ratio {1 + low / off_median:.3f}..{1 + high / off_median:.3f}\n"
              f"      added per pair: {_added(differences)}\n"
              f"      end: off {statistics.median(ends[False]):.2f}s  on {statistics.median(ends[True]):.2f}s; "
              f"added per pair: {_added([on - off for on, off in zip(ends[True], ends[False])])}\n"
              f"      CPU of the process tree: off {statistics.median(cpus[False]):.1f}s  "
              f"on {statistics.median(cpus[True]):.1f}s; added per pair: "
              f"{_added([on - off for on, off in zip(cpus[True], cpus[False])])}")
    if timings:
        print(f"  listener callback: p50 {_percentile(timings, 0.5) / 1e3:.0f} us, p99 "
              f"{_percentile(timings, 0.99) / 1e3:.0f} us, max {max(timings) / 1e3:.0f} us over {len(timings)} calls")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
