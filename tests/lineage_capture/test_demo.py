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


def _readme_graph_examples() -> list[list[str]]:
    """The read-only `lineage-capture graph` lines of README's graph section (not ingest of other files, serve,
    html, dag-factory output redirected into a file)."""
    import re
    import shlex

    from paths import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The lineage graph", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in section.splitlines()]
    commands = [shlex.split(line)[2:] for line in lines if line.startswith("lineage-capture graph ")]
    return [c for c in commands if c[0] in ("show", "downstream", "upstream", "dag", "history") and ">" not in c]


def test_readme_graph_examples_answer_after_the_demo(isolated_lineage_env, capsys):
    """README's examples name what the demo writes: each answers (exit 0) with something."""
    from lineage_graph.cli import main as lineage_capture

    assert demo(["--no-spark"]) == 0
    examples = _readme_graph_examples()
    assert len(examples) >= 5
    for example in examples:
        capsys.readouterr()
        assert lineage_capture(["graph", *example]) == 0, example
        assert capsys.readouterr().out.strip(), example
