"""`harvest snowflake --odbc`: the live path through pyodbc, against a stand-in served by the SQLite ODBC driver.

The stand-in holds tables named like the ACCOUNT_USAGE views with their column names (times as ISO 8601 UTC
text); the harvester sends the ``sqlite`` source's SQL (see ``harvesters.snowflake.live.SOURCES``) through the
same code as for Snowflake: window arithmetic, ACCESS_HISTORY join and fallback, de-duplication, state. The
``sqlite_information_schema`` stand-in returns, like INFORMATION_SCHEMA.QUERY_HISTORY(), only the RESULT_LIMIT rows
that ended last; with a small limit it checks the paging (no row lost or read twice).
"""
from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

from harvesters.core.state import Window
from harvesters.snowflake.live import SOURCES, connect_odbc, read_rows

from harvest_cli import run_harvest

DRIVER = "/usr/lib/x86_64-linux-gnu/odbc/libsqlite3odbc.so"
pytestmark = pytest.mark.skipif(not Path(DRIVER).exists(), reason="SQLite ODBC driver not installed")

ACCOUNT = "myorg-acct"
T0 = datetime(2024, 6, 1, 1, 0, tzinfo=timezone.utc)
QH_COLUMNS = ["QUERY_ID", "QUERY_TEXT", "DATABASE_NAME", "SCHEMA_NAME", "QUERY_TYPE", "SESSION_ID", "USER_NAME",
              "ROLE_NAME", "WAREHOUSE_NAME", "QUERY_TAG", "EXECUTION_STATUS", "ERROR_MESSAGE", "START_TIME",
              "END_TIME", "ROWS_INSERTED", "ROWS_UPDATED", "QUERY_PARAMETERIZED_HASH"]
AH_COLUMNS = ["QUERY_ID", "QUERY_START_TIME", "DIRECT_OBJECTS_ACCESSED", "BASE_OBJECTS_ACCESSED", "OBJECTS_MODIFIED",
              "OBJECT_MODIFIED_BY_DDL", "PARENT_QUERY_ID", "ROOT_QUERY_ID"]
PASSWORD = "s3cr3t-Pa55word"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(instant: datetime) -> str:
    return instant.isoformat(timespec="microseconds")


def make_db(path: Path, access_history: bool = True) -> Path:
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE QUERY_HISTORY ({', '.join(QH_COLUMNS)})")
        if access_history:
            db.execute(f"CREATE TABLE ACCESS_HISTORY ({', '.join(AH_COLUMNS)})")
    return path


def add_query(path: Path, qid: str, minute: float, text: str, *, seconds: float = 10, tag: str = "crm_sync",
              access: dict | None = None, **columns) -> None:
    """One query in QUERY_HISTORY (and its ACCESS_HISTORY row when ``access`` is given)."""
    start, end = at(minute), at(minute) + timedelta(seconds=seconds)
    values = {"QUERY_ID": qid, "QUERY_TEXT": text, "DATABASE_NAME": "OPS", "SCHEMA_NAME": "PUBLIC",
              "QUERY_TYPE": "INSERT", "SESSION_ID": "42", "USER_NAME": "SYNC", "WAREHOUSE_NAME": "WH",
              "QUERY_TAG": tag, "EXECUTION_STATUS": "SUCCESS", "START_TIME": iso(start), "END_TIME": iso(end),
              **columns}
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO QUERY_HISTORY ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                   list(values.values()))
        if access is not None:
            ah = {"QUERY_ID": qid, "QUERY_START_TIME": iso(start),
                  **{k: json.dumps(v) if isinstance(v, list) else v for k, v in access.items()}}
            db.execute(f"INSERT INTO ACCESS_HISTORY ({', '.join(ah)}) VALUES ({', '.join('?' * len(ah))})",
                       list(ah.values()))


def harvest(tmp_path: Path, db: Path, *args: str, source: str = "sqlite"):
    return run_harvest(tmp_path / "events.jsonl",
                       ["snowflake", "--account", ACCOUNT, "--odbc", f"Driver={DRIVER};Database={db}", "--source",
                        source, *args])


