"""SQL Server Extended Events -> statements: event conversion, cached table lineage, live reading through pyodbc.

Which events count (see :data:`EVENT_KINDS`): ``sql_statement_completed`` and ``sp_statement_completed`` are
statements; ``sql_batch_completed`` and ``rpc_completed`` are containers, read as a statement only when no
statement event of the same activity (``attach_activity_id``, needs ``TRACK_CAUSALITY = ON``) was seen, so a
session capturing both levels does not count a statement twice (``rpc_completed`` of ``sp_executesql`` is then
the statement inside, unwrapped by the lineage engine); ``module_end`` completes the module run of the
procedure whose ``sp_statement_completed`` events it covers; ``error_reported`` (severity 11 and up) fails the
next statement or container of the same activity that was running when the error was raised (a statement event
has no outcome of its own). Any other event is counted and skipped.

Table lineage comes from :func:`harvesters.sql.table_lineage` (T-SQL, the event's ``database_name`` as the
default database, ``dbo`` as the default schema), cached by the statement's *shape* (literals replaced by
``?``) so a statement repeated with other values is parsed once; the SQL facet keeps the original text
(the emitter redacts it).

Conversion has two halves: :class:`EventReader` reads one event on its own (a :class:`Reading`: lineage, times,
status, parent ids) and :class:`EventConverter` applies what earlier events left (covered containers, pending
errors). Large files do the first half in a second process (:func:`read_readings_background`).
"""
from __future__ import annotations

import io
import os
import re
import sys
from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

import attrs

from harvesters.background import read_in_background, send_items
from harvesters.state import Window
from harvesters.tasks import Statement, TaskGrouper, find_parent_ids, is_run_marker
from harvesters.xevents import (
    DEFAULT_MAX_EVENT_BYTES,
    Item,
    Unreadable,
    XEvent,
    parse_event,
    read_events,
    read_file,
)

STATEMENT, CONTAINER, MODULE_END, ERROR = "statement", "container", "module_end", "error"
DIALECT = "tsql"
DEFAULT_SCHEMA = "dbo"
#: Statements longer than this are not parsed for lineage (counted as unparsed): a 10 MB generated
#: statement would take the parser minutes and hundreds of MB.
DEFAULT_MAX_STATEMENT_CHARS = 1_000_000


@attrs.frozen
class EventKind:
    """How one Extended Events event is read."""

    sql_field: str | None  # the <data> field holding the SQL text
    role: str  # STATEMENT, CONTAINER or MODULE_END
    duration_unit: timedelta = timedelta(microseconds=1)  # 'duration' is in microseconds since SQL Server 2012


EVENT_KINDS: Mapping[str, EventKind] = {
    "sql_statement_completed": EventKind("statement", STATEMENT),
    "sp_statement_completed": EventKind("statement", STATEMENT),
    "sql_batch_completed": EventKind("batch_text", CONTAINER),
    "rpc_completed": EventKind("statement", CONTAINER),
    "module_end": EventKind(None, MODULE_END),
    "error_reported": EventKind(None, ERROR),
}
#: error_reported severities that mean a statement failed (10 and below are informational messages).
MIN_FAILING_SEVERITY = 11
#: An error belongs to the statement whose run [start, end] holds its timestamp, this much slack before the
#: start allowed ('duration' and the timestamps are rounded differently).
ERROR_SLACK = timedelta(milliseconds=1)
#: ``result`` of batch/rpc events (map rpc_return_result): text or value meaning the request failed.
FAILED_RESULTS = frozenset({"error", "abort", "1", "2"})
#: sp_statement_completed ``object_name`` values that are not modules: dynamic SQL runs in these.
NOT_MODULES = frozenset({"", "sp_executesql", "sp_prepexec", "sp_execute"})
#: How many activity ids of statement events are remembered to recognise their containers.
ACTIVITY_MEMORY = 100_000


@attrs.frozen
class ModuleEnd:
    """A procedure execution ended (``module_end``)."""

    module_key: str
    end: datetime
    failed: bool = False


@attrs.frozen
class Skip:
    """An event that yields no statement, and why (counted in the summary)."""

    reason: str
    unparsed: bool = False  # a statement whose lineage could not be worked out (exit code 1)
    #: the unparsed statement without lineage: it still continues or ends its task run (markers, parent ids)
    statement: Statement | None = None


