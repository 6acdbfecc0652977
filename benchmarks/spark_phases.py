"""Where the Spark plugin's added wall time goes in the ETL application (or the wide one: ``--app wide``): each
phase of the run, plugin on against off, in interleaved ``spark-submit`` pairs (the applications of
``spark_overhead.py``, which mark their phases).

Phases: ``start`` (spark-submit's launch to the script's first line), ``import`` (pyspark), ``session``
(``getOrCreate()``, where the plugin is instrumented), ``reads`` (the ``spark.read.parquet`` calls: two, or the wide
application's 150), ``write`` (the join, aggregate and write; the union's write), ``stop`` (``spark.stop()``),
``exit`` (to the process's exit); ``cpu`` is the CPU of the whole process tree. Whole-process noise on this VM is
seconds per pair; the phases show which part of a difference is the plugin's (``session`` and ``reads`` trade the
session state's build between them).

    .venv/bin/python benchmarks/spark_phases.py [--reps 10] [--app etl|wide] [--variant on|down|imports]
        [--conf KEY=VALUE]...

``on`` is the file transport; ``down`` an http transport to a closed port (one port, so one spool, for the run);
``imports`` is no plugin at all, the application running the plugin's preload itself (``_startup.preload``: what the
start-up hook imports, openlineage-python, the emitter, the plan reader) on a thread started just before its
``getOrCreate()``, as the hook starts it while the JVM creates the context: what those imports alone cost, e.g. the
context's slower creation (``session``) and the interpreter's longer teardown at ``exit``.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_overhead  # noqa: E402 - the same data, spark-submit command and plugin-on conf


def phases(app: Path, args: list[str], conf: dict[str, str], work: Path, env: dict[str, str] | None = None
           ) -> dict[str, float]:
    """Seconds of each phase of one run, and the CPU of its process tree."""
    marks_file = work / "marks.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    spark_overhead.submit(app, args, conf, work / "state", {"BENCH_MARKS": str(marks_file), **(env or {})})
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    points = [("launch", launched), *[tuple(mark) for mark in json.loads(marks_file.read_text())], ("exit", ended)]
    out = {name: at - points[i][1] for i, (name, at) in enumerate(points[1:])}
    out["total"] = ended - launched
    out["cpu"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10, help="interleaved off/on pairs")
    parser.add_argument("--app", choices=["etl", "wide"], default="etl")
    parser.add_argument("--variant", choices=["on", "down", "imports"], default="on")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="more Spark conf for the plugin-on runs (e.g. a facet switched off), repeatable")
    parser.add_argument("--against", action="append", default=[], metavar="KEY=VALUE",
                        help="the other side of each pair is the plugin too, with this conf on top (one part's cost: "
                             "e.g. --against spark.openlineage.python.pollIntervalSeconds=0), repeatable")
    args = parser.parse_args()
    work, conf = spark_overhead.prepare("spark_phases_", args.data_dir, args.rows, 150)
    if args.variant == "down":
        conf = spark_overhead.http_conf(conf, f"http://127.0.0.1:{spark_overhead.closed_port()}")
    env = {}
    if args.variant == "imports":
        conf, env = {}, {"BENCH_IMPORT_ONLY": "1"}
    conf = {**conf, **dict(item.split("=", 1) for item in args.conf)}
    off_conf: dict[str, str] = {**conf, **dict(item.split("=", 1) for item in args.against)} if args.against else {}
    off_env = env if args.against else None
    app = work / "app.py"
    app_args = [args.app, str(args.data_dir), str(work / "out"), *(["150"] if args.app == "wide" else [])]
    for warm_conf, warm_env in ((off_conf, off_env), (conf, env)):  # file system caches, the variant's modules included
        phases(app, app_args, warm_conf, work, warm_env)
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for rep in range(args.reps):
        for plugin in ((False, True) if rep % 2 == 0 else (True, False)):
            runs[plugin].append(phases(app, app_args, conf if plugin else off_conf, work, env if plugin else off_env))
        print(f"    rep {rep + 1}: " + "  ".join(f"{name} {runs[True][-1][name] - runs[False][-1][name]:+.2f}"
                                                 for name in runs[True][-1]), flush=True)
    print(f"\n{'phase':8s} {'off (median)':>12s} {'on (median)':>12s} {'added (mean of pairs)':>22s}")
    for name in runs[True][0]:
        added = statistics.fmean(on[name] - off[name] for on, off in zip(runs[True], runs[False]))
        print(f"{name:8s} {statistics.median(r[name] for r in runs[False]):12.3f} "
              f"{statistics.median(r[name] for r in runs[True]):12.3f} {added:+22.3f}")


if __name__ == "__main__":
    main()
