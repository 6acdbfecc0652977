"""A traversal pays only for what it needs: nothing new to read imports neither the ingest nor the derivation, and
still sees what was appended to a known file; the parser of one subcommand is the full parser's."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from graph_events import event as E

from lineage_graph.cli import build_parser

HEAVY = ("attrs", "lineage_graph.ingest", "lineage_graph.derive", "hashlib", "subprocess")
PROBE = ("import json, sys; from lineage_graph.cli import main; code = main(sys.argv[1:]); "
         "print(json.dumps([code, sorted(m for m in {heavy} if m in sys.modules)]), file=sys.stderr)")


def _run(tmp_path, *argv) -> tuple[int, list[str], dict]:
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", PROBE.format(heavy=repr(set(HEAVY))), "graph", *argv], env=env,
                         capture_output=True, text=True, check=True)
    code, imported = json.loads(res.stderr.strip().splitlines()[-1])
    return code, imported, json.loads(res.stdout) if res.stdout.strip() else {}


def test_traversal_imports_only_what_it_needs(tmp_path):
    events = tmp_path / "openlineage-events.jsonl"
    events.write_text(json.dumps(E(1, "r1", "a", inputs=["x"], outputs=["y"])) + "\n")
    code, imported, _ = _run(tmp_path, "ingest", "--json")
    assert code == 0 and "lineage_graph.ingest" in imported
    code, imported, answer = _run(tmp_path, "downstream", "db/x", "--json")
    assert (code, imported) == (0, [])
    assert [n["key"] for n in answer["nodes"]] == ["db/x", "ns/a", "db/y"]
    # appended to the default file: the same question reads it first (and derives), as before
    with open(events, "a") as fh:
        fh.write(json.dumps(E(2, "r2", "b", inputs=["y"], outputs=["z"])) + "\n")
    code, imported, answer = _run(tmp_path, "downstream", "db/x", "--json")
    assert code == 0 and {"lineage_graph.ingest", "lineage_graph.derive"} <= set(imported)
    assert [n["key"] for n in answer["nodes"]] == ["db/x", "ns/a", "db/y", "ns/b", "db/z"]
    # a file rewritten in place with the same size is read again (its first bytes differ): run r2 now also
    # writes w
    events.write_text(events.read_text().replace('"z"', '"w"'))
    code, imported, answer = _run(tmp_path, "downstream", "db/y", "--json")
    assert "lineage_graph.ingest" in imported
    assert [n["key"] for n in answer["nodes"]] == ["db/y", "ns/b", "db/w", "db/z"]


@pytest.mark.parametrize(("dataset", "typed"), [
    (("/tmp/x", "file"), "file:///tmp/x"),
    (("a/b", "s3://bucket"), "s3a://bucket/a/b"),
    (("DB.S.T", "snowflake://acct"), "snowflake://ACCT/db.s.t"),
    (("Sales.dbo.Orders", "sqlserver://db01:1433"), "sqlserver://db01:1433/Sales.dbo.Orders"),
])
def test_a_lookup_spelled_another_way_imports_nothing_heavy(tmp_path, dataset, typed):
    (tmp_path / "openlineage-events.jsonl").write_text(json.dumps(E(1, "r1", "a", inputs=[dataset])) + "\n")
    _run(tmp_path, "ingest", "--json")
    code, imported, answer = _run(tmp_path, "downstream", typed, "--json")
    assert (code, imported) == (0, [])
    assert [n["key"] for n in answer["nodes"]] == [f"{dataset[1]}/{dataset[0]}", "ns/a"]


@pytest.mark.parametrize("sub", ["upstream", "downstream", "history"])
def test_one_subcommand_parser_is_the_full_one(sub, capsys):
    helps = []
    for parser in (build_parser(), build_parser(sub)):
        with pytest.raises(SystemExit):
            parser.parse_args(["graph", sub, "--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and "exit codes:" in helps[0]
