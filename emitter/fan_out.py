"""A composite transport delivered as one delivery per member: each member its own spool, back-off and order.

openlineage-python's ``CompositeTransport`` (``continue_on_failure`` and ``continue_on_success``, its defaults)
sends an event to every member and raises only when *none* took it: with a file member beside an http member
whose backend is down, every event was counted delivered and the http backend never got it (nothing spooled),
and each event paid the http member's retries. Here each member is a :class:`~emitter.delivery.Delivery` of its
own, with the spool of its own destination: a member that fails spools (and later replays) for itself only,
is left alone for ``retry_after`` like any transport, and an http member keeps requests in flight. The other
modes of the composite (stop at the first success or the first failure) raise when an event was not sent as
configured: they stay one delivery through the stock transport.

A spool recorded for the composite as a whole (a process that ended with events undelivered appends them there,
as for any transport) is split into its members' spools before anything is sent: a member that had already
taken one of those events gets it again (a duplicate, never a loss).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from emitter.delivery import Counts, Delivery
from emitter.spool import Spool, SpoolBusy, SpoolError, describe_destination

log = logging.getLogger(__name__)

_OFF = {"false", "0", "no", "off"}


def fan_out_members(transport: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The member configurations of a composite transport that sends every event to every member (the
    composite's default), in their configured order; None for any other transport or mode."""
    if not transport or str(transport.get("type", "")).lower() != "composite":
        return None
    if any(str(transport.get(key, True)).strip().lower() in _OFF
           for key in ("continue_on_failure", "continue_on_success")):
        return None
    members = transport.get("transports")
    if isinstance(members, Mapping):
        members = [{**member, "name": name} for name, member in members.items() if member]
    if not isinstance(members, list) or not members or not all(isinstance(m, Mapping) for m in members):
        return None
    return [dict(member) for member in members]


def split_composite_spool(root: Any, max_bytes: int, composite: Mapping[str, Any],
                          members: list[dict[str, Any]]) -> None:
    """Move the events spooled for ``composite`` as a whole into each member's spool (in order), so that each
    member replays them for itself. Raises :class:`~emitter.spool.SpoolError` when a spool cannot be written;
    what was not moved stays where it was."""
    whole = Spool(root, max_bytes, describe_destination(composite))
    if not whole.pending_bytes():
        return
    spools = [Spool(root, max_bytes, describe_destination(member)) for member in members]

    def move(event: dict[str, Any]) -> None:
        for spool in spools:
            if not spool.append(event):
                raise SpoolError(f"lineage spool {spool.directory} is full")

    whole.replay(move)
    for spool in spools:
        spool.sync()


class MemberSpools:
    """The spools of a fan-out's members, read as one by those who report what waits (``pending_bytes``, the
    directory of the first that holds events). A process that is ending appends what is undelivered through
    it (``append_many``/``append_unlocked``, as to any spool): an event some members had not settled (handed out by
    :meth:`FanOut.pending_events`) goes to those members' spools only (the others have it already: a copy in the
    composite's spool would reach them twice), any other event (never handed to the members) to the composite's
    own spool, which the next fan-out splits into the members' spools."""

    def __init__(self, whole: Spool, members: list[Spool]) -> None:
        self.whole = whole
        self.members = members
        self.max_bytes = whole.max_bytes
        # id(event) -> (the event, kept alive so that its id is not reused; the members' spools it is pending for)
        self._pending_in: dict[int, tuple[Mapping[str, Any], list[Spool]]] = {}

    def note_pending(self, event: dict[str, Any], spool: Spool, first: bool = False) -> None:
        """``event`` is pending for the member of ``spool`` (``first``: forget what the last look noted)."""
        if first:
            self._pending_in.clear()
        self._pending_in.setdefault(id(event), (event, []))[1].append(spool)

    def _first_pending(self) -> Spool:
        return next((s for s in (self.whole, *self.members) if s.pending_bytes()), self.members[0])

    @property
    def directory(self) -> Any:
        return self._first_pending().directory

    @property
    def events_path(self) -> Any:
        return self._first_pending().events_path

    def pending_bytes(self) -> int:
        """Bytes waiting in any member's spool (or the composite's own)."""
        return sum(spool.pending_bytes() for spool in (self.whole, *self.members))

    def _groups(self, events: Sequence[Mapping[str, Any]]) -> list[tuple[Spool, list[Mapping[str, Any]]]]:
        """The events each spool takes, in their order."""
        groups: dict[int, tuple[Spool, list[Mapping[str, Any]]]] = {}
        for event in events:
            noted = self._pending_in.get(id(event))
            for spool in noted[1] if noted is not None and noted[0] is event else [self.whole]:
                groups.setdefault(id(spool), (spool, []))[1].append(event)
        return list(groups.values())

    def append_many(self, events: Sequence[Mapping[str, Any]], timeout: float | None = None) -> int:
        """As :meth:`Spool.append_many`, each event to the spools it belongs in; how many were kept everywhere."""
        missing, failure = 0, None
        for spool, group in self._groups(events):
            try:
                missing += len(group) - spool.append_many(group, timeout)
            except SpoolBusy:
                raise
            except SpoolError as error:
                missing += len(group) - error.kept
                failure = failure or error
        if failure is not None:
            failure.kept = max(0, len(events) - missing)
            raise failure
        return max(0, len(events) - missing)

    def append_unlocked(self, events: Sequence[Mapping[str, Any]]) -> int:
        """As :meth:`Spool.append_unlocked`, each event to the spools it belongs in."""
        for spool, group in self._groups(events):
            spool.append_unlocked(group)
        return len(events)

    def sync(self) -> None:
        for spool in (self.whole, *self.members):
            spool.sync()


