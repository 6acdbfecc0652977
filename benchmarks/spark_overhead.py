"""What the PySpark lineage plugin costs: wall-time ratio plugin-on / plugin-off on paired runs.

Workloads (one local SparkSession; events delivered to a file transport):

(a) ``small``: N tiny parquet writes (every one a lineage-bearing action: the worst case per action);
(b) ``etl``: two parquet inputs of ~1M rows (generated once into ``--data-dir``), a join, an aggregate
    and a parquet write.

Runs are paired (off/on, then on/off next repetition, to cancel drift) after one warm-up of each. A run
is timed until Spark delivered its listener calls (what the application sees) and, plugin on, also until
the worker delivered every event of it (lineage extraction runs on the worker, concurrently; a real
application waits for it only at its end). The per-application cost (instrument, emitter set-up, the
app's START/COMPLETE, uninstrument) is reported apart, since an application pays it once.
Also reported: the listener callback's own time on Spark's listener thread (p50, p99) and the start-up
hook's import cost in a process that does not use Spark (``-X importtime``).

    .venv/bin/python benchmarks/spark_overhead.py [--reps 7] [--etl-reps 15] [--small-actions 100] [--rows 1000000]

Targets: (b) <= 1.02, (a) <= 1.10, callback p99 <= 2 ms, start-up hook < 2 ms.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("spark overhead benchmark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _generate(spark, data_dir: Path, rows: int) -> None:
    marker = data_dir / f"_generated_{rows}"
    if marker.exists():
        return
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    (spark.range(rows).selectExpr("id AS order_id", "id % 50000 AS customer_id", "rand(1) * 100 AS amount")
     .write.parquet(str(data_dir / "orders")))
    (spark.range(rows).selectExpr("id % 50000 AS customer_id", "concat('c', id) AS name", "id % 7 AS segment")
     .write.parquet(str(data_dir / "customers")))
    marker.touch()


def small_actions(spark, out: Path, n: int) -> None:
    df = spark.range(10)
    for i in range(n):
        df.write.mode("overwrite").parquet(str(out / f"small_{i % 10}"))


def etl(spark, data_dir: Path, out: Path) -> None:
    orders = spark.read.parquet(str(data_dir / "orders"))
    customers = spark.read.parquet(str(data_dir / "customers")).dropDuplicates(["customer_id"])
    (orders.join(customers, "customer_id").groupBy("segment")
     .agg({"amount": "sum", "order_id": "count"}).write.mode("overwrite").parquet(str(out / "etl_out")))


def _timed(spark, work: Callable[[], None], plugin: bool, events: Path, timings: list[int],
           fixed: list[float]) -> tuple[float, float]:
    """Seconds of ``work``: (until Spark delivered its listener calls, until the worker also delivered every
    event of it). The first is what the application sees; the second adds the lineage extraction and
    delivery still running on the worker, which a real application waits for only at its very end. The
    per-application cost (instrument, emitter set-up, the application's own START/COMPLETE, uninstrument)
    goes into ``fixed``: a real application pays it once."""
    import spark_plugin

    listener_bus = spark._jsparkSession.sparkContext().listenerBus()
    app = None
    if plugin:
        began = time.perf_counter()
        app = spark_plugin.instrument(spark, {"spark.openlineage.transport.type": "file",
                                              "spark.openlineage.transport.location": str(events)})
        app.worker.drain(30)  # emitter set-up and the application START
        fixed.append(time.perf_counter() - began)
    began = time.perf_counter()
    work()
    listener_bus.waitUntilEmpty()
    seen = time.perf_counter() - began
    if app is not None:
        app.worker.drain(60)
    delivered = time.perf_counter() - began
    if app is not None:
        began = time.perf_counter()
        spark_plugin.uninstrument()
        fixed[-1] += time.perf_counter() - began
        timings.extend(app.listener.timings)
    return seen, delivered


def _paired(spark, work: Callable[[], None], reps: int, events: Path, timings: list[int],
            fixed: list[float]) -> tuple[list[float], list[float]]:
    """Per pair: (on / off as the application sees it, on-until-delivered / off)."""
    _timed(spark, work, False, events, [], [])  # warm-up: JIT, file system caches
    _timed(spark, work, True, events, [], [])
    seen_ratios, delivered_ratios = [], []
    for rep in range(reps):
        order = (False, True) if rep % 2 == 0 else (True, False)
        times = {plugin: _timed(spark, work, plugin, events, timings, fixed) for plugin in order}
        off = times[False][0]
        seen_ratios.append(times[True][0] / off)
        delivered_ratios.append(times[True][1] / off)
        print(f"    rep {rep + 1}: off {off:.3f}s  on {times[True][0]:.3f}s (lineage delivered at "
              f"{times[True][1]:.3f}s)  ratio {seen_ratios[-1]:.3f} / {delivered_ratios[-1]:.3f}", flush=True)
    return seen_ratios, delivered_ratios


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _import_us(code: str, env: dict[str, str]) -> int:
    """Microseconds of imports a fresh interpreter spends running ``code`` (best of 7)."""
    best = None
    for _ in range(7):
        result = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                                text=True, env=env, check=True)
        total = 0
        for line in result.stderr.splitlines():
            parts = line.split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[0].split(":")[1].strip().isdigit():
                total += int(parts[0].split(":")[1])  # self time of each module imported
        best = total if best is None else min(best, total)
    return best or 0


def startup_hook_cost() -> dict[str, int]:
    """Import microseconds added by the .pth line: inert (no PYSPARK_GATEWAY_PORT) and armed."""
    line = (ROOT / "spark_plugin" / "lineage_capture.pth").read_text().strip()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = str(ROOT)
    base = _import_us("pass", env)
    inert = _import_us(line, env)
    armed = _import_us(line, {**env, "PYSPARK_GATEWAY_PORT": "1"})
    return {"baseline": base, "inert_delta": inert - base, "armed_delta": armed - base}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=7, help="paired runs of (a)")
    parser.add_argument("--etl-reps", type=int, default=15, help="paired runs of (b): short, so noisier")
    parser.add_argument("--small-actions", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    args = parser.parse_args()

    hook = startup_hook_cost()
    print(f"start-up hook imports: inert {hook['inert_delta']} us, armed (spark-submit driver) "
          f"{hook['armed_delta']} us (interpreter baseline {hook['baseline']} us)", flush=True)

    os.environ.setdefault("LINEAGE_CAPTURE_STATE_DIR", tempfile.mkdtemp(prefix="spark_overhead_state"))
    spark = _session()
    _generate(spark, args.data_dir, args.rows)
    out = Path(tempfile.mkdtemp(prefix="spark_overhead_out"))
    events = out / "events.jsonl"
    results = {}
    fixed: list[float] = []
    for name, work, reps in [
        (f"(a) {args.small_actions} small actions", lambda: small_actions(spark, out, args.small_actions), args.reps),
        (f"(b) ETL, 2 x {args.rows} rows, join + aggregate + write", lambda: etl(spark, args.data_dir, out),
         args.etl_reps),
    ]:
        print(name, flush=True)
        timings: list[int] = []
        seen, delivered = _paired(spark, work, reps, events, timings, fixed)
        results[name] = (statistics.median(seen), statistics.median(delivered), timings)
    print("\nresults")
    all_timings = []
    for name, (seen, delivered, timings) in results.items():
        all_timings += timings
        print(f"  {name}: median ratio on/off {seen:.3f} (until its lineage was delivered: {delivered:.3f}); "
              f"callback p50 {_percentile(timings, 0.5) / 1e3:.0f} us, p99 {_percentile(timings, 0.99) / 1e3:.0f} us"
              f" over {len(timings)} calls")
    print(f"  per-application fixed cost (instrument + uninstrument, app START/COMPLETE delivered): "
          f"median {statistics.median(fixed) * 1e3:.0f} ms over {len(fixed)} applications")
    print(f"  listener callback overall: p50 {_percentile(all_timings, 0.5) / 1e3:.0f} us, "
          f"p99 {_percentile(all_timings, 0.99) / 1e3:.0f} us, max {max(all_timings, default=0) / 1e3:.0f} us")
    spark.stop()
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
