"""Where the PySpark plugin's cost goes: the CPU its own threads spend, by part, in the ETL (or wide, or
small-actions) application of ``spark_overhead.py`` under ``spark-submit`` (plugin on, file transport).

Whole-process wall times on this VM move by a second from run to run, far more than the plugin costs; thread CPU
clocks do not. The probe application wraps the plugin's entry points before its first line touches Spark (the
plugin itself is unchanged) and reads, per part:

- ``preload``: the start-up hook's preload thread (openlineage-python's import while the JVM creates the
  SparkContext): Python CPU;
- ``instrument``: ``instrument()`` on the driver's main thread, plus ``instrument_context()`` (the application's run
  started when the SparkContext is made) where the plugin has it: wall, Python CPU, and the CPU of the JVM thread
  serving the main thread's py4j calls (the listener's registration builds the session's state there, which the
  application's first DataFrame then does not pay);
- ``worker``: the worker thread (plan reading, events, delivery): Python CPU and the CPU of its JVM thread;
- ``stop``: the ``spark.stop()`` hook (the last actions' events delivered before the context stops): wall;
- the driver's whole Python process, plugin on against off (interleaved runs).

    .venv/bin/python benchmarks/spark_plugin_cpu.py [--reps 5] [--variant on|down] [--app etl|wide|small]
        [--baseline REV]   # the checkout's plugin against REV's, both on, alternating (a change's own CPU)
"""
from __future__ import annotations

import argparse
import compileall
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_overhead  # noqa: E402 - the same applications, data and spark-submit command

PROBE = r'''
import atexit, json, os, sys, threading, time
bench_parts = {}  # not `parts`: the probe shares the application's globals (wide has a `parts`)

def report():
    times = os.times()
    bench_parts["process_python_cpu"] = times.user + times.system
    with open(os.environ["BENCH_PARTS"], "w") as f:
        json.dump(bench_parts, f)

atexit.register(report)  # registered first: runs after the plugin's own exit hook
if os.environ.get("BENCH_PLUGIN") == "on":
    import spark_plugin._startup as startup  # imported already by the start-up hook

    def jvm_cpu():  # the CPU of the JVM thread serving this Python thread's py4j calls (pinned threads)
        from pyspark import SparkContext
        return SparkContext._jvm.java.lang.management.ManagementFactory.getThreadMXBean() \
            .getCurrentThreadCpuTime() / 1e9

    def patch():
        # on the preload thread, right after the first modules it imports anyway: the main thread is then still
        # waiting for the JVM to create the SparkContext, and imports nothing of the plugin earlier than it would
        import spark_plugin.lifecycle as lifecycle
        import spark_plugin.worker as worker

        def timed(function):  # summed: instrument_context() (at the SparkContext's making) and instrument()
            def timed_call(*args, **kwargs):
                wall, cpu, jvm = time.perf_counter(), time.thread_time(), jvm_cpu()
                try:
                    return function(*args, **kwargs)
                finally:
                    for part, value in (("instrument_jvm_cpu", jvm_cpu() - jvm),
                                        ("instrument_python_cpu", time.thread_time() - cpu),
                                        ("instrument_wall", time.perf_counter() - wall)):
                        bench_parts[part] = bench_parts.get(part, 0.0) + value
            return timed_call
        lifecycle.instrument = timed(lifecycle.instrument)
        if hasattr(lifecycle, "instrument_context"):  # (a --baseline before it had none)
            lifecycle.instrument_context = timed(lifecycle.instrument_context)

        run = worker.Worker._run
        def timed_run(self):
            jvm = jvm_cpu()
            try:
                run(self)
            finally:
                bench_parts["worker_jvm_cpu"] = jvm_cpu() - jvm
                bench_parts["worker_python_cpu"] = time.thread_time()
        worker.Worker._run = timed_run

        on_stop = lifecycle.Application.on_stop
        def timed_on_stop(self):
            wall = time.perf_counter()
            try:
                on_stop(self)
            finally:
                bench_parts["stop_wall"] = time.perf_counter() - wall
        lifecycle.Application.on_stop = timed_on_stop

    preload = startup.preload
    def timed_preload():
        try:
            patch()
            preload()
        finally:
            bench_parts["preload_python_cpu"] = time.thread_time()
    startup.preload = timed_preload

exec(compile(open(os.environ["BENCH_APP"]).read(), os.environ["BENCH_APP"], "exec"))
'''

