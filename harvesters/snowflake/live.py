"""Reading Snowflake's query history live through a DB-API connection (snowflake-connector-python or pyodbc).

The SQL each source sends is data (:data:`SOURCES`); the code that runs it is the same for all. Every query
binds the window ``[start, end)`` on END_TIME as ISO 8601 text (``TO_TIMESTAMP_LTZ(?)`` in Snowflake), and
returns rows ordered by START_TIME with the views' column names. A source that returns at most N rows a query
(INFORMATION_SCHEMA.QUERY_HISTORY(): the N that ended last) is read in pages (:func:`read_rows`).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import attrs

from harvesters.core.outcome import UsageError, require_pyodbc
from harvesters.core.state import Window
from harvesters.snowflake.history import HistoryRow, Unreadable, parse_time, row_from_mapping

#: The harvester's own QUERY_TAG: its queries are left out of what it reads.
HARVESTER_TAG = "openlineage-harvest"
#: Rows fetched per round trip.
FETCH_ROWS = 1000
#: How often a page that filled up (rows arrived after it was planned) is split again before it is taken as is.
MAX_PAGE_SPLITS = 8
#: END_TIME resolution of a page bound: times are read and bound with microseconds.
_TICK = timedelta(microseconds=1)


@attrs.frozen
class LiveSource:
    """How one kind of history is read: the SQL, what it binds, the default lag and overlap."""

    sql: str  # binds the names in ``params`` with qmark (?) placeholders
    params: tuple[str, ...]  # "start", "end": the window's bounds as ISO 8601 text
    lag: timedelta  # the source's documented latency: rows younger than this may still be missing
    overlap: timedelta  # how far a window reaches back into the previous one, for rows later than the lag
    probe: str | None = None  # a query that fails when ACCESS_HISTORY cannot be read ...
    fallback: str | None = None  # ... then this source is read instead
    # The source returns at most this many rows per query: those that ended last (Snowflake's RESULT_LIMIT).
    # ``sql`` and ``page_probe`` hold ``{limit}``, filled in with this number.
    result_limit: int | None = None
    # With result_limit: one row (how many rows ``sql`` would return, the earliest END_TIME among them) for the
    # same window; plans the pages without fetching query texts.
    page_probe: str | None = None


_QH_COLUMNS = ("q.QUERY_ID, q.QUERY_TEXT, q.DATABASE_NAME, q.SCHEMA_NAME, q.QUERY_TYPE, q.SESSION_ID, q.USER_NAME, "
               "q.ROLE_NAME, q.WAREHOUSE_NAME, q.QUERY_TAG, q.EXECUTION_STATUS, q.ERROR_MESSAGE, q.START_TIME, "
               "q.END_TIME, q.ROWS_INSERTED, q.ROWS_UPDATED, q.QUERY_PARAMETERIZED_HASH")
_AH_COLUMNS = ("a.DIRECT_OBJECTS_ACCESSED, a.BASE_OBJECTS_ACCESSED, a.OBJECTS_MODIFIED, a.OBJECT_MODIFIED_BY_DDL, "
               "a.PARENT_QUERY_ID, a.ROOT_QUERY_ID")
_OWN = f"COALESCE(q.QUERY_TAG, '') <> '{HARVESTER_TAG}'"
_AU = "SNOWFLAKE.ACCOUNT_USAGE"
_SF_WINDOW = "q.END_TIME >= TO_TIMESTAMP_LTZ(?) AND q.END_TIME < TO_TIMESTAMP_LTZ(?)"
#: The test stand-in (SQLite through the SQLite ODBC driver): tables named like the views, times stored as
#: ISO 8601 UTC text (``2024-06-01T01:00:00.000000+00:00``) so they compare as text.
_SQLITE_WINDOW = "q.END_TIME >= ? AND q.END_TIME < ?"
_IS_QH = ("TABLE(INFORMATION_SCHEMA.QUERY_HISTORY(END_TIME_RANGE_START => TO_TIMESTAMP_LTZ(?), "
          "END_TIME_RANGE_END => TO_TIMESTAMP_LTZ(?), RESULT_LIMIT => {limit}))")
_SQLITE_LIMITED = (f"(SELECT {_QH_COLUMNS} FROM QUERY_HISTORY AS q WHERE {_SQLITE_WINDOW} "
                   "ORDER BY q.END_TIME DESC, q.QUERY_ID LIMIT {limit})")

SOURCES: Mapping[str, LiveSource] = {
    # ACCOUNT_USAGE joined with ACCESS_HISTORY (Enterprise): lineage as Snowflake recorded it; up to 3 h late
    "account_usage": LiveSource(
        sql=f"SELECT {_QH_COLUMNS}, {_AH_COLUMNS} FROM {_AU}.QUERY_HISTORY AS q "
            f"LEFT JOIN {_AU}.ACCESS_HISTORY AS a ON a.QUERY_ID = q.QUERY_ID "
            f"AND a.QUERY_START_TIME >= DATEADD('day', -7, TO_TIMESTAMP_LTZ(?)) "
            f"WHERE {_SF_WINDOW} AND {_OWN} ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "start", "end"), lag=timedelta(hours=3), overlap=timedelta(hours=1),
        probe=f"SELECT 1 FROM {_AU}.ACCESS_HISTORY LIMIT 1", fallback="account_usage_query_history"),
    # ACCOUNT_USAGE without ACCESS_HISTORY (Standard edition): lineage parsed from the text; up to 45 min late
    "account_usage_query_history": LiveSource(
        sql=f"SELECT {_QH_COLUMNS} FROM {_AU}.QUERY_HISTORY AS q WHERE {_SF_WINDOW} AND {_OWN} "
            f"ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "end"), lag=timedelta(minutes=45), overlap=timedelta(hours=1)),
    # INFORMATION_SCHEMA.QUERY_HISTORY(): seconds late, last 7 days, the current role's queries, at most 10,000
    # rows a call (the queries that ended last). No WHERE on the harvester's own tag: Snowflake applies the
    # RESULT_LIMIT before the WHERE, and a filtered page would hide that the limit was reached.
    "information_schema": LiveSource(
        sql=f"SELECT * FROM {_IS_QH} AS q ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "end"), lag=timedelta(minutes=1), overlap=timedelta(minutes=15), result_limit=10_000,
        page_probe=f"SELECT COUNT(*), MIN(q.END_TIME) FROM {_IS_QH} AS q"),
    "sqlite": LiveSource(
        sql=f"SELECT {_QH_COLUMNS}, {_AH_COLUMNS} FROM QUERY_HISTORY AS q "
            f"LEFT JOIN ACCESS_HISTORY AS a ON a.QUERY_ID = q.QUERY_ID AND ? IS NOT NULL "
            f"WHERE {_SQLITE_WINDOW} AND {_OWN} ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "start", "end"), lag=timedelta(hours=3), overlap=timedelta(hours=1),
        probe="SELECT 1 FROM ACCESS_HISTORY LIMIT 1", fallback="sqlite_query_history"),
    "sqlite_query_history": LiveSource(
        sql=f"SELECT {_QH_COLUMNS} FROM QUERY_HISTORY AS q WHERE {_SQLITE_WINDOW} AND {_OWN} "
            f"ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "end"), lag=timedelta(minutes=45), overlap=timedelta(hours=1)),
    # Stand-in for information_schema: the {limit} rows of the window that ended last, own rows included.
    "sqlite_information_schema": LiveSource(
        sql=f"SELECT * FROM {_SQLITE_LIMITED} AS q ORDER BY q.START_TIME, q.QUERY_ID",
        params=("start", "end"), lag=timedelta(minutes=1), overlap=timedelta(minutes=15), result_limit=10_000,
        page_probe=f"SELECT COUNT(*), MIN(q.END_TIME) FROM {_SQLITE_LIMITED} AS q"),
}
#: Sources a user picks with --source (the others are fallbacks or the test stand-in).
USER_SOURCES = ("account_usage", "information_schema")
#: How far back the first live harvest (no state, no --since) reads.
FIRST_WINDOW = timedelta(days=1)


def bind_time(instant: datetime) -> str:
    """A window bound as bound to the SQL: ISO 8601 in UTC with microseconds."""
    return instant.astimezone(timezone.utc).isoformat(timespec="microseconds")


def choose_source(connection: Any, name: str, notes: Counter[str]) -> str:
    """``name``, or its fallback when its probe fails (the account has no ACCESS_HISTORY, or no grant)."""
    source = SOURCES[name]
    if source.probe is None:
        return name
    cursor = connection.cursor()
    try:
        cursor.execute(source.probe)
        cursor.fetchall()
    except Exception:  # noqa: BLE001 - each driver raises its own error class for "does not exist"
        notes["ACCESS_HISTORY not readable: lineage parsed from the text"] += 1
        return source.fallback or name
    finally:
        cursor.close()
    return name


def read_rows(connection: Any, source: LiveSource, window: Window, notes: Counter[str]
              ) -> Iterator[HistoryRow | Unreadable]:
    """The history rows of ``window`` (END_TIME in ``[start, end)``), in START_TIME order, streamed; the
    harvester's own queries left out.

    A source with a ``result_limit`` is read in pages, oldest first, each in START_TIME order (see
    :class:`_Pager`): every row of the window comes once, however many there are.
    """
    assert window.start is not None and window.end is not None
    if source.result_limit is None:
        yield from _own_left_out(_fetch(connection, source, window.start, window.end, streamed=True))
    else:
        yield from _Pager(connection, source, notes).rows(window.start, window.end)


def _execute(cursor: Any, source: LiveSource, sql: str, start: datetime, end: datetime) -> None:
    """Run one of the source's queries for ``[start, end)``."""
    values = {"start": bind_time(start), "end": bind_time(end)}
    if source.result_limit is not None:  # an int written into the text: table function arguments are constants
        sql = sql.replace("{limit}", str(int(source.result_limit)))
    cursor.execute(sql, [values[p] for p in source.params])


