"""What a cron-run harvester keeps between runs, and the time arithmetic of its windows.

* :class:`Checkpoint` (DataHub "stateful ingestion" / Singer bookmark style): ``last`` is the state the
  previous harvest committed, read-only; ``current`` starts as a copy and is updated as the harvest goes
  (position, open task runs). ``commit`` writes it atomically (temp file, fsync, rename, fsync of the
  directory), and the harvester commits only after every event the new state covers was delivered or
  spooled: a crash or a failed delivery leaves ``last`` in place, the next run redoes the work, and the
  deterministic run ids make the redo produce the same events.
* :class:`HarvestLock`: a filelock on ``{state}.lock`` so two overlapping cron runs never harvest the
  same position twice; the second one finds the lock taken and leaves.
* Window arithmetic as pure functions (:func:`harvest_window`, :func:`gap_exceeded`, :func:`is_idle`,
  :func:`closing_clock`), tested through a table of cases.
"""
from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from emitter.spool import write_atomically

STATE_VERSION = 1


class StateError(Exception):
    """The state file cannot be used (unreadable, another source's, a newer version): a configuration error."""


class LockBusy(Exception):
    """Another harvest holds the lock of this state file."""


# ---- window arithmetic ---------------------------------------------------------------------------------


@attrs.frozen
class Window:
    """A half-open time window ``[start, end)``; ``None`` = unbounded on that side."""

    start: datetime | None
    end: datetime | None

    def contains(self, instant: datetime) -> bool:
        return (self.start is None or instant >= self.start) and (self.end is None or instant < self.end)


def harvest_window(previous_end: datetime | None, now: datetime, *, since: datetime | None = None,
                   until: datetime | None = None, overlap: timedelta = timedelta(0),
                   latency: timedelta = timedelta(0)) -> Window:
    """The window a harvest reads.

    Start: ``since`` when given, else the previous window's end minus ``overlap`` (late rows: Snowflake's
    history lags up to 45 min, so windows overlap and rows are de-duplicated by query id), else unbounded.
    End: ``until`` when given, else ``now - latency`` (rows younger than the source's latency may still be
    missing). The end never precedes the start (an empty window, not a negative one).
    """
    start = since if since is not None else (previous_end - overlap if previous_end is not None else None)
    end = until if until is not None else now - latency
    if start is not None and end < start:
        end = start
    return Window(start, end)


def gap_exceeded(last_end: datetime, next_start: datetime, idle_gap: timedelta) -> bool:
    """True when a statement starting at ``next_start`` begins a new task run after one ending at ``last_end``.

    A gap exactly equal to ``idle_gap`` continues the run; overlapping statements (negative gap) do too.
    """
    return next_start - last_end > idle_gap


def is_idle(last_activity: datetime, clock: datetime, idle_gap: timedelta) -> bool:
    """True when a task run whose last statement ended at ``last_activity`` is over at ``clock``."""
    return clock - last_activity > idle_gap


def closing_clock(now: datetime, until: datetime | None) -> datetime:
    """The instant open task runs are judged idle against at the end of a harvest: ``until`` when the
    harvest was bounded before ``now``, else ``now`` (a log from last week closes everything; a task that
    ran five minutes ago stays open for the next harvest)."""
    return until if until is not None and until < now else now


# ---- what a state file may hold ------------------------------------------------------------------------
#
# A state file is JSON a person may have edited (or another version written): every key the sources read back
# is checked here, before anything uses it, so a wrong type is a StateError naming the field (exit code 2), not
# a traceback halfway through a harvest. A schema is: a type (int, str, bool), TIME (an ISO 8601 string with
# its UTC offset), Opt(schema) (null allowed), ListOf(schema), MapOf(schema) (an object with any keys),
# Fixed(schema, ...) (a list of that many values) or Record({key: schema}, required=(...)). Keys not listed
# are not checked (a newer harvester may add some; the version number guards real changes).


@attrs.frozen
class Opt:
    schema: Any


@attrs.frozen
class ListOf:
    schema: Any


@attrs.frozen
class MapOf:
    schema: Any


@attrs.frozen
class Fixed:
    schemas: tuple[Any, ...]


@attrs.frozen
class Record:
    fields: Mapping[str, Any]
    required: tuple[str, ...] = ()


