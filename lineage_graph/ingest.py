"""Reading OpenLineage run events (JSON lines, or a file holding one JSON event or an array of them) into the store.

Incremental: per file, the byte offset of the last complete line read is kept with the file's device, inode and
a hash of its first bytes; a file that was truncated, replaced or rotated is read again from the start (events
already stored are recognised by their hash). Idempotent: an event is the same event when its canonical JSON
(keys sorted, no whitespace) is the same; it is stored once, and a run's coalesced row only changes through
new events. A bad line is counted, named by file and line, and skipped.
"""
from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import attrs
import orjson

from .store import blob_ids, ids_blob

EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
TERMINAL = frozenset({"COMPLETE", "ABORT", "FAIL"})
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
# a Hive-style partition folder at the end of a path: `/dt=2024-01-01`, `/region=eu/` (partitions are one dataset)
_PARTITION_TAIL = re.compile(r"(?:/[^/=]+=[^/]*)+/?$")
BATCH = 20_000
CHUNK = 8 << 20
HEAD = 4096


@attrs.define
class BadLine:
    """One line that was skipped, and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@attrs.define
class IngestReport:
    """What one ingest did; ``bad`` keeps the first 1,000 bad lines, ``bad_count`` counts them all."""

    files: int = 0
    lines: int = 0
    new_events: int = 0
    duplicates: int = 0
    ignored: int = 0
    bad_count: int = 0
    bad: list[BadLine] = attrs.Factory(list)

    def add_bad(self, file: str, line: int, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad) < 1000:
            self.bad.append(BadLine(file, line, reason))

    def to_json(self) -> dict:
        return {"files": self.files, "lines": self.lines, "new_events": self.new_events,
                "duplicates": self.duplicates, "ignored": self.ignored, "bad_count": self.bad_count,
                "bad": [str(b) for b in self.bad]}


class BadEvent(ValueError):
    """An event that is not a valid OpenLineage run event; the message says why."""


class NotRunEvent(Exception):
    """A valid OpenLineage JobEvent or DatasetEvent (no run): nothing for a run graph; counted as ignored."""


def parse_time(value: object) -> float:
    """eventTime (ISO 8601 with offset; a naive time is taken as UTC) -> POSIX seconds."""
    if not isinstance(value, str):
        raise BadEvent("eventTime must be an ISO 8601 string")
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise BadEvent(f"eventTime is not an ISO 8601 time: {value[:40]!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def normalize_dataset(namespace: str, name: str) -> tuple[str, str] | None:
    """A dataset's identity in the graph, or None for storage private to a job.

    Partitions of one table are one dataset: trailing ``key=value`` path folders are trimmed
    (``/data/sales/dt=2024-01-01`` -> ``/data/sales``). SQL Server temporary tables (last name part starting
    with ``#``) are private to their session and not datasets."""
    if "=" in name and "/" in name:
        trimmed = _PARTITION_TAIL.sub("", name)
        if trimmed:
            name = trimmed
    if name.rsplit(".", 1)[-1].startswith("#"):
        return None
    return namespace, name


def _str(obj: dict, key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise BadEvent(f"{where}{key} must be a non-empty string")
    return value


def _datasets(event: dict, key: str) -> list[tuple[str, str]]:
    items = event.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadEvent(f"{key} must be an array")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadEvent(f"{key}[{i}] must be an object")
        ds = normalize_dataset(_str(item, "namespace", f"{key}[{i}]."), _str(item, "name", f"{key}[{i}]."))
        if ds is not None:
            out.append(ds)
    return out


def code_version(job_facets: dict) -> str | None:
    """The job's code version: sourceCodeLocation ``version`` (a git sha) or else its ``url``, else a hash of the
    sourceCode facet's text. SQL text is not a code version (harvested statements differ by literals)."""
    loc = job_facets.get("sourceCodeLocation")
    if isinstance(loc, dict):
        for key in ("version", "url"):
            value = loc.get(key)
            if isinstance(value, str) and value:
                return value
    src = job_facets.get("sourceCode")
    if isinstance(src, dict) and isinstance(src.get("sourceCode"), str):
        return "sha1:" + hashlib.sha1(src["sourceCode"].encode()).hexdigest()[:16]
    return None


@attrs.define(slots=True)
class Event:
    """What the derivation needs of one run event."""

    hash: bytes
    run_id: str
    event_type: str | None
    t: float
    namespace: str
    name: str
    parent_namespace: str
    parent_name: str
    parent_run_id: str | None
    code: str | None
    job_type: str | None
    integration: str | None
    error: str | None
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]


def parse_event(event: object) -> Event:
    """Validate one decoded event and extract what the graph needs; raises BadEvent or NotRunEvent."""
    if not isinstance(event, dict):
        raise BadEvent("not a JSON object")
    run = event.get("run")
    job = event.get("job")
    if run is None and event.get("eventType") is None and (isinstance(job, dict)
                                                           or isinstance(event.get("dataset"), dict)):
        raise NotRunEvent()
    if not isinstance(job, dict):
        raise BadEvent("job must be an object" if job is not None else "job is missing")
    if not isinstance(run, dict):
        raise BadEvent("run must be an object" if run is not None else "run is missing")
    run_id = run.get("runId")
    if not isinstance(run_id, str) or not _UUID.fullmatch(run_id):
        raise BadEvent("run.runId must be a UUID" if run_id is not None else "run.runId is missing")
    if "eventTime" not in event:
        raise BadEvent("eventTime is missing")
    t = parse_time(event["eventTime"])
    event_type = event.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise BadEvent(f"eventType must be one of {', '.join(sorted(EVENT_TYPES))}")
    namespace = _str(job, "namespace", "job.")
    name = _str(job, "name", "job.")
    producer = event.get("producer")
    if producer is not None and not isinstance(producer, str):
        raise BadEvent("producer must be a string")
    run_facets = run.get("facets") or {}
    job_facets = job.get("facets") or {}
    if not isinstance(run_facets, dict) or not isinstance(job_facets, dict):
        raise BadEvent("run.facets and job.facets must be objects")
    pns = pname = ""
    prun = None
    parent = run_facets.get("parent")
    if parent is not None:
        if not isinstance(parent, dict) or not isinstance(parent.get("job"), dict) \
                or not isinstance(parent.get("run"), dict):
            raise BadEvent("run.facets.parent must have job and run objects")
        pns = _str(parent["job"], "namespace", "run.facets.parent.job.")
        pname = _str(parent["job"], "name", "run.facets.parent.job.")
        prun = parent["run"].get("runId")
        if not isinstance(prun, str) or not _UUID.fullmatch(prun):
            raise BadEvent("run.facets.parent.run.runId must be a UUID")
        prun = prun.lower()
    job_type = integration = None
    jt = job_facets.get("jobType")
    if isinstance(jt, dict):
        job_type = jt.get("jobType") if isinstance(jt.get("jobType"), str) else None
        integration = jt.get("integration") if isinstance(jt.get("integration"), str) else None
    error = None
    err = run_facets.get("errorMessage")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        error = err["message"][:2000]
    # canonical form: the same event written with other key order or spacing is the same event
    digest = hashlib.blake2b(orjson.dumps(event, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()
    return Event(digest, run_id.lower(), event_type, t, namespace, name, pns, pname, prun,
                 code_version(job_facets), job_type, integration, error,
                 _datasets(event, "inputs"), _datasets(event, "outputs"))


_RANK = {"COMPLETE": 2, "FAIL": 2, "ABORT": 2, "START": 1, "RUNNING": 1, "OTHER": 0}
_RUN_COLS = ("run_id, job_id, parent_run_id, state, state_rank, state_t, start_t, end_t, code, code_t, job_type, "
             "jt_t, integration, error, err_t, inputs, outputs, nevents")


class Ingester:
    """Adds events to one open database. Keeps the dataset and job id maps in memory for the whole ingest."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.datasets: dict[tuple[str, str], int] = {
            (ns, name): i for i, ns, name in conn.execute("SELECT id, namespace, name FROM datasets")}
        self.jobs: dict[tuple[str, str, str, str], int] = {
            tuple(r[1:]): r[0] for r in conn.execute(
                "SELECT id, namespace, name, parent_namespace, parent_name FROM jobs")}
        self.job_keys: dict[int, tuple[str, str, str, str]] = {v: k for k, v in self.jobs.items()}
        self.report = IngestReport()

    # -- files ---------------------------------------------------------------------------------------------
    def ingest_file(self, path: Path, *, missing_ok: bool = False) -> None:
        """Read what is new in one events file (the whole file if it was truncated, replaced or rotated)."""
        key = str(path.resolve())
        try:
            st = os.stat(path)
            with open(path, "rb") as fh:
                head = fh.read(HEAD)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        self.report.files += 1
        row = self.conn.execute("SELECT dev, inode, size, offset, line, head FROM files WHERE path=?",
                                (key,)).fetchone()
        offset = line = 0
        if row is not None:
            dev, inode, size, off, ln, old_head = row
            same = (dev, inode) == (st.st_dev, st.st_ino) and st.st_size >= off \
                and head[:len(old_head)] == old_head
            if same:
                if st.st_size == size and off == size:
                    return
                offset, line = off, ln
        with open(path, "rb") as fh:
            fh.seek(offset)
            if offset == 0:
                first = fh.read(1 << 16).lstrip()
                fh.seek(0)
                if first[:1] == b"[" or (first[:1] == b"{" and b"\n" in first and not _line_parses(first)):
                    if self._whole_document(fh, key, st.st_size):
                        self._save_offset(key, st, st.st_size, 1, head)
                        return
                    fh.seek(0)
            rest = b""
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                data = rest + chunk
                cut = data.rfind(b"\n") + 1
                lines, rest = data[:cut].split(b"\n")[:-1], data[cut:]
                self._lines(lines, key, line)
                line += len(lines)
                offset += cut
                self._save_offset(key, st, offset, line, head)
            if rest.strip():
                # a last line without newline: complete if it parses (a writer mid-line leaves broken JSON,
                # which is left for the next ingest rather than reported)
                try:
                    orjson.loads(rest)
                except orjson.JSONDecodeError:
                    pass
                else:
                    self._lines([rest], key, line)
                    line += 1
                    offset += len(rest)
                    self._save_offset(key, st, offset, line, head)
            elif rest:
                offset += len(rest)
                self._save_offset(key, st, offset, line, head)
        if row is None or offset == 0:
            self._save_offset(key, st, offset, line, head)

    def _whole_document(self, fh, key: str, size: int) -> bool:
        if size > 256 << 20:
            return False
        try:
            doc = orjson.loads(fh.read())
        except orjson.JSONDecodeError:
            return False
        docs = doc if isinstance(doc, list) else [doc]
        self.report.lines += len(docs)
        events = []
        for i, item in enumerate(docs, 1):
            ev = self._parse_decoded(item, key, i)
            if ev is not None:
                events.append(ev)
        self.add_events(events)
        return True

    def _save_offset(self, key: str, st: os.stat_result, offset: int, line: int, head: bytes) -> None:
        # the first bytes already read identify the file: a rewrite with other content starts over
        self.conn.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?)",
                          (key, st.st_dev, st.st_ino, st.st_size, offset, line, head[:min(HEAD, offset)]))

    def _parse_decoded(self, obj: object, key: str, lineno: int) -> Event | None:
        try:
            return parse_event(obj)
        except BadEvent as exc:
            self.report.add_bad(key, lineno, str(exc))
        except NotRunEvent:
            self.report.ignored += 1
        return None

    def _lines(self, lines: list[bytes], key: str, first_line: int) -> None:
        events: list[Event] = []
        loads = orjson.loads
        for i, raw in enumerate(lines, first_line + 1):
            if not raw.strip():
                continue
            self.report.lines += 1
            try:
                obj = loads(raw)
            except orjson.JSONDecodeError as exc:
                self.report.add_bad(key, i, f"not JSON ({str(exc).split(':')[0]})")
                continue
            ev = self._parse_decoded(obj, key, i)
            if ev is not None:
                events.append(ev)
                if len(events) >= BATCH:
                    self.add_events(events)
                    events = []
        self.add_events(events)

    # -- events --------------------------------------------------------------------------------------------
    def add_events(self, events: list[Event]) -> int:
        """Store the events not seen before and merge them into their runs, in one transaction. Returns how
        many were new."""
        if not events:
            return 0
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            fresh = self._new_only(events)
            self.report.duplicates += len(events) - len(fresh)
            self.report.new_events += len(fresh)
            if fresh:
                self._merge(fresh)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(fresh)

    def _new_only(self, events: list[Event]) -> list[Event]:
        seen: set[bytes] = set()
        batch = []
        for ev in events:
            if ev.hash not in seen:
                seen.add(ev.hash)
                batch.append(ev)
        before = self.conn.total_changes
        # INSERT OR IGNORE tells per row whether it was new only through changes(); one probe query per 500
        # hashes finds the known ones instead, then one executemany inserts the rest
        known: set[bytes] = set()
        hashes = [ev.hash for ev in batch]
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            known.update(h for (h,) in self.conn.execute(
                f"SELECT hash FROM events WHERE hash IN ({','.join('?' * len(part))})", part))
        fresh = [ev for ev in batch if ev.hash not in known]
        self.conn.executemany("INSERT INTO events VALUES (?)", [(ev.hash,) for ev in fresh])
        assert self.conn.total_changes - before == len(fresh)
        return fresh

    def _dataset_id(self, ds: tuple[str, str]) -> int:
        i = self.datasets.get(ds)
        if i is None:
            i = self.conn.execute("INSERT INTO datasets (namespace, name) VALUES (?,?)", ds).lastrowid
            self.datasets[ds] = i
        return i

    def _job_id(self, key: tuple[str, str, str, str]) -> int:
        i = self.jobs.get(key)
        if i is None:
            i = self.conn.execute("INSERT INTO jobs (namespace, name, parent_namespace, parent_name) "
                                  "VALUES (?,?,?,?)", key).lastrowid
            self.jobs[key] = i
            self.job_keys[i] = key
        return i

    def _merge(self, events: list[Event]) -> None:
        by_run: dict[str, list[Event]] = {}
        for ev in events:
            by_run.setdefault(ev.run_id, []).append(ev)
        existing: dict[str, list] = {}
        ids = list(by_run)
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            for row in self.conn.execute(
                    f"SELECT {_RUN_COLS} FROM runs WHERE run_id IN ({','.join('?' * len(part))})", part):
                existing[row[0]] = list(row)
        rows = []
        dirty: set[int] = set()
        for run_id, evs in by_run.items():
            row = existing.get(run_id)
            if row is None:
                first = evs[0]
                row = [run_id, None, None, None, -1, None, None, None, None, None, None, None, None, None, None,
                       set(), set(), 0]
                key = (first.namespace, first.name, "", "")
            else:
                old_job = row[1]
                dirty.add(old_job)
                key = self.job_keys[old_job]
                row[15], row[16] = set(blob_ids(row[15])), set(blob_ids(row[16]))
            for ev in evs:
                row[17] += 1
                t = ev.t
                if ev.parent_run_id is not None and row[2] is None:
                    row[2] = ev.parent_run_id
                    key = (key[0], key[1], ev.parent_namespace, ev.parent_name)
                rank = _RANK.get(ev.event_type or "OTHER", 0)
                if ev.event_type is not None and (rank > row[4] or (rank == row[4] and t >= (row[5] or 0))):
                    row[3], row[4], row[5] = ev.event_type, rank, t
                if row[6] is None or t < row[6]:
                    row[6] = t
                if ev.event_type in TERMINAL and (row[7] is None or t > row[7]):
                    row[7] = t
                # facets merged by name: the one of the latest eventTime wins
                if ev.code is not None and (row[9] is None or t >= row[9]):
                    row[8], row[9] = ev.code, t
                if ev.job_type is not None and (row[11] is None or t >= row[11]):
                    row[10], row[11], row[12] = ev.job_type, t, ev.integration
                if ev.error is not None and (row[14] is None or t >= row[14]):
                    row[13], row[14] = ev.error, t
                for ds in ev.inputs:
                    row[15].add(self._dataset_id(ds))
                for ds in ev.outputs:
                    row[16].add(self._dataset_id(ds))
            job_id = self._job_id(key)
            row[1] = job_id
            dirty.add(job_id)
            row[15], row[16] = ids_blob(row[15]), ids_blob(row[16])
            rows.append(row)
        self.conn.executemany(f"INSERT OR REPLACE INTO runs ({_RUN_COLS}) VALUES ({','.join('?' * 18)})", rows)
        self.conn.executemany("INSERT OR IGNORE INTO dirty_jobs VALUES (?)", [(j,) for j in dirty])


def _line_parses(first: bytes) -> bool:
    try:
        orjson.loads(first.split(b"\n", 1)[0])
        return True
    except orjson.JSONDecodeError:
        return False


def known_files(conn: sqlite3.Connection) -> list[Path]:
    """Every file ingested before (read commands pick up what was appended to them)."""
    return [Path(p) for (p,) in conn.execute("SELECT path FROM files ORDER BY path")]


def ingest(conn: sqlite3.Connection, files: Iterable[Path], *, default: Path | None = None) -> IngestReport:
    """Ingest the given files (each must exist), plus ``default`` when it exists; returns the report."""
    ing = Ingester(conn)
    for path in files:
        ing.ingest_file(Path(path))
    if default is not None:
        ing.ingest_file(default, missing_ok=True)
    return ing.report


def ingest_decoded(conn: sqlite3.Connection, events: list[object], source: str = "http") -> IngestReport:
    """Ingest already-decoded events (the HTTP receiver); a bad one is reported with its index as line."""
    ing = Ingester(conn)
    parsed = []
    for i, obj in enumerate(events, 1):
        ing.report.lines += 1
        ev = ing._parse_decoded(obj, source, i)
        if ev is not None:
            parsed.append(ev)
    ing.add_events(parsed)
    return ing.report


def iter_lines_of(path: Path) -> Iterator[bytes]:  # pragma: no cover - helper for debugging
    with open(path, "rb") as fh:
        yield from fh