def completed_queries(events: list[dict]) -> list[tuple]:
    return [(e["run"]["facets"]["externalQuery"]["externalQueryId"], e["job"]["name"],
             [d["name"] for d in e["inputs"]], [d["name"] for d in e["outputs"]])
            for e in events if e["eventType"] in ("COMPLETE", "FAIL") and "externalQuery" in e["run"]["facets"]]


def test_live_windows_resume_deduplicate_and_take_late_rows(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SF_TEST_PASSWORD", PASSWORD)
    db = make_db(tmp_path / "history.db")
    add_query(db, "q1", 0, "INSERT INTO sync.accounts SELECT * FROM crm.accounts")
    # ACCESS_HISTORY for text the parser cannot read
    add_query(db, "q2", 5, "SELECT * FROM crm.contacts ->> INSERT INTO sync.contacts SELECT * FROM $1",
              access={"DIRECT_OBJECTS_ACCESSED": [{"objectDomain": "Table", "objectName": "OPS.CRM.CONTACTS"}],
                      "OBJECTS_MODIFIED": [{"objectDomain": "Table", "objectName": "OPS.SYNC.\"Contacts\""}]})
    add_query(db, "q3", 40, "INSERT INTO sync.deals SELECT * FROM crm.deals")  # ends after the first window
    add_query(db, "own", 1, "SELECT * FROM QUERY_HISTORY", tag="openlineage-harvest")  # the harvester's own
    state = tmp_path / "state.json"
    auth = ["--user", "svc_lineage", "--password-env", "SF_TEST_PASSWORD"]
    code, first = harvest(tmp_path, db, *auth, "--state", str(state), "--until", iso(at(30)))
    assert code == 0
    assert completed_queries(first) == [
        ("q1", "crm_sync.insert_ops_sync_accounts", ["OPS.CRM.ACCOUNTS"], ["OPS.SYNC.ACCOUNTS"]),
        ("q2", "crm_sync.insert_ops_sync_contacts", ["OPS.CRM.CONTACTS"], ["OPS.SYNC.Contacts"])]
    saved = json.loads(state.read_text())
    assert saved["window_end"] == "2024-06-01T01:30:00+00:00"
    assert sorted(saved["seen"]) == ["q1", "q2"]
    err = capsys.readouterr().err
    assert "window 2024-05-31T01:30:00+00:00 to 2024-06-01T01:30:00+00:00" in err  # first harvest: one day back

    # a row arriving late (it ended inside the first window) and a new one
    add_query(db, "q_late", 20, "INSERT INTO sync.leads SELECT * FROM crm.leads")
    add_query(db, "q4", 50, "INSERT INTO sync.tickets SELECT * FROM crm.tickets")
    code, second = harvest(tmp_path, db, *auth, "--state", str(state), "--until", iso(at(60)))
    assert code == 0
    assert completed_queries(second) == [
        ("q_late", "crm_sync.insert_ops_sync_leads", ["OPS.CRM.LEADS"], ["OPS.SYNC.LEADS"]),
        ("q3", "crm_sync.insert_ops_sync_deals", ["OPS.CRM.DEALS"], ["OPS.SYNC.DEALS"]),
        ("q4", "crm_sync.insert_ops_sync_tickets", ["OPS.CRM.TICKETS"], ["OPS.SYNC.TICKETS"])]
    err = capsys.readouterr().err
    # the window reached back the overlap (60 min): q1 and q2 read again and skipped
    assert "window 2024-06-01T00:30:00+00:00 to 2024-06-01T02:00:00+00:00" in err
    assert "duplicate rows: 2" in err
    assert sorted(json.loads(state.read_text())["seen"]) == ["q1", "q2", "q3", "q4", "q_late"]

    # nothing new: nothing emitted
    code, third = harvest(tmp_path, db, *auth, "--state", str(state), "--until", iso(at(60)))
    assert code == 0 and third == []
    everything = json.dumps(first + second) + state.read_text() + err + capsys.readouterr().err
    assert PASSWORD not in everything


def test_without_access_history_the_text_is_parsed(tmp_path, capsys):
    db = make_db(tmp_path / "standard.db", access_history=False)
    add_query(db, "q1", 0, "INSERT INTO sync.accounts SELECT * FROM crm.accounts")
    add_query(db, "q2", 5, "SELECT * FROM crm.contacts ->> INSERT INTO sync.contacts SELECT * FROM $1")
    code, events = harvest(tmp_path, db, "--until", iso(at(30)))
    assert code == 1  # the unparseable query is counted
    assert completed_queries(events) == [
        ("q1", "crm_sync.insert_ops_sync_accounts", ["OPS.CRM.ACCOUNTS"], ["OPS.SYNC.ACCOUNTS"])]
    err = capsys.readouterr().err
    assert "ACCESS_HISTORY not readable: lineage parsed from the text: 1" in err
    assert "1 unparsed (unparseable: 1)" in err


def test_lag_and_overlap_options_shape_the_window(tmp_path, capsys):
    db = make_db(tmp_path / "h.db")
    add_query(db, "q1", 0, "INSERT INTO a SELECT * FROM b")
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 1, "source": "snowflake snowflake://myorg-acct",
                                 "window_end": iso(at(-10)), "seen": {}, "open_runs": []}))
    code, events = harvest(tmp_path, db, "--state", str(state), "--overlap", "5", "--lag", "0",
                           "--until", iso(at(1)))
    assert code == 0 and len(completed_queries(events)) == 1
    assert "window 2024-06-01T00:45:00+00:00 to 2024-06-01T01:01:00+00:00" in capsys.readouterr().err


