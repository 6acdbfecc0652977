"""The demo (`./dev.sh demo`) writes what it shows: exact jobs, parents and datasets, all valid events."""
from __future__ import annotations

from lineage_capture.demo import main as demo

from ol_schema import assert_valid_event, read_events


def test_demo_without_spark_writes_the_emitter_and_harvester_runs(isolated_lineage_env, capsys):
    assert demo(["--no-spark"]) == 0
    events = read_events(isolated_lineage_env / "openlineage-events.jsonl")
    for event in events:
        assert_valid_event(event)
    parents = {e["job"]["name"]: e["run"]["facets"].get("parent", {}).get("job", {}).get("name") for e in events}
    assert parents == {
        "nightly_orders.load": None,
        "nightly_orders.load.insert_daily_orders": "nightly_orders.load",
        "python_task.load_archive": None,
        "python_task.load_archive.select_into_sales_dbo_orderlines": "python_task.load_archive",
        "python_task.load_archive.insert_reporting_dbo_orderarchive": "python_task.load_archive",
    }
    task_complete = [e for e in events if e["job"]["name"] == "python_task.load_archive"][-1]
    assert task_complete["eventType"] == "COMPLETE"
    assert sorted(d["name"] for d in task_complete["inputs"]) == ["Sales.dbo.OrderLines", "Sales.dbo.Orders"]
    assert [d["name"] for d in task_complete["outputs"]] == ["Reporting.dbo.OrderArchive"]
    assert "hunter2" not in (isolated_lineage_env / "openlineage-events.jsonl").read_text()
    assert "all events are in" in capsys.readouterr().out
