"""A durable on-disk spool for events that could not be delivered, replayed in the original order, and the
dead-letter file for events the backend refused for good.

Layout: one sub-directory of ``spool.dir`` per destination (``http-1a2b3c4d5e6f/``), created only when an event
must be kept, holding

- ``destination.json``: where its events were going (transport type, URL or file, never a secret), so that
  ``lineage-capture replay`` sends them there and not to whatever the replaying process happens to be configured for;
- ``events.jsonl``: one record per line, ``<crc32 of the JSON, 8 hex digits> <JSON event>\\n``, appended under the
  lock; a record whose checksum does not match (a write torn by a crash or a full disk) is detected, counted and
  skipped, and an append after a torn tail first ends that tail with a newline, so a torn record never merges
  with the next one. Lines holding bare JSON (``{...}``, written by older versions) are read too;
- ``events.offset``: bytes of ``events.jsonl`` already re-delivered (replaced atomically), so a crash mid-replay
  re-sends at most the events of the last fraction of a second;
- ``dead-letters.jsonl``: events the backend rejected permanently (a 4xx other than 408/429), each with the
  backend's status and answer, same record format; ``lineage-capture replay --dead-letters`` lists, retries or
  discards them;
- ``spool.lock``: a filelock held for every change to these files, never for longer than one read or write
  (a Spark driver, a cron harvester and ``lineage-capture replay`` may share one spool);
- ``replay.lock``: a filelock held for a whole replay, so two processes never re-send the same events. A replay
  waits on the backend for seconds when it is down: it does so without ``spool.lock``, so appends (an ending
  application's last events) and dead letters (a replayed event refused for good) never wait for it.

A spool that cannot be written (disk full, read-only, ``spool.dir`` under a regular file) raises
:class:`SpoolError` from :meth:`Spool.append` with a one-line reason; a partial record is cut off again.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

#: The offset of a replay in progress reaches the disk at least this often (and when the replay stops).
OFFSET_EVERY_SECONDS = 0.2
#: Appended records are fsynced at least this often, and on :meth:`Spool.sync` (the emitter's flush/close).
SYNC_EVERY_SECONDS = 0.5
#: A replay reads at most about this many bytes of records at a time (under ``spool.lock``, released while it
#: sends them): its memory stays bounded and an append never waits for a send.
REPLAY_CHUNK_BYTES = 1 << 20
#: Records a replay hands to a delivery that sends several at once (``send_many``), at most: its requests in flight
#: are kept busy while the records it waits on stay few.
REPLAY_BATCH = 512
#: The backend's answer kept with a dead letter is cut to this many characters.
ANSWER_CHARS = 2000
DESTINATION_FILE = "destination.json"
DEAD_LETTERS_FILE = "dead-letters.jsonl"
SPOOL_LOCK = "spool.lock"
REPLAY_LOCK = "replay.lock"


class SpoolError(Exception):
    """The spool cannot be written; the message is one line naming the spool and the reason."""

    kept = 0  #: records of the failed append that did reach the file whole


class Suspect(Exception):
    """Raised by a replay's ``send`` for an event the destination answered but failed on (a server error): it may
    be this event, not the destination. The replay then sends the event behind it (see :meth:`Spool.replay`)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


#: Witnesses a suspect's replay tries (each another run's event the destination also failed on with a server error)
#: before it takes the destination itself for failing: one bad dataset poisons a statement's events and its task
#: run's COMPLETE alike, so the first witness is often failed on too.
MAX_FAILED_WITNESSES = 3


class SpoolBusy(SpoolError):
    """Another holder kept the spool's lock longer than the caller would wait (a process stopped or stuck on its
    disk in the middle of a write)."""


