"""The live SQL Server source: an event session's file target or ring buffer, read through pyodbc.

The event file is read from its last position (:class:`FilePosition`: file name and offset, as
``sys.fn_xe_file_target_read_file`` takes them); a ring buffer has no position and is read whole (the harvest
skips what its watermark says was read before). The connection string never holds the password: it comes
from an environment variable at connect time.
"""
from __future__ import annotations

import io
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from emitter.naming.sqlserver import split_sqlserver_name
from harvesters.core.outcome import Unreadable, UsageError
from harvesters.sql.remote import connection_server, connection_value
from harvesters.sqlserver.address import parse_server
from harvesters.sqlserver.xevents import Item, XEvent, parse_event, read_events


@attrs.frozen
class LiveQueries:
    """The SQL a live harvest sends to one kind of server: the text differs per backend, the code does not.

    Parameter lists name what is bound: ``path`` (event file pattern), ``file``/``offset`` (the saved
    position), ``session`` (event session name).
    """

    read_all: str  # every event from the oldest file on
    read_all_params: tuple[str, ...]
    read_from: str  # events after (file, offset); must fail when that file is gone (rollover)
    read_from_params: tuple[str, ...]
    ring_buffer: str  # the ring_buffer target's XML document
    ring_buffer_params: tuple[str, ...]
    #: a table's columns in order (``{database}``: the bracket-quoted database; ``database``, ``schema``, ``table``)
    columns: str = ""
    columns_params: tuple[str, ...] = ()
    #: the linked servers: (name, data_source, provider) rows (no parameters); the local server's own row too, as a
    #: loopback (``(local)``): a four-part name may name the local server by its own name (``@@SERVERNAME``)
    linked_servers: str = ""


_FN_XE = "SELECT CAST(event_data AS nvarchar(max)) AS event_data, file_name, file_offset " \
         "FROM sys.fn_xe_file_target_read_file(?, NULL, {position})"
#: The ``sqlite`` backend is the test stand-in: a table named like the function with the same columns
#: (module_guid, package_guid, object_name, event_data, file_name, file_offset), read through the SQLite ODBC
#: driver. ``json('...')`` raises an error when the saved file is gone, like SQL Server does.
_SQLITE_READ = "SELECT event_data, file_name, file_offset FROM fn_xe_file_target_read_file WHERE ? IS NOT NULL"
#: ``server_id`` 0 is the local server itself (its name is ``@@SERVERNAME``, its data source that name again):
#: given as a loopback, so its tables are the statement's server's whatever host ``--server`` names it by.
_LINKED_SERVERS = "SELECT name, CASE WHEN server_id = 0 THEN '(local)' ELSE data_source END, " \
                  "CASE WHEN server_id = 0 THEN 'SQLOLEDB' ELSE provider END FROM {table} " \
                  "WHERE is_linked = 1 OR server_id = 0"
BACKENDS: Mapping[str, LiveQueries] = {
    "sqlserver": LiveQueries(
        read_all=_FN_XE.format(position="NULL, NULL"), read_all_params=("path",),
        read_from=_FN_XE.format(position="?, ?"), read_from_params=("path", "file", "offset"),
        ring_buffer="SELECT CAST(t.target_data AS nvarchar(max)) FROM sys.dm_xe_session_targets AS t "
                    "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                    "WHERE s.name = ? AND t.target_name = N'ring_buffer'",
        ring_buffer_params=("session",),
        columns="SELECT COLUMN_NAME FROM {database}.INFORMATION_SCHEMA.COLUMNS "
                "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
        columns_params=("schema", "table"),
        linked_servers=_LINKED_SERVERS.format(table="sys.servers"),
    ),
    "sqlite": LiveQueries(
        read_all=f"{_SQLITE_READ} ORDER BY file_name, file_offset, rowid", read_all_params=("path",),
        read_from=f"{_SQLITE_READ} AND (file_name > ? OR (file_name = ? AND file_offset > ?)) "
                  "AND (SELECT CASE WHEN EXISTS (SELECT 1 FROM fn_xe_file_target_read_file WHERE file_name = ?) "
                  "THEN 1 ELSE json('the initial file is gone') END) ORDER BY file_name, file_offset, rowid",
        read_from_params=("path", "file", "file", "offset", "file"),
        ring_buffer="SELECT target_data FROM ring_buffer_target WHERE name = ?", ring_buffer_params=("session",),
        # INFORMATION_SCHEMA.COLUMNS as a table (one database file stands for the server's databases)
        columns="SELECT column_name FROM information_schema_columns WHERE table_catalog = ? AND table_schema = ? "
                "AND table_name = ? ORDER BY ordinal_position",
        columns_params=("database", "schema", "table"),
        linked_servers=_LINKED_SERVERS.format(table="sys_servers"),
    ),
}


