"""Benchmark `harvest sqlserver --xml`: statements per second end to end and peak memory.

Generates Extended Events logs of 100k and 1M statements into /tmp with realistic repetition (a few dozen
statement shapes run by a few hundred tasks with different literals, sessions, hosts, days), harvests each in
a fresh process to the file transport, and prints statements/s and peak RSS.

    .venv/bin/python benchmarks/sqlserver_harvest.py                 # 100k and 1M
    .venv/bin/python benchmarks/sqlserver_harvest.py --sizes 100000  # one size
    .venv/bin/python benchmarks/sqlserver_harvest.py --sizes 100000 --breakdown  # + CPU us by component

Statements/s is wall time: ``harvest`` parses large XML files and reads each event in a second process, so the
rate needs two free cores. "cores busy" says how many it got; on a shared machine compare the CPU per statement
printed for each process instead.

Targets (issue 4): >= 10,000 statements/s end to end, <= 500 MB peak RSS at 1M statements.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from harvest_measure import ROOT, cpu_seconds, measure_harvest

TARGET_RATE, TARGET_RSS_MB = 10_000, 500

#: Statement shapes: {n} numbers and {s} strings vary per execution, {t}/{u} tables per task.
SHAPES = [
    "INSERT INTO [DW].[dbo].[Fact{t}] (DateKey, ProductKey, Amount)\nSELECT d.DateKey, p.ProductKey, s.Qty * s.Price\n"
    "FROM [Staging].[dbo].[{u}Lines] AS s\nJOIN [DW].[dbo].[DimDate] AS d ON d.FullDate = CAST(s.SoldAt AS date)\n"
    "JOIN [DW].[dbo].[DimProduct] AS p ON p.ProductCode = s.ProductCode\nWHERE s.BatchId = {n}",
    "UPDATE t SET t.Status = s.Status, t.UpdatedAt = SYSUTCDATETIME()\nFROM dbo.{t}Orders AS t\n"
    "JOIN staging.{u}Status AS s ON s.OrderID = t.OrderID WHERE t.Region = '{s}' AND s.Batch = {n}",
    "SELECT o.OrderID, SUM(l.Qty * l.Price) AS Total INTO #recent_{t}\nFROM Sales.Orders AS o WITH (NOLOCK)\n"
    "JOIN Sales.OrderLines AS l ON l.OrderID = o.OrderID WHERE o.OrderDate >= '{s}' GROUP BY o.OrderID",
    "INSERT INTO Reporting.dbo.{t}Archive (OrderID, Total)\nSELECT r.OrderID, r.Total FROM #recent_{t} AS r\n"
    "WHERE r.Total > {n}",
    "MERGE dbo.Dim{t} AS tgt USING (SELECT Code, Name FROM staging.{u} WHERE BatchId = {n}) AS src\n"
    "ON tgt.Code = src.Code WHEN MATCHED THEN UPDATE SET tgt.Name = src.Name\n"
    "WHEN NOT MATCHED THEN INSERT (Code, Name) VALUES (src.Code, src.Name);",
    "DELETE FROM dbo.{t}Queue WHERE ProcessedAt < '{s}' AND Attempts > {n}",
    "exec sp_executesql N'INSERT INTO [dbo].[{t}Audit] ([Id], [By], [At]) SELECT [o].[Id], @p1, SYSUTCDATETIME() "
    "FROM [dbo].[{u}] AS [o] WHERE [o].[Id] = @p0',N'@p0 int,@p1 nvarchar(4000)',@p0={n},@p1=N'{s}'",
    "SELECT TOP ({n}) * FROM dbo.{t}Lookup WHERE Name = N'{s}'",
    "SET NOCOUNT ON",
]
TABLES = ["Sales", "Orders", "Customer", "Inventory", "Shipment", "Invoice", "Payment", "Product", "Store",
          "Supplier", "Return", "Budget"]
EVENT = (
    '<event name="{name}" package="sqlserver" timestamp="{ts}"><data name="duration"><value>{dur}</value></data>'
    '<data name="cpu_time"><value>{cpu}</value></data><data name="page_server_reads"><value>0</value></data>'
    '<data name="physical_reads"><value>3</value></data><data name="logical_reads"><value>{reads}</value></data>'
    '<data name="writes"><value>12</value></data><data name="spills"><value>0</value></data>'
    '<data name="row_count"><value>{rows}</value></data><data name="last_row_count"><value>{rows}</value></data>'
    '<data name="line_number"><value>1</value></data><data name="offset"><value>0</value></data>'
    '<data name="offset_end"><value>-1</value></data><data name="statement"><value><![CDATA[{sql}]]></value></data>'
    '<data name="parameterized_plan_handle"><value></value></data>'
    '<action name="username" package="sqlserver"><value><![CDATA[CORP\\svc_etl]]></value></action>'
    '<action name="session_id" package="sqlserver"><value>{session}</value></action>'
    '<action name="server_principal_name" package="sqlserver"><value><![CDATA[CORP\\svc_etl]]></value></action>'
    '<action name="database_name" package="sqlserver"><value><![CDATA[{db}]]></value></action>'
    '<action name="client_hostname" package="sqlserver"><value><![CDATA[{host}]]></value></action>'
    '<action name="client_app_name" package="sqlserver"><value><![CDATA[{app}]]></value></action>'
    '<action name="event_sequence" package="package0"><value>{seq}</value></action>'
    '<action name="attach_activity_id" package="package0"><value>{guid}-1</value></action></event>\n'
)


def generate(path: Path, statements: int, seed: int = 4) -> None:
    """A log of ``statements`` events: tasks run every hour, 10-40 statements per run, in time order."""
    rng = random.Random(seed)
    tasks = [(f"etl_{g}::load_{TABLES[i % len(TABLES)].lower()}_{i}", TABLES[i % len(TABLES)],
              TABLES[(i * 7 + 3) % len(TABLES)], f"WORKER{i % 8}") for g in range(10) for i in range(30)]
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)
    written = seq = 0
    hour = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < statements:
            clock = start + timedelta(hours=hour)
            for index, (app, t, u, host) in enumerate(rng.sample(tasks, 40)):
                session = 51 + index
                at = clock + timedelta(seconds=rng.randint(0, 600))
                for _ in range(rng.randint(10, 40)):
                    shape = SHAPES[rng.randrange(len(SHAPES))]
                    sql = shape.format(t=t, u=u, n=rng.randint(1, 10**6), s=f"2024-05-{rng.randint(1, 28):02d}")
                    duration = rng.randint(500, 3_000_000)
                    at += timedelta(microseconds=duration + rng.randint(1000, 5_000_000))
                    seq += 1
                    out.write(EVENT.format(
                        name="sql_statement_completed", ts=at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                        dur=duration, cpu=duration // 2, reads=rng.randint(10, 100000), rows=rng.randint(0, 10**5),
                        sql=sql, session=session, db="DW", host=host, app=app, seq=seq,
                        guid=f"{seq:08X}-2E4A-4C1B-8F0D-0A1B2C3D4E5F"))
                    written += 1
                    if written >= statements:
                        return
            hour += 1


def run_one(log: Path, statements: int) -> dict[str, float]:
    """Harvest ``log`` with ``harvest sqlserver`` in this process (which reads large XML files in a second
    process); returns the measurements."""
    result = measure_harvest(["sqlserver", "--xml", str(log), "--server", "db01"],
                             Path(f"/tmp/xe_bench_events_{statements}.jsonl"), "/tmp/xe_bench_state", statements, log)
    return {**result, "statements": statements}


def run_alone(log: Path, statements: int) -> dict[str, float]:
    """The harvester's own share, in this process, no emitter: read, convert, group, build RunRecords."""
    sys.path.insert(0, str(ROOT))
    from harvesters.core.state import Window
    from harvesters.core.tasks import TaskGrouper
    from harvesters.sqlserver.reading import EventConverter, Harvest, LineageCache
    from harvesters.sqlserver.xevents import read_file

    records = []
    grouper = TaskGrouper(lambda r: records.append(1), "default", "SQLSERVER", timedelta(minutes=30))
    harvest = Harvest(EventConverter("sqlserver://db01:1433", LineageCache()), grouper, Window(None, None))
    started, cpu = time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF)
    for item in read_file(str(log)):
        harvest.feed(item.value)
    grouper.close_all()
    elapsed, cpu = time.perf_counter() - started, cpu_seconds(resource.RUSAGE_SELF) - cpu
    return {"statements": statements, "seconds": elapsed, "rate": statements / elapsed,
            "cpu_us": cpu / statements * 1e6, "records": len(records),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_breakdown(log: Path, statements: int) -> dict[str, float]:
    """CPU per statement by component, everything in this process (XML read here too), with a CPU clock
    around each component (the clock itself adds ~2 us per statement, spread over the components)."""
    sys.path.insert(0, str(ROOT))
    from harvesters.core.run import make_emitter
    from harvesters.core.state import Window
    from harvesters.core.tasks import TaskGrouper
    from harvesters.sqlserver.reading import EventConverter, Harvest, LineageCache
    from harvesters.sqlserver.xevents import read_file

    clock = time.process_time
    spent = dict.fromkeys(("read", "convert", "group", "emit"), 0.0)
    events = Path(f"/tmp/xe_bench_events_{statements}.jsonl")
    events.unlink(missing_ok=True)
    os.environ["LINEAGE_CAPTURE_STATE_DIR"] = "/tmp/xe_bench_state"
    emitter = make_emitter(["transport.type=file", f"transport.location={events}"], False)

    def timed(function: Any, component: str) -> Any:
        def run(*args: Any) -> Any:
            started = clock()
            try:
                return function(*args)
            finally:
                spent[component] += clock() - started
        return run

    grouper = TaskGrouper(timed(emitter.emit, "emit"), "default", "SQLSERVER", timedelta(minutes=30))
    converter = EventConverter("sqlserver://db01:1433", LineageCache())
    converter.convert = timed(converter.convert, "convert")  # type: ignore[method-assign]
    harvest = Harvest(converter, grouper, Window(None, None))
    feed = timed(harvest.feed, "group")
    for item in timed_iter(read_file(str(log)), spent, clock):
        feed(item.value)
    timed(grouper.close_all, "group")()
    timed(emitter.close, "emit")()
    spent["group"] -= spent["convert"] + spent["emit"]  # feed() holds both
    return {name: cpu / statements * 1e6 for name, cpu in spent.items()}


def timed_iter(items: Any, spent: dict[str, float], clock: Any) -> Any:
    """``items``, with the CPU spent producing them added to ``spent["read"]``."""
    while True:
        started = clock()
        item = next(items, None)
        spent["read"] += clock() - started
        if item is None:
            return
        yield item


def _child(size: int, *flags: str) -> dict[str, float] | None:
    child = subprocess.run([sys.executable, __file__, "--run", str(size), *flags], capture_output=True, text=True,
                           cwd=ROOT)
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return None
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result["summary"] = next((line for line in reversed(child.stderr.splitlines())
                              if line.startswith("harvest sqlserver:")), "")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--breakdown", action="store_true",
                        help="also measure CPU per statement by component (one more harvest per size)")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # child process: harvest one size
    parser.add_argument("--part", choices=("alone", "breakdown"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        log = Path(f"/tmp/xe_bench_{args.run}.xml")
        run = {"alone": run_alone, "breakdown": run_breakdown}.get(args.part, run_one)
        print(json.dumps(run(log, args.run)))
        return 0
    ok = True
    for size in [int(s) for s in args.sizes.split(",")]:
        log = Path(f"/tmp/xe_bench_{size}.xml")
        if not log.exists():
            generate(log, size)
        result = _child(size)
        if result is None:
            return 1
        good = result["rate"] >= TARGET_RATE and (size < 1_000_000 or result["peak_rss_mb"] <= TARGET_RSS_MB)
        ok &= good
        print(f"{size:>9,} statements ({result['log_mb']:.0f} MB of XML): {result['seconds']:.1f} s, "
              f"{result['rate']:,.0f} statements/s, peak RSS {result['peak_rss_mb']:.0f} MB "
              f"(XML reader process {result['reader_rss_mb']:.0f} MB), {result['events']:,} events, "
              f"exit {result['exit']} -> {'OK' if good else 'BELOW TARGET'}")
        cores = (result["cpu_us"] + result["reader_cpu_us"]) * result["rate"] / 1e6
        print(f"  CPU per statement: harvest process {result['cpu_us']:.0f} us, reader process "
              f"{result['reader_cpu_us']:.0f} us; {cores:.2f} cores busy on average (wall time needs both "
              f"cores free: on a busy machine compare CPU)")
        if result["summary"]:
            print("  " + result["summary"])
        alone = _child(size, "--part", "alone")
        if alone is not None:
            print(f"  harvester alone (no emitter, XML read in process): {alone['seconds']:.1f} s, "
                  f"{alone['rate']:,.0f} statements/s, {alone['cpu_us']:.0f} us CPU per statement")
        if args.breakdown:
            parts = _child(size, "--part", "breakdown")
            if parts is not None:
                print("  CPU us per statement, all in one process: " + ", ".join(
                    f"{name} {cost:.0f}" for name, cost in parts.items() if name != "summary")
                      + f" = {sum(v for k, v in parts.items() if k != 'summary'):.0f}")
    print(f"targets: >= {TARGET_RATE:,} statements/s, <= {TARGET_RSS_MB} MB peak RSS at 1M")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
