"""At the application's end, what the backend has not taken yet goes to the emitter's spool at once.

The worker may be stuck inside a delivery (a backend that hangs, or openlineage-python retrying a refused
connection for seconds) while holding the emitter's lock, so the main thread cannot hand these events to the
emitter. It appends them to the emitter's own spool (``Spool.append``: same format, same destination), built
the way every delivered event is built (the emitter's ``event_dict``: redacted), so ``lineage-capture replay`` or the
next run delivers them.

A worker stuck in a spool *replay* (the emitter replays an earlier run's spool when it is built) holds the
spool's lock for as long as the backend keeps it waiting. The events are then appended without the lock, at once
(one ``O_APPEND`` write per record, which a concurrent reader sees whole).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any


def make_spool(emitter_config: Any) -> Any:
    """The spool the emitter built from ``emitter_config`` would use (for an application whose emitter
    was never built, e.g. stuck replaying an earlier spool)."""
    from emitter.spool import Spool, describe_destination

    return Spool(emitter_config.spool_dir, emitter_config.spool_max_bytes,
                 describe_destination(emitter_config.transport))


def spool_records(spool: Any, records: Iterable[Any], built: Iterable[dict[str, Any]] = ()) -> tuple[int, int]:
    """Append ``built`` events, then each record's event, to ``spool``; (spooled, dropped). Dropped: records
    whose event cannot be built, events the spool refuses (full, unwritable)."""
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
        kept = spool.append_many(events, wait=False)  # one write, under the lock when nobody holds it
    except SpoolBusy:  # a replay stalled on the backend holds it (this run's or another process's): no waiting
        try:
            return _append_unlocked(spool, events), dropped
        except OSError:  # unwritable: counted, reported by the caller
            return 0, dropped + len(events)
    except SpoolError as error:
        return error.kept, dropped + len(events) - error.kept
    try:
        spool.sync()  # the spool fsyncs lazily: now, the process is ending
    except SpoolError:
        pass
    return kept, dropped + len(events) - kept


def _append_unlocked(spool: Any, events: list[dict[str, Any]]) -> int:
    from emitter.spool import encode_record

    if not events:
        return 0
    spool.directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(spool.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for event in events:
            os.write(fd, encode_record(event))
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(events)
