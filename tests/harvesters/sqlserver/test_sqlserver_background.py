"""harvesters.sqlserver.reading.read_readings_background: the same items as read_readings, early stop, failures,
fallback, and the same harvest.

The second process (XML parsing and reading each event, lineage included), added for the issue 4 harvest rate.
"""
from __future__ import annotations

import codecs
import subprocess
from pathlib import Path

import pytest
from test_sqlserver_harvest import BAD_INPUT_CASES as HARVEST_BAD_INPUT
from test_sqlserver_harvest import ERROR_CASES, harvest, sample_events, write_log
from test_xevents import BAD_INPUT_CASES, SAMPLES

from harvesters.core import background
from harvesters.sqlserver.reading import EventReader, LineageCache, read_readings, read_readings_background

SAMPLE_FILES = sorted(SAMPLES.glob("*.xml"))
NS = "sqlserver://sqlprod01:1433"


def read_file_background(path: str, start: int = 0):
    return read_readings_background(path, EventReader(NS, LineageCache()), start)


def read_file(path: str, start: int = 0):
    return read_readings(path, EventReader(NS, LineageCache()), start)


def _many_events(tmp_path: Path, copies: int = 1500) -> Path:
    """A stream of 3000 events: several batches of background.BATCH."""
    one = b"\n".join((SAMPLES / name).read_bytes().strip() for name in
                     ("01_sql_statement_completed_insert_select.xml", "04_sql_statement_completed_update_join.xml"))
    path = tmp_path / "many.xml"
    path.write_bytes((one + b"\n") * copies)
    return path


# input name -> bytes; every case is read both ways and must give equal items (values and resume offsets)
SAME_ITEMS_CASES = [(p.name, p.read_bytes()) for p in SAMPLE_FILES] + [(c[0], c[1]) for c in BAD_INPUT_CASES] + [
    ("utf-16 export", codecs.BOM_UTF16_LE + (SAMPLES / SAMPLE_FILES[0].name).read_text("utf-8").encode("utf-16-le")),
]


@pytest.mark.parametrize("data", [c[1] for c in SAME_ITEMS_CASES], ids=[c[0] for c in SAME_ITEMS_CASES])
@pytest.mark.parametrize("start", [0, 300])
def test_same_items_as_in_process(data: bytes, start: int, tmp_path: Path) -> None:
    path = tmp_path / "in.xml"
    path.write_bytes(data)
    assert list(read_file_background(str(path), start)) == list(read_file(str(path), start))


def test_many_batches_in_order(tmp_path: Path) -> None:
    path = str(_many_events(tmp_path))
    items = list(read_file_background(path))
    assert len(items) == 3000
    assert items == list(read_file(path))


def test_closing_early_stops_the_reader(tmp_path: Path, child_processes: list[subprocess.Popen]) -> None:
    path = str(_many_events(tmp_path))
    items = read_file_background(path)
    first = [next(items) for _ in range(3)]
    items.close()
    assert first == list(read_file(path))[:3]
    assert child_processes[0].returncode is not None  # ended and reaped


def test_a_reading_error_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"reading .*gone\.xml failed: FileNotFoundError"):
        list(read_file_background(str(tmp_path / "gone.xml")))


def test_a_reader_that_dies_midway_is_an_oserror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "_CHILD_MAIN",
                        "import sys, pickle; pickle.dump([], sys.stdout.buffer); sys.exit(3)")
    with pytest.raises(OSError, match=r"ended unexpectedly \(exit code 3\)"):
        list(read_file_background(str(_many_events(tmp_path))))


def test_a_reader_that_cannot_start_falls_back_to_reading_here(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "_CHILD_MAIN", "import sys; sys.exit(3)")
    path = str(_many_events(tmp_path, copies=2))
    assert list(read_file_background(path)) == list(read_file(path))


def test_cli_events_are_the_same_when_read_in_a_second_process(tmp_path, monkeypatch, child_processes):
    events = [*sample_events(), *(e for case in ERROR_CASES for e in case[1]),
              *(e for case in HARVEST_BAD_INPUT if case[0] != "10 MB statement" for e in case[1])]
    log = str(write_log(tmp_path / "log.xml", events))
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    code_here, here = harvest(tmp_path / "here", "--xml", log)
    assert child_processes == []
    monkeypatch.setattr(background, "worth_a_second_process", lambda *paths: True)
    code_there, there = harvest(tmp_path / "there", "--xml", log)
    assert [c.args[4:6] for c in child_processes] == [["harvesters.sqlserver.reading", "send_readings"]]
    assert (code_there, there) == (code_here, here)
    assert code_here == 1 and len(here) > 40
    assert {e["eventType"] for e in here} == {"START", "COMPLETE", "FAIL"}