TIME = "an ISO 8601 time with its UTC offset"
COUNT = "a whole number, 0 or more"  # a position or a count: a negative one would re-read or skip silently
_JOB = Fixed((str, str))  # [namespace, name]
_RUN = Opt(Fixed((str, str, str)))  # [namespace, name, run id]
#: An open task run (:meth:`harvesters.core.tasks.TaskRun.to_json`).
OPEN_RUN = Record(
    {"job": _JOB, "run_id": str, "host": str, "session": str, "start": TIME, "last_end": TIME, "parent": _RUN,
     "root": _RUN, "parent_id": Opt(str), "inputs": ListOf(Fixed((str, str))), "outputs": ListOf(Fixed((str, str))),
     "temps": MapOf(ListOf(str)), "children": COUNT, "started": bool,
     "modules": MapOf(Record({"job": _JOB, "run_id": str, "start": TIME, "last_end": TIME, "failed": bool,
                              "caller": _RUN}, required=("job", "run_id", "start", "last_end")))},
    required=("job", "run_id", "host", "session", "start", "last_end"))
#: Every key a source reads back from its state, and its schema.
STATE_SCHEMA = Record({
    "version": int,
    "source": str,
    "open_runs": ListOf(OPEN_RUN),
    # SQL Server: XML files' positions, the live event_file position or ring buffer watermark, the activities
    # whose containers are still to come, the errors still waiting for their statement
    "files": MapOf(Record({"offset": COUNT, "head_len": COUNT, "head": str}, required=("offset",))),
    "event_file": Record({"file": Opt(str), "offset": Opt(COUNT), "partial_file": Opt(str),
                          "partial_offset": Opt(COUNT), "done": COUNT}),
    "ring_buffer": Record({"time": Opt(TIME), "keys": ListOf(str)}),
    "covered_activities": ListOf(str),
    "pending_errors": ListOf(Fixed((str, TIME, str))),
    # Snowflake: the last window's end, the QUERY_IDs harvested inside the next window's overlap
    "window_end": TIME,
    "seen": MapOf(TIME),
})


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is an int subclass: true is not an offset


