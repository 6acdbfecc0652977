"""Benchmark of `lineage-capture graph` (not part of the test run): prints numbers.

Generates a realistic history: Airflow-like DAGs (jobType DAG) of recurring tasks, each task run daily over 30
days (START with inputs, COMPLETE with outputs, parent facet to its DAG run), tasks reading what earlier tasks
write. Then measures whole commands as a user pays for them (subprocess, medians):

    .venv/bin/python benchmarks/graph_bench.py                  # 300,000 events
    .venv/bin/python benchmarks/graph_bench.py --events 1200000 # 20,000 jobs, 50,000 datasets
    .venv/bin/python benchmarks/graph_bench.py --mode 5m        # 5,000,000 events (ingest speed and peak RSS)
    .venv/bin/python benchmarks/graph_bench.py --page-nodes 2000  # also: page of 2,000 nodes in Chromium
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400
T0 = 1_717_200_000  # 2024-06-01


def generate(path: Path, events: int, seed: int = 7) -> tuple[int, int]:
    """Write ``events`` run events; returns (tasks, datasets)."""
    rnd = random.Random(seed)
    runs_per_task = 30
    tasks = max(20, events // (2 * runs_per_task))
    outputs_per_task = 2.5
    n_datasets = int(tasks * outputs_per_task)
    out_of = {t: [f"dwh.s{t % 50}.t{t}_{k}" for k in range(2 + (t % 2))] for t in range(tasks)}
    ins_of = {}
    for t in range(tasks):
        pool = [rnd.randrange(max(1, t)) for _ in range(2)] if t > 20 else []
        ins_of[t] = sorted({rnd.choice(out_of[p]) for p in pool} | {f"src.raw.r{t % 997}"})
    producer = "https://github.com/apache/airflow/tree/providers-openlineage/1.0"
    written = 0
    with open(path, "wb") as fh:
        day = 0
        while written < events:
            for dag in range(0, tasks, 20):
                dag_run = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                base = T0 + day * DAY + (dag % 1440) * 60
                buf = []
                for t in range(dag, min(dag + 20, tasks)):
                    run = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                    job = {"namespace": "airflow", "name": f"dag{dag // 20}.task{t}",
                           "facets": {"jobType": {"_producer": producer, "_schemaURL": "x", "jobType": "TASK",
                                                  "integration": "AIRFLOW", "processingType": "BATCH"}}}
                    facets = {"parent": {"_producer": producer, "_schemaURL": "x",
                                         "job": {"namespace": "airflow", "name": f"dag{dag // 20}"},
                                         "run": {"runId": dag_run}}}
                    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + (t - dag) * 30))
                    te = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + (t - dag) * 30 + 20))
                    ins = [{"namespace": "sqlserver://db01:1433", "name": n, "facets": {}} for n in ins_of[t]]
                    outs = [{"namespace": "sqlserver://db01:1433", "name": n, "facets": {}} for n in out_of[t]]
                    for et, tm, i, o in (("START", ts, ins, []), ("COMPLETE" if rnd.random() > 0.02 else "FAIL",
                                                                  te, ins, outs)):
                        buf.append(orjson.dumps({"eventTime": tm + ".000Z", "eventType": et, "producer": producer,
                                                 "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
                                                 "run": {"runId": run, "facets": facets}, "job": job,
                                                 "inputs": i, "outputs": o}))
                written += len(buf)
                fh.write(b"\n".join(buf) + b"\n")
                if written >= events:
                    break
            day += 1
    return tasks, n_datasets


def cmd(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "lineage_graph", "graph", *args, "--db", str(db)]


def timed(argv: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True)
    return time.perf_counter() - start, res


def median_of(argv: list[str], env: dict, n: int = 5) -> float:
    times = []
    for _ in range(n):
        dt, res = timed(argv, env)
        assert res.returncode in (0, 1), res.stderr.decode()[-2000:]
        times.append(dt)
    return statistics.median(times)


def page_load(html: Path) -> dict:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--window-size=1400,900", f"--user-data-dir={profile}"):
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            start = time.perf_counter()
            driver.get(html.as_uri())
            while not driver.execute_script("return window.lineage && window.lineage.ready"):
                time.sleep(0.02)
            # usable: a click highlights, answered within the same measurement
            driver.execute_script("window.lineage.cy.nodes('.dataset')[0].emit('tap')")
            usable = time.perf_counter() - start
            info = driver.execute_script("return {nodes: window.lineage.cy.nodes().length, layout: "
                                         "window.lineage.layout, layoutMs: window.lineage.layoutMs, "
                                         "loadMs: window.lineage.loadMs}")
        finally:
            driver.quit()
    return {"usable_s": round(usable, 2), **info}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--mode", choices=("default", "5m"), default="default")
    ap.add_argument("--page-nodes", type=int, default=0, help="also measure a page of about this many nodes")
    ap.add_argument("--keep", type=Path, help="work directory to keep (default: a temporary one)")
    args = ap.parse_args()
    events = 5_000_000 if args.mode == "5m" else args.events
    work = args.keep or Path(tempfile.mkdtemp(prefix="graph-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(work / "state")}
    src = work / "events.jsonl"
    t = time.perf_counter()
    tasks, n_ds = generate(src, events)
    print(f"generated {events:,} events ({src.stat().st_size / 2**20:,.0f} MiB), {tasks:,} tasks, "
          f"~{n_ds:,} datasets in {time.perf_counter() - t:.1f} s")
    db = work / "graph.sqlite"
    # the VM is shared: the load average and the CPU time of the ingest's processes say how far the wall time
    # is our own
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    dt, res = timed(cmd(db, "ingest", str(src)), env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    # ru_maxrss of children is the largest of any child (the ingest, or its reading process), not their sum
    print(f"ingest: {dt:.1f} s, {events / dt:,.0f} events/s, CPU {cpu:.1f} s (all its processes), peak RSS "
          f"{after.ru_maxrss / 1024:,.0f} MiB  [{res.stdout.decode().strip()}]")
    dt, res = timed(cmd(db, "ingest", str(src)), env)
    print(f"ingest again (nothing new): {dt:.2f} s")
    dt, res = timed(cmd(db, "show", "--json"), env)
    print(f"first read after the ingest: {dt:.1f} s")
    jobs_ds = orjson.loads(res.stdout)
    print(f"current graph: {len(jobs_ds['jobs']):,} jobs, {len(jobs_ds['datasets']):,} datasets")
    print(f"show --json (current graph):     median {median_of(cmd(db, 'show', '--json'), env):.2f} s")
    print(f"dag --json (task DAG):           median {median_of(cmd(db, 'dag', '--json'), env):.2f} s")
    mid = f"sqlserver://db01:1433/dwh.s{tasks // 2 % 50}.t{tasks // 2}_0"
    print(f"downstream --depth 5:            median "
          f"{median_of(cmd(db, 'downstream', mid, '--depth', '5', '--json'), env) * 1000:.0f} ms")
    print(f"upstream --depth 5:              median "
          f"{median_of(cmd(db, 'upstream', mid, '--depth', '5', '--json'), env) * 1000:.0f} ms")
    py = [sys.executable, "-c", "pass"]
    print(f"(python start-up alone:          median {median_of(py, env) * 1000:.0f} ms)")
    if args.page_nodes:
        pw = work / "page"
        n = max(20, int(args.page_nodes / 3.6 / 2) * 2)  # ~3.6 drawn nodes per START/COMPLETE pair... per task
        psrc = pw / "events.jsonl"
        pw.mkdir(exist_ok=True)
        ptasks, _ = generate(psrc, n * 60)
        pdb = pw / "graph.sqlite"
        subprocess.run(cmd(pdb, "ingest", str(psrc)), cwd=ROOT, env=env, check=False, capture_output=True)
        html = pw / "lineage.html"
        dt, res = timed(cmd(pdb, "html", "-o", str(html)), env)
        print(f"html -o ({ptasks} tasks): {dt:.2f} s, {html.stat().st_size / 2**20:.1f} MiB")
        print(f"page in Chromium: {page_load(html)}")
    print(f"work directory: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
