"""Reading OpenLineage run events (JSON lines, or a file holding one JSON event or an array of them) into the store.

Incremental: per file, the byte offset of the last complete line read is kept with the file's device, inode and
a hash of its first bytes; a file that was truncated, replaced or rotated is read again from the start (events
already stored are recognised by their digest). Idempotent: an event is the same event when its canonical JSON
(keys sorted, no whitespace) is the same; it is stored once, and a run's coalesced row only changes through
new events. A bad line is counted, named by file and line, and skipped.

Speed: a well-formed event takes :func:`fast_record` (plain tuples, no error messages); anything unusual goes
through :func:`parse_event`, which names what is wrong. The digests of a run's events are kept in its row, which
the merge reads anyway, so recognising a known event costs no lookup of its own.
"""
from __future__ import annotations

import gc
import gzip
import hashlib
import io
import itertools
import json
import os
import re
import sqlite3
import stat
import sys
import uuid
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import BinaryIO

import attrs
import orjson

from .background import in_background, send, worth_a_second_process
from .naming import normalize_dataset
from .store import blob_ids, ids_blob

EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
TERMINAL = frozenset({"COMPLETE", "ABORT", "FAIL"})
# The schema's `format: uuid`: the hyphenated form (a hyphenless copy of an id would be another run).
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# the schemaURL of a JobEvent or DatasetEvent (`.../OpenLineage.json#/$defs/JobEvent`)
_STATIC_SCHEMA = re.compile(r"(JobEvent|DatasetEvent)/?$")
# eventTimes whose instant every time zone can show (datetime's years 1-9999): a time past them would break every
# read command that shows times.
_T_MIN = datetime(1, 1, 2, tzinfo=timezone.utc).timestamp()
_T_MAX = datetime(9999, 12, 30, tzinfo=timezone.utc).timestamp()
CHUNK = 8 << 20
HEAD = 4096
#: The largest file or stream read as one JSON document (an array, pretty-printed events) rather than as lines.
_WHOLE_MAX = 256 << 20
_GZIP = b"\x1f\x8b"


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
    other_job_events: int = 0  # events whose run id another job's run has (kept apart: see Ingester)
    merged_datasets: int = 0  # datasets found to be another's other name (see Ingester._merge)

    def add_bad(self, file: str, line: int, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad) < 1000:
            self.bad.append(BadLine(file, line, reason))

    def to_json(self) -> dict:
        return {"files": self.files, "lines": self.lines, "new_events": self.new_events,
                "duplicates": self.duplicates, "ignored": self.ignored, "bad_count": self.bad_count,
                "other_job_events": self.other_job_events, "merged_datasets": self.merged_datasets,
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
        dt: datetime | None = datetime.fromisoformat(value)
    except ValueError:
        dt = _rfc3339(value)
    if dt is None:
        raise BadEvent(f"eventTime is not an ISO 8601 time: {value[:40]!r}")
    t = _instant(dt)
    if t is None:
        raise BadEvent(f"eventTime is out of range (years 1-9999 in every time zone): {value[:40]!r}")
    return t


def _rfc3339(value: str) -> datetime | None:
    """RFC 3339 times Python's ISO 8601 parser refuses (the spec's eventTime is RFC 3339): a lower-case ``t``/``z``
    and a leap second (``23:59:60``, taken as the second's last microsecond: its order among events is kept)."""
    text = value.strip()
    if len(text) < 19 or text[10] not in "Tt ":
        return None
    text = text[:10] + "T" + text[11:]
    if text.endswith("z"):
        text = text[:-1] + "Z"
    leap = text[17:19] == "60"
    if leap:
        text = text[:17] + "59" + text[19:]
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt.replace(microsecond=999999) if leap else dt


def _instant(dt: datetime) -> float | None:
    """POSIX seconds of a parsed eventTime (a naive time taken as UTC), or None when every time zone could not
    show it (past :data:`_T_MIN`..:data:`_T_MAX`): one check for :func:`parse_time` and :func:`fast_record`."""
    try:
        t = (dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt).timestamp()
    except (OverflowError, ValueError):
        return None
    return t if _T_MIN <= t <= _T_MAX else None


def _str(obj: dict, key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise BadEvent(f"{where}{key} must be a non-empty string")
    return value


def _datasets(event: dict, key: str) -> list[tuple]:
    items = event.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadEvent(f"{key} must be an array")
    out: list[tuple] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadEvent(f"{key}[{i}] must be an object")
        ns, name = _str(item, "namespace", f"{key}[{i}]."), _str(item, "name", f"{key}[{i}].")
        ds = normalize_dataset(ns, name)
        if ds is not None:
            aliases = _symlinks(item)
            out.append((*ds, aliases) if aliases else ds)
    return out


def _symlinks(item: dict) -> tuple[tuple[str, str], ...]:
    """The (namespace, name) identifiers of a dataset's ``symlinks`` facet: other names of the same data (a table
    name beside its location). A malformed facet gives none: it is optional, the dataset stays."""
    facets = item.get("facets")
    symlinks = facets.get("symlinks") if type(facets) is dict else None
    identifiers = symlinks.get("identifiers") if type(symlinks) is dict else None
    if type(identifiers) is not list:
        return ()
    found = []
    for identifier in identifiers:
        if type(identifier) is dict:
            ns, name = identifier.get("namespace"), identifier.get("name")
            if type(ns) is str and type(name) is str and ns and name:
                found.append((ns, name))
    return tuple(found)


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
    # (namespace, name), or (namespace, name, aliases) for a dataset with symlinks
    inputs: list[tuple]
    outputs: list[tuple]


def parse_event(event: object) -> Event:
    """Validate one decoded event and extract what the graph needs; raises BadEvent or NotRunEvent."""
    if not isinstance(event, dict):
        raise BadEvent("not a JSON object")
    run = event.get("run")
    job = event.get("job")
    if run is None and (event.get("eventType") is None or _STATIC_SCHEMA.search(str(event.get("schemaURL", ""))))\
            and (isinstance(job, dict) or isinstance(event.get("dataset"), dict)):
        raise NotRunEvent()  # (Marquez's own JobEvent fixture carries an eventType: its schemaURL says what it is)
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
    if event_type is not None and (not isinstance(event_type, str) or event_type not in EVENT_TYPES):
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
    pns, pname, prun = parent_of(run_facets)
    job_type = integration = None
    jt = job_facets.get("jobType")
    if isinstance(jt, dict):
        job_type = jt.get("jobType") if isinstance(jt.get("jobType"), str) else None
        integration = jt.get("integration") if isinstance(jt.get("integration"), str) else None
    error = None
    err = run_facets.get("errorMessage")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        error = err["message"][:2000]
    return Event(digest(event), run_id.lower(), event_type, t, namespace, name, pns, pname, prun,
                 code_version(job_facets), job_type, integration, error,
                 _datasets(event, "inputs"), _datasets(event, "outputs"))


# -- the fast path ----------------------------------------------------------------------------------------------
# A record is what the store needs of one valid run event, as a plain tuple (no object per event):
# (digest, run_id, event_type, t, namespace, name, parent_namespace, parent_name, parent_run_id, code, job_type,
#  integration, error, inputs, outputs); inputs/outputs are (namespace, name) pairs, or (namespace, name, symlink
#  pairs) triples, normalised at store time
Record = tuple
_SORT_KEYS = orjson.OPT_SORT_KEYS
_uuid_match = _UUID.fullmatch


def digest(event: object) -> bytes:
    """An event's identity: blake2b-128 of its canonical JSON (keys sorted, no whitespace), so the same event
    written with other key order or spacing, in another file or over HTTP, is the same event."""
    return hashlib.blake2b(orjson.dumps(event, option=_SORT_KEYS), digest_size=16).digest()


# run ids already matched as UUIDs: a run's id comes again with each of its events, a parent run's with each
# event of each of its children (bounded: cleared when full)
_UUIDS_SEEN: set[str] = set()


_NO_PARENT: tuple[str, str, str | None] = ("", "", None)


def parent_of(run_facets: dict) -> tuple[str, str, str | None]:
    """(namespace, name, run id) of the ParentRun facet (``parentRun``: the old Airflow integration's key, read as
    Marquez reads it), ("", "", None) for none. The facet is optional: a malformed one (a parent job without a name)
    counts as none, and the run and its datasets stay. A run id that is no UUID (the old Airflow integration's
    ``scheduled__2022-04-25T00:20:00+00:00``) becomes the name-based UUID Marquez makes of it (Java's
    ``UUID.nameUUIDFromBytes``: MD5, version 3)."""
    parent = run_facets.get("parent") or run_facets.get("parentRun")
    if type(parent) is not dict:
        return _NO_PARENT
    job, run = parent.get("job"), parent.get("run")
    if type(job) is not dict or type(run) is not dict:
        return _NO_PARENT
    namespace, name, run_id = job.get("namespace"), job.get("name"), run.get("runId")
    if not isinstance(namespace, str) or not namespace or not isinstance(name, str) or not name:
        return _NO_PARENT
    if not isinstance(run_id, str) or not run_id:
        return namespace, name, None
    if run_id in _UUIDS_SEEN or _uuid(run_id):
        return namespace, name, run_id.lower()
    return namespace, name, str(uuid.UUID(bytes=hashlib.md5(run_id.encode()).digest(), version=3))


def _uuid(value: str) -> bool:
    if _uuid_match(value) is None:
        return False
    if len(_UUIDS_SEEN) > 20_000:
        _UUIDS_SEEN.clear()
    _UUIDS_SEEN.add(value)
    return True


_BOM = b"\xef\xbb\xbf"
_SHARED: dict = {}
_SHARED_MAX = 50_000


def _pairs(items: object) -> tuple[tuple, ...] | None:
    # exact types (a subclass takes parse_event's path): cheaper than isinstance, and orjson makes only these
    if items is None:
        return ()
    if type(items) is not list:
        return None
    out = []
    for item in items:
        if type(item) is not dict:
            return None
        ns = item.get("namespace")
        name = item.get("name")
        if type(ns) is not str or type(name) is not str or not ns or not name:
            return None
        facets = item.get("facets")
        aliases = _symlinks(item) if facets and type(facets) is dict and "symlinks" in facets else ()
        out.append((ns, name, aliases) if aliases else (ns, name))
    return tuple(out)


def fast_record(event: object) -> Record | None:
    """The record of a well-formed run event, or None when anything is unusual (then :func:`parse_event` decides,
    with the exact reason). Same checks as ``parse_event`` without building error messages or an object; the
    tests hold the two to the same answer on generated events."""
    if type(event) is not dict:
        return None
    run = event.get("run")
    job = event.get("job")
    if type(run) is not dict or type(job) is not dict:
        return None
    run_id = run.get("runId")
    if type(run_id) is not str or (run_id not in _UUIDS_SEEN and not _uuid(run_id)):
        return None
    when = event.get("eventTime")
    if not isinstance(when, str):
        return None
    try:
        dt = _fromisoformat(when)
    except ValueError:
        return None
    t = _instant(dt)
    if t is None:
        return None
    event_type = event.get("eventType")
    if event_type is not None and (not isinstance(event_type, str) or event_type not in EVENT_TYPES):
        return None
    namespace = job.get("namespace")
    name = job.get("name")
    if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name):
        return None
    producer = event.get("producer")
    if producer is not None and not isinstance(producer, str):
        return None
    run_facets = run.get("facets") or {}
    job_facets = job.get("facets") or {}
    if type(run_facets) is not dict or type(job_facets) is not dict:
        return None
    pns, pname, prun = parent_of(run_facets) if "parent" in run_facets or "parentRun" in run_facets else _NO_PARENT
    job_type = integration = error = None
    jt = job_facets.get("jobType")
    if isinstance(jt, dict):
        job_type = jt.get("jobType") if isinstance(jt.get("jobType"), str) else None
        integration = jt.get("integration") if isinstance(jt.get("integration"), str) else None
    err = run_facets.get("errorMessage")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        error = err["message"][:2000]
    code = code_version(job_facets) if "sourceCodeLocation" in job_facets or "sourceCode" in job_facets else None
    inputs = _pairs(event.get("inputs"))
    outputs = _pairs(event.get("outputs"))
    if inputs is None or outputs is None:
        return None
    # one object per distinct job name and dataset list: records of a chunk share them, so the pickled chunk of
    # the reading process holds each once and the ingest process hashes each once (parse_lines empties it per
    # chunk: memory stays at one chunk's names)
    shared = _SHARED
    if len(shared) > _SHARED_MAX:
        shared.clear()
    return (digest(event), run_id.lower(), event_type, t, shared.setdefault(namespace, namespace),
            shared.setdefault(name, name), shared.setdefault(pns, pns), shared.setdefault(pname, pname), prun, code,
            job_type, integration, error, shared.setdefault(inputs, inputs), shared.setdefault(outputs, outputs))


def event_record(ev: Event) -> Record:
    """The record of a parsed :class:`Event` (the slow path; its datasets are already normalised, and normalising
    is idempotent)."""
    return (ev.hash, ev.run_id, ev.event_type, ev.t, ev.namespace, ev.name, ev.parent_namespace, ev.parent_name,
            ev.parent_run_id, ev.code, ev.job_type, ev.integration, ev.error, tuple(ev.inputs), tuple(ev.outputs))


_fromisoformat = datetime.fromisoformat
_RANK = {"COMPLETE": 2, "FAIL": 2, "ABORT": 2, "START": 1, "RUNNING": 1, "OTHER": 0}
_RUN_COLS = ("run_id, job_id, parent_run_id, state, state_rank, state_t, start_t, end_t, code, code_t, job_type, "
             "jt_t, integration, error, err_t, inputs, outputs, nevents, hashes")
_NCOLS = 19
# event digests kept per run: 8 bytes each (only events of one run are compared, so 64 bits are plenty)
_HASH = 8
# events per transaction when reading files: big transactions write each b-tree page touched once per commit
# instead of once per chunk (the runs index is keyed by random run ids); the offsets commit with the rows
COMMIT_EVENTS = 200_000
_IN = 900  # ids per `IN (...)` probe
_PAIR_IDS_MAX = 100_000
INGEST_GC_THRESHOLDS = (50_000, 50, 100)


class Ingester:
    """Adds events to one open database. Keeps the dataset and job id maps in memory for the whole ingest."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # every name of a dataset -> its id: its own, and the names its events' symlinks gave it
        self.datasets: dict[tuple[str, str], int] = {
            (ns, name): i for i, ns, name in conn.execute("SELECT id, namespace, name FROM datasets")}
        self.datasets.update(((ns, name), i) for ns, name, i in conn.execute(
            "SELECT namespace, name, dataset_id FROM dataset_aliases"))
        # dataset ids by the (namespace, name) written in events, before normalising (None: not a dataset)
        self.raw_datasets: dict[tuple[str, str], int | None] = {}
        self.pair_ids: dict[tuple[tuple[str, str], ...], tuple[int, ...]] = {}
        # datasets merged into another (old id -> surviving id), and those whose runs are not rewritten yet
        self.merged: dict[int, int] = {}
        self.unsettled: set[int] = set()
        self.jobs: dict[tuple[str, str, str, str], int] = {
            tuple(r[1:]): r[0] for r in conn.execute(
                "SELECT id, namespace, name, parent_namespace, parent_name FROM jobs")}
        self.job_keys: dict[int, tuple[str, str, str, str]] = {v: k for k, v in self.jobs.items()}
        # job ids by (namespace, name), whatever their parent (see _job_id)
        self.jobs_named: dict[tuple[str, str], list[int]] = defaultdict(list)
        for key, job in sorted(self.jobs.items(), key=lambda item: item[1]):
            self.jobs_named[key[:2]].append(job)
        # a database made before event digests moved into the runs (schema 1) still has its table of digests
        self.legacy = conn.execute("SELECT 1 FROM sqlite_master WHERE name='events'").fetchone() is not None
        self.report = IngestReport()
        self.pending = 0  # events stored since the open transaction began

    # -- transactions --------------------------------------------------------------------------------------
    def _begin(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")
            self.pending = 0

    def _commit(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")
        self.pending = 0

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    # -- files ---------------------------------------------------------------------------------------------
    def ingest_file(self, path: Path, *, missing_ok: bool = False) -> None:
        """Read what is new in one events file (the whole file if it was truncated, replaced or rotated)."""
        try:
            self._ingest_file(path, missing_ok)
            self._commit()
        except BaseException:
            self._rollback()
            raise

    def _ingest_file(self, path: Path, missing_ok: bool) -> None:
        if str(path) == "-":
            self._ingest_pipe(sys.stdin.buffer, "<stdin>")
            return
        key = str(path.resolve())
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):  # a pipe (`/dev/stdin`, `<(zcat f)`): no offset to seek or keep
                with open(path, "rb") as fh:
                    self._ingest_pipe(fh, str(path))
                return
            with open(path, "rb") as fh:
                head = fh.read(HEAD)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        if head[:2] == _GZIP:
            self._ingest_gzip(path, key, st, head)
            return
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
            if offset == 0:
                first = fh.read(1 << 16)
                # a byte order mark (Windows editors, PowerShell's Out-File) is no part of the first event
                offset = len(_BOM) if first.startswith(_BOM) else 0
                first = first[offset:].lstrip()
                fh.seek(offset)
                if first[:1] == b"[" or (first[:1] == b"{" and b"\n" in first and not _line_parses(first)):
                    if st.st_size <= _WHOLE_MAX and self._whole_document(fh.read(), key):
                        self._save_offset(key, st, st.st_size, 1, head)
                        return
                    fh.seek(offset)
        path_text = str(path)
        chunks: Iterator[Chunk]
        if worth_a_second_process(st.st_size - offset):
            chunks = in_background(send_chunks, (path_text, str(offset), str(line)),
                                   partial(read_chunks, path_text, offset, line), path_text)
        else:
            chunks = read_chunks(path_text, offset, line)
        try:
            for records, bad, ignored, nlines, offset, line in chunks:
                self._take(records, bad, ignored, nlines, key)
                self._save_offset(key, st, offset, line, head)
                self._commit_when_full()
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        if row is None or offset == 0:
            self._save_offset(key, st, offset, line, head)

    def _ingest_gzip(self, path: Path, key: str, st: os.stat_result, head: bytes) -> None:
        """A gzip file (a rotated log) is read whole, as a stream, unless it is exactly as it was read before
        (then the events would all be known)."""
        row = self.conn.execute("SELECT dev, inode, size, offset, head FROM files WHERE path=?", (key,)).fetchone()
        if row is not None and tuple(row) == (st.st_dev, st.st_ino, st.st_size, st.st_size, head):
            self.report.files += 1
            return
        try:
            with gzip.open(path, "rb") as fh:
                self._ingest_stream(fh, str(path))
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or damaged archive: what it held so far stays
            self.report.add_bad(key, 0, f"cannot read to its end: {exc}")
            return
        self._save_offset(key, st, st.st_size, 0, head)

    def _ingest_pipe(self, fh: BinaryIO | io.BufferedReader, name: str) -> None:
        """stdin or a pipe, gzip-compressed or not, read once."""
        try:
            if fh.peek(2)[:2] == _GZIP:  # type: ignore[union-attr]  # (both are buffered readers)
                with gzip.GzipFile(fileobj=fh) as unzipped:
                    self._ingest_stream(unzipped, name)
                return
            self._ingest_stream(fh, name)
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or damaged stream: what it held so far stays
            self.report.add_bad(name, 0, f"cannot read to its end: {exc}")

    def _ingest_stream(self, fh: BinaryIO | io.BufferedIOBase, name: str) -> None:
        """Read a stream once to its end (stdin, a pipe, a decompressed file): JSON lines, or one JSON document
        or several (an array, pretty-printed events) as in a file. Nothing is kept to resume from: reading it
        again finds its events known."""
        self.report.files += 1
        first = fh.read(1 << 16)
        if first.startswith(_BOM):
            first = first[len(_BOM):]
        start = first.lstrip()
        if start[:1] == b"[" or (start[:1] == b"{" and b"\n" in start and not _line_parses(start)):
            data = first + fh.read()
            if self._whole_document(data, name):
                return
            chunks: Iterable[bytes] = (data,)
        else:
            chunks = itertools.chain((first,), iter(partial(fh.read, CHUNK), b""))
        line, rest = 0, b""
        for chunk in chunks:
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n") + 1
            lines, rest = data[:cut].split(b"\n"), data[cut:]
            lines.pop()  # what follows the last newline is `rest`
            self._store_lines(lines, line, name)
            line += len(lines)
        if rest.strip():
            self._store_lines([rest], line, name)

    def _store_lines(self, lines: list[bytes], line: int, name: str) -> None:
        self._take(*parse_lines(lines, line), name)
        self._commit_when_full()

    def _take(self, records: list[Record], bad: list[tuple[int, str]], ignored: int, nlines: int, name: str) -> None:
        """Count a parsed chunk's lines (its bad ones named) and store its records in the open transaction."""
        for lineno, reason in bad:
            self.report.add_bad(name, lineno, reason)
        self.report.ignored += ignored
        self.report.lines += nlines
        self._begin()
        self._store(records)

    def _commit_when_full(self) -> None:
        if self.pending >= COMMIT_EVENTS:
            self._commit()

    def _whole_document(self, data: bytes, key: str) -> bool:
        docs = _documents(data)
        if docs is None:
            return False
        self.report.lines += len(docs)
        records = []
        for i, item in enumerate(docs, 1):
            if not _encodable(item):  # (the json module's fallback reads `"\ud800"`, which no event may hold)
                self.report.add_bad(key, i, "not JSON (a lone surrogate escape: no UTF-8 text)")
                continue
            rec = self._record(item, key, i)
            if rec is not None:
                records.append(rec)
        self._begin()
        self._store(records)
        return True

    def _save_offset(self, key: str, st: os.stat_result, offset: int, line: int, head: bytes) -> None:
        # the first bytes already read identify the file: a rewrite with other content starts over
        self._begin()
        self.conn.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?)",
                          (key, st.st_dev, st.st_ino, st.st_size, offset, line, head[:min(HEAD, offset)]))

    def _record(self, obj: object, key: str, lineno: int) -> Record | None:
        rec = fast_record(obj)
        if rec is not None:
            return rec
        try:
            return event_record(parse_event(obj))
        except BadEvent as exc:
            self.report.add_bad(key, lineno, str(exc))
        except NotRunEvent:
            self.report.ignored += 1
        return None

    # -- events --------------------------------------------------------------------------------------------
    def add_events(self, events: list[Event]) -> int:
        """Store the events not seen before and merge them into their runs, in one transaction. Returns how
        many were new."""
        return self.add_records([event_record(ev) for ev in events])

    def add_records(self, records: list[Record]) -> int:
        """Store the records of events not seen before, in one transaction; returns how many were new."""
        before = self.report.new_events
        try:
            self._begin()
            self._store(records)
            self._commit()
        except BaseException:
            self._rollback()
            raise
        return self.report.new_events - before

    def _dataset_ids(self, pairs: tuple[tuple, ...]) -> tuple[int, ...]:
        """Dataset ids of the (namespace, name) pairs of one event's inputs or outputs (cached per tuple of
        pairs: a recurring task lists the same datasets in every run)."""
        ids = self.pair_ids.get(pairs)
        if ids is None:
            if len(self.pair_ids) > _PAIR_IDS_MAX:
                self.pair_ids.clear()
            into: set[int] = set()
            self._add_dataset_ids(pairs, into)
            ids = self.pair_ids[pairs] = tuple(into)
        return ids

    def _add_dataset_ids(self, pairs: tuple[tuple, ...], into: set[int]) -> None:
        raw = self.raw_datasets
        for pair in pairs:
            if pair in raw:
                i = raw[pair]
            else:
                i = raw[pair] = self._dataset_id(pair)
            if i is not None:
                into.add(i)

    def _dataset_id(self, pair: tuple) -> int | None:
        """The id of the dataset ``(namespace, name[, symlinks])``: the one known under its name or under any of its
        symlinks (which become its aliases), else a new one; None if it is no dataset (a temp table)."""
        ds = normalize_dataset(pair[0], pair[1])
        if ds is None:
            return None
        names = [ds, *filter(None, (normalize_dataset(*alias) for alias in pair[2]))] if len(pair) > 2 else [ds]
        known = {self.datasets[n] for n in names if n in self.datasets}
        if not known:
            i = self.datasets[ds] = self._insert("INSERT INTO datasets (namespace, name) VALUES (?,?)", ds)
        else:
            i = min(known)  # the dataset seen first keeps its name
            if len(known) > 1:  # names first seen apart (a reader by table name, the writer by location)
                self._merge(known - {i}, i)
        for name in names:
            if name not in self.datasets:
                self.datasets[name] = i
                self.conn.execute("INSERT INTO dataset_aliases (namespace, name, dataset_id) VALUES (?,?,?)",
                                  (*name, i))
        return i

    def _merge(self, olds: set[int], into: int) -> None:
        """Datasets an event shows to be one become ``into``: their names become its aliases, and the runs that
        name them are rewritten by :meth:`_settle_merges` at the end of the batch (the batch's own rows may still
        hold the old ids). Rare (only where two names of one dataset were first seen in different events), so
        the in-memory maps are walked whole."""
        for old in olds:
            row = self.conn.execute("SELECT namespace, name FROM datasets WHERE id=?", (old,)).fetchone()
            self.conn.execute("DELETE FROM datasets WHERE id=?", (old,))
            if row is not None:
                self.conn.execute("INSERT INTO dataset_aliases (namespace, name, dataset_id) VALUES (?,?,?)",
                                  (*row, into))
            self.conn.execute("UPDATE dataset_aliases SET dataset_id=? WHERE dataset_id=?", (into, old))
            self.merged[old] = into
        self.unsettled |= olds
        for name, i in self.datasets.items():
            if i in olds:
                self.datasets[name] = into
        for old, i in self.merged.items():
            if i in olds:
                self.merged[old] = into
        self.raw_datasets.clear()  # both caches may hold the old ids
        self.pair_ids.clear()
        self.report.merged_datasets += len(olds)

    def _settle_merges(self, dirty: set[int]) -> None:
        """Rewrite the stored runs naming a dataset merged since the last call; their jobs become dirty."""
        olds, self.unsettled = self.unsettled, set()
        merged = self.merged
        changed = []
        for run_id, job_id, inputs, outputs in self.conn.execute(
                "SELECT run_id, job_id, inputs, outputs FROM runs").fetchall():
            ins, outs = blob_ids(inputs), blob_ids(outputs)
            if olds.intersection(ins) or olds.intersection(outs):
                changed.append((ids_blob({merged.get(d, d) for d in ins}),
                                ids_blob({merged.get(d, d) for d in outs}), run_id))
                dirty.add(job_id)
        self.conn.executemany("UPDATE runs SET inputs=?, outputs=? WHERE run_id=?", changed)

    def _insert(self, sql: str, values: tuple) -> int:
        rowid = self.conn.execute(sql, values).lastrowid
        assert rowid is not None  # an INSERT into a rowid table
        return rowid

    def _job_id(self, key: tuple[str, str, str, str]) -> int:
        """The job of (namespace, name, parent namespace, parent name). A job is one per parent, but a run without a
        parent facet of a job known under a parent is that job's (the latest made, if several), and the first run
        under a parent of a job known only without one gives it that parent (Marquez's rule: the old Airflow
        integration and a parentless manual run name the same task; two keys would print the same name twice)."""
        i = self.jobs.get(key)
        if i is not None:
            return i
        named = self.jobs_named[key[:2]]
        with_parent = [j for j in named if self.job_keys[j][3]]
        if not key[3] and with_parent:
            return with_parent[-1]
        if key[3] and named and not with_parent:  # adopted: the parentless job takes this parent
            i = named[-1]
            self.conn.execute("UPDATE jobs SET parent_namespace=?, parent_name=? WHERE id=?", (key[2], key[3], i))
            del self.jobs[self.job_keys[i]]
        else:
            i = self._insert("INSERT INTO jobs (namespace, name, parent_namespace, parent_name) VALUES (?,?,?,?)",
                             key)
            named.append(i)
        self.jobs[key] = i
        self.job_keys[i] = key
        return i

    def _existing(self, run_ids: list[str]) -> dict[str, list]:
        existing: dict[str, list] = {}
        execute = self.conn.execute
        for i in range(0, len(run_ids), _IN):
            part = run_ids[i:i + _IN]
            for row in execute(f"SELECT {_RUN_COLS} FROM runs WHERE run_id IN ({','.join('?' * len(part))})",
                               part):
                existing[row[0]] = list(row)
        return existing

    def _known_legacy(self, digests: list[bytes]) -> set[bytes]:
        known: set[bytes] = set()
        for i in range(0, len(digests), _IN):
            part = digests[i:i + _IN]
            known.update(h for (h,) in self.conn.execute(
                f"SELECT hash FROM events WHERE hash IN ({','.join('?' * len(part))})", part))
        return known

    def _runs_of_other_jobs(self, by_run: dict[str, list[Record]], existing: dict[str, list]) -> list[str]:
        """A run id is one run of one job; events of another job carrying the same id (a producer's bug, or two
        producers' ids colliding) are kept apart as the run ``{run id}/{namespace}/{job name}`` rather than merged
        into the first job's run (which moved the second job's lineage under the first). Returns those keys."""
        moved: list[str] = []
        for run_id in list(by_run):
            evs = by_run[run_id]
            row = existing.get(run_id)
            owner = self.job_keys[row[1]][:2] if row is not None else (evs[0][4], evs[0][5])
            if all((ev[4], ev[5]) == owner for ev in evs):
                continue
            by_run[run_id] = [ev for ev in evs if (ev[4], ev[5]) == owner]
            for ev in evs:
                if (ev[4], ev[5]) != owner:
                    key = f"{run_id}/{ev[4]}/{ev[5]}"
                    if key not in by_run:
                        by_run[key] = []
                        moved.append(key)
                    by_run[key].append(ev)
                    self.report.other_job_events += 1
            if not by_run[run_id]:
                del by_run[run_id]
        return moved

    def _store(self, records: list[Record]) -> None:
        """Merge records into their runs (inside the open transaction): an event already stored for its run, or
        twice in ``records``, is a duplicate. A run is all its events coalesced; its row is rewritten whole."""
        if not records:
            return
        by_run: dict[str, list[Record]] = {}
        for rec in records:
            evs = by_run.get(rec[1])
            if evs is None:
                by_run[rec[1]] = [rec]
            else:
                evs.append(rec)
        existing = self._existing(list(by_run))
        moved = self._runs_of_other_jobs(by_run, existing)
        if moved:
            existing.update(self._existing(moved))
        legacy: set[bytes] = set()
        if self.legacy and existing:
            legacy = self._known_legacy([r[0] for rid in existing for r in by_run[rid]])
        rows = []
        dirty: set[int] = set()
        new = dup = 0
        rank_of = _RANK
        pair_ids = self.pair_ids
        dataset_ids = self._dataset_ids
        for run_id, evs in by_run.items():
            row = existing.get(run_id)
            if row is None:
                first = evs[0]
                row = [run_id, None, None, None, -1, None, None, None, None, None, None, None, None, None, None,
                       set(), set(), 0, b""]
                key = (first[4], first[5], "", "")
                seen: set[bytes] = set()
            else:
                old_job = row[1]
                key = self.job_keys[old_job]
                row[15], row[16] = set(blob_ids(row[15])), set(blob_ids(row[16]))
                blob = row[18] or b""
                seen = {blob[i:i + _HASH] for i in range(0, len(blob), _HASH)}
            added = []
            for ev in evs:
                h = ev[0][:_HASH]
                if h in seen or (legacy and ev[0] in legacy):
                    dup += 1
                    continue
                seen.add(h)
                added.append(h)
                row[17] += 1
                t = ev[3]
                if ev[8] is not None and row[2] is None:
                    row[2] = ev[8]
                    key = (key[0], key[1], ev[6], ev[7])
                event_type = ev[2]
                rank = rank_of.get(event_type or "OTHER", 0)
                if event_type is not None and (rank > row[4] or (rank == row[4] and t >= (row[5] or 0))):
                    row[3], row[4], row[5] = event_type, rank, t
                if row[6] is None or t < row[6]:
                    row[6] = t
                if event_type in TERMINAL and (row[7] is None or t > row[7]):
                    row[7] = t
                # facets merged by name: the one of the latest eventTime wins
                if ev[9] is not None and (row[9] is None or t >= row[9]):
                    row[8], row[9] = ev[9], t
                if ev[10] is not None and (row[11] is None or t >= row[11]):
                    row[10], row[11], row[12] = ev[10], t, ev[11]
                if ev[12] is not None and (row[14] is None or t >= row[14]):
                    row[13], row[14] = ev[12], t
                if ev[13]:
                    row[15].update(pair_ids.get(ev[13]) or dataset_ids(ev[13]))
                if ev[14]:
                    row[16].update(pair_ids.get(ev[14]) or dataset_ids(ev[14]))
            if not added:
                continue
            if row[1] is not None:
                dirty.add(row[1])  # the job the run belonged to (a parent facet may move it to another job)
            new += len(added)
            job_id = self._job_id(key)
            row[1] = job_id
            dirty.add(job_id)
            row[18] = (row[18] or b"") + b"".join(added)
            rows.append(row)
        merged = self.merged if self.unsettled else None
        for row in rows:
            if merged:  # a dataset of this batch was merged after some of its rows took its id
                row[15], row[16] = {merged.get(d, d) for d in row[15]}, {merged.get(d, d) for d in row[16]}
            row[15], row[16] = ids_blob(row[15]), ids_blob(row[16])
        self.report.new_events += new
        self.report.duplicates += dup
        self.pending += new
        if rows:
            self.conn.executemany(f"INSERT OR REPLACE INTO runs ({_RUN_COLS}) VALUES ({','.join('?' * _NCOLS)})",
                                  rows)
        if self.unsettled:
            self._settle_merges(dirty)
        if dirty:
            self.conn.executemany("INSERT OR IGNORE INTO dirty_jobs VALUES (?)", [(j,) for j in dirty])