def test_reading_failure_exits_2_and_keeps_the_state(tmp_path, capsys):
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()  # no QUERY_HISTORY table: the query fails
    state = tmp_path / "state.json"
    code, events = harvest(tmp_path, db, "--state", str(state), "--until", iso(at(30)))
    assert code == 2 and events == [] and not state.exists()
    assert "reading failed" in capsys.readouterr().err


# ---- connection settings: secrets only from the environment ---------------------------------------------

@pytest.mark.parametrize("kwargs,expected", [
    ({"user": "svc", "password_env": "SF_PW"}, "Driver=X;Server=a;UID=svc;PWD={p;w}}d};"),
    ({"user": "svc", "private_key_file": "/keys/rsa.p8", "passphrase_env": "SF_PW"},
     "Driver=X;Server=a;UID=svc;AUTHENTICATOR=SNOWFLAKE_JWT;PRIV_KEY_FILE=/keys/rsa.p8;PRIV_KEY_FILE_PWD={p;w}}d};"),
    ({}, "Driver=X;Server=a;"),
])
def test_odbc_connection_string(monkeypatch, kwargs, expected):
    from harvesters.snowflake.live import odbc_connection_string

    monkeypatch.setenv("SF_PW", "p;w}d")
    assert odbc_connection_string("Driver=X;Server=a;", **kwargs) == expected


def _pem_key(tmp_path: Path, passphrase: bytes | None) -> tuple[Path, bytes]:
    """A fresh RSA key written as PEM (encrypted when a passphrase is given); returns (path, its DER form)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase
                  else serialization.NoEncryption())
    path = tmp_path / "rsa_key.p8"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return path, key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())


# passphrase the key was written with, passphrase given, whether it loads
KEY_CASES = [
    ("unencrypted", None, None, True),
    ("encrypted, right passphrase", b"s3cret-pass", "s3cret-pass", True),
    ("encrypted, wrong passphrase", b"s3cret-pass", "wrong-pass", False),
    ("encrypted, no passphrase", b"s3cret-pass", None, False),
]


@pytest.mark.parametrize("written, given, loads", [c[1:] for c in KEY_CASES], ids=[c[0] for c in KEY_CASES])
def test_key_pair_private_key_is_read_as_der_for_the_connector(tmp_path, written, given, loads):
    from harvesters.snowflake.live import UsageError, _der_private_key

    path, der = _pem_key(tmp_path, written)
    if loads:
        assert _der_private_key(str(path), given) == der
        return
    with pytest.raises(UsageError) as error:
        _der_private_key(str(path), given)
    assert str(path) in str(error.value)
    assert "s3cret" not in str(error.value) and "wrong-pass" not in str(error.value)


@pytest.mark.parametrize("kwargs,expected", [
    ({"password_env": "SF_PW"}, {"password": "pw"}),
    ({"private_key_file": "/keys/rsa.p8"}, {"private_key_file": "/keys/rsa.p8"}),
    ({"private_key_file": "/keys/rsa.p8", "passphrase_env": "SF_PW"},
     {"private_key_file": "/keys/rsa.p8", "private_key_file_pwd": "pw"}),
])
def test_connector_arguments(monkeypatch, kwargs, expected):
    from harvesters.snowflake.live import connector_arguments

    monkeypatch.setenv("SF_PW", "pw")
    args = {"password_env": None, "private_key_file": None, "passphrase_env": None, **kwargs}
    got = connector_arguments("myorg-acct", "svc", args["password_env"], args["private_key_file"],
                              args["passphrase_env"], "WH", None)
    assert got == {"account": "myorg-acct", "user": "svc", "application": "openlineage-harvest",
                   "session_parameters": {"QUERY_TAG": "openlineage-harvest", "TIMEZONE": "UTC"},
                   "warehouse": "WH", **expected}


# ---- paging: INFORMATION_SCHEMA.QUERY_HISTORY() returns only the RESULT_LIMIT rows that ended last ------------

US = timedelta(microseconds=1)
SHORT = "crm_sync"


def add_ended(path: Path, qid: str, end: datetime) -> None:
    """A query ending at ``end`` (started 5 s before); ids starting with ``own`` carry the harvester's tag."""
    tag = "openlineage-harvest" if qid.startswith("own") else SHORT
    add_query(path, qid, 0, f"INSERT INTO sync.t_{qid} SELECT * FROM crm.s", tag=tag,
              START_TIME=iso(end - timedelta(seconds=5)), END_TIME=iso(end))