# ---- statement shapes and the lineage cache -------------------------------------------------------------

_SHAPE_TOKENS = re.compile(
    r"(?=[\[\"N'+\-0-9])"  # the first characters of the tokens below: lets the scan skip other text fast
    r"(?:(\[[^\]]*\]|\"[^\"]*\")"  # quoted identifiers: kept (they may contain digits or quotes)
    r"|N?'(?:[^']|'')*'"  # string literals
    r"|(?<![\w@#$])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w]))"  # numbers, not digits inside names
)
_SP_EXECUTESQL = re.compile(r"^\s*exec(?:ute)?\s+(?:\[?sys\]?\.)?\[?sp_executesql\]?\s+N?'((?:[^']|'')*)'",
                            re.IGNORECASE)


def _keep_identifiers(match: re.Match[str]) -> str:
    return match.group(1) or "?"


#: Text whose string literals the lineage engine reads as SQL (``EXEC ('...')``, ``sp_executesql @stmt = N'...'``,
#: ``EXECUTE IMMEDIATE '...'``): two such statements differing only in a literal have different lineage.
_DYNAMIC_SQL = re.compile(r"(?i)\bexec(?:ute)?\b\s*(?:\(|immediate\b|[\w.\[\]]*sp_executesql\b)")


def statement_shape(sql: str) -> str:
    """The statement with its literals replaced by ``?``: equal for runs of one statement with other values.

    ``sp_executesql`` calls are shaped by the statement inside their first literal (the rest are parameters).
    Other dynamic SQL is its own shape: the text in its literal decides its lineage.
    """
    inner = _SP_EXECUTESQL.match(sql)
    if inner:
        return "sp_executesql:" + statement_shape(inner.group(1).replace("''", "'"))
    if _DYNAMIC_SQL.search(sql):
        return sql
    return _SHAPE_TOKENS.sub(_keep_identifiers, sql)


@attrs.frozen(slots=True)
class Lineage:
    """The part of :func:`harvesters.sql.table_lineage`'s answer the harvester keeps."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    temp_inputs: tuple[str, ...]
    temp_outputs: tuple[str, ...]
    statement_types: tuple[str, ...]
    error: str | None


NO_LINEAGE = Lineage((), (), (), (), (), None)


class LineageCache:
    """``table_lineage`` memoised by (statement shape, default database), bounded (least recently used out).

    :meth:`memoised` is the cache itself; the Snowflake harvester's cache keys it differently.
    """

    def __init__(self, dialect: str = DIALECT, default_schema: str | None = DEFAULT_SCHEMA,
                 max_entries: int = 20_000) -> None:
        from harvesters.sql import table_lineage

        self._table_lineage = table_lineage
        self.dialect = dialect
        self.default_schema = default_schema
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[Any, ...], Lineage] = OrderedDict()
        self.hits = self.misses = 0

    def lineage(self, sql: str, database: str | None) -> Lineage:
        return self.memoised((statement_shape(sql), database), sql, default_database=database,
                             default_schema=self.default_schema)

    def memoised(self, key: tuple[Any, ...], sql: str, **engine_options: Any) -> Lineage:
        """The lineage cached under ``key``, else ``table_lineage(sql, dialect, **engine_options)`` stored there."""
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            self._cache.move_to_end(key)
            return cached
        self.misses += 1
        try:
            found = self._table_lineage(sql, self.dialect, **engine_options)
            result = Lineage(tuple(found.inputs), tuple(found.outputs), tuple(found.temp_inputs),
                             tuple(found.temp_outputs), tuple(found.statement_types), found.error)
        except Exception as error:  # noqa: BLE001 - the engine promises not to raise; a bug costs one statement
            result = Lineage((), (), (), (), (), f"lineage engine error: {type(error).__name__}")
        self._cache[key] = result
        if len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return result


def reason_of(error: str) -> str:
    """A short, countable reason from the engine's message (its first clause, at most 60 characters)."""
    return re.split(r"[:\n]", error, maxsplit=1)[0].strip()[:60] or "unparseable"