# one chunk of a file: (records, bad lines as (line number, reason), events ignored, lines that were not blank,
# offset after the chunk, line number after the chunk)
Chunk = tuple[list[Record], list[tuple[int, str]], int, int, int, int]


def parse_lines(lines: list[bytes], first_line: int) -> tuple[list[Record], list[tuple[int, str]], int, int]:
    """Records of JSON lines (numbered from ``first_line + 1``), the bad lines with their reasons, how many were
    ignored (not run events) and how many were not blank."""
    records: list[Record] = []
    bad: list[tuple[int, str]] = []
    append = records.append
    _SHARED.clear()
    loads = orjson.loads
    blank = ignored = 0
    for i, raw in enumerate(lines, first_line + 1):
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            if not raw.strip():
                blank += 1
            else:
                bad.append((i, f"not JSON ({str(exc).split(':')[0]})"))
            continue
        rec = fast_record(obj)
        if rec is None:
            try:
                rec = event_record(parse_event(obj))
            except BadEvent as exc:
                bad.append((i, str(exc)))
                continue
            except NotRunEvent:
                ignored += 1
                continue
        append(rec)
    return records, bad, ignored, len(lines) - blank


def read_chunks(path: str, offset: int, line: int) -> Iterator[Chunk]:
    """Parse a JSON-lines file from ``offset`` (``line`` lines before it), chunk by chunk. A last line without
    newline counts only when it parses: a writer mid-line leaves broken JSON, left for the next ingest rather than
    reported."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        rest = b""
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n") + 1
            lines, rest = data[:cut].split(b"\n"), data[cut:]
            lines.pop()  # what follows the last newline is `rest`
            offset += cut
            yield (*parse_lines(lines, line), offset, line + len(lines))
            line += len(lines)
        if rest.strip():
            try:
                orjson.loads(rest)
            except orjson.JSONDecodeError:
                return
            yield (*parse_lines([rest], line), offset + len(rest), line + 1)
        elif rest:
            yield [], [], 0, 0, offset + len(rest), line


def send_chunks(path: str, offset: str, line: str) -> None:
    """The second process of an ingest (see ``background``): :func:`read_chunks` sent to the ingest process."""
    send(read_chunks(path, int(offset), int(line)), path)


_WHITESPACE = re.compile(r"\s*")


def _documents(data: bytes) -> list[object] | None:
    """The events of a file or stream holding one JSON document (an event, or an array of them) or several written
    one after another (``jq . events.jsonl``, pretty-printed, each over many lines); None when it is not that."""
    try:
        doc = orjson.loads(data)
        return doc if isinstance(doc, list) else [doc]
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder, docs, i = json.JSONDecoder(), [], _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    while i < len(text):
        try:
            doc, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return None
        docs.extend(doc if isinstance(doc, list) else [doc])
        i = _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]
    return docs if len(docs) > 1 else None  # one document orjson refused is not JSON it can read


def _encodable(doc: object) -> bool:
    """Whether ``doc`` can be written as UTF-8 JSON (what :func:`digest` and the database need)."""
    try:
        orjson.dumps(doc)
    except TypeError:
        return False
    return True


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
    # each event makes a few dozen short-lived containers and no reference cycles: a young collection every
    # 700 allocations (the default) would run every ~20 events and scan the chunk's records each time
    thresholds = gc.get_threshold()
    gc.set_threshold(*INGEST_GC_THRESHOLDS)
    try:
        ing = Ingester(conn)
        for path in files:
            ing.ingest_file(Path(path))
        if default is not None:
            ing.ingest_file(default, missing_ok=True)
        return ing.report
    finally:
        gc.set_threshold(*thresholds)


def ingest_decoded(conn: sqlite3.Connection, events: list[object], source: str = "http", *,
                   ingester: Ingester | None = None) -> IngestReport:
    """Ingest already-decoded events (the HTTP receiver); a bad one is reported with its index as line.
    ``ingester`` (of ``conn``) is reused when given: its id maps are what costs at each call."""
    ing = ingester or Ingester(conn)
    ing.report = IngestReport()
    records = []
    for i, obj in enumerate(events, 1):
        ing.report.lines += 1
        rec = ing._record(obj, source, i)
        if rec is not None:
            records.append(rec)
    ing.add_records(records)
    return ing.report


def iter_lines_of(path: Path) -> Iterator[bytes]:  # pragma: no cover - helper for debugging
    with open(path, "rb") as fh:
        yield from fh
