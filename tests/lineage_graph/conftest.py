from __future__ import annotations

import pytest

from lineage_graph import derive, ingest
from lineage_graph.store import connect


@pytest.fixture
def db(tmp_path):
    """A fresh graph database file (real SQLite, WAL) and a function that ingests plain-dict events into it."""
    conn = connect(tmp_path / "graph.sqlite")

    def add(events: list[dict]) -> ingest.IngestReport:
        report = ingest.ingest_decoded(conn, events)
        derive.refresh(conn)
        return report

    add.conn = conn
    yield add
    conn.close()