def _fetch(connection: Any, source: LiveSource, start: datetime, end: datetime, streamed: bool = False
           ) -> Iterator[HistoryRow | Unreadable]:
    """The rows the source's query returns for ``[start, end)``: fetched as read, or all at once."""
    cursor = connection.cursor()
    try:
        _execute(cursor, source, source.sql, start, end)
        names = [str(d[0]).upper() for d in cursor.description]
        while True:
            rows = cursor.fetchmany(FETCH_ROWS) if streamed else cursor.fetchall()
            for row in rows:
                yield row_from_mapping(dict(zip(names, row)))
            if not rows or not streamed:
                break
    finally:
        cursor.close()


def _own_left_out(rows: Iterator[HistoryRow | Unreadable]) -> Iterator[HistoryRow | Unreadable]:
    return (row for row in rows if isinstance(row, Unreadable) or row.tag != HARVESTER_TAG)


class _Pager:
    """Reads a window from a source that returns only the ``limit`` rows that ended last (Snowflake's
    QUERY_HISTORY() with RESULT_LIMIT), oldest page first, so the rows still come nearly in START_TIME order.

    When a query returns ``limit`` rows, the window is cut into pages from its end backwards with the source's
    ``page_probe``: the rows returned reach back to some earliest END_TIME e; every row that ended after e was
    among them, but rows that ended at e may have been cut off. So the later page is ``[e + 1 us, end)`` and the
    earlier one ``[start, e + 1 us)``, probed again, until a probe returns fewer than ``limit`` rows. Pages are
    half-open on END_TIME and meet at one instant: a row at that instant belongs to one page, and if the source
    bound were inclusive, it would come twice: a row whose QUERY_ID the page before held is dropped. A page that
    filled up after it was planned (rows landing late) is split again; more than ``limit`` rows at a single
    instant cannot be split: that page is taken as returned and counted in the notes.
    """

    def __init__(self, connection: Any, source: LiveSource, notes: Counter[str]) -> None:
        assert source.result_limit is not None and source.page_probe is not None
        self.connection = connection
        self.source = source
        self.limit = source.result_limit
        self.notes = notes
        self.previous: set[str] = set()  # QUERY_IDs of the page given out last

    def rows(self, start: datetime, end: datetime, splits: int = 0) -> Iterator[HistoryRow | Unreadable]:
        rows = list(_fetch(self.connection, self.source, start, end))
        full = len(rows) >= self.limit
        cuts = self._cuts(start, end) if full and splits < MAX_PAGE_SPLITS else []
        if not cuts:
            if full:
                self.notes[f"pages of {self.limit} rows that could not be split (rows may be missed)"] += 1
            if splits:
                self.notes[f"pages read ({self.limit} rows a query at most)"] += 1
            yield from self._page(rows)
            return
        del rows  # read again page by page: hold one page at a time
        for low, high in pairwise([start, *cuts, end]):
            yield from self.rows(low, high, splits + 1)

    def _cuts(self, start: datetime, end: datetime) -> list[datetime]:
        """Page bounds inside ``[start, end)``, in time order, such that each page holds fewer than ``limit`` rows
        when probed; empty when the window cannot be cut (``limit`` rows or more ended at its first instant)."""
        assert self.source.page_probe is not None
        cuts: list[datetime] = []
        high = end
        while True:
            cursor = self.connection.cursor()
            try:
                _execute(cursor, self.source, self.source.page_probe, start, high)
                count, earliest = cursor.fetchone()
            finally:
                cursor.close()
            if int(count or 0) < self.limit or earliest is None:
                break
            cut = parse_time(earliest) + _TICK  # the rows at `earliest` go to the earlier page
            if cut >= high:
                break
            cuts.append(cut)
            high = cut
        return cuts[::-1]

    def _page(self, rows: list[HistoryRow | Unreadable]) -> Iterator[HistoryRow | Unreadable]:
        ids = {row.query_id for row in rows if isinstance(row, HistoryRow)}
        for row in _own_left_out(iter(rows)):
            if isinstance(row, HistoryRow) and row.query_id in self.previous:
                continue
            yield row
        self.previous = ids


