"""Live run ids are UUIDv7 laid out as openlineage-python's own (so both sort and read the same), made without
importing openlineage-python (a Spark driver makes one on its main thread)."""
from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from emitter.run_ids import new_run_id

INSTANTS = [datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(2026, 11, 23, 22, 40, 1, 234567, tzinfo=timezone.utc),
            datetime(2026, 11, 23, 23, 40, tzinfo=timezone(timedelta(hours=1))),  # the same instant elsewhere
            datetime(9999, 12, 31, tzinfo=timezone.utc)]


@pytest.mark.parametrize("instant", INSTANTS, ids=str)
def test_live_run_ids_are_uuid7_with_the_instant_in_their_first_48_bits(instant):
    from openlineage.client.uuid import generate_new_uuid

    ours, theirs = uuid.UUID(new_run_id(instant)), generate_new_uuid(instant)
    assert (ours.version, ours.variant) == (theirs.version, theirs.variant) == (7, uuid.RFC_4122)
    assert ours.int >> 80 == theirs.int >> 80 == int(instant.timestamp() * 1000) & 0xFFFF_FFFF_FFFF
    assert new_run_id(instant) != new_run_id(instant)  # 74 random bits


def test_live_run_ids_sort_by_time():
    start = INSTANTS[1]
    ids = [new_run_id(start + timedelta(milliseconds=m)) for m in (1, 2, 50, 1000, 86_400_000)]
    assert ids == sorted(ids)


def test_making_a_live_run_id_does_not_import_openlineage():
    code = ("import sys; from emitter.run_ids import new_run_id; new_run_id(); "
            "print(sorted(m for m in sys.modules if m.startswith('openlineage')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
