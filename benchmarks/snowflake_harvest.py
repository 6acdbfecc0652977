"""Benchmark `harvest snowflake --history`: queries per second end to end and peak memory.

Generates QUERY_HISTORY exports (JSON lines, Snowflake's timestamp format) of 100k and 1M queries into /tmp with
realistic repetition (two dozen query shapes run by a few hundred tagged and untagged sessions with different
literals, hourly, with QUERY_PARAMETERIZED_HASH as Snowflake fills it; about half the rows carry ACCESS_HISTORY
objects, a few are failed, SHOW or procedure children), harvests each in a fresh process to the file transport,
and prints queries/s, peak RSS and CPU per query of each process (files of 16 MB and more are read, parsed and
prepared, lineage included, by a second process, so the rate needs two free cores).

    .venv/bin/python benchmarks/snowflake_harvest.py                 # 100k and 1M
    .venv/bin/python benchmarks/snowflake_harvest.py --sizes 100000  # one size

Targets (issue 5, as for SQL Server): >= 10,000 queries/s end to end, <= 500 MB peak RSS at 1M queries.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from harvest_measure import ROOT, measure_harvest

TARGET_RATE, TARGET_RSS_MB = 10_000, 500

#: (QUERY_TYPE, text): {n} numbers and {s} strings vary per execution, {t}/{u} tables per task.
SHAPES = [
    ("INSERT", "INSERT INTO analytics.fct_{t} (day_key, product_key, amount)\nSELECT d.day_key, p.product_key, "
               "s.qty * s.price\nFROM raw.{u}_lines AS s\nJOIN analytics.dim_date AS d ON d.full_date = s.sold_at::date"
               "\nJOIN analytics.dim_product AS p ON p.code = s.product_code\nWHERE s.batch_id = {n}"),
    ("UPDATE", "UPDATE analytics.{t}_orders AS t SET status = s.status, updated_at = CURRENT_TIMESTAMP()\n"
               "FROM staging.{u}_status AS s WHERE s.order_id = t.order_id AND t.region = '{s}' AND s.batch = {n}"),
    ("CREATE_TABLE_AS_SELECT", "CREATE TEMPORARY TABLE recent_{t} AS SELECT o.order_id, SUM(l.qty * l.price) AS total"
                               "\nFROM sales.orders AS o JOIN sales.order_lines AS l ON l.order_id = o.order_id\n"
                               "WHERE o.order_date >= '{s}' GROUP BY o.order_id"),
    ("INSERT", "INSERT INTO reporting.{t}_archive (order_id, total)\nSELECT r.order_id, r.total FROM recent_{t} AS r "
               "WHERE r.total > {n}"),
    ("MERGE", "MERGE INTO analytics.dim_{t} AS tgt USING (SELECT code, name FROM staging.{u} WHERE batch_id = {n}) "
              "AS src\nON tgt.code = src.code WHEN MATCHED THEN UPDATE SET tgt.name = src.name\n"
              "WHEN NOT MATCHED THEN INSERT (code, name) VALUES (src.code, src.name)"),
    ("DELETE", "DELETE FROM ops.{t}_queue WHERE processed_at < '{s}' AND attempts > {n}"),
    ("INSERT", "INSERT INTO IDENTIFIER('AUDIT.PUBLIC.{T}_LOG') SELECT id, '{s}', CURRENT_TIMESTAMP() FROM ops.{u} "
               "WHERE id = {n}"),
    ("SELECT", "SELECT * FROM analytics.{t}_lookup WHERE name = '{s}' LIMIT {n}"),
    ("COPY", "COPY INTO raw.{u}_lines FROM @landing/{u}/{s}/ FILE_FORMAT = (TYPE = PARQUET) PATTERN = '.*{n}.*'"),
    ("SHOW", "SHOW TABLES LIKE '{t}%' IN SCHEMA analytics"),
    ("ALTER_SESSION", "ALTER SESSION SET QUERY_TAG = '{tag}'"),
    ("SELECT", "SELECT COUNT(*) FROM raw.{u}_lines WHERE batch_id = {n}"),
]
TABLES = ["sales", "orders", "customer", "inventory", "shipment", "invoice", "payment", "product", "store",
          "supplier", "returns", "budget"]


def _objects(names: list[str], domain: str = "Table") -> str:
    return json.dumps([{"objectDomain": domain, "objectName": n, "objectId": abs(hash(n)) % 10**6} for n in names])


def _access(shape: int, t: str, u: str) -> tuple[str | None, str | None]:
    """ACCESS_HISTORY objects for the shapes whose lineage Snowflake records (a subset, as on a real account)."""
    t_up, u_up = t.upper(), u.upper()
    if shape == 0:
        return (_objects([f"DW.RAW.{u_up}_LINES", "DW.ANALYTICS.DIM_DATE", "DW.ANALYTICS.DIM_PRODUCT"]),
                _objects([f"DW.ANALYTICS.FCT_{t_up}"]))
    if shape == 4:
        return _objects([f"DW.STAGING.{u_up}"]), _objects([f"DW.ANALYTICS.DIM_{t_up}"])
    if shape == 8:
        return "[]", _objects([f"DW.RAW.{u_up}_LINES"])
    return None, None


def generate(path: Path, queries: int, seed: int = 5) -> None:
    """An export of ``queries`` rows: tasks run every hour, 10-40 queries per run, in START_TIME order."""
    rng = random.Random(seed)
    tasks = [(f"etl_{g}::load_{TABLES[i % len(TABLES)]}_{i}" if i % 5 else "", TABLES[i % len(TABLES)],
              TABLES[(i * 7 + 3) % len(TABLES)], f"SVC_{g}", f"WH_{i % 4}") for g in range(10) for i in range(30)]
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)
    written = session_no = 0
    hour = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < queries:
            clock = start + timedelta(hours=hour)
            runs = []
            for tag, t, u, user, wh in rng.sample(tasks, 40):
                session_no += 1
                at = clock + timedelta(seconds=rng.randint(0, 600))
                rows = []
                for _ in range(rng.randint(10, 40)):
                    shape = rng.randrange(len(SHAPES))
                    query_type, text = SHAPES[shape]
                    sql = text.format(t=t, u=u, T=t.upper(), n=rng.randint(1, 10**6),
                                      s=f"2024-05-{rng.randint(1, 28):02d}", tag=tag)
                    duration = timedelta(microseconds=rng.randint(20_000, 30_000_000))
                    at += timedelta(microseconds=rng.randint(1000, 2_000_000))
                    end = at + duration
                    failed = rng.random() < 0.01
                    direct, modified = _access(shape, t, u) if not failed else (None, None)
                    rows.append((at, {
                        "QUERY_ID": f"01b{written:013x}-0000-{session_no % 65536:04x}-0000-00000000{shape:04x}",
                        "QUERY_TEXT": sql, "DATABASE_NAME": "DW", "SCHEMA_NAME": "PUBLIC", "QUERY_TYPE": query_type,
                        "SESSION_ID": str(100000 + session_no), "USER_NAME": user, "ROLE_NAME": "TRANSFORMER",
                        "WAREHOUSE_NAME": wh, "QUERY_TAG": tag, "EXECUTION_STATUS": "FAIL" if failed else "SUCCESS",
                        "ERROR_MESSAGE": "Numeric value 'x' is not recognized" if failed else None,
                        "START_TIME": at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000",
                        "END_TIME": end.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000",
                        "ROWS_INSERTED": rng.randint(0, 10**5), "ROWS_UPDATED": 0,
                        "QUERY_PARAMETERIZED_HASH": hashlib.md5(text.format(
                            t=t, u=u, T=t.upper(), n="?", s="?", tag="?").encode()).hexdigest(),
                        "DIRECT_OBJECTS_ACCESSED": direct, "BASE_OBJECTS_ACCESSED": direct,
                        "OBJECTS_MODIFIED": modified}))
                    at = end
                    written += 1
                    if written >= queries:
                        break
                runs.extend(rows)
                if written >= queries:
                    break
            # the export is in START_TIME order across the hour's sessions
            for _, row in sorted(runs, key=lambda r: r[0]):
                out.write(json.dumps(row) + "\n")
            hour += 1


def run_one(log: Path, queries: int) -> dict[str, float]:
    """Harvest ``log`` in this process (which reads large files in a second process); returns the measurements."""
    result = measure_harvest(["snowflake", "--history", str(log), "--account", "myorg-acct"],
                             Path(f"/tmp/sf_bench_events_{queries}.jsonl"), "/tmp/sf_bench_state", queries, log)
    return {**result, "queries": queries}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # child process: harvest one size
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_one(Path(f"/tmp/sf_bench_{args.run}.jsonl"), args.run)))
        return 0
    ok = True
    for size in [int(s) for s in args.sizes.split(",")]:
        log = Path(f"/tmp/sf_bench_{size}.jsonl")
        if not log.exists():
            generate(log, size)
        child = subprocess.run([sys.executable, __file__, "--run", str(size)], capture_output=True, text=True,
                               cwd=ROOT)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        result = json.loads(child.stdout.strip().splitlines()[-1])
        summary = [line for line in child.stderr.splitlines() if line.startswith("harvest snowflake:")]
        good = result["rate"] >= TARGET_RATE and (size < 1_000_000 or result["peak_rss_mb"] <= TARGET_RSS_MB)
        ok &= good
        print(f"{size:>9,} queries ({result['log_mb']:.0f} MB of JSON lines): {result['seconds']:.1f} s, "
              f"{result['rate']:,.0f} queries/s, peak RSS {result['peak_rss_mb']:.0f} MB "
              f"(reader process {result['reader_rss_mb']:.0f} MB), {result['events']:,} events, "
              f"exit {result['exit']} -> {'OK' if good else 'BELOW TARGET'}")
        cores = (result["cpu_us"] + result["reader_cpu_us"]) * result["rate"] / 1e6
        print(f"  CPU per query: harvest process {result['cpu_us']:.0f} us, reader process "
              f"{result['reader_cpu_us']:.0f} us; {cores:.2f} cores busy on average (wall time needs both cores "
              f"free: on a busy machine compare CPU)")
        if summary:
            print("  " + summary[-1])
    print(f"targets: >= {TARGET_RATE:,} queries/s, <= {TARGET_RSS_MB} MB peak RSS at 1M")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