#: Bytes of the offset file (digits padded with spaces): rewritten in place when the disk is full.
OFFSET_WIDTH = 24


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory. A symbolic link is written
    through (its target replaced, the link kept)."""
    path = Path(os.path.realpath(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):  # a full disk left half a temp file: each failed write would add one
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def encode_record(obj: Mapping[str, Any]) -> bytes:
    """One spool line: CRC-32 of the JSON (8 hex digits), a space, the JSON, a newline."""
    payload = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def decode_record(line: bytes) -> dict[str, Any] | None:
    """The object of one spool line, or None when it is torn or corrupt (checksum, JSON or missing newline)."""
    if not line.endswith(b"\n"):
        return None  # the last write never finished
    line = line[:-1]
    try:
        if line.startswith(b"{"):  # bare JSON: a spool written before records carried a checksum
            obj = json.loads(line)
        else:
            crc, _, payload = line.partition(b" ")
            if len(crc) != 8 or int(crc, 16) != zlib.crc32(payload):
                return None
            obj = orjson.loads(payload)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def describe_destination(transport: Mapping[str, Any] | None) -> dict[str, Any]:
    """Where a transport configuration sends events, without any secret: type and URL/endpoint, file,
    topic, or the parts of a composite transport."""
    from emitter.redact import redact, url_without_credentials

    transport = transport or {}
    kind = str(transport.get("type", "")).lower()
    out: dict[str, Any] = {"type": kind}
    if kind in ("http", "async_http"):
        out["type"] = "http"  # one destination, however it is reached
        out["url"] = url_without_credentials(str(transport.get("url", "")).strip().rstrip("/"))
        out["endpoint"] = redact(str(transport.get("endpoint", "api/v1/lineage")).strip("/"))  # ?api_key=...
        if _has_credentials(transport):
            out[CREDENTIALS] = True  # (only that it had some: a replay without them would be refused every event)
    elif kind == "file":
        out["location"] = str(transport.get("log_file_path") or transport.get("location") or "")
    elif kind == "kafka":
        out["topic"] = str(transport.get("topic", ""))
    elif kind == "composite":
        subs = transport.get("transports") or {}
        items = subs.values() if isinstance(subs, Mapping) else subs
        out["transports"] = sorted((describe_destination(s) for s in items if isinstance(s, Mapping)),
                                   key=lambda d: json.dumps(d, sort_keys=True))
    return out


#: In a destination's description: its transport sent credentials (an auth section, an Authorization header).
CREDENTIALS = "credentials"


def _has_credentials(transport: Mapping[str, Any]) -> bool:
    auth = transport.get("auth")
    headers = transport.get("custom_headers") or transport.get("headers") or {}
    return (isinstance(auth, Mapping) and str(auth.get("type", "api_key")).lower() not in ("", "none")) or (
        isinstance(headers, Mapping) and any(str(k).lower() == "authorization" for k in headers))


def same_destination(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Two descriptions name one destination (whether credentials were recorded is no part of it: a spool
    written before they were recorded is the same destination's)."""
    return a is not None and b is not None and \
        {k: v for k, v in a.items() if k != CREDENTIALS} == {k: v for k, v in b.items() if k != CREDENTIALS}


def destination_key(destination: Mapping[str, Any]) -> str:
    """The sub-directory name of a destination's spool: its type and a short hash of its description (without
    the credentials flag: the directory of a destination stays where earlier versions put it)."""
    described = {k: v for k, v in destination.items() if k != CREDENTIALS}
    digest = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:12]
    return f"{destination.get('type') or 'unknown'}-{digest}"


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