# ---- connections ---------------------------------------------------------------------------------------

_SECRET_KEY = re.compile(r"(?i)(?:^|;)\s*(?:pwd|password|priv_key_file_pwd|token)\s*=")


def odbc_connection_string(conn: str, user: str | None = None, password_env: str | None = None,
                           private_key_file: str | None = None, passphrase_env: str | None = None) -> str:
    """An ODBC connection string (Snowflake's driver); secrets only ever come from the environment.

    Key-pair authentication: ``AUTHENTICATOR=SNOWFLAKE_JWT;PRIV_KEY_FILE=path``, the passphrase from
    ``passphrase_env``.
    """
    if _SECRET_KEY.search(conn):
        raise UsageError("the connection string contains a secret: put it in an environment variable and pass "
                         "--password-env VAR (or --private-key-passphrase-env VAR)")
    parts = [conn.rstrip(";")]
    if user:
        parts.append(f"UID={user}")
    if password_env:
        parts.append("PWD=" + _braced(_env(password_env, "--password-env")))
    if private_key_file:
        parts.append(f"AUTHENTICATOR=SNOWFLAKE_JWT;PRIV_KEY_FILE={private_key_file}")
    if passphrase_env:
        parts.append("PRIV_KEY_FILE_PWD=" + _braced(_env(passphrase_env, "--private-key-passphrase-env")))
    return ";".join(parts) + ";"


