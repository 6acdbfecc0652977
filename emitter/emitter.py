"""The emitter: records in, redacted events out through an openlineage-python transport, never raising.

Ordering (Marquez applies events in arrival order and creates unknown parents in the child's namespace):
a parent's START goes before its children's events (``order_records`` for a batch; producers emit a parent's
START first when streaming), and a parent's terminal event is held back until every child it started has
terminated (or until ``flush``).

Delivery (:mod:`emitter.delivery`): the transport, else the spool (a failure for now), else the dead letters
(a final refusal); once anything sits in the spool, new events queue behind it so the backend sees the original
order; after a failed delivery the backend is left alone for ``retry_after`` seconds. The http transport keeps
several requests in flight without breaking the order above.
"""
from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from emitter.config import EmitterConfig, load_config
from emitter.delivery import Counts, Delivery
from emitter.delivery_process import DeliveryProcess
from emitter.fan_out import FanOut, MemberSpools, fan_out_members
from emitter.records import START, RunRecord
from emitter.redact import redact
from emitter.serialize import event_dict
from emitter.spool import Spool, describe_destination

log = logging.getLogger(__name__)


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

    delivery: Delivery | DeliveryProcess | FanOut
    spool: Spool | MemberSpools

    def __init__(self, config: EmitterConfig, transport: Any | None = None, retry_after: float = 30.0,
                 in_flight: int | None = None, announce_file: bool | Callable[[str], None] = True,
                 delivery_process: bool = False) -> None:
        """``delivery_process``: deliver over HTTP from a second process (:mod:`emitter.delivery_process`) when
        the machine has a second core; for a process that does nothing else, like a harvest."""
        self.config = config
        self._filters = job_filters(config.filters)
        self._filtered = 0  # (kept here: a delivery child's counts replace the delivery's whole)
        # One spool per destination (recorded with it): `lineage-capture replay` sends its events where they were going.
        spool = self.spool = Spool(config.spool_dir, config.spool_max_bytes, describe_destination(config.transport))
        self.retry_after = retry_after
        self._transport = transport
        self._lock = threading.RLock()
        self._open_children: dict[str, set[str]] = defaultdict(set)
        self._held_terminals: dict[str, RunRecord] = {}
        self._parent_of: dict[str, str] = {}
        self._failure_kinds: set[str] = set()
        self._closed = False
        self._own = Counts()  # what the emitter itself settled: events it could not build, writes lost after all
        if transport is None and not config.disabled and self._fan_out(config, in_flight, announce_file):
            return
        width, make = 1, None
        if transport is None and not config.disabled:
            from emitter.transport import create_transport, parallel_plan

            transport_config, width = parallel_plan(config.transport, in_flight)
            self._transport = create_transport(transport_config, announce_file=announce_file)
            if width > 1:
                def make() -> Any:
                    return create_transport(transport_config, announce=False)
        # Events an older version spooled without recording their destination go to this one, as they did.
        legacy = Spool(config.spool_dir, config.spool_max_bytes)

        def in_this_process() -> Delivery:
            return Delivery(self._transport, spool, retry_after, width, make,
                            legacy_spool=legacy if transport is None else None)

        process = None
        if delivery_process and make is not None and _cores() > 1:
            spool_settings = {"spool_dir": str(config.spool_dir), "spool_max_bytes": config.spool_max_bytes,
                              "destination": describe_destination(config.transport)}
            process = DeliveryProcess.start(transport_config or {}, width, spool, spool_settings,
                                            retry_after, in_this_process)
        self.delivery = process or in_this_process()
        if process is None and self._transport is not None and transport is None:
            self.delivery.replay()  # the spool of an earlier run first, before anything new

    def _fan_out(self, config: EmitterConfig, in_flight: int | None,
                 announce_file: bool | Callable[[str], None]) -> bool:
        """For a composite transport that sends every event to every member: one delivery per member
        (:mod:`emitter.fan_out`), each spooling for itself. False for any other transport."""
        from emitter.transport import check_types, create_transport, warn_unknown_keys

        members = fan_out_members(config.transport)
        if members is None:
            return False
        assert config.transport is not None
        check_types(config.transport)  # (each member's error named as the composite's member)
        warn_unknown_keys(config.transport, members=False)  # (each member's own: when it is built)

        def create(member: Mapping[str, Any], announce: bool) -> Any:
            return create_transport(member, announce=announce, announce_file=announce_file)

        fan_out = FanOut.build(config.transport, members, config.spool_dir, config.spool_max_bytes,
                               self.retry_after, in_flight, create)
        self.delivery = fan_out
        self.spool = fan_out.spools  # (what waits in any member's spool)
        self._transport = fan_out.transports
        fan_out.replay()  # the members' spools of an earlier run first, before anything new
        return True

    @classmethod
    def from_config(cls, overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> Emitter:
        """An emitter configured by the precedence in :mod:`emitter.config`.

        Raises ValueError with a clear message when the configuration cannot give a transport.
        """
        return cls(load_config(overrides), **kwargs)

    # ---- public API --------------------------------------------------------------------------------------

    @property
    def counts(self) -> Counts:
        """What happened to the events so far (updated by the delivery)."""
        counts = self.delivery.counts.copy()
        counts.delivered -= self._own.delivered  # (writes the transport took, then lost: counted below)
        counts.dropped += self._own.dropped
        counts.filtered = self._filtered
        return counts

    def emit(self, record: RunRecord) -> None:
        """Hand one record over. Never raises: failures end in the spool or in ``counts.dropped``."""
        try:
            with self._lock:
                self._route(record)
        except Exception as error:  # noqa: BLE001 - the one boundary: a bug here costs an event, not the caller
            self._own.dropped += 1
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
            self.delivery.flush()
            flush_transport = getattr(self._transport, "flush", None)
            if callable(flush_transport):  # (kafka's `flush` is a setting, a bool)
                try:
                    flush_transport()
                except Exception as error:  # noqa: BLE001 - a failing flush is logged and counted, never raised
                    self._log_failure_once("flush", error)
            self._count_lost_writes()
        return self.counts.copy()

    def _count_lost_writes(self) -> None:
        """Events the transport took, counted delivered, but could not write after all (the file transport on a
        full disk): dropped, so that a harvest keeps its state and sends them again."""
        take_lost = getattr(self._transport, "take_lost", None)
        lost = take_lost() if take_lost is not None else 0
        if lost:
            self._own.delivered += lost  # (subtracted from the delivery's count: see counts)
            self._own.dropped += lost
            log.error("%d lineage events the transport took could not be written: LOST (counted)", lost)

    def undelivered(self) -> tuple[list[RunRecord], list[dict[str, Any]]]:
        """What is not delivered yet, for a process that must spool it at once as it ends: (parent terminal
        records held back for open children, events handed to the delivery and not settled). Read without the
        locks, which a delivery stuck on the network may hold."""
        return list(dict(self._held_terminals).values()), self.delivery.pending_events()

    def stalled_for(self) -> float:
        """Seconds a request to a backend that has not answered yet has been in flight (0.0 when none is): a
        process that is ending spools at once rather than wait for it. Read without the locks."""
        return self.delivery.stalled_for()

    def close(self) -> Counts:
        """Flush, log the counts once, close the transport. Never raises."""
        counts = self.flush()
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self.delivery.close()
                except Exception as error:  # noqa: BLE001
                    self._log_failure_once("close", error)
                counts = self.counts.copy()
                # (a transport may name its outcome: a dry run's prints, it delivers nothing)
                log.info("lineage events: %d %s, %d spooled, %d replayed from spool, %d dead-lettered, "
                         "%d dropped%s", counts.delivered, getattr(self._transport, "outcome", "delivered"),
                         counts.spooled, counts.replayed, counts.dead_lettered,
                         counts.dropped, f", {counts.filtered} left out by the filters" if counts.filtered else "")
                if self.spool.pending_bytes():
                    log.warning("%d bytes of lineage events wait in %s; run `lineage-capture replay` once the "
                                "backend is reachable (the next run also replays them)",
                                self.spool.pending_bytes(), self.spool.events_path)
                if self._transport is not None:
                    try:
                        self._transport.close()
                    except Exception as error:  # noqa: BLE001
                        self._log_failure_once("close", error)
        return counts

    @property
    def spool_error(self) -> str | None:
        """Why the spool could not be written (one line), or None."""
        return self.delivery.spool_error

    @property
    def delivery_failure(self) -> str | None:
        """Why the last delivery that failed for now failed, in words (the backend's answer, else "backend
        unreachable"), or None."""
        return self.delivery.failure

    def replay(self) -> tuple[int, int]:
        """Re-send the spool now (ignores the back-off). Returns (delivered, pending bytes)."""
        with self._lock:
            if self._transport is not None and not self.config.disabled:
                self.delivery.replay()
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
            if parent is not None and siblings is not None:  # siblings is None when parent is
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
        # openlineage-python's filters read only the event's job name, which a record has as the event will
        if self._filters and any(f.filter_event(cast(Any, record)) is None for f in self._filters):
            self._filtered += 1
            return
        self.delivery.submit(event_dict(record))

    def _log_failure_once(self, kind: str, error: BaseException) -> None:
        if kind not in self._failure_kinds:
            self._failure_kinds.add(kind)
            log.warning("lineage %s failed (%s: %s); further failures of this kind are counted, not logged",
                        kind, type(error).__name__, redact(str(error)))


def job_filters(configs: tuple[Mapping[str, Any], ...]) -> list[Any]:
    """openlineage-python's event filters (``openlineage.client.filter``) for the ``filters`` setting; one it cannot
    build is refused with its reason."""
    if not configs:
        return []
    from openlineage.client.filter import FilterConfig, create_filter

    built = []
    for conf in configs:
        made = create_filter(FilterConfig(type=conf.get("type"), match=conf.get("match"), regex=conf.get("regex")))
        if made is None:
            raise ValueError(f"filter {dict(conf)} cannot be used: give type exact with match, or type regex with "
                             "regex")
        built.append(made)
    return built


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _create_transport(transport_config: Mapping[str, Any] | None) -> Any:
    from emitter.transport import create_transport

    return create_transport(transport_config)