class Spool:
    """Append-only event spool of one destination, bounded to ``max_bytes``.

    ``Spool(root, max_bytes, destination)`` keeps its files in ``root/<destination key>``;
    without ``destination`` in ``root`` itself (where older versions kept it).
    """

    def __init__(self, directory: Path, max_bytes: int, destination: Mapping[str, Any] | None = None) -> None:
        self.root = Path(directory)
        self.destination = dict(destination) if destination is not None else None
        self.destination_unreadable = False  #: (set by spools_under) its recorded destination is damaged
        self.directory = self.root / destination_key(destination) if destination is not None else self.root
        self.max_bytes = max_bytes
        self.events_path = self.directory / "events.jsonl"
        self.offset_path = self.directory / "events.offset"
        self.dead_letters_path = self.directory / DEAD_LETTERS_FILE
        self.corrupt = 0  # torn or corrupt records skipped by replays of this object
        self._warned_full = False
        self._unsynced: list[str] = []  # files appended to since the last fsync
        self._synced_at = time.monotonic()

    # ---- locking and reading -------------------------------------------------------------------------

    @contextmanager
    def _locked(self, create: bool, timeout: float | None = None, name: str = SPOOL_LOCK) -> Iterator[bool]:
        """Hold the lock file ``name``; yields False (without locking) when the directory does not exist and
        ``create`` is false: there is nothing to read. Raises :class:`SpoolBusy` when the lock is still held
        after ``timeout`` seconds (None: wait as long as it takes)."""
        if not create and not self.directory.is_dir():
            yield False
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise SpoolError(f"lineage spool {self.directory} cannot be created ({_reason(error)})") from None
        import filelock  # cross-platform (flock on POSIX, msvcrt on Windows); deferred: only spooling pays

        lock = filelock.FileLock(self.directory / name)
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except filelock.Timeout:  # (an OSError too: caught first)
            raise SpoolBusy(f"lineage spool {self.directory} is locked by another writer") from None
        except OSError as error:  # the lock file itself cannot be made: read-only or full
            raise SpoolError(f"lineage spool {self.directory} cannot be locked ({_reason(error)})") from None
        try:
            yield True
        finally:
            lock.release()

    def _offset(self) -> int:
        try:
            return int(self.offset_path.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def pending_bytes(self) -> int:
        """Bytes of events not yet re-delivered (0 when the spool is empty or absent). Cheap: two stat calls."""
        try:
            size = self.events_path.stat().st_size
        except OSError:  # absent, or spool.dir under a regular file: nothing spooled
            return 0
        return max(0, size - self._offset()) if size else 0

    def read_destination(self) -> dict[str, Any] | None:
        """The destination recorded with this spool's events, or None (older spool, or none yet)."""
        try:
            value = json.loads((self.directory / DESTINATION_FILE).read_text())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    # ---- writing -------------------------------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> bool:
        """Append one event. False (and one warning) when the spool is full: the event is dropped.
        Raises :class:`SpoolError` when the spool cannot be written."""
        return self.append_many([event]) == 1

    def append_many(self, events: Sequence[Mapping[str, Any]], timeout: float | None = None) -> int:
        """Append events in order with one lock and one write; returns how many were kept (the rest did not fit
        in ``max_bytes``: dropped, one warning). Raises :class:`SpoolError` (its ``kept`` says how many whole
        records did reach the file) when the spool cannot be written, :class:`SpoolBusy` when its lock is
        still held after ``timeout`` seconds (None: no limit)."""
        return self._append_lines(self.events_path, [encode_record(e) for e in events], self.pending_bytes, timeout)

    def append_unlocked(self, events: Sequence[Mapping[str, Any]]) -> int:
        """Append events without the lock, each record with one ``O_APPEND`` write (whole for a reader), fsynced;
        returns how many. The last resort of a process that is ending while another holds the lock far longer
        than a write takes (stopped, or stuck on its disk mid-write): waiting could be forever. Only a replay
        reading that very record in the microseconds its write takes could take it for a torn one. No size limit.
        Raises OSError when the spool cannot be written."""
        if not events:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            for event in events:
                os.write(fd, encode_record(event))
            os.fsync(fd)
        finally:
            os.close(fd)
        return len(events)

    def add_dead_letter(self, event: Mapping[str, Any], status: int, answer: str) -> bool:
        """Set aside an event the backend refused for good, with its answer (redacted, shortened).
        False when the dead-letter file is at ``max_bytes``; raises :class:`SpoolError` when unwritable."""
        from emitter.redact import redact

        record = {"status": status, "answer": redact(answer[:ANSWER_CHARS]),
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": event}

        def used() -> int:
            try:
                return self.dead_letters_path.stat().st_size
            except OSError:
                return 0

        return self._append_lines(self.dead_letters_path, [encode_record(record)], used) == 1

    def _append_lines(self, path: Path, lines: list[bytes], used: Callable[[], int],
                      timeout: float | None = None) -> int:
        with self._locked(create=True, timeout=timeout):
            room, fitting = self.max_bytes - used(), 0
            for line in lines:
                if len(line) > room:
                    break
                room -= len(line)
                fitting += 1
            if fitting < len(lines) and not self._warned_full:
                self._warned_full = True
                if path == self.events_path:
                    log.warning("lineage spool %s is full (%d bytes): new undeliverable events are DROPPED "
                                "until `lineage-capture replay` drains it or spool.maxBytes is raised",
                                self.directory, self.max_bytes)
                else:
                    log.warning("lineage dead letters %s are full (%d bytes): events the backend refuses cannot be "
                                "set aside until `lineage-capture replay --dead-letters list|retry|discard` empties "
                                "them or spool.maxBytes is raised", path, self.max_bytes)
            if not fitting:
                return 0
            self._write_destination()
            if path == self.events_path:
                self._reserve_offset()
            self._write(path, b"".join(lines[:fitting]))
        return fitting

    def _write(self, path: Path, data: bytes) -> None:
        """One append of whole records. On a failure, what was written is cut back to its last whole record
        (the SpoolError's ``kept`` counts those), so no torn record stays behind."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # read: the last byte
        except OSError as error:
            raise SpoolError(f"lineage spool {path} cannot be written ({_reason(error)})") from None
        try:
            size = os.fstat(fd).st_size
            lead = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""  # end a torn record first
            data = lead + data
            written = 0
            try:
                while written < len(data):  # a write may be cut short (signal, limit): go on until it fails
                    written += os.write(fd, data[written:])
            except OSError as error:
                whole = data.rfind(b"\n", 0, written) + 1  # bytes of whole records written
                _truncate(fd, size + whole)
                failure = SpoolError(f"lineage spool {path} cannot be written ({_reason(error)})")
                failure.kept = data[len(lead):whole].count(b"\n") if whole > len(lead) else 0
                raise failure from None
            if time.monotonic() - self._synced_at > SYNC_EVERY_SECONDS:
                os.fsync(fd)
                self._synced_at = time.monotonic()
            elif str(path) not in self._unsynced:
                self._unsynced.append(str(path))
        except OSError as error:  # fstat, pread or fsync
            raise SpoolError(f"lineage spool {path} cannot be written ({_reason(error)})") from None
        finally:
            os.close(fd)

    def _write_destination(self) -> None:
        if self.destination is None or (self.directory / DESTINATION_FILE).exists():
            return
        try:
            write_atomically(self.directory / DESTINATION_FILE,
                             json.dumps(self.destination, sort_keys=True, indent=1).encode())
        except OSError as error:
            raise SpoolError(f"lineage spool {self.directory} cannot be written ({_reason(error)})") from None

    def sync(self) -> None:
        """fsync what was appended since the last sync (the emitter calls it on flush and close, before a
        harvester moves its state). Raises :class:`SpoolError` when the disk refuses."""
        paths, self._unsynced = self._unsynced, []
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # replayed and removed meanwhile
            try:
                os.fsync(fd)
            except OSError as error:
                raise SpoolError(f"lineage spool {path} cannot be synced ({_reason(error)})") from None
            finally:
                os.close(fd)
        self._synced_at = time.monotonic()

    # ---- replay --------------------------------------------------------------------------------------

    def replay(self, send: Callable[[dict[str, Any]], None],
               set_aside: Callable[[dict[str, Any], Suspect], None] | None = None,
               independent: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
               send_many: SendMany | None = None) -> tuple[int, int]:
        """Re-send spooled events oldest first, stopping at the first failure (order is kept).

        Returns (delivered, still pending bytes). ``send`` raises on a failure that should stop the replay; it
        returns normally for a delivered event (and for one it set aside as a dead letter, which it may write
        to this spool: ``send`` runs without ``spool.lock``). Events appended while the replay runs are re-sent
        by it too, after the others. Raises :class:`SpoolError` when the replay's position cannot be written.

        When ``send`` raises :class:`Suspect` and ``set_aside`` is given, a later record of the same chunk is sent
        first: the next one for which ``independent(suspect, record)`` holds (an unrelated run's event: the same
        run's, its parent's or its children's may fail alike, and must keep their order); one the destination fails
        on too is left in place and the next tried, up to :data:`MAX_FAILED_WITNESSES`. If the destination takes
        one, the suspect is sent once more, and handed to ``set_aside`` when it raises :class:`Suspect` again: one
        event the destination keeps failing on no longer blocks the spool forever. ``set_aside`` raises when it
        cannot keep the event (the replay then stops at it: it stays in the spool). The later record is not sent
        again when the replay reaches it; if the replay stops before that, a later replay sends it again (a
        duplicate, never a loss).

        ``send_many`` (a delivery with several requests in flight) is handed up to :data:`REPLAY_BATCH` records at
        once; it returns, by position in the list it was given, what ``send`` would have raised for each record it
        sent (None: sent, or set aside). Those outcomes are then read in order as if ``send`` had returned them, and
        a record it did not send is handed over again.

        A record sent ahead of the one the replay stops at is blanked in the file (spaces, the same length: the
        next replay skips it); a crash before that makes the next replay send it again (a duplicate, never a loss).
        """
        delivered = 0
        with self._locked(create=False, name=REPLAY_LOCK) as present:  # one replay at a time, appends go on
            if not present:
                return 0, 0
            offset = self._offset()
            saved_at = time.monotonic()
            try:
                while True:
                    lines = self._read_or_finish(offset)
                    if lines is None:
                        return delivered, 0
                    chunk_at = offset
                    sent_ahead: set[int] = set()  # records of this chunk sent before the replay reached them
                    outcomes: dict[int, BaseException | None] = {}  # send_many's, by position in the chunk
                    for at, line in enumerate(lines):
                        if at not in sent_ahead:
                            event = self._decoded(line)
                            if event is not None:
                                if send_many is not None and at not in outcomes \
                                        and not _send_batch(lines, at, sent_ahead, outcomes, send_many):
                                    send_many = None  # (a bug there: one at a time for the rest of this replay)
                                if not self._replay_one(event, lines, at, sent_ahead, outcomes, send, set_aside,
                                                        independent):
                                    self._blank(chunk_at, lines, sorted(i for i in sent_ahead if i > at))
                                    self._save_offset(offset)
                                    return delivered, self.pending_bytes()
                                delivered += 1
                        offset += len(line)
                        if time.monotonic() - saved_at > OFFSET_EVERY_SECONDS:
                            self._save_offset(offset)
                            saved_at = time.monotonic()
            except OSError as error:
                raise SpoolError(f"lineage spool {self.directory} cannot be updated ({_reason(error)})") from None

    @staticmethod
    def _replay_one(event: dict[str, Any], lines: list[bytes], at: int, sent_ahead: set[int],
                    outcomes: dict[int, BaseException | None], send: Callable[[dict[str, Any]], None],
                    set_aside: Callable[[dict[str, Any], Suspect], None] | None,
                    independent: Callable[[dict[str, Any], dict[str, Any]], bool] | None) -> bool:
        """Send the event of ``lines[at]`` (a suspect as :meth:`replay` says), or read how ``send_many`` did; False
        when the replay stops."""
        first = outcomes.pop(at) if at in outcomes else _attempt(send, event)
        if first is None:
            return True
        if not isinstance(first, Suspect) or set_aside is None:
            return False  # the destination is down or refusing: stop, keep order
        failed: list[dict[str, Any]] = []  # witnesses failed on too: they stay in place, and so do their relatives
        for later in range(at + 1, len(lines)):  # a witness: the next event of an unrelated run
            witness = decode_record(lines[later])
            if witness is None or (independent is not None and not all(
                    independent(before, witness) for before in (event, *failed))):
                continue
            # one sent ahead (a batch's, an earlier witness) is a witness already taken
            outcome = None if later in sent_ahead else outcomes.get(later, _UNSENT)
            if outcome is _UNSENT:
                outcome = _attempt(send, witness)
            if isinstance(outcome, Suspect):  # failed on as well (the same bad dataset): another witness is tried
                failed.append(witness)
                if len(failed) >= MAX_FAILED_WITNESSES:
                    return False  # the destination fails on everything: it is the destination
                continue
            if outcome is not None:
                return False  # the destination is down or refusing: stop, keep order
            sent_ahead.add(later)
            try:
                send(event)
            except Suspect as again:
                try:
                    set_aside(event, again)
                except Exception:  # noqa: BLE001 - it cannot be set aside (dead letters full): it stays here
                    return False
            except Exception:  # noqa: BLE001 - failing otherwise now: stop at the suspect
                return False
            return True
        return False  # no witness in this chunk: wait as for any failure

    def _decoded(self, line: bytes) -> dict[str, Any] | None:
        """The event of one record; None (counted and logged when it is not blank) for a torn or corrupt one."""
        event = decode_record(line)
        if event is None and line.strip():
            self.corrupt += 1
            log.warning("skipping a torn or corrupt record in the lineage spool %s", self.events_path)
        return event

    def _read_or_finish(self, offset: int) -> list[bytes] | None:
        """Under ``spool.lock``: the records from ``offset`` on (about :data:`REPLAY_CHUNK_BYTES`; the last may be
        torn: every append writes whole records under this lock, so a missing newline is a crash's), or, when
        there are none left, the spool emptied (it starts afresh, so it does not grow forever) and None. Both
        under the lock: no append can land between the last read and the removal."""
        with self._locked(create=False) as present:
            if not present:
                return None
            lines: list[bytes] = []
            try:
                with open(self.events_path, "rb") as f:
                    f.seek(offset)
                    size = 0
                    for line in f:
                        lines.append(line)
                        size += len(line)
                        if size >= REPLAY_CHUNK_BYTES:
                            break
            except FileNotFoundError:
                pass
            if not lines:
                self.events_path.unlink(missing_ok=True)
                self.offset_path.unlink(missing_ok=True)
                return None
            return lines

    def _blank(self, chunk_at: int, lines: list[bytes], positions: list[int]) -> None:
        """Overwrite the records at ``positions`` of the chunk read at ``chunk_at`` with spaces (they were sent
        ahead of the record the replay stopped at), so that no later replay sends them again. Under
        ``spool.lock``; appends only write after them. On failure they stay (duplicates later, never a loss)."""
        if not positions:
            return
        starts = [chunk_at]
        for line in lines[:positions[-1]]:
            starts.append(starts[-1] + len(line))
        with self._locked(create=False) as present:
            if not present:
                return
            try:
                fd = os.open(self.events_path, os.O_WRONLY)
            except OSError:
                return
            try:
                for at in positions:
                    line = lines[at]
                    os.pwrite(fd, b" " * (len(line) - 1) + line[-1:], starts[at])
            except OSError:
                pass
            finally:
                os.close(fd)

    def _save_offset(self, offset: int) -> None:
        data = str(offset).encode().ljust(OFFSET_WIDTH)
        try:
            write_atomically(self.offset_path, data)
        except OSError as error:
            if error.errno != errno.ENOSPC or not self.offset_path.exists():
                raise
            # a full disk has no block for the temp file: the offset file, which holds one since the spool's first
            # append (_reserve_offset), is overwritten in place. A crash mid-write can only make a replay start
            # from an older position (duplicates, never a loss); without this the replay stopped at every save
            # and each run re-sent the same first events while new ones were dropped.
            fd = os.open(self.offset_path, os.O_WRONLY)
            try:
                os.pwrite(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)

    def _reserve_offset(self) -> None:
        """Create the replay's offset file, padded, with the spool's first events (while the disk has room)."""
        if not self.offset_path.exists():
            with suppress(OSError):  # (written by the first replay then, if the disk allows)
                write_atomically(self.offset_path, b"0".ljust(OFFSET_WIDTH))

    # ---- dead letters --------------------------------------------------------------------------------

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead letters, oldest first: ``{"status", "answer", "at", "event"}`` each."""
        try:
            with open(self.dead_letters_path, "rb") as f:
                return [r for r in map(decode_record, f) if r is not None and isinstance(r.get("event"), dict)]
        except OSError:
            return []

    def keep_dead_letters(self, records: list[dict[str, Any]], replacing: int | None = None) -> None:
        """Replace the dead-letter file with ``records`` (removed when empty); with ``replacing``, only the first
        that many letters (those read before a retry) are replaced: letters another process set aside meanwhile
        stay, after them (the file is only appended to, under the lock)."""
        with self._locked(create=False) as present:
            if not present:
                return
            if replacing is not None:
                records = records + self.dead_letters()[replacing:]
            if records:
                write_atomically(self.dead_letters_path, b"".join(encode_record(r) for r in records))
            else:
                self.dead_letters_path.unlink(missing_ok=True)


def _truncate(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        log.warning("a torn record could not be cut off the lineage spool; the next append ends it")


def _complete(destination: Mapping[str, Any] | None) -> bool:
    if not destination or not isinstance(destination.get("type"), str):
        return False
    needs = {"http": "url", "file": "location"}.get(destination["type"])
    return needs is None or isinstance(destination.get(needs), str)


def spools_under(root: Path, max_bytes: int) -> list[Spool]:
    """Every spool kept under ``root``: one per destination sub-directory, plus ``root`` itself when an older
    version spooled there. Their ``destination`` is what each recorded (None when unknown)."""
    found: list[Spool] = []
    try:
        children = sorted(p for p in Path(root).iterdir() if p.is_dir())
    except OSError:
        children = []
    for child in children:
        spool = Spool(child, max_bytes)
        destination = spool.read_destination()
        if destination is not None or spool.events_path.exists() or spool.dead_letters_path.exists():
            spool.destination = destination
            # a destination's sub-directory always records it: none, or one without its address, is a damaged
            # file (the events' destination is unknown, not "whatever is configured")
            spool.destination_unreadable = not _complete(destination)
            found.append(spool)
    legacy = Spool(root, max_bytes)
    if legacy.events_path.exists() or legacy.dead_letters_path.exists():
        found.append(legacy)
    return found


#: What ``send_many`` returns: by position in the events it was given, the outcome of each one it sent.
SendMany = Callable[[list[dict[str, Any]]], dict[int, BaseException | None]]
_UNSENT = object()


def _attempt(send: Callable[[dict[str, Any]], None], event: dict[str, Any]) -> BaseException | None:
    """What ``send`` raised for ``event``; None when it returned."""
    try:
        send(event)
    except Exception as error:  # noqa: BLE001 - the caller's transport failed: an outcome, read by the caller
        return error
    return None


def _send_batch(lines: list[bytes], at: int, sent_ahead: set[int], outcomes: dict[int, BaseException | None],
                send_many: SendMany) -> bool:
    """Hand the records from ``at`` on to ``send_many`` (up to :data:`REPLAY_BATCH`, up to the first one with an
    outcome already), and note their outcomes: a record sent after ``at`` joins ``sent_ahead``. False when
    ``send_many`` failed itself."""
    batch: list[tuple[int, dict[str, Any]]] = []
    for later in range(at, min(len(lines), at + REPLAY_BATCH)):
        if later in outcomes:
            break
        event = None if later in sent_ahead else decode_record(lines[later])
        if event is not None:
            batch.append((later, event))
    try:
        results = send_many([event for _, event in batch])
    except Exception:  # noqa: BLE001 - a bug there costs the speed, never an event: each is sent one at a time
        log.warning("a lineage replay's batch could not be sent together; sending one at a time", exc_info=True)
        return False
    for index, (later, _) in enumerate(batch):
        if index in results:
            outcome = results[index]
            if outcome is None and later != at:
                sent_ahead.add(later)
            else:
                outcomes[later] = outcome
    return True