def _is_time(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def _describe(schema: Any) -> str:
    if schema is TIME or schema is COUNT:
        return str(schema)
    if isinstance(schema, Opt):
        return f"{_describe(schema.schema)} or null"
    if isinstance(schema, (ListOf, Fixed)):
        return "a list" if isinstance(schema, ListOf) else f"a list of {len(schema.schemas)} values"
    if isinstance(schema, (MapOf, Record)):
        return "an object"
    return {int: "an integer", str: "a string", bool: "true or false"}[schema]


def _problem(value: Any, schema: Any, where: str) -> str | None:
    """Where ``value`` breaks ``schema`` (the first place found), or None."""
    if isinstance(schema, Opt):
        if value is None:
            return None
        inner = _problem(value, schema.schema, where)
        said = f"{where} must be {_describe(schema.schema)},"
        return f"{where} must be {_describe(schema)},{inner[len(said):]}" if inner and inner.startswith(said) \
            else inner
    wrong = f"{where} must be {_describe(schema)}, not {json.dumps(value)[:60]}"
    if schema is TIME:
        return None if _is_time(value) else wrong
    if schema is int:
        return None if _is_int(value) else wrong
    if schema is COUNT:
        return None if _is_int(value) and value >= 0 else wrong
    if schema in (str, bool):
        return None if type(value) is schema else wrong
    if isinstance(schema, (ListOf, Fixed)):
        if type(value) is not list or (isinstance(schema, Fixed) and len(value) != len(schema.schemas)):
            return wrong
        schemas = schema.schemas if isinstance(schema, Fixed) else [schema.schema] * len(value)
        return next((p for i, (v, s) in enumerate(zip(value, schemas)) if (p := _problem(v, s, f"{where}[{i}]"))),
                    None)
    if type(value) is not dict:
        return wrong
    if isinstance(schema, MapOf):
        return next((p for k, v in value.items() if (p := _problem(v, schema.schema, f"{where}[{json.dumps(k)}]"))),
                    None)
    missing = [key for key in schema.required if key not in value]
    if missing:
        return f"{where} has no {missing[0]!r}"
    prefix = f"{where}." if where else ""
    return next((p for key, s in schema.fields.items() if key in value
                 and (p := _problem(value[key], s, f"{prefix}{key}"))), None)


def state_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a loaded state (the first field found, named as ``open_runs[0].start``), or None."""
    return _problem(data, STATE_SCHEMA, "")


def _redacted(value: Any) -> Any:
    """A copy of a JSON-ready state with every string value redacted (keys are paths, ids and table names)."""
    from emitter.redact import redact

    if type(value) is str:
        return redact(value)
    if type(value) is dict:
        return {k: _redacted(v) for k, v in value.items()}
    if type(value) is list:
        return [_redacted(v) for v in value]
    return value


# ---- checkpoint ----------------------------------------------------------------------------------------


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class Checkpoint:
    """The previous harvest's committed state (``last``, read-only) and the one being built (``current``)."""

    def __init__(self, path: Path | None, source: str, last: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.source = source
        data = dict(last or {"version": STATE_VERSION, "source": source})
        self.last: Mapping[str, Any] = _frozen(data)
        self.current: dict[str, Any] = copy.deepcopy(data)

    @classmethod
    def load(cls, path: Path | str | None, source: str) -> Checkpoint:
        """Read the state file (missing = first harvest). Raises StateError when it cannot be trusted."""
        if path is None:
            return cls(None, source)
        path = Path(path)
        if not path.exists():
            return cls(path, source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise StateError(f"cannot read the state file {path}: {error}") from None
        if not isinstance(data, dict):
            raise StateError(f"{path}: not a harvest state file")
        if not _is_int(data.get("version", 0)):
            raise StateError(f"{path}: version must be an integer, not {json.dumps(data.get('version'))}")
        if data.get("version", 0) > STATE_VERSION:
            raise StateError(f"{path}: written by a newer version (state version {data.get('version')})")
        if data.get("source") != source:
            raise StateError(f"{path} holds the state of {data.get('source')!r}, not of {source!r}: "
                             f"use one state file per source")
        problem = state_problem(data)
        if problem:
            raise StateError(f"{path}: {problem} (fix or remove the state file: without it the next harvest "
                             f"starts over)")
        return cls(path, source, data)

    def commit(self) -> None:
        """Write ``current`` atomically; it becomes the next harvest's ``last``."""
        if self.path is None:
            return
        self.current["version"] = STATE_VERSION
        self.current["source"] = self.source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # secrets never sit in the state: an error message, a host or a task name may quote one (the sources
        # redact what they keep; this is the last line before the disk)
        safe = _redacted(self.current)
        write_atomically(self.path, json.dumps(safe, indent=1, sort_keys=True).encode("utf-8"))
        self.last = _frozen(copy.deepcopy(self.current))


# ---- lock ----------------------------------------------------------------------------------------------


def _file_among_parents(path: Path) -> Path | None:
    """The nearest parent directory of ``path`` that exists as something else (``--state`` under a regular
    file: mkdir says only "File exists"), else None."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


class HarvestLock:
    """An exclusive, non-blocking lock on ``{state}.lock`` (filelock: flock on POSIX, msvcrt on Windows), released
    when the process ends at the latest. The holder's pid is written beside it (``{state}.lock.pid``, not in the
    lock file: some filelock versions truncate the lock file when a contender opens it)."""

    def __init__(self, state_path: Path | str) -> None:
        state_path = os.path.realpath(state_path)  # one lock per state file, whichever link names it
        self.path = Path(f"{state_path}.lock")
        self.pid_path = Path(f"{state_path}.lock.pid")
        self._lock: Any = None

    def acquire(self) -> None:
        """Take the lock or raise LockBusy naming the holder's pid."""
        import filelock  # deferred: only harvests that keep a state take the lock

        lock = filelock.FileLock(self.path, timeout=0)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except filelock.Timeout:  # (first: it is an OSError too)
            try:
                holder = self.pid_path.read_text(encoding="utf-8").strip() or "?"
            except OSError:
                holder = "?"
            raise LockBusy(f"another harvest (pid {holder}) holds {self.path}") from None
        except OSError as error:  # a file where the directory should be, a read-only or full disk
            blocker = _file_among_parents(self.path)
            reason = f"{blocker} is a file, not a directory" if blocker else error.strerror or error
            raise StateError(f"cannot lock the state next to {self.path}: {reason}") from None
        try:
            self.pid_path.write_text(str(os.getpid()), encoding="utf-8")
        except OSError as error:
            lock.release()
            raise StateError(f"cannot write {self.pid_path}: {error.strerror or error}") from None
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> HarvestLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
