"""The lineage graph's SQLite database: schema, connection settings and default locations.

What is stored is what the derivation needs, not whole events: one coalesced row per run (job, parent, state,
times, code version, input and output dataset ids, and the digests of its events, for idempotence), and per
events file how far it was read. Derived tables (job versions, current inputs/outputs,
hierarchy columns of ``jobs``) are rebuilt lazily for the jobs marked dirty by ingest (see ``derive.refresh``).
"""
from __future__ import annotations

import os
import sqlite3
from array import array
from collections.abc import Iterable
from pathlib import Path

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, dev INTEGER, inode INTEGER, size INTEGER, offset INTEGER, line INTEGER, head BLOB);
CREATE TABLE IF NOT EXISTS datasets (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
    UNIQUE (namespace, name));
-- other names of a dataset: the `symlinks` identifiers events give it (a table's name beside its location, SQL
-- Server's mssql:// beside sqlserver://), each mapped to the dataset first seen under any of its names
CREATE TABLE IF NOT EXISTS dataset_aliases (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
    dataset_id INTEGER NOT NULL, UNIQUE (namespace, name));
-- a job is (namespace, name) under one parent job (''/'' for none): the same name under two parents is two jobs
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
    parent_namespace TEXT NOT NULL, parent_name TEXT NOT NULL,
    parent_id INTEGER, fqn TEXT, effective_namespace TEXT, job_type TEXT, integration TEXT,
    UNIQUE (namespace, name, parent_namespace, parent_name));
CREATE TABLE IF NOT EXISTS dirty_jobs (job_id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, job_id INTEGER NOT NULL, parent_run_id TEXT,
    state TEXT, state_rank INTEGER, state_t REAL, start_t REAL, end_t REAL,
    code TEXT, code_t REAL, job_type TEXT, jt_t REAL, integration TEXT, error TEXT, err_t REAL,
    inputs BLOB, outputs BLOB, nevents INTEGER NOT NULL,
    -- 8-byte digests of the run's distinct events (canonical JSON), concatenated
    hashes BLOB);
CREATE INDEX IF NOT EXISTS runs_job ON runs (job_id, start_t);
CREATE TABLE IF NOT EXISTS job_versions (job_id INTEGER, version INTEGER, run_id TEXT, t REAL, code TEXT,
    inputs BLOB, outputs BLOB, lineage_unknown INTEGER, PRIMARY KEY (job_id, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_current (job_id INTEGER PRIMARY KEY, version INTEGER, lineage_unknown INTEGER,
    latest_run_id TEXT, latest_state TEXT, latest_t REAL, error TEXT, nruns INTEGER);
-- the current graph's edges: dir 0 = dataset is an input of the job, 1 = an output
CREATE TABLE IF NOT EXISTS current_io (job_id INTEGER, dataset_id INTEGER, dir INTEGER,
    PRIMARY KEY (job_id, dir, dataset_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS current_io_dataset ON current_io (dataset_id, dir);
"""


_ALIASES = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS dataset_aliases"):SCHEMA.index("-- a job is")].strip()


def state_dir() -> Path:
    """The project's state directory: ``$LINEAGE_CAPTURE_STATE_DIR``, else ``~/.local/state/lineage-capture``
    (the rule the emitter follows for its default events file)."""
    env = os.environ.get("LINEAGE_CAPTURE_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "lineage-capture"


def default_db(state: Path | None = None) -> Path:
    """``{state dir}/lineage-graph.sqlite``."""
    return (state or state_dir()) / "lineage-graph.sqlite"


def default_events_file(state: Path | None = None) -> Path:
    """``{state dir}/openlineage-events.jsonl``: what the emitter's embedded default file transport writes."""
    return (state or state_dir()) / "openlineage-events.jsonl"


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (creating if needed) the database in WAL mode with the schema in place."""
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable across application crashes in WAL mode; only an OS crash may lose the last commits,
    # which a re-ingest recovers (offsets are committed in the same transaction as the rows).
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: the event-hash and run b-trees stay mostly in memory
    conn.execute("PRAGMA temp_store=MEMORY")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        conn.executescript(SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    elif version == 1:
        # schema 1 kept every event digest in a table `events`; it stays as it is for the runs it knows (events
        # received over HTTP exist nowhere else) and new digests go into the runs
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute("PRAGMA user_version").fetchone()[0] == 1:  # not migrated meanwhile by another process
            conn.execute("ALTER TABLE runs ADD COLUMN hashes BLOB")
            conn.execute("DROP TABLE IF EXISTS dataset_versions")  # now read from the runs when asked
            conn.execute("PRAGMA user_version=2")
        conn.execute("COMMIT")
        version = 2
    if version == 2:  # schema 3 added dataset_aliases
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_ALIASES)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    elif version not in (0, SCHEMA_VERSION):
        raise RuntimeError(f"{path}: database schema {version}, this version reads {SCHEMA_VERSION}; remove it "
                           "and ingest again")
    return conn


def nothing_new(conn: sqlite3.Connection, default: Path) -> bool:
    """Whether every file ingested before, and the default events file, is exactly as far as it was read (same
    device, inode, size and first bytes; the default file may be missing): then a read command need not import
    the ingest at all. The same test as the ingest's own, which runs whenever this says no."""
    rows = conn.execute("SELECT path, dev, inode, size, offset, head FROM files").fetchall()
    known = {r[0] for r in rows}
    try:
        if str(default.resolve()) not in known and default.stat().st_size:
            return False
    except OSError:
        pass  # no default file: nothing to read there
    for path, dev, inode, size, offset, head in rows:
        try:
            st = os.stat(path)
            if (st.st_dev, st.st_ino, st.st_size) != (dev, inode, size) or offset != size:
                return False
            if head:
                with open(path, "rb") as fh:
                    if fh.read(len(head)) != head:
                        return False
        except OSError:
            continue  # a known file that is gone: the ingest skips it too
    return True


def ids_blob(ids: Iterable[int]) -> bytes:
    """Sorted dataset ids packed as 32-bit integers (compact, and decoded far faster than JSON)."""
    return array("i", sorted(ids)).tobytes()


def blob_ids(blob: bytes | None) -> tuple[int, ...]:
    """Inverse of :func:`ids_blob`."""
    if not blob:
        return ()
    ids = array("i")
    ids.frombytes(blob)
    return tuple(ids)
