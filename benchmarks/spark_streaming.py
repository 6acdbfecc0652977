"""What following a Structured Streaming query costs: a rate source on a short trigger into foreachBatch, in-process
with the plugin on (file transport), for ``--seconds``.

Reported: micro-batches run; events written per micro-batch (the JVM integration sends at least START and COMPLETE
per micro-batch execution: 2.0 is "no more than the JVM"); the plugin's own part of the streaming listener's
progress callback (Spark's ``streams`` listener thread; PySpark's conversion of the event comes before it) and the
worker's time per micro-batch (plan read + records), p50/p99; Python heap growth (tracemalloc) between the end of
the first quarter of the run and its end, which stays flat when nothing is kept per batch.

    .venv/bin/python benchmarks/spark_streaming.py [--seconds 60] [--trigger 0.2] [--rows-per-second 100]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] / 1e6 if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--trigger", type=float, default=0.2, help="processing-time trigger, seconds")
    parser.add_argument("--rows-per-second", type=int, default=100)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import spark_plugin
    from spark_plugin import streaming

    spark = SparkSession.builder.master("local[2]").appName("stream bench").config("spark.ui.enabled", "false") \
        .getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    events = work / "events.jsonl"
    app = spark_plugin.instrument(spark, {
        "spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(events),
        "spark.openlineage.python.pollIntervalSeconds": "0"})
    assert app is not None
    listener = app._streams[0][1]
    own: list[int] = []
    worker: list[int] = []
    progress = listener._progress
    records = streaming.batch_records

    def timed_progress(event: object) -> None:
        began = time.perf_counter_ns()
        progress(event)
        own.append(time.perf_counter_ns() - began)

    def timed_records(application: object, batch: object) -> list:
        began = time.perf_counter_ns()
        result = records(application, batch)
        worker.append(time.perf_counter_ns() - began)
        return result

    listener._progress = timed_progress
    streaming.batch_records = timed_records
    tracemalloc.start()
    query = spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load() \
        .selectExpr("value * 2 AS v").writeStream.foreachBatch(lambda batch, batch_id: None) \
        .trigger(processingTime=f"{args.trigger} seconds").option("checkpointLocation", str(work / "ck")).start()
    time.sleep(args.seconds / 4)
    gc.collect()  # py4j proxies sit in reference cycles (object <-> its cached methods) until the cyclic gc runs
    early = tracemalloc.take_snapshot()
    time.sleep(args.seconds * 3 / 4)
    query.stop()
    app.worker.drain(10.0)
    gc.collect()
    late = tracemalloc.take_snapshot()
    growth = sum(stat.size_diff for stat in late.compare_to(early, "filename"))
    ran = sum(1 for p in query.recentProgress if "addBatch" in p["durationMs"])  # last 100 only
    spark_plugin.uninstrument()
    micro_batch_events = sum(1 for line in events.read_text().splitlines() if '"STREAMING"' in line)
    print(f"micro-batches run: {len(own)} (last 100 progress: {ran}); events per micro-batch: "
          f"{micro_batch_events / max(1, len(own)):.2f}")
    print(f"listener callback (plugin's part) p50 {_quantile(own, .5):.2f} ms, p99 {_quantile(own, .99):.2f} ms; "
          f"worker per micro-batch p50 {_quantile(worker, .5):.2f} ms, p99 {_quantile(worker, .99):.2f} ms")
    # the emitter's identity memos keep recent events' parts, bounded (emitter.serialize._RECENT_MAX entries)
    print(f"Python heap growth over the last 3/4 of the run: {growth / 1024:.1f} KiB")
    spark.stop()
    os.system(f"rm -rf {work}")  # noqa: S605 - our own temp dir


if __name__ == "__main__":
    main()