ROWS = (("preload_python_cpu", "preload thread, Python CPU"),
        ("instrument_wall", "instrument() (+ _context()) on the main thread, wall"),
        ("instrument_python_cpu", "instrument() (+ _context()), Python CPU"),
        ("instrument_jvm_cpu", "instrument() (+ _context()), JVM thread CPU"),
        ("worker_python_cpu", "worker thread, Python CPU"),
        ("worker_jvm_cpu", "worker thread, JVM thread CPU"),
        ("stop_wall", "spark.stop() hook, wall"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="interleaved off/on runs")
    parser.add_argument("--variant", choices=["on", "down"], default="on",
                        help="on: file transport; down: an http transport to a closed port (one spool for all runs)")
    parser.add_argument("--app", choices=["etl", "wide", "small"], default="etl",
                        help="etl: a join and an aggregate of two inputs; wide: a union of --wide-inputs reads; "
                             "small: --small-actions tiny writes")
    parser.add_argument("--small-actions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--wide-inputs", type=int, default=150)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    parser.add_argument("--baseline", metavar="REV",
                        help="instead of plugin off: the plugin as it was at git revision REV (its spark_plugin/ and "
                             "emitter/ first on the driver's PYTHONPATH), alternating with the checkout's")
    args = parser.parse_args()

    work, on = spark_overhead.prepare("spark_plugin_cpu_", args.data_dir, args.rows, args.wide_inputs)
    if args.variant == "down":
        on = spark_overhead.http_conf(on, f"http://127.0.0.1:{spark_overhead.closed_port()}")
    app, probe, state, out = work / "app.py", work / "probe.py", work / "state", work / "out"
    probe.write_text(PROBE)
    other = "baseline" if args.baseline else "off"
    baseline_path = _baseline(args.baseline, work) if args.baseline else None
    runs: dict[str, list[dict[str, float]]] = {other: [], "on": []}
    count = {"wide": [str(args.wide_inputs)], "small": [str(args.small_actions)]}.get(args.app, [])
    app_args = [args.app, str(args.data_dir), str(out), *count]
    for rep in range(args.reps + 1):  # the first pair warms the file system caches
        for variant in ((other, "on") if rep % 2 == 0 else ("on", other)):
            parts_file = work / "parts.json"
            env = {"BENCH_PARTS": str(parts_file), "BENCH_APP": str(app),
                   "BENCH_PLUGIN": "off" if variant == "off" else "on"}
            if variant == "baseline":
                env["PYTHONPATH"] = str(baseline_path)
            spark_overhead.submit(probe, app_args, {} if variant == "off" else on, state, env)
            if rep:
                runs[variant].append(json.loads(parts_file.read_text()))
    if args.baseline:
        _print_comparison(args, runs)
        return
    print(f"{args.app} application, {args.variant}, {args.reps} runs each (median, min-max):")
    for key, label in ROWS:
        values = [r[key] for r in runs["on"] if key in r]
        if values:
            print(f"  {label:50s} {statistics.median(values):6.3f} s  ({min(values):.3f}-{max(values):.3f})")
    on_cpu = [r["process_python_cpu"] for r in runs["on"]]
    off_cpu = [r["process_python_cpu"] for r in runs["off"]]
    print(f"  {'driver Python process CPU, off / on':50s} {statistics.median(off_cpu):6.3f} / "
          f"{statistics.median(on_cpu):.3f} s (added per pair, median: "
          f"{statistics.median(a - b for a, b in zip(on_cpu, off_cpu)):+.3f} s)")


def _baseline(revision: str, work: Path) -> Path:
    """The plugin's packages as they were at ``revision``, byte-compiled, in a directory of their own."""
    target = work / "baseline"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(spark_overhead.ROOT), "archive", revision, "spark_plugin", "emitter"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    compileall.compile_dir(target, quiet=1)
    return target


def _print_comparison(args: argparse.Namespace, runs: dict[str, list[dict[str, float]]]) -> None:
    print(f"{args.app} application, {args.variant}, {args.reps} runs each, the checkout against {args.baseline} "
          f"(medians; the same part's min-max):")
    for key, label in [*ROWS, ("process_python_cpu", "driver Python process CPU")]:
        now, then = ([r[key] for r in runs[v] if key in r] for v in ("on", "baseline"))
        if now and then:
            print(f"  {label:50s} {statistics.median(now):6.3f} s ({min(now):.3f}-{max(now):.3f})  against "
                  f"{statistics.median(then):.3f} s ({min(then):.3f}-{max(then):.3f})")


if __name__ == "__main__":
    main()
