"""Snowflake history files read in a second process (harvesters.core.background): the same rows in the same order as
read in process, prepared there as they would be here, failures raised, and the CLI's events unchanged when it
reads that way."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_snowflake import FIXTURES, GOOD, GOOD2, NS, harvest, history, row

from harvesters.core import background
from harvesters.core.outcome import Skip
from harvesters.snowflake.history import (
    DEFAULT_MAX_STATEMENT_CHARS,
    HistoryRow,
    LineageCache,
    prepare_row,
    read_history_files,
    read_history_files_background,
)

# input name -> files (made in tmp_path from fixtures or rows); each read both ways must give equal rows
BAD_LINES = '{"QUERY_ID": "q0"}\n{not json\n\n["a list"]\n'


def _inputs(tmp_path: Path) -> dict[str, list[str]]:
    late = history(tmp_path, [row(f"q{i}", 60 - i, f"INSERT INTO t{i} SELECT * FROM s") for i in range(1500)],
                   "late.jsonl")  # reverse START_TIME order, several batches
    bad = tmp_path / "bad.jsonl"
    bad.write_text(BAD_LINES)
    return {
        "csv export": [str(FIXTURES / "history.csv")],
        "access history": [str(FIXTURES / "access_history.jsonl")],
        "two overlapping windows": [str(FIXTURES / "window1.jsonl"), str(FIXTURES / "window2.jsonl")],
        "reverse order, 1500 rows": [str(late)],
        "unreadable lines": [str(bad), str(history(tmp_path, [GOOD, GOOD2], "good.jsonl"))],
    }


def prepared_here(paths: list[str], max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS) -> list:
    """The rows read in this process, prepared as the reading process prepares them."""
    cache = LineageCache()
    return [prepare_row(r, cache, max_statement_chars, NS) if isinstance(r, HistoryRow) else r
            for r in read_history_files(paths)]


@pytest.mark.parametrize("name", ["csv export", "access history", "two overlapping windows",
                                  "reverse order, 1500 rows", "unreadable lines"])
def test_same_rows_as_in_process(tmp_path, name):
    paths = _inputs(tmp_path)[name]
    here = prepared_here(paths)
    assert here  # the case reads something
    assert list(read_history_files_background(paths, NS)) == here


def test_the_reader_prepares_for_the_harvest_s_statement_limit(tmp_path):
    paths = _inputs(tmp_path)["csv export"]
    rows = list(read_history_files_background(paths, NS, max_statement_chars=60))
    assert rows == prepared_here(paths, 60)
    assert Skip("statement longer than 60 characters", unparsed=True) in [r.parsed for r in rows]


def test_rows_are_read_here_when_no_process_can_be_started(tmp_path, monkeypatch):
    def no_process(*args, **kwargs):
        raise OSError("no more processes")

    monkeypatch.setattr(background.subprocess, "Popen", no_process)
    paths = _inputs(tmp_path)["two overlapping windows"]
    # the harvest prepares them
    assert list(read_history_files_background(paths, NS)) == list(read_history_files(paths))


def test_a_reading_error_is_an_oserror(tmp_path):
    with pytest.raises(OSError, match=r"reading .*gone\.jsonl failed: FileNotFoundError"):
        list(read_history_files_background([str(tmp_path / "gone.jsonl")], NS))


def test_closing_early_stops_the_reader(tmp_path, child_processes):
    paths = _inputs(tmp_path)["reverse order, 1500 rows"]
    rows = read_history_files_background(paths, NS)
    first = [next(rows) for _ in range(3)]
    rows.close()
    assert first == prepared_here(paths)[:3]
    assert child_processes[0].returncode is not None  # ended and reaped


@pytest.mark.parametrize("limit", [[], ["--max-statement-chars", "50"]])  # 50: some texts are longer
def test_cli_events_are_the_same_when_read_in_a_second_process(tmp_path, monkeypatch, child_processes, limit):
    files = ["--history", str(FIXTURES / "window1.jsonl"), "--history", str(FIXTURES / "window2.jsonl"), *limit]
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    code_here, here = harvest(tmp_path / "here", *files)
    assert child_processes == []
    monkeypatch.setattr(background, "worth_a_second_process", lambda *paths: True)
    code_there, there = harvest(tmp_path / "there", *files)
    assert [c.args[4:6] for c in child_processes] == [["harvesters.snowflake.history", "send_history_rows"]]
    assert (code_there, there) == (code_here, here) and here
