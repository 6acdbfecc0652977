"""Accuracy and speed of `harvesters.sql.engine.table_lineage` over the shared table-lineage cases.

Run from the repository root:

    .venv/bin/python benchmarks/sql_lineage.py [path/to/cases.jsonl] [--repeat N]
    .venv/bin/python benchmarks/sql_lineage.py --generated    # pathological texts against their time budgets

A case is exact when its input and output sets equal the expected ones, compared case-insensitively (the
cases' README: names are written lower-cased, quotes and brackets removed). Every case is timed on its own:
one call per run, no caching anywhere, the per-case time is the median of `--repeat` runs (default 3), and
p50/p90/max are taken over the cases. The first call of a dialect (sqlglot imports its modules lazily) is
done before timing and reported apart. Exits 1 when the targets (>= 97% of all cases, >= 95% of the tsql and
snowflake cases, median < 0.5 ms) are missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlglot.tokens import SQLGLOTC_INSTALLED  # noqa: E402

from harvesters.sql.engine import table_lineage  # noqa: E402

DEFAULT_CASES = ROOT.parent / "shared" / "sql-lineage-cases" / "cases.jsonl"
TARGET_ALL, TARGET_TSQL_SNOWFLAKE, TARGET_P50_MS = 0.97, 0.95, 0.5


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def generated_budgets() -> int:
    """Time the generated pathological texts of the unit tests (deep nesting, huge IN lists, NULs...) against
    the budget each case names; exit 1 when one is over (these were asserted in the unit test before)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "harvesters" / "sql"))
    from test_sql_lineage import GENERATED

    over = 0
    for case_id, sql, dialect, *_, seconds in GENERATED:
        start = time.perf_counter()
        table_lineage(sql, dialect)
        elapsed = time.perf_counter() - start
        over += elapsed >= seconds
        print(f"  {case_id:<28} {elapsed * 1000:8.1f} ms (budget {seconds * 1000:.0f} ms)"
              + ("" if elapsed < seconds else "  OVER"))
    print("budgets met" if not over else f"{over} BUDGETS MISSED")
    return 1 if over else 0


def main(argv: list[str] | None = None) -> int:
    """Run the cases, print accuracy per dialect, timings and every miss; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="?", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--generated", action="store_true", help="time the generated pathological texts instead")
    args = parser.parse_args(argv)
    if args.generated:
        return generated_budgets()
    cases = [json.loads(line) for line in args.cases.read_text().splitlines() if line.strip()]

    cold: dict[str, float] = {}
    for case in cases:  # first call per dialect loads sqlglot's dialect modules: report, don't count
        if case["dialect"] not in cold:
            start = time.perf_counter()
            table_lineage(case["sql"], case["dialect"], case.get("database"), case.get("schema"))
            cold[case["dialect"]] = (time.perf_counter() - start) * 1000

    times: list[float] = []
    exact: dict[str, list[bool]] = defaultdict(list)
    misses: list[str] = []
    slowest: list[tuple[float, str]] = []
    for case in cases:
        runs = []
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            result = table_lineage(case["sql"], case["dialect"], case.get("database"), case.get("schema"),
                                   temp_tables=case.get("temp_tables", ()))  # (as the tests' case format)
            runs.append((time.perf_counter() - start) * 1000)
        elapsed = statistics.median(runs)
        times.append(elapsed)
        slowest.append((elapsed, case["id"]))
        got_in = {n.lower() for n in result.inputs}
        got_out = {n.lower() for n in result.outputs}
        want_in = {n.lower() for n in case["inputs"]}
        want_out = {n.lower() for n in case["outputs"]}
        ok = got_in == want_in and got_out == want_out
        exact[case["dialect"]].append(ok)
        if not ok:
            misses.append(
                f"  {case['id']} [{case['dialect']}] inputs {sorted(got_in)} (want {sorted(want_in)}), "
                f"outputs {sorted(got_out)} (want {sorted(want_out)}), error={result.error!r}"
            )

    total = [ok for oks in exact.values() for ok in oks]
    # (.get: indexing the defaultdict would add empty tsql/snowflake rows, and the per-dialect shares divide by 0)
    focus = exact.get("tsql", []) + exact.get("snowflake", [])
    share_all = sum(total) / len(total)
    share_focus = sum(focus) / len(focus) if focus else 1.0
    p50, p90 = _percentile(times, 0.5), _percentile(times, 0.9)

    print(f"sqlglot compiled extension (sqlglotc): {'yes' if SQLGLOTC_INSTALLED else 'no'}")
    print(f"cases: {args.cases} ({len(total)})")
    print(f"exact overall: {sum(total)}/{len(total)} = {share_all:.1%} (target {TARGET_ALL:.0%})")
    print(
        f"exact tsql+snowflake: {sum(focus)}/{len(focus)} = {share_focus:.1%} "
        f"(target {TARGET_TSQL_SNOWFLAKE:.0%})"
    )
    for dialect in sorted(exact, key=lambda d: -len(exact[d])):
        oks = exact[dialect]
        print(f"  {dialect:<10} {sum(oks):>4}/{len(oks):<4} {sum(oks) / len(oks):.1%}")
    print(
        f"time per case (median of {args.repeat} runs each, uncached): p50 {p50:.3f} ms, p90 {p90:.3f} ms, "
        f"max {max(times):.3f} ms, mean {statistics.fmean(times):.3f} ms (target p50 < {TARGET_P50_MS} ms)"
    )
    print("  slowest: " + ", ".join(f"{i} {t:.2f} ms" for t, i in sorted(slowest, reverse=True)[:5]))
    print("  first call per dialect (module loading, not counted): "
          + ", ".join(f"{d} {t:.1f} ms" for d, t in sorted(cold.items(), key=lambda x: -x[1])))
    print(f"misses ({len(misses)}):" + ("" if misses else " none"))
    for line in misses:
        print(line)
    met = share_all >= TARGET_ALL and share_focus >= TARGET_TSQL_SNOWFLAKE and p50 < TARGET_P50_MS
    print("targets met" if met else "TARGETS MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