# ---- events -> statements ------------------------------------------------------------------------------


def _activity(event: XEvent) -> str:
    """The activity GUID of ``attach_activity_id`` (``GUID-sequence``): shared by one request's events."""
    value = event.actions.get("attach_activity_id", "")
    return value.rsplit("-", 1)[0] if value.count("-") >= 5 else value


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


@attrs.frozen(slots=True)
class ErrorNote:
    """An ``error_reported`` event that fails a statement: its message, ``Msg N, Level L: text``."""

    message: str


@attrs.define(slots=True)  # one per event: not frozen (see harvesters.tasks.Statement); never changed
class Reading:
    """One event read on its own (:class:`EventReader`): what it says, before what the harvest remembers of
    earlier events (containers already covered, errors waiting for their statement) is applied to it."""

    timestamp: datetime
    role: str | None  # the event kind's role (STATEMENT, CONTAINER, MODULE_END, ERROR); None: not used
    activity: str
    #: a statement (its ``failed`` from the event alone), a module end, an error, or why there is nothing
    result: Statement | ModuleEnd | ErrorNote | Skip


class EventReader:
    """XEvents -> :class:`Reading`: everything about one event that needs no other event (the SQL text's
    lineage, parent ids, times, status). Stateless apart from the lineage cache, so large files do it in the
    reading process (:func:`read_readings_background`)."""

    def __init__(self, namespace: str, lineage: LineageCache,
                 max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS) -> None:
        self.namespace = namespace
        self.lineage = lineage
        self.max_statement_chars = max_statement_chars

    def read(self, event: XEvent) -> Reading:
        kind = EVENT_KINDS.get(event.name)
        if kind is None:
            return Reading(event.timestamp, None, "", Skip(f"event {event.name} not used"))
        activity = _activity(event)
        if kind.role == MODULE_END:
            result: Statement | ModuleEnd | ErrorNote | Skip = ModuleEnd(self._module_key(event, activity),
                                                                          event.timestamp)
        elif kind.role == ERROR:
            result = self._error(event, activity)
        else:
            sql = event.data.get(kind.sql_field or "", "")
            result = self._statement(event, kind, sql, activity) if sql.strip() else Skip("no SQL text")
        return Reading(event.timestamp, kind.role, activity, result)

    def _error(self, event: XEvent, activity: str) -> ErrorNote | Skip:
        severity = _int(event.data.get("severity"))
        if severity is None or severity < MIN_FAILING_SEVERITY:
            return Skip("informational message (severity 10 or below)")
        if not activity:
            return Skip("error without attach_activity_id (TRACK_CAUSALITY is off)")
        number, message = event.data.get("error_number", ""), event.data.get("message", "").strip()
        return ErrorNote(f"Msg {number}, Level {severity}: {message}")

    def _module_key(self, event: XEvent, activity: str) -> str:
        return f"{activity}/{event.data.get('source_database_id', '')}/{event.data.get('object_id', '')}"

    def _statement(self, event: XEvent, kind: EventKind, sql: str, activity: str) -> Statement | Skip:
        actions, data = event.actions, event.data
        database = actions.get("database_name") or None
        unparsed = None
        if len(sql) > self.max_statement_chars:
            found, unparsed = NO_LINEAGE, f"statement longer than {self.max_statement_chars} characters"
        else:
            found = self.lineage.lineage(sql, database)
            if found.error:
                found, unparsed = NO_LINEAGE, reason_of(found.error)
        app = actions.get("client_app_name", "")
        parent_id, root_parent_id = find_parent_ids(app, sql)
        duration = _int(data.get("duration")) or 0
        result = (event.texts.get("result") or data.get("result") or "").lower()
        failed = result in FAILED_RESULTS
        module = data.get("object_name", "") if event.name == "sp_statement_completed" else ""
        is_module = module.lower() not in NOT_MODULES
        session = actions.get("session_id", "")
        sequence = actions.get("event_sequence", "")
        statement = Statement(
            query_id="|".join((event.name, session, sequence, actions.get("attach_activity_id", ""))),
            start=event.timestamp - duration * kind.duration_unit, end=event.timestamp, task=app,
            host=actions.get("client_hostname", ""), session=session, sql=sql, namespace=self.namespace,
            dialect=DIALECT, inputs=found.inputs, outputs=found.outputs, temp_inputs=found.temp_inputs,
            temp_outputs=found.temp_outputs, statement_types=found.statement_types, failed=failed,
            error_message=f"result: {event.texts.get('result') or result}" if failed else None,
            parent_id=parent_id, root_parent_id=root_parent_id, marker=is_run_marker(sql),
            module=module if is_module else None,
            module_key=self._module_key(event, activity) if is_module else None,
            row_count=_int(data.get("row_count")),
        )
        return statement if unparsed is None else Skip(unparsed, unparsed=True, statement=statement)


