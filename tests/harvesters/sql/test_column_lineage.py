"""`harvesters.sql.columns.column_lineage` against tests/cases/column_lineage.jsonl: one SQL text per row, the
exact column lineage (output table -> output column -> (input table, input column, subtype)), {} where the text
does not tell (never an invented column)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from harvesters.sql.columns import column_lineage

from paths import CASES

ROWS = [json.loads(line) for line in (CASES / "column_lineage.jsonl").read_text().splitlines() if line.strip()]


def _plain(found: dict[str, dict[str, tuple[tuple[str, str, str], ...]]]) -> dict[str, Any]:
    return {table: {column: sorted(list(source) for source in sources) for column, sources in columns.items()}
            for table, columns in found.items()}


@pytest.mark.parametrize("case", ROWS, ids=[row["id"] for row in ROWS])
def test_column_lineage_case(case):
    known = case["table_columns"]
    found = column_lineage(case["sql"], case["dialect"], case["database"], case["schema"],
                           table_columns=known.get if known is not None else None,
                           temp_tables=case.get("temp_tables", ()))
    expected = {table: {column: sorted(sources) for column, sources in columns.items()}
                for table, columns in case["expected"].items()}
    assert _plain(found) == expected


@pytest.mark.parametrize("text", [None, "", "   ", "x" * 200_000, "SELECT " + "(" * 5000 + "1" + ")" * 5000])
def test_never_raises(text):
    assert column_lineage(text, "tsql") == {}  # type: ignore[arg-type]