def _braced(value: str) -> str:
    """An ODBC attribute value in braces: any character is allowed inside (``}`` doubled)."""
    return "{" + value.replace("}", "}}") + "}"


def _env(name: str, option: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise UsageError(f"environment variable {name} ({option}) is not set")
    return value


def connector_arguments(account: str, user: str | None, password_env: str | None, private_key_file: str | None,
                        passphrase_env: str | None, warehouse: str | None, role: str | None) -> dict[str, Any]:
    """Arguments of ``snowflake.connector.connect``: key-pair (JWT) when a key file is given, else password."""
    if not user:
        raise UsageError("--user is needed for a live harvest")
    if bool(password_env) == bool(private_key_file):
        raise UsageError("give one of --password-env VAR or --private-key-file PATH")
    args: dict[str, Any] = {"account": account, "user": user, "application": HARVESTER_TAG,
                            "session_parameters": {"QUERY_TAG": HARVESTER_TAG, "TIMEZONE": "UTC"}}
    if password_env:
        args["password"] = _env(password_env, "--password-env")
    else:
        args["private_key_file"] = private_key_file
        if passphrase_env:
            args["private_key_file_pwd"] = _env(passphrase_env, "--private-key-passphrase-env")
    if warehouse:
        args["warehouse"] = warehouse
    if role:
        args["role"] = role
    return args


def connect_connector(arguments: Mapping[str, Any]) -> Any:
    """A snowflake-connector-python connection binding qmark (``?``) parameters like pyodbc."""
    try:
        import snowflake.connector
    except ImportError:
        raise UsageError("the live Snowflake harvest needs snowflake-connector-python: "
                         "pip install 'lineage-capture[snowflake]' (or pass --odbc with Snowflake's ODBC driver)"
                         ) from None
    snowflake.connector.paramstyle = "qmark"
    arguments = dict(arguments)
    key_file = arguments.pop("private_key_file", None)
    passphrase = arguments.pop("private_key_file_pwd", None)
    if key_file:  # read here: every connector version takes the key as DER bytes (private_key=)
        arguments["private_key"] = _der_private_key(key_file, passphrase)
    return snowflake.connector.connect(**arguments)


def _der_private_key(path: str, passphrase: str | None) -> bytes:
    """The PEM private key at ``path`` (encrypted or not) as unencrypted PKCS#8 DER, for the connector."""
    from cryptography.hazmat.primitives import serialization  # a dependency of snowflake-connector-python

    try:
        with open(path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=passphrase.encode() if passphrase else None)
    except (OSError, ValueError, TypeError) as error:
        # the message names the file and the kind of problem, never the passphrase
        raise UsageError(f"cannot read the private key {path}: {type(error).__name__}") from None
    return key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def connect_odbc(conn_str: str) -> Any:
    """A pyodbc connection (Snowflake's ODBC driver; the SQLite driver for the test stand-in)."""
    pyodbc = require_pyodbc("sqlserver")  # deferred: needs unixODBC's libodbc (pyodbc: the sqlserver extra)

    connection = pyodbc.connect(conn_str, autocommit=True)
    try:  # tag the harvester's own queries so they are left out (Snowflake only; others ignore the failure)
        connection.cursor().execute(f"ALTER SESSION SET QUERY_TAG = '{HARVESTER_TAG}'")
    except pyodbc.Error:
        pass
    return connection


def live_window(previous_end: datetime | None, now: datetime, source: LiveSource, since: datetime | None,
                until: datetime | None, lag: timedelta | None, overlap: timedelta | None) -> Window:
    """``[previous end - overlap, now - lag)``; the first harvest reads :data:`FIRST_WINDOW` before that end."""
    from harvesters.core.state import harvest_window

    lag = source.lag if lag is None else lag
    window = harvest_window(previous_end, now, since=since, until=until,
                            overlap=source.overlap if overlap is None else overlap, latency=lag)
    if window.start is None:
        assert window.end is not None
        window = Window(window.end - FIRST_WINDOW, window.end)
    return window
