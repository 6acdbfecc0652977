"""The emitter: records in, redacted events out through an openlineage-python transport, never raising.

Ordering (Marquez applies events in arrival order and creates unknown parents in the child's namespace):
a parent's START goes before its children's events (``order_records`` for a batch; producers emit a parent's
START first when streaming), and a parent's terminal event is held back until every child it started has
terminated (or until ``flush``).

Delivery: once anything sits in the spool, new events queue behind it so the backend sees the original order.
After a failed delivery the transport is not tried again for ``retry_after`` seconds; meanwhile events go
straight to the spool, so a dead backend costs one timeout, not one per event.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from emitter.config import EmitterConfig, load_config
from emitter.serialize import event_dict
from emitter.records import START, RunRecord
from emitter.redact import redact
from emitter.spool import Spool

log = logging.getLogger(__name__)


@attrs.define
class Counts:
    """What happened to the events handed to the emitter."""

    delivered: int = 0  # reached the transport on the first try
    spooled: int = 0  # written to the durable spool for a later replay
    replayed: int = 0  # spooled earlier (by this or another process) and now delivered
    dropped: int = 0  # lost: the spool was full, or an event could not be built

    def copy(self) -> Counts:
        return attrs.evolve(self)


def order_records(records: Iterable[RunRecord]) -> list[RunRecord]:
    """Order a batch so that every parent START precedes its children's events and every parent terminal
    event follows its children's terminal events. Otherwise stable."""
    records = list(records)
    ids = {r.run_id for r in records}
    depth: dict[str, int] = {}

    def level(run_id: str, seen: frozenset[str] = frozenset()) -> int:
        if run_id not in depth:
            parents = {r.parent.run_id for r in records if r.run_id == run_id and r.parent}
            inside = [p for p in parents if p in ids and p not in seen]
            depth[run_id] = 1 + max((level(p, seen | {run_id}) for p in inside), default=-1)
        return depth[run_id]

    def key(item: tuple[int, RunRecord]) -> tuple[int, int, int]:
        index, r = item
        if r.event_type == START:
            return (0, level(r.run_id), index)  # shallow STARTs first
        if r.is_terminal:
            return (2, -level(r.run_id), index)  # deep terminals first
        return (1, level(r.run_id), index)

    return [r for _, r in sorted(enumerate(records), key=key)]


