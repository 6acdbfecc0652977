"""lineage-capture demo: the main job in miniature, in three parts that all write to the configured transport (the
embedded default file unless configured), each followed by what it wrote:

1. the emitter: a task run with one statement run under it;
2. harvest sqlserver over two Extended Events statements of one task, a temp table flowing between them;
3. spark-submit --conf spark.openlineage.python.enabled=true of a small PySpark application
   (skip with --no-spark)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emitter.records import RunRecord


def demo_records() -> list[RunRecord]:
    """The parent/child records of the demo, in emission order."""
    from openlineage.client.facet_v2 import sql_job

    from emitter.records import COMPLETE, START, Dataset, JobRef, JobType, RunRecord, RunRef
    from emitter.run_ids import stable_run_id

    t0 = datetime.now(timezone.utc).replace(microsecond=0)
    task = RunRef(stable_run_id(t0, "demo", "task"), JobRef("demo", "nightly_orders.load"))
    child = RunRef(stable_run_id(t0, "demo", "statement", "1"),
                   JobRef("demo", "nightly_orders.load.insert_daily_orders"))
    sql = ("INSERT INTO mart.daily_orders SELECT order_date, count(*) FROM raw.orders GROUP BY order_date "
           "/* connection: Server=db1;UID=etl;PWD=hunter2 */")
    orders = Dataset("sqlserver://db1:1433", "sales.raw.orders")
    daily = Dataset("sqlserver://db1:1433", "sales.mart.daily_orders")
    task_type, query_type = JobType("TASK", "SQLSERVER"), JobType("QUERY", "SQLSERVER")
    return [
        RunRecord(START, t0, task.job, task.run_id, task_type),
        RunRecord(START, t0 + timedelta(seconds=1), child.job, child.run_id, query_type, parent=task,
                  inputs=[orders], outputs=[daily], job_facets={"sql": sql_job.SQLJobFacet(query=sql)}),
        RunRecord(COMPLETE, t0 + timedelta(seconds=3), child.job, child.run_id, query_type, parent=task,
                  inputs=[orders], outputs=[daily]),
        RunRecord(COMPLETE, t0 + timedelta(seconds=4), task.job, task.run_id, task_type,
                  inputs=[orders], outputs=[daily]),
    ]


#: Two statements of one task, as SQL Server's Extended Events record them: a temp table flows through.
_XEVENT = (
    '<event name="sql_statement_completed" package="sqlserver" timestamp="{ts}"><data name="duration"><value>4000'
    '</value></data><data name="row_count"><value>{rows}</value></data><data name="statement"><value><![CDATA[{sql}]]>'
    '</value></data><action name="session_id" package="sqlserver"><value>112</value></action><action '
    'name="database_name" package="sqlserver"><value><![CDATA[Sales]]></value></action><action name="client_hostname" '
    'package="sqlserver"><value><![CDATA[etl01]]></value></action><action name="client_app_name" package="sqlserver">'
    '<value><![CDATA[python_task::load_archive]]></value></action><action name="event_sequence" package="package0">'
    '<value>{seq}</value></action></event>\n'
)
_STATEMENTS = [
    "SELECT o.OrderID, SUM(l.Qty * l.Price) AS Total INTO #recent FROM dbo.Orders AS o WITH (NOLOCK) "
    "JOIN dbo.OrderLines AS l ON l.OrderID = o.OrderID GROUP BY o.OrderID",
    "INSERT INTO Reporting.dbo.OrderArchive (OrderID, Total) SELECT r.OrderID, r.Total FROM #recent AS r",
]

#: A PySpark application that knows nothing about lineage: run with spark-submit and one --conf.
_SPARK_APP = """
import sys
from pyspark.sql import SparkSession
out = sys.argv[1]
spark = SparkSession.builder.appName("Demo Orders ETL").getOrCreate()
spark.createDataFrame([(1, "a", 10.0), (2, "b", 5.0)], "id int, customer string, amount double") \\
    .write.mode("overwrite").parquet(out + "/raw/orders")
spark.createDataFrame([("a", "Ada"), ("b", "Bob")], "customer string, name string") \\
    .write.mode("overwrite").parquet(out + "/raw/customers")
orders, customers = spark.read.parquet(out + "/raw/orders"), spark.read.parquet(out + "/raw/customers")
orders.join(customers, "customer").groupBy("name").sum("amount") \\
    .write.mode("overwrite").parquet(out + "/mart/spend_by_customer")