class EventConverter:
    """Turns XEvents (or their :class:`Reading`) into :class:`Statement` / :class:`ModuleEnd` / :class:`Skip`,
    remembering what later events need: the activities whose statements were read (their containers add
    nothing) and the errors raised but not yet given to a statement."""

    def __init__(self, namespace: str, lineage: LineageCache,
                 max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS) -> None:
        self.reader = EventReader(namespace, lineage, max_statement_chars)
        # activity ids that had statement events: their containers (batch, rpc) add nothing
        self._covered: OrderedDict[str, None] = OrderedDict()
        # activity id -> (time, message) of the first error raised there and not yet given to a statement
        self._errors: OrderedDict[str, tuple[datetime, str]] = OrderedDict()

    def covered_state(self, keep: int = 1000) -> list[str]:
        """The most recent covered activity ids, for the harvest state (a container may come next harvest)."""
        return list(self._covered)[-keep:]

    def errors_state(self, keep: int = 1000) -> list[list[str]]:
        """Errors not yet given to a statement, for the harvest state (the statement may come next harvest)."""
        return [[activity, at.isoformat(), message] for activity, (at, message) in list(self._errors.items())[-keep:]]

    def restore(self, covered: list[str], errors: list[list[str]] | None = None) -> None:
        self._covered.update((a, None) for a in covered)
        self._errors.update((activity, (datetime.fromisoformat(at), message)) for activity, at, message in errors or ())

    def convert(self, event: XEvent | Reading) -> Statement | ModuleEnd | Skip:
        """The event's statement, module end or skip, given what earlier events left behind."""
        reading = event if isinstance(event, Reading) else self.reader.read(event)
        role, activity, result = reading.role, reading.activity, reading.result
        if isinstance(result, ErrorNote):
            if activity not in self._errors:  # the first error says why; the next ("statement terminated") follow
                self._errors[activity] = (reading.timestamp, result.message)
                if len(self._errors) > ACTIVITY_MEMORY:
                    self._errors.popitem(last=False)
            return Skip("error, read with its statement")
        if role == CONTAINER and activity in self._covered:
            del self._covered[activity]
            self._errors.pop(activity, None)  # the request is over
            return Skip("container of statements already read")
        if role == STATEMENT and activity:
            self._covered[activity] = None
            if len(self._covered) > ACTIVITY_MEMORY:
                self._covered.popitem(last=False)
        if isinstance(result, Statement):
            return self._with_error(result, activity)
        if isinstance(result, Skip) and result.statement is not None:
            return attrs.evolve(result, statement=self._with_error(result.statement, activity))
        return result

    def _with_error(self, statement: Statement, activity: str) -> Statement:
        """The statement failed by the error raised in its activity while it ran, if there was one.

        An error raised before the statement's start belonged to a statement that logged no completion: dropped.
        """
        error = self._errors.get(activity) if activity else None
        if error is None or error[0] > statement.end:
            return statement
        del self._errors[activity]
        if error[0] < statement.start - ERROR_SLACK:
            return statement
        return attrs.evolve(statement, failed=True, error_message=error[1])


# ---- reading files: in this process or in a second one ------------------------------------------------


