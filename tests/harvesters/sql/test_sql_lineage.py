"""`harvesters.sql.engine.table_lineage` against the shared contract cases and the project's own cases.

- every case of ../shared/sql-lineage-cases/cases.jsonl: exact input and output sets, compared
  case-insensitively as that file's README says; cases we cannot pass go in XFAIL (strict);
- tests/cases/sql_extra.jsonl: qualification with defaults, temp tables, sp_executesql, GO, USE, NOLOCK,
  OUTPUT INTO, MERGE, bad SQL: exact names (case included), temp fields, statement types and error kind;
- generated texts too big for a .jsonl line (10 MB, deep nesting, many statements): never raise, give a
  reason, finish quickly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harvesters.sql.engine import TableLineage, table_lineage

from paths import CASES, REPO

ROOT = REPO
SHARED_CASES = ROOT.parent / "shared" / "sql-lineage-cases" / "cases.jsonl"
EXTRA_CASES = CASES / "sql_extra.jsonl"


def _load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


SHARED = _load(SHARED_CASES)
EXTRA = _load(EXTRA_CASES)

# Shared cases the engine does not pass yet: id -> reason. Strict xfail, so a fix shows up as XPASS.
# At most ~3% of the shared cases may be listed here.
XFAIL: dict[str, str] = {}


def _shared_params() -> list[Any]:
    params = []
    for case in SHARED:
        marks = [pytest.mark.xfail(reason=XFAIL[case["id"]], strict=True)] if case["id"] in XFAIL else []
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def _folded(names: list[str]) -> set[str]:
    return {name.casefold() for name in names}


@pytest.mark.parametrize("case", _shared_params())
def test_shared_case(case: dict[str, Any]) -> None:
    result = table_lineage(case["sql"], case["dialect"], case["database"], case["schema"])
    assert (_folded(result.inputs), _folded(result.outputs)) == (
        _folded(case["inputs"]),
        _folded(case["outputs"]),
    )


def test_xfail_table_is_small_and_current() -> None:
    ids = {case["id"] for case in SHARED}
    assert set(XFAIL) <= ids
    assert len(XFAIL) <= 0.03 * len(SHARED)


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in EXTRA])
def test_extra_case(case: dict[str, Any]) -> None:
    result = table_lineage(
        case["sql"],
        case["dialect"],
        case["database"],
        case["schema"],
        temp_tables=case.get("temp_tables", ()),
    )
    got = {
        "inputs": result.inputs,
        "outputs": result.outputs,
        "temp_inputs": result.temp_inputs,
        "temp_outputs": result.temp_outputs,
    }
    want = {key: case[key] for key in got}
    if "statement_types" in case:
        got["statement_types"] = result.statement_types
        want["statement_types"] = case["statement_types"]
    # error: null = must be None; a string = the reason's kind (its prefix before the colon).
    got["error"] = result.error.split(":")[0] if result.error else None
    want["error"] = case["error"]
    assert got == want, result.error


def _nested_parens(depth: int) -> str:
    return "SELECT " + "(" * depth + "1" + ")" * depth + " FROM t"


def _nested_subqueries(depth: int) -> str:
    return "SELECT * FROM " + "(SELECT * FROM " * depth + "t" + ") x" * depth


# (id, sql, dialect, error kind or None, inputs, outputs, seconds allowed)
GENERATED = [
    ("ten-megabytes", "INSERT INTO t VALUES " + ",".join(["(1,'abc')"] * 1_000_000), "tsql", "too large",
     [], [], 1.0),
    ("deep-parens", _nested_parens(5000), "tsql", "unparseable", [], [], 2.0),
    ("deep-parens-snowflake", _nested_parens(800), "snowflake", "unparseable", [], [], 2.0),
    ("deep-subqueries", _nested_subqueries(2000), "ansi", "unparseable", [], [], 5.0),
    # sqlglot[c] (compiled) segfaults parsing this instead of raising: must be refused before parsing.
    ("deep-subqueries-segfault-guard", _nested_subqueries(10_000), "ansi", "unparseable", [], [], 5.0),
    ("moderate-subqueries", _nested_subqueries(25), "ansi", None, ["t"], [], 1.0),
    ("many-statements-no-semicolons",
     "\n".join(f"INSERT INTO t{i % 7} SELECT * FROM s{i % 11}" for i in range(3000)), "tsql", None,
     [f"s{i}" for i in range(11)], [f"t{i}" for i in range(7)], 5.0),
    # each `;`-less statement the parser takes for an opaque command swallowing the rest: 28.8 s before the window
    ("many-commands-no-semicolons", "\n".join(["SET @x = @x + 1"] * 4000), "tsql", None, [], [], 3.0),
    ("set-nocount-then-many-statements",
     "SET NOCOUNT ON\n" + "\n".join(f"INSERT INTO t{i % 7} SELECT * FROM s{i % 11}" for i in range(4000)), "tsql",
     None, [f"s{i}" for i in range(11)], [f"t{i}" for i in range(7)], 5.0),
    ("none", None, "tsql", "empty", [], [], 0.1),
    ("bytes", b"SELECT * FROM t", "tsql", "empty", [], [], 0.1),
    ("nul-and-surrogates", "\x00\x01SELECT \udcff * FROM t", "tsql", "unparseable", [], [], 0.5),
    ("dialect-none", "SELECT * FROM t", None, None, ["t"], [], 0.5),
]


@pytest.mark.parametrize(
    "sql, dialect, error, inputs, outputs, seconds",
    [pytest.param(*case[1:], id=case[0]) for case in GENERATED],
)
def test_generated_text_never_raises(
    sql: Any, dialect: Any, error: str | None, inputs: list[str], outputs: list[str], seconds: float
) -> None:
    # ``seconds`` is the budget benchmarks/sql_lineage.py --generated holds these cases to (timing is measured
    # there, not asserted in a unit test)
    result = table_lineage(sql, dialect)
    assert isinstance(result, TableLineage)
    kind = result.error.split(":")[0] if result.error else None
    assert (kind, result.inputs, result.outputs) == (error, sorted(inputs), sorted(outputs))


def test_max_bytes_is_a_parameter() -> None:
    sql = "INSERT INTO t SELECT * FROM s"
    assert table_lineage(sql, "tsql", max_bytes=10) == TableLineage(error=f"too large: {len(sql)} bytes > 10")
    assert table_lineage(sql, "tsql", max_bytes=len(sql)).outputs == ["t"]



# quote_dotted_parts (the SQL Server harvester's names, split back into parts for linked servers): a part holding
# a dot is quoted as the dialect quotes it, `]` doubled inside; without it (the contract), names are plain
QUOTED_PARTS = [
    ("tsql", "INSERT INTO dbo.[t.2024] SELECT * FROM [10.0.0.5].db.dbo.orders JOIN [odd]]name.x] ON 1=1",
     (["DW.dbo.[odd]]name.x]", "[10.0.0.5].db.dbo.orders"], ["DW.dbo.[t.2024]"]),
     (["10.0.0.5.db.dbo.orders", "DW.dbo.odd]name.x"], ["DW.dbo.t.2024"])),
    ("tsql", "SELECT * FROM [sql02.corp.local]..dbo.t JOIN [a].[b].[c] ON 1=1",
     (["[sql02.corp.local]..dbo.t", "a.b.c"], []), (["a.b.c", "sql02.corp.local..dbo.t"], [])),
    # a dialect without such quotes joins the parts as they are either way
    ("snowflake", 'SELECT * FROM "my.db".s.t', (["my.db.S.T"], []), (["my.db.S.T"], [])),
]


@pytest.mark.parametrize("dialect, sql, quoted, plain", QUOTED_PARTS)
def test_a_part_holding_a_dot_is_quoted_when_asked(dialect: str, sql: str, quoted: tuple[list[str], list[str]],
                                                   plain: tuple[list[str], list[str]]) -> None:
    found = table_lineage(sql, dialect, "DW", quote_dotted_parts=True)
    assert (found.inputs, found.outputs, found.error) == (*quoted, None)
    found = table_lineage(sql, dialect, "DW")
    assert (found.inputs, found.outputs, found.error) == (*plain, None)
