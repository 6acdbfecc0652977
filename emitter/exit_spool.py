"""At a host process's end (a Spark application's), what the backend has not taken yet goes to the emitter's spool
at once.

The host's worker, or the emitter's own thread in :mod:`emitter.emitter_process`, may be stuck inside a delivery (a
backend that hangs, or openlineage-python retrying a refused connection for seconds) while holding the emitter's
lock, so the end cannot hand these events to the emitter. It appends them to the emitter's own spool
(``Spool.append``: same format, same destination), built the way every delivered event is built (the emitter's
``event_dict``: redacted), so ``lineage-capture replay`` or the next run delivers them.

A worker stuck in a spool *replay* (the emitter replays an earlier run's spool when it is built) does not hold
the spool's lock while the backend keeps it waiting: the append takes it at once. Only when another process keeps
it longer than :data:`LOCK_WAIT_S` (stopped, or stuck on its disk mid-write) are the events appended without it
(``Spool.append_unlocked``): the process is ending, and waiting could be forever.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: How long the end waits for the spool's lock (every holder keeps it for one read or write: milliseconds).
LOCK_WAIT_S = 0.1


def make_spool(emitter_config: Any) -> Any:
    """The spool the emitter built from ``emitter_config`` would use (for an application whose emitter
    was never built, e.g. stuck replaying an earlier spool)."""
    from emitter.spool import Spool, describe_destination

    return Spool(emitter_config.spool_dir, emitter_config.spool_max_bytes,
                 describe_destination(emitter_config.transport))


def spool_records(spool: Any, records: Iterable[Any], built: Iterable[dict[str, Any]] = (),
                  problem: list[str] | None = None) -> tuple[int, int]:
    """Append ``built`` events, then each record's event, to ``spool``; (spooled, dropped). Dropped: records
    whose event cannot be built, events the spool refuses (full, unwritable); why the spool refused them is
    appended to ``problem`` when given."""
    from emitter.serialize import event_dict
    from emitter.spool import SpoolBusy, SpoolError

    events: list[dict[str, Any]] = list(built)
    dropped = 0
    for record in records:
        try:
            events.append(event_dict(record))
        except Exception:  # noqa: BLE001 - one record that cannot be built must not lose the others
            dropped += 1
    if not events:
        return 0, dropped
    try:
        kept = spool.append_many(events, timeout=LOCK_WAIT_S)  # one write, under the lock
    except SpoolBusy:  # held far longer than any write takes: not waiting on it at the process's end
        try:
            return spool.append_unlocked(events), dropped
        except OSError as error:  # unwritable: counted, reported by the caller
            if problem is not None:
                problem.append(error.strerror or str(error))
            return 0, dropped + len(events)
    except SpoolError as error:
        if problem is not None:
            problem.append(str(error))
        return error.kept, dropped + len(events) - error.kept
    try:
        spool.sync()  # the spool fsyncs lazily: now, the process is ending
    except SpoolError:
        pass
    if kept < len(events) and problem is not None:
        problem.append(f"the spool is full (spool.maxBytes {spool.max_bytes})")
    return kept, dropped + len(events) - kept


def spool_undelivered(emitter: Any, spool: Any, records: Iterable[Any] = ()) -> tuple[int, int, list[str], str]:
    """What ``emitter`` holds (None: no emitter was built), then ``records``, to ``spool`` (the emitter's, or the
    one it would use) at once, in that order: (spooled, dropped, why the spool refused some, the spool's file)."""
    held, pending = emitter.undelivered() if emitter is not None else ([], [])
    records = [*held, *records]
    problem: list[str] = []
    spooled, dropped = spool_records(spool, records, pending, problem) if records or pending else (0, 0)
    return spooled, dropped, problem, str(spool.events_path)