def read_readings(path: str, reader: EventReader, start_offset: int = 0,
                  max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Iterator[Item]:
    """:func:`harvesters.xevents.read_file`, each event replaced by ``reader``'s :class:`Reading` of it."""
    for item in read_file(path, start_offset, max_event_bytes):
        if isinstance(item.value, XEvent):
            yield Item(reader.read(item.value), item.resume_offset)
        else:
            yield item


def read_readings_background(path: str, reader: EventReader, start_offset: int = 0,
                             max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Generator[Item, None, None]:
    """:func:`read_readings` done by a second process (:mod:`harvesters.background`): parsing the XML and
    reading each event (table lineage included) is half of a harvest's work; the harvest process is left with
    what needs the order of events (containers, errors, task runs) and the emitter. Same items, same order.

    The second process has its own lineage cache (:class:`LineageCache` defaults, as the harvest uses).
    """
    args = [path, reader.namespace, str(reader.max_statement_chars), str(start_offset), str(max_event_bytes)]
    return read_in_background(send_readings, args, _unpack_item,
                              lambda: read_readings(path, reader, start_offset, max_event_bytes), path)


def send_readings(path: str, namespace: str, max_statement_chars: str, start_offset: str,
                  max_event_bytes: str) -> None:
    """The reading process's side of :func:`read_readings_background`."""
    reader = EventReader(namespace, LineageCache(), int(max_statement_chars))
    send_items(read_readings(path, reader, int(start_offset), int(max_event_bytes)), _pack_item, path)


_STATEMENT_FIELDS = tuple(field.name for field in attrs.fields(Statement))
#: Fields repeated across a task's statements: interned, pickle sends each value once per batch.
_REPEATED_FIELDS = tuple(_STATEMENT_FIELDS.index(name) for name in ("task", "host"))
#: Packed results by kind: plain tuples pickle and load several times faster than attrs objects.
_STATEMENT, _SKIP, _MODULE_END, _ERROR = range(4)


def _pack_statement(statement: Statement) -> tuple[Any, ...]:
    values = [getattr(statement, name) for name in _STATEMENT_FIELDS]
    for index in _REPEATED_FIELDS:
        values[index] = sys.intern(values[index])
    return tuple(values)


def _pack_item(item: Item) -> tuple[Any, ...]:
    value = item.value
    if isinstance(value, Unreadable):
        return value.reason, value.offset, item.resume_offset
    result = value.result
    if isinstance(result, Statement):
        packed: tuple[Any, ...] = (_STATEMENT, _pack_statement(result))
    elif isinstance(result, Skip):
        packed = (_SKIP, result.reason, result.unparsed,
                  None if result.statement is None else _pack_statement(result.statement))
    elif isinstance(result, ModuleEnd):
        packed = (_MODULE_END, result.module_key, result.end, result.failed)
    else:
        packed = (_ERROR, result.message)
    return value.timestamp, value.role, value.activity, packed, item.resume_offset


def _unpack_item(packed: tuple[Any, ...]) -> Item:
    if len(packed) == 3:
        reason, offset, resume = packed
        return Item(Unreadable(reason, offset), resume)
    timestamp, role, activity, (kind, *fields), resume = packed
    result: Statement | ModuleEnd | ErrorNote | Skip
    if kind == _STATEMENT:
        result = Statement(*fields[0])
    elif kind == _SKIP:
        reason, unparsed, statement = fields
        result = Skip(reason, unparsed, None if statement is None else Statement(*statement))
    elif kind == _MODULE_END:
        result = ModuleEnd(*fields)
    else:
        result = ErrorNote(*fields)
    return Item(Reading(timestamp, role, activity, result), resume)


# ---- live reading ---------------------------------------------------------------------------------------


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


_FN_XE = "SELECT CAST(event_data AS nvarchar(max)) AS event_data, file_name, file_offset " \
         "FROM sys.fn_xe_file_target_read_file(?, NULL, {position})"
#: The ``sqlite`` backend is the test stand-in: a table named like the function with the same columns
#: (module_guid, package_guid, object_name, event_data, file_name, file_offset), read through the SQLite ODBC
#: driver. ``json('...')`` raises an error when the saved file is gone, like SQL Server does.
_SQLITE_READ = "SELECT event_data, file_name, file_offset FROM fn_xe_file_target_read_file WHERE ? IS NOT NULL"
BACKENDS: Mapping[str, LiveQueries] = {
    "sqlserver": LiveQueries(
        read_all=_FN_XE.format(position="NULL, NULL"), read_all_params=("path",),
        read_from=_FN_XE.format(position="?, ?"), read_from_params=("path", "file", "offset"),
        ring_buffer="SELECT CAST(t.target_data AS nvarchar(max)) FROM sys.dm_xe_session_targets AS t "
                    "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                    "WHERE s.name = ? AND t.target_name = N'ring_buffer'",
        ring_buffer_params=("session",),
    ),
    "sqlite": LiveQueries(
        read_all=f"{_SQLITE_READ} ORDER BY file_name, file_offset, rowid", read_all_params=("path",),
        read_from=f"{_SQLITE_READ} AND (file_name > ? OR (file_name = ? AND file_offset > ?)) "
                  "AND (SELECT CASE WHEN EXISTS (SELECT 1 FROM fn_xe_file_target_read_file WHERE file_name = ?) "
                  "THEN 1 ELSE json('the initial file is gone') END) ORDER BY file_name, file_offset, rowid",
        read_from_params=("path", "file", "file", "offset", "file"),
        ring_buffer="SELECT target_data FROM ring_buffer_target WHERE name = ?", ring_buffer_params=("session",),
    ),
}


class UsageError(Exception):
    """A configuration mistake the user must fix (exit code 2)."""


_PASSWORD_KEY = re.compile(r"(?i)(?:^|;)\s*(?:pwd|password)\s*=")
_APP_KEY = re.compile(r"(?i)(?:^|;)\s*(?:app|application name)\s*=")
#: The harvester's own application name (``APP=``), so the event session can leave its queries out.
HARVESTER_APP = "openlineage-harvest"
_SERVER_KEY = re.compile(r"(?i)(?:^|;)\s*(?:server|address|addr|data source)\s*=\s*([^;]+)")


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
    """(host, port) from ``Server=tcp:host,1433`` / ``host\\instance`` / ``host``, or None."""
    match = _SERVER_KEY.search(conn or "")
    if not match:
        return None
    server = re.sub(r"(?i)^(tcp|np|lpc):", "", match.group(1).strip())
    host, _, port = server.partition(",")
    return host.strip(), port.strip() or None


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


# ---- the harvest loop -----------------------------------------------------------------------------------


@attrs.define
class HarvestCounts:
    """What a harvest read and skipped, for the summary line and the exit code."""

    READ: ClassVar[str] = "events"  # what ``events`` counts, in the summary line
    events: int = 0  # readable events read
    unreadable: Counter[str] = attrs.field(factory=Counter)  # by reason
    skipped: Counter[str] = attrs.field(factory=Counter)  # events without a statement, by reason
    unparsed: Counter[str] = attrs.field(factory=Counter)  # statements whose lineage failed, by reason
    outside_window: int = 0
    source: Counter[str] = attrs.field(factory=Counter)  # reader notes (rollover)


class Harvest:
    """Feeds events through the converter into the task grouper, within a time window."""

    def __init__(self, converter: EventConverter, grouper: TaskGrouper, window: Window,
                 tick: Callable[[Harvest], None] | None = None) -> None:
        self.converter = converter
        self.grouper = grouper
        self.window = window
        self.counts = HarvestCounts()
        self._tick = tick

    def feed(self, value: XEvent | Reading | Unreadable) -> bool:
        """Handle one event (or its reading); False when it lies at or after the window's end (stop there, do
        not consume it)."""
        if isinstance(value, Unreadable):
            self.counts.unreadable[value.reason] += 1
            return True
        if self.window.end is not None and value.timestamp >= self.window.end:
            return False
        self.counts.events += 1
        if self._tick is not None and self.counts.events % 2048 == 0:
            self._tick(self)
        if self.window.start is not None and value.timestamp < self.window.start:
            self.counts.outside_window += 1
            return True
        result = self.converter.convert(value)
        if isinstance(result, Statement):
            self.grouper.add(result)
            self.grouper.advance(value.timestamp)
        elif isinstance(result, ModuleEnd):
            self.grouper.end_module(result.module_key, result.end, result.failed)
        elif result.unparsed:
            self.counts.unparsed[result.reason] += 1
            if result.statement is not None:
                self.grouper.add(result.statement)
        else:
            self.counts.skipped[result.reason] += 1
        return True
