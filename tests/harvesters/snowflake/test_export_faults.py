"""Malformed Snowflake exports: every row read is harvested or counted with a reason, the state never moves past a
row that was lost, a bad byte costs one row, a row from the future is counted and does not move the window."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harvesters.snowflake.history import (
    BAD_UTF8,
    FROM_THE_FUTURE,
    UNCLOSED_QUOTE,
    HistoryRow,
    Unreadable,
    read_history,
    read_history_files,
)

from harvest_cli import run_harvest

ACCOUNT = "org-acct"
COLUMNS = ["QUERY_ID", "QUERY_TEXT", "START_TIME", "END_TIME", "SESSION_ID", "QUERY_TAG", "EXECUTION_STATUS",
           "ERROR_MESSAGE"]
T0 = datetime(2024, 6, 1, 1, 0, tzinfo=timezone.utc)


def stamp(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000"


def row(i: int, text: str | None = None, end: str | None = None) -> dict[str, str]:
    """Query ``q{i}``: INSERT INTO T{i} SELECT FROM S{i}, one minute long, a minute after the previous one."""
    return {"QUERY_ID": f"q{i:02d}", "QUERY_TEXT": text or f"INSERT INTO db.s.t{i:02d} SELECT * FROM db.s.src{i:02d}",
            "START_TIME": stamp(2 * i), "END_TIME": end or stamp(2 * i + 1), "SESSION_ID": "7",
            "QUERY_TAG": "etl::load", "EXECUTION_STATUS": "SUCCESS", "ERROR_MESSAGE": ""}


def csv_lines(rows: list[dict[str, str]]) -> list[str]:
    """One string per record, as csv writes it (quoted where needed, \\r\\n line ends)."""
    out = []
    for values in [dict(zip(COLUMNS, COLUMNS)), *rows]:
        buffer = io.StringIO()
        csv.writer(buffer).writerow([values[c] for c in COLUMNS])
        out.append(buffer.getvalue())
    return out


def ten_rows() -> list[dict[str, str]]:
    return [row(i) for i in range(1, 11)]


# Each case: (name, the export's bytes, the QUERY_IDs harvested, the unreadable reasons counted)
def _cases() -> list[tuple[str, bytes, list[int], dict[str, int]]]:
    rows = ten_rows()
    rows[1]["QUERY_TEXT"] = "INSERT INTO db.s.t02\nSELECT a,\n  b FROM db.s.src02"  # multi-line, quoted: fine
    lines = csv_lines(rows)
    all_ids = list(range(1, 11))
    cases = [("clean, a multi-line text", "".join(lines).encode(), all_ids, {})]

    # row 3's text opens a quote it never closes: it runs to the end of the file
    broken = list(lines)
    broken[3] = broken[3].replace(",INSERT INTO db.s.t03", ',"INSERT INTO db.s.t03', 1)
    cases.append(("unclosed quote in row 3 of 10", "".join(broken).encode(), [i for i in all_ids if i != 3],
                  {UNCLOSED_QUOTE: 1}))

    # ... and a later row has a quoted field, which closes it: the record then looks whole (8 fields)
    quoted = ten_rows()
    quoted[4]["QUERY_TEXT"] = 'INSERT INTO db.s.t05 SELECT "A", b FROM db.s.src05'
    quoted_lines = csv_lines(quoted)
    quoted_lines[3] = quoted_lines[3].replace(",INSERT INTO db.s.t03", ',"INSERT INTO db.s.t03', 1)
    cases.append(("unclosed quote closed by a later row's quote", "".join(quoted_lines).encode(),
                  [i for i in all_ids if i != 3], {UNCLOSED_QUOTE: 1}))

    # two broken rows
    twice = list(lines)
    for i in (3, 7):
        twice[i] = twice[i].replace(f",INSERT INTO db.s.t{i:02d}", f',"INSERT INTO db.s.t{i:02d}', 1)
    cases.append(("unclosed quotes in rows 3 and 7", "".join(twice).encode(), [i for i in all_ids if i not in (3, 7)],
                  {UNCLOSED_QUOTE: 2}))

    # the last row's quote is open at the end of the file: that row alone, its fields short
    last = list(lines)
    last[10] = last[10].replace(",INSERT INTO db.s.t10", ',"INSERT INTO db.s.t10', 1)
    cases.append(("unclosed quote in the last row", "".join(last).encode(), all_ids[:-1],
                  {"2 fields where the header has 8": 1}))

    # a row with a field too many
    extra = list(lines)
    extra[5] = extra[5].replace("\r\n", ",surplus\r\n")
    cases.append(("a field too many", "".join(extra).encode(), [i for i in all_ids if i != 5],
                  {"9 fields where the header has 8": 1}))

    # one byte that is not UTF-8 (Latin-1 é) in row 4: that row only
    latin = "".join(lines).encode()
    latin = latin.replace(b"INSERT INTO db.s.t04", b"INSERT INTO db.s.t04 /* caf\xe9 */", 1)
    cases.append(("invalid UTF-8 in row 4", latin, [i for i in all_ids if i != 4], {BAD_UTF8: 1}))

    # ... inside the multi-line text of row 2
    latin2 = "".join(lines).encode().replace(b"SELECT a,\n", b"SELECT a, \xff\n", 1)
    cases.append(("invalid UTF-8 in a multi-line row", latin2, [i for i in all_ids if i != 2], {BAD_UTF8: 1}))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "content", "harvested", "unreadable"), CASES, ids=[c[0] for c in CASES])
def test_csv_export_every_row_accounted_for(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                            content: bytes, harvested: list[int], unreadable: dict[str, int]) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes(content)
    state = tmp_path / "state.json"
    code, events = run_harvest(tmp_path / "events.jsonl",
                               ["snowflake", "--account", ACCOUNT, "--history", str(path), "--state", str(state)])
    err = capsys.readouterr().err
    assert code == (1 if unreadable else 0), err
    queries = sorted({e["run"]["facets"]["externalQuery"]["externalQueryId"] for e in events
                      if "externalQuery" in e["run"]["facets"]})
    assert queries == [f"q{i:02d}" for i in harvested]
    outputs = sorted({o["name"] for e in events for o in e["outputs"] if e["job"]["name"] != "etl.load"})
    assert outputs == [f"DB.S.T{i:02d}" for i in harvested]  # no row's text swallowed another's
    assert f"{len(harvested)} history rows read" in err
    reasons = ", ".join(f"{reason}: {n}" for reason, n in unreadable.items())
    assert f"{sum(unreadable.values())} unreadable" + (f" ({reasons})" if reasons else "") in err
    # the state resumes after the last row harvested (row 10 ends at minute 21)
    assert json.loads(state.read_text())["window_end"] == (T0 + timedelta(minutes=2 * harvested[-1] + 1)).isoformat()


def test_reader_yields_one_item_per_physical_row() -> None:
    """read_history itself: the rows in file order, the broken one as an Unreadable in its place."""
    content = CASES[1][1].decode()
    items = list(read_history(io.StringIO(content, newline="")))
    assert [i.query_id if isinstance(i, HistoryRow) else i.reason for i in items] == [
        "q01", "q02", UNCLOSED_QUOTE, "q04", "q05", "q06", "q07", "q08", "q09", "q10"]
    assert items[1].text == "INSERT INTO db.s.t02\nSELECT a,\n  b FROM db.s.src02"


def test_json_lines_bad_byte_costs_one_row(tmp_path: Path) -> None:
    rows = [json.dumps(row(i)).encode() for i in range(1, 6)]
    rows[2] = rows[2].replace(b"INSERT INTO", b"INSERT /* \xe9 */ INTO")
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    items = list(read_history_files([str(path)]))
    assert [i.query_id if isinstance(i, HistoryRow) else i.reason for i in items] == [
        BAD_UTF8, "q01", "q02", "q04", "q05"]  # unreadables come first out of the START_TIME ordering
    assert isinstance(items[0], Unreadable)


def test_row_from_the_future_is_counted_and_does_not_move_the_window(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rows = ten_rows()
    rows[4]["END_TIME"] = "2099-01-01 00:00:00.000 +0000"
    path = tmp_path / "h.csv"
    path.write_text("".join(csv_lines(rows)), newline="")
    state = tmp_path / "state.json"
    args = ["snowflake", "--account", ACCOUNT, "--history", str(path), "--state", str(state)]
    code, events = run_harvest(tmp_path / "events.jsonl", args)
    err = capsys.readouterr().err
    assert code == 1
    assert f"1 unreadable ({FROM_THE_FUTURE}: 1)" in err
    assert "9 history rows read" in err
    assert sorted({e["run"]["facets"]["externalQuery"]["externalQueryId"] for e in events
                   if "externalQuery" in e["run"]["facets"]}) == [f"q{i:02d}" for i in range(1, 11) if i != 5]
    assert json.loads(state.read_text())["window_end"] == (T0 + timedelta(minutes=21)).isoformat()

    # the next export's rows are harvested, not skipped as "ending before the window"
    path.write_text("".join(csv_lines([row(11), row(12)])), newline="")
    code, events = run_harvest(tmp_path / "events.jsonl", args)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "before the window" not in err
    assert sorted({e["run"]["facets"]["externalQuery"]["externalQueryId"] for e in events
                   if "externalQuery" in e["run"]["facets"]}) == ["q11", "q12"]


def test_a_few_minutes_ahead_is_clock_drift_not_the_future(tmp_path: Path) -> None:
    """A row ending 2 minutes after the harvest's clock (a clock a little ahead) is harvested."""
    from harvesters.snowflake.history import FUTURE_TOLERANCE

    assert FUTURE_TOLERANCE == timedelta(minutes=5)
    now = datetime.now(timezone.utc)
    soon = row(1, end=(now + timedelta(minutes=2)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000")
    soon["START_TIME"] = (now - timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " +0000"
    path = tmp_path / "h.csv"
    path.write_text("".join(csv_lines([soon])), newline="")
    code, events = run_harvest(tmp_path / "events.jsonl", ["snowflake", "--account", ACCOUNT, "--history", str(path)])
    assert code == 0
    assert {e["run"]["facets"]["externalQuery"]["externalQueryId"] for e in events
            if "externalQuery" in e["run"]["facets"]} == {"q01"}