class Emitter:
    """Builds, redacts, orders and delivers events; see the module docstring."""

    def __init__(self, config: EmitterConfig, transport: Any | None = None, retry_after: float = 30.0) -> None:
        self.config = config
        self.counts = Counts()
        self.spool = Spool(config.spool_dir, config.spool_max_bytes)
        self.retry_after = retry_after
        self._transport = transport
        self._lock = threading.RLock()
        self._open_children: dict[str, set[str]] = defaultdict(set)
        self._held_terminals: dict[str, RunRecord] = {}
        self._parent_of: dict[str, str] = {}
        self._blocked_until = 0.0
        self._failure_kinds: set[str] = set()
        self._closed = False
        if transport is None and not config.disabled:
            self._transport = _create_transport(config.transport)
        # Whether events of ours (or of an earlier run) wait in the spool: checked on disk once here, then
        # tracked, so the hot path does not stat the spool for every event.
        self._spool_in_use = self.spool.pending_bytes() > 0
        if self._transport is not None and self._spool_in_use:
            self._drain()

    @classmethod
    def from_config(cls, overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> Emitter:
        """An emitter configured by the precedence in :mod:`emitter.config`.

        Raises ValueError with a clear message when the configuration cannot give a transport.
        """
        return cls(load_config(overrides), **kwargs)

    # ---- public API --------------------------------------------------------------------------------------

    def emit(self, record: RunRecord) -> None:
        """Hand one record over. Never raises: failures end in the spool or in ``counts.dropped``."""
        try:
            with self._lock:
                self._route(record)
        except Exception as error:  # noqa: BLE001 - the one boundary: a bug here costs an event, not the caller
            self.counts.dropped += 1
            self._log_failure_once("emit", error)

    def emit_batch(self, records: Iterable[RunRecord]) -> None:
        """Emit several records, ordered parents-first by :func:`order_records`."""
        for record in order_records(records):
            self.emit(record)

    def flush(self) -> Counts:
        """Release parent terminal events still held for open children, push buffered events out of the
        transport, then return the counts so far."""
        with self._lock:
            while self._held_terminals:  # children whose terminal never came: deepest held runs go first
                held = self._held_terminals.keys()
                run_id = next((r for r in held if not self._open_children.get(r, set()) & held), next(iter(held)))
                self._release(run_id)
            flush_transport = getattr(self._transport, "flush", None)
            if flush_transport is not None:
                try:
                    flush_transport()
                except Exception as error:  # noqa: BLE001 - a failing flush is logged and counted, never raised
                    self._log_failure_once("flush", error)
        return self.counts.copy()

    def close(self) -> Counts:
        """Flush, log the counts once, close the transport."""
        counts = self.flush()
        with self._lock:
            if not self._closed:
                self._closed = True
                log.info("lineage events: %d delivered, %d spooled, %d replayed from spool, %d dropped",
                         counts.delivered, counts.spooled, counts.replayed, counts.dropped)
                if self.spool.pending_bytes():
                    log.warning("%d bytes of lineage events wait in %s; run `emitter replay` once the backend "
                                "is reachable (the next run also replays them)",
                                self.spool.pending_bytes(), self.spool.events_path)
                if self._transport is not None:
                    try:
                        self._transport.close()
                    except Exception as error:  # noqa: BLE001
                        self._log_failure_once("close", error)
        return counts

    def replay(self) -> tuple[int, int]:
        """Re-send the spool now (ignores the back-off). Returns (delivered, pending bytes)."""
        with self._lock:
            self._blocked_until = 0.0
            self._drain()
            return self.counts.replayed, self.spool.pending_bytes()

    # ---- ordering ----------------------------------------------------------------------------------------

    def _route(self, record: RunRecord) -> None:
        parent_id = record.parent.run_id if record.parent else None
        if record.event_type == START and parent_id:
            self._open_children[parent_id].add(record.run_id)
            self._parent_of[record.run_id] = parent_id
        if record.is_terminal and self._open_children.get(record.run_id):
            self._held_terminals[record.run_id] = record  # children still running: wait for them
            return
        self._send(record)
        if record.is_terminal:
            self._open_children.pop(record.run_id, None)
            parent = self._parent_of.pop(record.run_id, None)
            siblings = self._open_children.get(parent) if parent is not None else None
            if siblings is not None:
                siblings.discard(record.run_id)
                if not siblings:
                    del self._open_children[parent]
                    if parent in self._held_terminals:
                        self._release(parent)

    def _release(self, run_id: str) -> None:
        record = self._held_terminals.pop(run_id)
        self._open_children.pop(run_id, None)
        self._route(record)

    # ---- delivery ----------------------------------------------------------------------------------------

    def _send(self, record: RunRecord) -> None:
        if self.config.disabled or self._transport is None:
            return
        event = event_dict(record)
        if self._spool_in_use and not self._drain():
            self._to_spool(event)
            return
        try:
            self._transport.emit(event)
        except Exception as error:  # noqa: BLE001 - any transport failure means: keep it for later
            self._blocked_until = time.monotonic() + self.retry_after
            self._log_failure_once("deliver", error)
            self._to_spool(event)
        else:
            self.counts.delivered += 1

    def _drain(self) -> bool:
        """Replay the spool unless backing off. True when the spool is empty afterwards."""
        if time.monotonic() < self._blocked_until:
            return False
        replayed, pending = self.spool.replay(self._transport.emit)
        self.counts.replayed += replayed
        if pending:
            self._blocked_until = time.monotonic() + self.retry_after
        self._spool_in_use = bool(pending)
        return not pending

    def _to_spool(self, event: dict[str, Any]) -> None:
        if self.spool.append(event):
            self.counts.spooled += 1
            self._spool_in_use = True  # later events queue behind it until a replay empties the spool
        else:
            self.counts.dropped += 1

    def _log_failure_once(self, kind: str, error: BaseException) -> None:
        if kind not in self._failure_kinds:
            self._failure_kinds.add(kind)
            log.warning("lineage %s failed (%s: %s); further failures of this kind are counted, not logged",
                        kind, type(error).__name__, redact(str(error)))


def _create_transport(transport_config: Mapping[str, Any] | None) -> Any:
    from emitter.transport import create_transport

    return create_transport(transport_config)