class FanOut:
    """One :class:`~emitter.delivery.Delivery` per member of a composite transport, used as one delivery."""

    def __init__(self, deliveries: list[Delivery], names: list[str], spools: MemberSpools) -> None:
        self.deliveries = deliveries
        self.names = names
        self.spools = spools

    @classmethod
    def build(cls, composite: Mapping[str, Any], members: list[dict[str, Any]], root: Any, max_bytes: int,
              retry_after: float, in_flight: int | None,
              create: Callable[[Mapping[str, Any], bool], Any]) -> FanOut:
        """The members' deliveries; ``create(config, announce)`` builds one member's transport."""
        from emitter.transport import parallel_plan

        try:
            split_composite_spool(root, max_bytes, composite, members)
        except SpoolError as error:  # kept where they were: replayed once the spool can be written
            log.warning("lineage events spooled for the composite transport stay in its spool: %s", error)
        deliveries, spools = [], []
        for member in members:
            planned, width = parallel_plan(member, in_flight)
            plan = dict(planned or member)
            transport = create(plan, True)
            make = (lambda plan=plan: create(plan, False)) if width > 1 else None
            spool = Spool(root, max_bytes, describe_destination(member))
            spools.append(spool)
            deliveries.append(Delivery(transport, spool, retry_after, width, make))
        names = [str(m.get("name") or m.get("type")) for m in members]
        return cls(deliveries, names, MemberSpools(Spool(root, max_bytes, describe_destination(composite)), spools))

    @property
    def counts(self) -> Counts:
        """Per event, the worst of its members' outcomes: delivered by every member, else spooled (or lost...)
        by at least one."""
        each = [d.counts for d in self.deliveries]
        return Counts(**{field.name: (min if field.name == "delivered" else max)(getattr(c, field.name) for c in each)
                         for field in attrs.fields(Counts)})

    @property
    def spool_error(self) -> str | None:
        return next((d.spool_error for d in self.deliveries if d.spool_error), None)

    @property
    def failure(self) -> str | None:
        return next((f"{name}: {d.failure}" for name, d in zip(self.names, self.deliveries) if d.failure), None)

    def submit(self, event: dict[str, Any]) -> None:
        """Hand ``event`` to every member (none mutates it)."""
        for delivery in self.deliveries:
            delivery.submit(event)

    def replay(self) -> None:
        for delivery in self.deliveries:
            delivery.replay()

    def flush(self) -> None:
        for delivery in self.deliveries:
            delivery.flush()

    def close(self) -> None:
        for delivery in self.deliveries:
            delivery.close()

    def pending_events(self) -> list[dict[str, Any]]:
        """Events some member has not settled yet, each once, in the order the first member holding it has; the
        spools (:class:`MemberSpools`) note which members each is pending for."""
        seen: set[int] = set()
        pending: list[dict[str, Any]] = []
        for delivery in self.deliveries:
            for event in delivery.pending_events():
                self.spools.note_pending(event, delivery.spool, first=not seen)
                if id(event) not in seen:
                    seen.add(id(event))
                    pending.append(event)
        return pending

    def stalled_for(self) -> float:
        return max(d.stalled_for() for d in self.deliveries)

    # ---- the members' transports, for the emitter's flush and close ----------------------------------------

    @property
    def transports(self) -> MemberTransports:
        return MemberTransports([d.transport for d in self.deliveries])


@attrs.define
class MemberTransports:
    """The members' transports as the emitter treats its one transport: flushed, asked for lost writes, closed."""

    members: list[Any]

    def flush(self) -> None:
        for transport in self.members:
            flush = getattr(transport, "flush", None)
            if callable(flush):
                flush()

    def take_lost(self) -> int:
        return max((t.take_lost() for t in self.members if callable(getattr(t, "take_lost", None))), default=0)

    def close(self, timeout: float = -1) -> bool:
        return all([transport.close(timeout) for transport in self.members])
