"""Run ids: UUIDv7, random for live runs, deterministic for harvested ones."""
from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from datetime import datetime


def new_run_id(instant: datetime | None = None) -> str:
    """A fresh UUIDv7 (RFC 9562: 48 bits of Unix milliseconds, version 7, the RFC variant, 74 random bits) for a
    run observed live (Spark application or action), laid out as openlineage-python's ``generate_new_uuid``.

    Made here, not by openlineage-python: importing any part of ``openlineage.client`` imports its whole client
    (transports, requests, httpx), about 0.2 s, and a Spark driver makes its application's run id on its main
    thread, in the application's own time."""
    millis = int(instant.timestamp() * 1000) if instant else time.time_ns() // 1_000_000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | secrets.randbits(80)
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # the RFC 4122/9562 variant
    return str(uuid.UUID(int=value))


def stable_run_id(instant: datetime, *natural_key: str) -> str:
    """A UUIDv7 fixed by the run's start instant and a natural key (query id, session, task...).

    Harvesting the same history twice yields the same run ids, so a backend sees the same runs.
    """
    global _static_uuid
    if _static_uuid is None:  # imported on first use (see new_run_id), then one global lookup per statement
        from openlineage.client.uuid import generate_static_uuid

        _static_uuid = generate_static_uuid
    return str(_static_uuid(instant, "\x1f".join(natural_key).encode("utf-8")))


_static_uuid: Callable[[datetime, bytes], uuid.UUID] | None = None
