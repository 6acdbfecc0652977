"""harvesters.xevents.read_file_background: the same items as read_file, early stop, failures, fallback.

The XML reader's second process, added for the issue 4 harvest rate.
"""
from __future__ import annotations

import codecs
import subprocess
from pathlib import Path

import pytest

from harvesters import background
from harvesters.xevents import read_file, read_file_background
from test_xevents import BAD_INPUT_CASES, SAMPLES

SAMPLE_FILES = sorted(SAMPLES.glob("*.xml"))


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
    monkeypatch.setattr(background, "_CHILD_MAIN", "import sys, pickle; pickle.dump([], sys.stdout.buffer); sys.exit(3)")
    with pytest.raises(OSError, match=r"ended unexpectedly \(exit code 3\)"):
        list(read_file_background(str(_many_events(tmp_path))))


def test_a_reader_that_cannot_start_falls_back_to_reading_here(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "_CHILD_MAIN", "import sys; sys.exit(3)")
    path = str(_many_events(tmp_path, copies=2))
    assert list(read_file_background(path)) == list(read_file(path))
