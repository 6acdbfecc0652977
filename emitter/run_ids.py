"""Run ids: UUIDv7, random for live runs, deterministic for harvested ones."""
from __future__ import annotations

from datetime import datetime

from openlineage.client.uuid import generate_new_uuid, generate_static_uuid


def new_run_id(instant: datetime | None = None) -> str:
    """A fresh UUIDv7 for a run observed live (Spark application or action)."""
    return str(generate_new_uuid(instant))


def stable_run_id(instant: datetime, *natural_key: str) -> str:
    """A UUIDv7 fixed by the run's start instant and a natural key (query id, session, task...).

    Harvesting the same history twice yields the same run ids, so a backend sees the same runs.
    """
    return str(generate_static_uuid(instant, "\x1f".join(natural_key).encode("utf-8")))