def paged_source(limit: int, inclusive_end: bool = False):
    """The stand-in of information_schema with a small RESULT_LIMIT; optionally with an inclusive end bound
    (Snowflake does not document whether END_TIME_RANGE_END is inclusive)."""
    source = attrs.evolve(SOURCES["sqlite_information_schema"], result_limit=limit)
    if inclusive_end:
        source = attrs.evolve(source, sql=source.sql.replace("q.END_TIME < ?", "q.END_TIME <= ?"),
                              page_probe=source.page_probe.replace("q.END_TIME < ?", "q.END_TIME <= ?"))
    return source


class CountingConnection:
    """A pyodbc connection that counts the statements run and can run ``before(n)`` before the n-th."""

    def __init__(self, connection, before=None) -> None:
        self.connection, self.before, self.executed = connection, before, 0

    def cursor(self):
        outer, cursor = self, self.connection.cursor()

        class Cursor:
            def execute(self, sql, params):
                outer.executed += 1
                if outer.before:
                    outer.before(outer.executed)
                return cursor.execute(sql, params)

            def __getattr__(self, name):
                return getattr(cursor, name)

        return Cursor()


M = 60  # seconds in a minute
# (id, rows as (QUERY_ID, seconds after T0 it ended), RESULT_LIMIT, END_TIME_RANGE_END inclusive,
#  QUERY_IDs read in order, notes, statements run). The window is [T0, T0 + 10 min).
PAGING = [
    ("fits one call", [("q1", 1 * M), ("q2", 2 * M)], 3, False, ["q1", "q2"], {}, 1),
    ("exactly the limit: split, nothing lost", [("q1", 1 * M), ("q2", 2 * M), ("q3", 3 * M)], 3, False,
     ["q1", "q2", "q3"], {"pages read (3 rows a query at most)": 2}, 5),
    ("distinct ends, five pages", [(f"q{i:02}", i * M // 2) for i in range(1, 11)], 3, False,
     [f"q{i:02}" for i in range(1, 11)], {"pages read (3 rows a query at most)": 5}, 1 + 5 + 5),
    # the first call returns q5, q4 and one of q2/q3 (equal END_TIME): the page bound goes after that instant
    ("equal END_TIMEs cut by the limit", [("q1", 1 * M), ("q2", 2 * M), ("q3", 2 * M), ("q4", 3 * M),
                                          ("q5", 3 * M)], 3, False,
     ["q1", "q2", "q3", "q4", "q5"], {"pages read (3 rows a query at most)": 3}, 1 + 3 + 3),
    ("rows at the window's bounds", [("q0", 0), ("q1", 1 * M), ("q2", 2 * M), ("q3", 3 * M), ("q10", 10 * M)],
     2, False, ["q0", "q1", "q2", "q3"], {"pages read (2 rows a query at most)": 4}, 1 + 4 + 4),
    # own queries count toward RESULT_LIMIT (applied before any WHERE) but are left out
    ("own queries fill pages", [("q1", 1 * M), ("own2", 2 * M), ("own3", 3 * M), ("own4", 4 * M), ("q5", 5 * M)],
     3, False, ["q1", "q5"], {"pages read (3 rows a query at most)": 3}, 1 + 3 + 3),
    # an inclusive end bound gives q3 (ending exactly at a page bound) twice: read once
    ("inclusive end bound: a row at a page bound comes once",
     [("q1", 1 * M), ("q2", 2 * M), ("q3", 2 * M), ("q4", 3 * M)], 3, True,
     ["q1", "q2", "q3", "q4"], {"pages read (3 rows a query at most)": 3}, 1 + 3 + 3),
    # the window splits after the instant, not at it: the page holding it is read (and probed) again
    ("more rows at one instant than the limit: counted", [("q1", 1 * M), ("q2", 1 * M), ("q3", 1 * M),
                                                         ("q4", 1 * M)], 3, False,
     ["q1", "q2", "q3"], {"pages of 3 rows that could not be split (rows may be missed)": 1,
                          "pages read (3 rows a query at most)": 2}, 1 + 2 + 1 + 1 + 1),
]


@pytest.mark.parametrize("rows,limit,inclusive,expected,notes,statements",
                         [pytest.param(*case[1:], id=case[0]) for case in PAGING])
def test_information_schema_is_read_in_pages(tmp_path, rows, limit, inclusive, expected, notes, statements):
    db = make_db(tmp_path / "h.db", access_history=False)
    for qid, seconds in rows:
        end = T0 + timedelta(seconds=seconds)
        if inclusive and qid == "q3":
            end = T0 + timedelta(seconds=seconds) + US  # exactly where the page after q2's instant starts
        add_ended(db, qid, end)
    connection = CountingConnection(connect_odbc(f"Driver={DRIVER};Database={db}"))
    counted: Counter[str] = Counter()
    got = [row.query_id for row in read_rows(connection, paged_source(limit, inclusive),
                                             Window(T0, at(10)), counted)]
    assert (got, dict(counted), connection.executed) == (expected, notes, statements)


def test_a_page_that_fills_up_after_it_was_planned_is_split_again(tmp_path):
    db = make_db(tmp_path / "h.db", access_history=False)
    for i in range(1, 7):
        add_ended(db, f"q{i}", at(i))

    def late_rows(statement: int) -> None:
        # statements: the full first call, 3 probes (cuts after 4m and 2m), the first page, then two rows land
        # in the second page [2m+1us, 4m+1us) before it is read: it comes back full and is split in two
        if statement == 6:
            add_ended(db, "q3a", at(3) + timedelta(seconds=1))
            add_ended(db, "q3b", at(3) + timedelta(seconds=2))

    connection = CountingConnection(connect_odbc(f"Driver={DRIVER};Database={db}"), late_rows)
    counted: Counter[str] = Counter()
    got = [row.query_id for row in read_rows(connection, paged_source(3), Window(T0, at(10)), counted)]
    assert got == ["q1", "q2", "q3", "q3a", "q3b", "q4", "q5", "q6"]
    assert dict(counted) == {"pages read (3 rows a query at most)": 4}


def test_live_harvest_through_information_schema_pages(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(SOURCES, "sqlite_information_schema", paged_source(3))
    db = make_db(tmp_path / "is.db", access_history=False)
    for i in range(1, 9):
        add_query(db, f"q{i}", i, f"INSERT INTO sync.t{i} SELECT * FROM crm.s{i}")
    add_query(db, "own", 4.5, "SELECT * FROM TABLE(INFORMATION_SCHEMA.QUERY_HISTORY())", tag="openlineage-harvest")
    code, events = harvest(tmp_path, db, "--until", iso(at(30)), source="sqlite_information_schema")
    assert code == 0
    assert completed_queries(events) == [
        (f"q{i}", f"crm_sync.insert_ops_sync_t{i}", [f"OPS.CRM.S{i}"], [f"OPS.SYNC.T{i}"]) for i in range(1, 10)
        if i != 9]
    assert "pages read (3 rows a query at most): 5" in capsys.readouterr().err
