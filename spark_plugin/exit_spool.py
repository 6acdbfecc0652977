"""At the application's end, what the backend has not taken yet goes to the emitter's spool at once.

The worker may be stuck inside a delivery (a backend that hangs, or openlineage-python retrying a refused
connection for seconds) while holding the emitter's lock, so the main thread cannot hand these events to the
emitter. It appends them to the emitter's own spool (``Spool.append``: same format, same destination), built
the way every delivered event is built (the emitter's ``event_dict``: redacted), so ``lineage-capture replay`` or the
next run delivers them.

A worker stuck in a spool *replay* holds the spool's lock. The appends therefore run on a helper thread
that the caller waits for until its deadline; past it, the remaining events (the one the helper is waiting to
write included) are appended without the lock (one ``O_APPEND`` write per record, which a concurrent reader sees
whole) and the helper is told to stop.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


def make_spool(emitter_config: Any) -> Any:
    """The spool the emitter built from ``emitter_config`` would use (for an application whose emitter
    was never built, e.g. stuck replaying an earlier spool)."""
    from emitter.spool import Spool, describe_destination

    return Spool(emitter_config.spool_dir, emitter_config.spool_max_bytes,
                 describe_destination(emitter_config.transport))


def spool_records(spool: Any, records: Iterable[Any], deadline: float,
                  built: Iterable[dict[str, Any]] = ()) -> tuple[int, int]:
    """Append ``built`` events, then each record's event, to ``spool``; (spooled, dropped). Dropped: records
    whose event cannot be built, events the spool refuses (full, unwritable)."""
    from emitter.serialize import event_dict

    events: list[dict[str, Any]] = list(built)
    dropped = 0
    for record in records:
        try:
            events.append(event_dict(record))
        except Exception:  # noqa: BLE001 - one record that cannot be built must not lose the others
            dropped += 1
    state = {"done": 0, "spooled": 0, "dropped": 0, "abandoned": False, "finished": False}

    def append_all() -> None:
        for event in events:
            if state["abandoned"]:
                return
            try:
                kept = spool.append(event)
            except Exception:  # noqa: BLE001 - an unwritable spool: counted
                kept = False
            state["spooled" if kept else "dropped"] += 1
            state["done"] += 1
        sync = getattr(spool, "sync", None)  # spools that fsync lazily: now, the process is ending
        if sync is not None:
            try:
                sync()
            except Exception:  # noqa: BLE001
                pass
        state["finished"] = True

    helper = threading.Thread(target=append_all, name="lineage-capture-spool", daemon=True)
    helper.start()
    helper.join(max(0.0, deadline - time.monotonic()))
    if state["finished"]:
        return state["spooled"], dropped + state["dropped"]
    state["abandoned"] = True  # the spool's lock is held by a stalled replay: append the rest without it
    # The one in the helper's hands is appended here too: the helper writes it only if the lock frees before
    # the process ends, which a replay stuck on a dead backend does not do. Twice is better than never.
    rest = events[state["done"]:]
    return state["spooled"] + _append_unlocked(spool, rest), dropped + state["dropped"]


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