def read_linked_servers(connection: Any, queries: LiveQueries) -> list[tuple[Any, ...]] | str:
    """The server's linked servers as ``sys.servers`` lists them (name, data_source, provider), or why they could not
    be read (a login without the permission sees only some, or none: the harvest goes on without them)."""
    if not queries.linked_servers:
        return []
    try:
        cursor = connection.cursor()
        try:
            return [tuple(row) for row in cursor.execute(queries.linked_servers).fetchall()]
        finally:
            cursor.close()
    except Exception as error:  # noqa: BLE001 - pyodbc.Error and driver errors alike: reported, not fatal
        return f"{type(error).__name__}: {str(error)[:200]}"


class TableColumns:
    """A table's columns from the server's ``INFORMATION_SCHEMA.COLUMNS``, for column lineage through ``*``
    (:attr:`harvesters.sql.cache.LineageCache.table_columns`): read once per table (cached, also when unknown),
    on a connection of its own (the event cursor is still fetching on the harvest's). Unknown (None) for names
    that are not ``database.schema.table``, tables the login cannot see, and after any error (the harvest goes
    on without column lineage through ``*``)."""

    def __init__(self, conn_str: str, queries: LiveQueries, max_tables: int = 4096) -> None:
        self._conn_str = conn_str
        self._queries = queries
        self._max_tables = max_tables
        self._known: dict[str, tuple[str, ...] | None] = {}
        self._connection: Any = None
        self._broken = not queries.columns

    def __call__(self, name: str) -> tuple[str, ...] | None:
        if name in self._known:
            return self._known[name]
        parts = split_sqlserver_name(name)  # (``db.dbo.[t.2024]``: a part holding a dot comes bracketed)
        if self._broken or len(parts) != 3 or not all(parts):
            return None
        found = self._read(*parts)
        if len(self._known) < self._max_tables:
            self._known[name] = found
        return found

    def _read(self, database: str, schema: str, table: str) -> tuple[str, ...] | None:
        import pyodbc  # deferred: needs unixODBC's libodbc

        values = {"database": database, "schema": schema, "table": table}
        text = self._queries.columns.replace("{database}", "[" + database.replace("]", "]]") + "]")
        try:
            if self._connection is None:
                self._connection = pyodbc.connect(self._conn_str, autocommit=True, timeout=15)
            cursor = self._connection.cursor()
            cursor.execute(text, *[values[p] for p in self._queries.columns_params])
            columns = tuple(str(row[0]) for row in cursor.fetchall())
        except pyodbc.Error:
            self._broken = True  # no permission, no such database, connection lost: no more tries this harvest
            return None
        return columns or None

    def close(self) -> None:
        """Close its connection (opened on the first table asked for)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


_PASSWORD_KEY = re.compile(r"(?i)(?:^|;)\s*(?:pwd|password)\s*=")
_APP_KEY = re.compile(r"(?i)(?:^|;)\s*(?:app|application name)\s*=")
#: The harvester's own application name (``APP=``), so the event session can leave its queries out.
HARVESTER_APP = "openlineage-harvest"


def connection_string(conn: str | None, dsn: str | None, user: str | None, password_env: str | None) -> str:
    """The ODBC connection string; the password only ever comes from the environment variable named."""
    if conn and _PASSWORD_KEY.search(conn):
        raise UsageError("the connection string contains a password: put it in an environment variable "
                         "and pass --password-env VAR")
    if bool(conn) == bool(dsn):
        raise UsageError("give one of --connection-string or --dsn")
    parts = [conn.rstrip(";")] if conn else [f"DSN={dsn}"]
    if not _APP_KEY.search(conn or ""):
        parts.append(f"APP={HARVESTER_APP}")
    if user:
        parts.append(f"UID={user}")
    if password_env:
        password = os.environ.get(password_env)
        if password is None:
            raise UsageError(f"environment variable {password_env} (--password-env) is not set")
        parts.append("PWD={" + password.replace("}", "}}") + "}")  # braces: any character is allowed inside
    return ";".join(parts) + ";"


def server_from_connection_string(conn: str | None) -> tuple[str, str | None] | None:
    """(host, port) from ``Server=tcp:host,1433`` / ``host\\instance`` / ``host`` (or ``Data Source``, ``Address``,
    ``Addr``, ``Network Address``; braces around the value allowed; read as ``--server`` is), the port from FreeTDS's
    ``Port`` key when the server gives none; None when it names no server."""
    server = connection_server(conn or "")
    if server is None:
        return None
    host, port = parse_server(server)
    return host, port or connection_value(conn or "", ("port",))


@attrs.frozen
class FilePosition:
    """Where a live event_file harvest resumes: after the block (file, offset), skipping ``done`` events of
    the block (``partial_file``, ``partial_offset``) that were already harvested (a stop inside a block)."""

    file: str | None = None
    offset: int | None = None
    partial_file: str | None = None
    partial_offset: int | None = None
    done: int = 0

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def read_event_file(connection: Any, queries: LiveQueries, path: str, position: FilePosition,
                    counts: Counter[str]) -> Iterator[tuple[XEvent | Unreadable, FilePosition]]:
    """Events of an event_file target after ``position``, each with the position after it.

    When the saved file is gone (rolled over), reading starts again from the oldest file (counted as
    ``rollover``: events written and removed between two harvests are lost; harvest more often or raise
    ``max_rollover_files``).
    """
    import pyodbc  # deferred: needs unixODBC's libodbc

    values = {"path": path, "file": position.file, "offset": position.offset}
    cursor = connection.cursor()
    if position.file is None:
        cursor.execute(queries.read_all, *[values[p] for p in queries.read_all_params])
    else:
        try:
            cursor.execute(queries.read_from, *[values[p] for p in queries.read_from_params])
        except pyodbc.Error:
            counts["rollover"] += 1
            position = FilePosition()
            cursor = connection.cursor()
            cursor.execute(queries.read_all, *[values[p] for p in queries.read_all_params])
    complete = (position.file, position.offset)
    block: tuple[str, int] | None = None
    in_block = 0
    while True:
        rows = cursor.fetchmany(500)
        if not rows:
            break
        for event_data, file_name, file_offset in rows:
            here = (str(file_name), int(file_offset))
            if here != block:
                if block is not None:
                    complete = block
                block, in_block = here, 0
            in_block += 1
            if (position.partial_file, position.partial_offset) == here and in_block <= position.done:
                continue  # harvested before a stop inside this block
            after = FilePosition(complete[0], complete[1], here[0], here[1], in_block)
            try:
                value: XEvent | Unreadable = parse_event(
                    event_data.encode("utf-8", "surrogatepass") if isinstance(event_data, str) else event_data)
            except (ValueError, SyntaxError):
                value = Unreadable("malformed event", here[1])
            yield value, after


def read_ring_buffer(connection: Any, queries: LiveQueries, session: str) -> Iterator[Item]:
    """Events of a ring_buffer target (one XML document, read whole: the buffer is bounded by its size)."""
    cursor = connection.cursor()
    cursor.execute(queries.ring_buffer, *[{"session": session}[p] for p in queries.ring_buffer_params])
    row = cursor.fetchone()
    if row is None or row[0] is None:
        raise UsageError(f"no ring_buffer target for the event session {session!r}")
    data = row[0].encode("utf-8") if isinstance(row[0], str) else bytes(row[0])
    yield from read_events(io.BytesIO(data))
