"""harvesters.core.state: window arithmetic (tables of cases), the checkpoint, the lock."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from harvesters.core.state import (
    Checkpoint,
    HarvestLock,
    LockBusy,
    StateError,
    Window,
    closing_clock,
    gap_exceeded,
    harvest_window,
    is_idle,
)

NOW = datetime(2024, 5, 14, 12, 0, tzinfo=timezone.utc)
M = timedelta(minutes=1)

# previous_end, since, until, overlap, latency -> expected window (start, end)
WINDOW_CASES = [
    # first harvest, nothing given: from the beginning up to now
    (None, None, None, 0, 0, (None, NOW)),
    # first harvest of a lagging source: stop `latency` before now (Snowflake QUERY_HISTORY: 45 min)
    (None, None, None, 0, 45, (None, NOW - 45 * M)),
    # next harvest: continue at the previous end
    (NOW - 60 * M, None, None, 0, 0, (NOW - 60 * M, NOW)),
    # next harvest with overlap: re-read the last 10 minutes (late rows; de-duplicated by query id)
    (NOW - 60 * M, None, None, 10, 0, (NOW - 70 * M, NOW)),
    # explicit --since wins over the saved end; explicit --until wins over now
    (NOW - 60 * M, NOW - 600 * M, NOW - 300 * M, 10, 45, (NOW - 600 * M, NOW - 300 * M)),
    # previous end newer than now - latency (clock skew, a re-run right after): empty window, never negative
    (NOW - 5 * M, None, None, 0, 45, (NOW - 5 * M, NOW - 5 * M)),
    # --until before --since: empty window at since
    (None, NOW, NOW - 60 * M, 0, 0, (NOW, NOW)),
]


@pytest.mark.parametrize("previous_end,since,until,overlap,latency,expected", WINDOW_CASES)
def test_harvest_window(previous_end, since, until, overlap, latency, expected):
    window = harvest_window(previous_end, NOW, since=since, until=until, overlap=overlap * M, latency=latency * M)
    assert (window.start, window.end) == expected


# window, instant -> contained (half-open [start, end))
CONTAINS_CASES = [
    (Window(None, None), NOW, True),
    (Window(NOW, None), NOW, True),  # start included
    (Window(None, NOW), NOW, False),  # end excluded: the next window starts there
    (Window(NOW - M, NOW), NOW - M / 2, True),
    (Window(NOW - M, NOW), NOW - 2 * M, False),
]


@pytest.mark.parametrize("window,instant,expected", CONTAINS_CASES)
def test_window_contains(window, instant, expected):
    assert window.contains(instant) is expected


# last statement end, next statement start, idle gap (min) -> a new task run?
GAP_CASES = [
    (NOW, NOW + 29 * M, 30, False),
    (NOW, NOW + 30 * M, 30, False),  # exactly the gap: same run
    (NOW, NOW + 30 * M + timedelta(microseconds=1), 30, True),
    (NOW, NOW - 5 * M, 30, False),  # overlapping / out-of-order statements: same run
    (NOW, NOW + 24 * 60 * M, 30, True),  # the same task tomorrow
    (NOW, NOW + 6 * M, 5, True),  # a shorter configured gap
]


@pytest.mark.parametrize("last_end,next_start,gap,expected", GAP_CASES)
def test_gap_exceeded(last_end, next_start, gap, expected):
    assert gap_exceeded(last_end, next_start, gap * M) is expected


# last activity, clock, gap (min) -> idle (complete the run now)?
IDLE_CASES = [
    (NOW - 31 * M, NOW, 30, True),
    (NOW - 30 * M, NOW, 30, False),  # exactly the gap: not yet
    (NOW - 5 * M, NOW, 30, False),  # still running at the end of the harvest: kept open in the state
    (NOW + 5 * M, NOW, 30, False),  # the server's clock ahead of ours
]


@pytest.mark.parametrize("last,clock,gap,expected", IDLE_CASES)
def test_is_idle(last, clock, gap, expected):
    assert is_idle(last, clock, gap * M) is expected


# now, until -> clock open runs are judged against
CLOCK_CASES = [
    (NOW, None, NOW),  # a cron harvest: now
    (NOW, NOW - 60 * M, NOW - 60 * M),  # bounded harvest: its end
    (NOW, NOW + 60 * M, NOW),  # an --until in the future changes nothing
]


@pytest.mark.parametrize("now,until,expected", CLOCK_CASES)
def test_closing_clock(now, until, expected):
    assert closing_clock(now, until) == expected


def test_checkpoint_first_run_commit_and_reload(tmp_path):
    path = tmp_path / "sub" / "state.json"
    first = Checkpoint.load(path, "sqlserver sqlserver://db01:1433")
    assert dict(first.last) == {"version": 1, "source": "sqlserver sqlserver://db01:1433"}
    first.current["files"] = {"/x.xml": {"offset": 10}}
    assert "files" not in first.last  # last stays what was loaded until commit
    first.commit()
    assert not list(path.parent.glob(".*tmp"))  # the temp file was renamed into place
    again = Checkpoint.load(path, "sqlserver sqlserver://db01:1433")
    assert again.last["files"]["/x.xml"]["offset"] == 10
    with pytest.raises(TypeError):
        again.last["files"] = {}  # type: ignore[index]  # the previous state is read-only
    again.current["files"]["/x.xml"]["offset"] = 20
    assert again.last["files"]["/x.xml"]["offset"] == 10  # current is a deep copy


@pytest.mark.parametrize("content,message", [
    ("{not json", "cannot read the state file"),
    ("[1, 2]", "not a harvest state file"),
    (json.dumps({"version": 99, "source": "s"}), "newer version"),
    (json.dumps({"version": 1, "source": "sqlserver sqlserver://other:1433"}), "use one state file per source"),
])
def test_checkpoint_refuses_untrustworthy_state(tmp_path, content, message):
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateError, match=message):
        Checkpoint.load(path, "s")


def test_lock_excludes_a_second_holder(tmp_path):
    state = tmp_path / "state.json"
    with HarvestLock(state):
        with pytest.raises(LockBusy, match=r"pid \d+"):
            HarvestLock(state).acquire()
        # and from another process
        probe = ("import sys; from harvesters.core.state import HarvestLock, LockBusy\n"
                 "try:\n    HarvestLock(sys.argv[1]).acquire()\nexcept LockBusy:\n    sys.exit(3)\n")
        assert subprocess.run([sys.executable, "-c", probe, str(state)]).returncode == 3
    HarvestLock(state).acquire()  # released: free again


def test_a_state_named_through_a_symbolic_link_is_one_state(tmp_path):
    """``--state link.json`` (a link to real/state.json) and ``--state real/state.json``: one lock (two harvests at
    once delivered every event twice), and a commit through the link writes the real file and keeps the link."""
    real = tmp_path / "real" / "state.json"
    real.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with HarvestLock(real):
        with pytest.raises(LockBusy):
            HarvestLock(link).acquire()
    checkpoint = Checkpoint.load(link, "s")
    checkpoint.current["files"] = {"/x.xml": {"offset": 10}}
    checkpoint.commit()
    assert link.is_symlink() and Checkpoint.load(real, "s").last["files"]["/x.xml"]["offset"] == 10