spark.stop()
"""


def _show(events: list[dict]) -> None:
    for event in events:
        parent = event["run"]["facets"].get("parent", {}).get("job", {}).get("name", "-")
        inputs = ", ".join(d["name"] for d in event.get("inputs", [])) or "-"
        outputs = ", ".join(d["name"] for d in event.get("outputs", [])) or "-"
        print(f"  {event['eventType']:<8} {event['job']['name']}\n"
              f"           parent={parent}  in: {inputs}  out: {outputs}")


class _EventFile:
    """Reads back what each part appended to the file transport (nothing to read for other transports)."""

    def __init__(self) -> None:
        from emitter.config import load_config

        transport = load_config().transport or {}
        self.path = Path(transport["log_file_path"]) if transport.get("type") == "file" else None
        self.where = str(self.path or transport.get("url") or transport.get("type"))
        self._offset = self.path.stat().st_size if self.path and self.path.exists() else 0

    def new_events(self) -> list[dict]:
        if self.path is None or not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        return [json.loads(line) for line in data.splitlines() if line.strip()]


def _emitter_part(events: _EventFile) -> int:
    from emitter.emitter import Emitter

    emitter = Emitter.from_config()
    emitter.emit_batch(demo_records())
    counts = emitter.close()
    print(f"\n1. emitter: a task run and one statement under it -> {events.where}")
    _show(events.new_events())
    return 0 if counts.dropped == 0 else 1


def _harvest_part(events: _EventFile, work: Path) -> int:
    from harvesters.cli import main as harvest

    xml = work / "events.xml"
    xml.write_text("".join(_XEVENT.format(ts=f"2024-05-14T02:20:1{i}.000Z", rows=100 + i, sql=sql, seq=900 + i)
                           for i, sql in enumerate(_STATEMENTS)))
    print("\n2. harvest sqlserver: two statements of the task python_task::load_archive (temp table between them)")
    code = harvest(["sqlserver", "--xml", str(xml), "--server", "sqlprod01:1433"])
    _show(events.new_events())
    return code


def _spark_part(events: _EventFile, work: Path) -> int:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        print("\n3. spark-submit: skipped (spark-submit not found next to this Python)")
        return 0
    app = work / "orders_etl.py"
    app.write_text(_SPARK_APP)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
               "--conf", "spark.openlineage.python.enabled=true", str(app), str(work / "data")]
    print("\n3. spark-submit --conf spark.openlineage.python.enabled=true orders_etl.py (the app has no lineage code)")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    _show(events.new_events())
    return done.returncode


def _graph_part(events: _EventFile) -> int:
    """Read what the demo wrote into the local lineage graph: print ``graph show`` and write the page."""
    if events.path is None:
        print(f"\n4. lineage graph: events went to {events.where}, not to a file; "
              "run `lineage-capture graph serve` and point the transport at it to see them here")
        return 0
    from emitter.config import state_dir
    from lineage_graph.cli import main as graph

    page = state_dir() / "lineage.html"
    print("\n4. lineage-capture graph show (every job with its current inputs and outputs, grouped by parent)")
    code = graph(["graph", "ingest", str(events.path)])
    code = max(code, graph(["graph", "show", "--no-ingest"]))
    code = max(code, graph(["graph", "html", "--no-ingest", "-o", str(page)]))
    print(f"\nthe lineage page (open it in a browser; it works offline): {page}")
    return code


def build_parser(prog: str = "lineage-capture demo") -> argparse.ArgumentParser:
    """The demo's options (``--help`` describes it without running it)."""
    from lineage_capture.version import add_version_option

    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="exit codes: 0 every part wrote its events; 1 a part failed or lost "
                                            "events (its output says which)")
    parser.add_argument("--no-spark", action="store_true", help="skip the spark-submit part (about 30 s)")
    add_version_option(parser)
    return parser


def main(argv: list[str] | None = None, prog: str = "lineage-capture demo") -> int:
    """Run the demo: the emitter, the SQL Server harvester and the Spark plugin, each writing its events to the
    configured transport (the embedded default file unless configured), and show what they wrote."""
    from emitter.log import configure_cli_logging

    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    configure_cli_logging(logging.WARNING)
    events = _EventFile()
    with tempfile.TemporaryDirectory(prefix="lineage-demo-") as tmp:
        codes = [_emitter_part(events), _harvest_part(events, Path(tmp))]
        if not args.no_spark:
            codes.append(_spark_part(events, Path(tmp)))
    print(f"\nall events are in {events.where}")
    codes.append(_graph_part(events))
    return max(1 if code else 0 for code in codes)


if __name__ == "__main__":
    sys.exit(main())
