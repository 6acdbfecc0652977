"""A durable on-disk spool for events that could not be delivered, replayed in the original order.

Layout in the spool directory: ``events.jsonl`` (one redacted event per line, appended and fsynced),
``events.offset`` (bytes of ``events.jsonl`` already re-delivered, replaced atomically after each delivery, so a
crash mid-replay re-sends at most the one event in flight) and ``spool.lock`` (a filelock: a Spark driver, a cron
harvester and ``emitter replay`` may share one spool).
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Spool:
    """Append-only event spool bounded to ``max_bytes``."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.events_path = self.directory / "events.jsonl"
        self.offset_path = self.directory / "events.offset"
        self._warned_full = False

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        import filelock  # cross-platform (flock on POSIX, msvcrt on Windows); deferred: only spooling pays

        with filelock.FileLock(self.directory / "spool.lock"):
            yield

    def _offset(self) -> int:
        try:
            return int(self.offset_path.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def pending_bytes(self) -> int:
        """Bytes of events not yet re-delivered (0 when the spool is empty). Cheap: two stat calls."""
        try:
            size = self.events_path.stat().st_size
        except FileNotFoundError:
            return 0
        return max(0, size - self._offset()) if size else 0

    def append(self, event: dict[str, Any]) -> bool:
        """Append one event durably. False (and one warning) when the spool is full: the event is dropped."""
        line = (json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
        with self._locked():
            if self.pending_bytes() + len(line) > self.max_bytes:
                if not self._warned_full:
                    self._warned_full = True
                    log.warning("lineage spool %s is full (%d bytes): new undeliverable events are DROPPED "
                                "until `emitter replay` drains it or spool.maxBytes is raised",
                                self.events_path, self.max_bytes)
                return False
            with open(self.events_path, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        return True

    def replay(self, send: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
        """Re-send spooled events oldest first, stopping at the first failure (order is kept).

        Returns (delivered, still pending bytes). ``send`` raises on failure.
        """
        delivered = 0
        with self._locked():
            offset = self._offset()
            try:
                f = open(self.events_path, "rb")
            except FileNotFoundError:
                return 0, 0
            with f:
                f.seek(offset)
                for line in f:
                    if line.strip():
                        try:
                            event = json.loads(line)
                        except ValueError:
                            log.warning("skipping a corrupt line in the lineage spool %s", self.events_path)
                        else:
                            try:
                                send(event)
                            except Exception:  # noqa: BLE001 - the caller's transport failed: stop, keep order
                                return delivered, self.pending_bytes()
                            delivered += 1
                    offset += len(line)
                    write_atomically(self.offset_path, str(offset).encode())
            # Everything re-delivered: start afresh so the spool does not grow forever.
            self.events_path.unlink(missing_ok=True)
            self.offset_path.unlink(missing_ok=True)
        return delivered, 0
