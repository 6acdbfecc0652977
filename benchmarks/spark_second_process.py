"""Would a second, low-priority process make the plugin cheaper for the ETL? A question, not a feature.

The plugin's largest steady cost in the ETL of ``spark_overhead.py`` is openlineage-python's import and the events'
building in the driver (~0.3 s of CPU on a run that is CPU-bound most of the time on a 2-core VM). A redesign could
move that work to a child process at ``nice 19``, whose CPU then only fills the cores' idle slots (a process has
no GIL to share with the driver, unlike a niced thread). This script measures that idea without the redesign: the
plain ETL (``off``), the ETL with the plugin (``on``), and the plain ETL starting a child that does the same kind of
work (imports openlineage-python and the emitter, builds and serializes ``--events`` RunEvents, then waits for the
driver's end, which waits for it) at ``nice 19`` and at ``nice 0``. The four run interleaved in a shuffled order
per repetition; each row is the mean added time per repetition against ``off`` with its 90% bootstrap interval.

    .venv/bin/python benchmarks/spark_second_process.py [--reps 20] [--events 40]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_overhead  # noqa: E402 - the same data, spark-submit command and plugin-on conf

#: The child, ``python child.py <nice> <events>``: ends when the driver closes its stdin.
CHILD = r'''
import datetime, os, sys, uuid
os.nice(int(sys.argv[1]))
import openlineage.client, emitter.emitter, emitter.config
from openlineage.client.event_v2 import InputDataset, Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import schema_dataset
from openlineage.client.serde import Serde
for i in range(int(sys.argv[2])):
    fields = [schema_dataset.SchemaDatasetFacetFields(name=f"c{j}", type="long") for j in range(10)]
    inputs = [InputDataset(namespace="file", name=f"/data/{k}",
                           facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}) for k in range(3)]
    Serde.to_json(RunEvent(eventType=RunState.START, eventTime=datetime.datetime.now().isoformat(),
                           run=Run(runId=str(uuid.uuid4())), job=Job(namespace="ns", name=f"job{i}"),
                           producer="benchmark", inputs=inputs))
sys.stdin.read()
'''
_START = "spark = SparkSession.builder"
_END = 'marks.append(("stop", time.time()))'
#: The ETL application, starting the child (without the gateway's variables: no plugin there) just before its
#: session, as the plugin's start-up hook would, and waiting for it after ``spark.stop()``.
APP = spark_overhead.APP.replace(_START, '''child = None
if os.environ.get("BENCH_CHILD_NICE"):
    import subprocess
    child = subprocess.Popen(
        [sys.executable, os.environ["BENCH_CHILD"], os.environ["BENCH_CHILD_NICE"], os.environ["BENCH_CHILD_EVENTS"]],
        stdin=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")})
''' + _START).replace(_END, _END + '''
if child is not None:
    child.stdin.close()
    child.wait()''')
assert APP.count("child.wait()") == 1 and "BENCH_CHILD_NICE" in APP, "spark_overhead.APP changed: update the hooks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20, help="repetitions of the four variants")
    parser.add_argument("--events", type=int, default=40, help="RunEvents the child builds")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spark_overhead_data")
    args = parser.parse_args()
    work, on = spark_overhead.prepare("spark_second_process_", args.data_dir, args.rows, 150)
    app, child = work / "second_process_app.py", work / "child.py"
    app.write_text(APP)
    child.write_text(CHILD)
    app_args = ["etl", str(args.data_dir), str(work / "out")]
    common = {"BENCH_CHILD": str(child), "BENCH_CHILD_EVENTS": str(args.events)}
    variants: dict[str, tuple[dict[str, str], dict[str, str]]] = {
        "off": ({}, common), "on": (on, common),
        "nice 19": ({}, {**common, "BENCH_CHILD_NICE": "19"}), "nice 0": ({}, {**common, "BENCH_CHILD_NICE": "0"})}
    for conf, env in variants.values():  # warm-up: file system caches, every variant's modules
        spark_overhead.submit(app, app_args, conf, work / "state", env)
    times: dict[str, list[float]] = {name: [] for name in variants}
    order, rng = list(variants), random.Random(3)
    for rep in range(args.reps):
        rng.shuffle(order)
        for name in order:
            conf, env = variants[name]
            times[name].append(spark_overhead.submit(app, app_args, conf, work / "state", env))
        print(f"    rep {rep + 1}: " + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    print(f"\noff: median {statistics.median(times['off']):.2f}s")
    for name in list(variants)[1:]:
        added = [t - off for t, off in zip(times[name], times["off"])]
        print(f"{name:8s} median {statistics.median(times[name]):.2f}s  added per repetition: "
              f"{spark_overhead._added(added)}")


if __name__ == "__main__":
    main()
