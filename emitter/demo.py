"""``lineage-demo``: the main job in miniature. Emits a parent run (a pipeline task) with one child run (a
statement reading ``raw.orders`` and writing ``mart.daily_orders``) through the emitter, to the configured
transport or the embedded default file, and prints what was written."""
from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone


def demo_records():
    """The parent/child records of the demo, in emission order."""
    from openlineage.client.facet_v2 import sql_job

    from emitter.records import COMPLETE, START, Dataset, JobRef, JobType, RunRecord, RunRef
    from emitter.run_ids import stable_run_id

    t0 = datetime.now(timezone.utc).replace(microsecond=0)
    task = RunRef(stable_run_id(t0, "demo", "task"), JobRef("demo", "nightly_orders.load"))
    child = RunRef(stable_run_id(t0, "demo", "statement", "1"), JobRef("demo", "nightly_orders.load.insert_daily_orders"))
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


def main(argv: list[str] | None = None) -> int:
    """Run the demo; prints each event as one JSON line after a short header."""
    from emitter.emitter import Emitter
    from emitter.events import event_dict
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    emitter = Emitter.from_config()
    records = demo_records()
    emitter.emit_batch(records)
    counts = emitter.close()
    where = emitter.config.transport.get("log_file_path") or emitter.config.transport.get("url") or \
        emitter.config.transport.get("type")
    print(f"emitted {len(records)} events ({counts.delivered} delivered, {counts.spooled} spooled) "
          f"to {where} [{emitter.config.source}]:")
    for record in records:
        event = event_dict(record)
        parent = event["run"]["facets"].get("parent", {}).get("job", {}).get("name", "-")
        print(f"  {event['eventType']:<8} {event['job']['name']:<45} parent={parent}")
    if "--json" in (argv if argv is not None else sys.argv[1:]):
        for record in records:
            print(json.dumps(event_dict(record), sort_keys=True))
    return 0 if counts.dropped == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
