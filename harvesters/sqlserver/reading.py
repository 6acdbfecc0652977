"""SQL Server Extended Events -> statements: event conversion, cached table lineage, live reading through pyodbc.

Which events count (see :data:`EVENT_KINDS`): ``sql_statement_completed`` and ``sp_statement_completed`` are
statements; ``sql_batch_completed`` and ``rpc_completed`` are containers, read as a statement only when no
statement event of the same activity (``attach_activity_id``, needs ``TRACK_CAUSALITY = ON``) was seen, so a
session capturing both levels does not count a statement twice (``rpc_completed`` of ``sp_executesql`` is then
the statement inside, unwrapped by the lineage engine); ``module_end`` completes the module run of the
procedure whose ``sp_statement_completed`` events it covers; ``error_reported`` (severity 11 and up) fails the
next statement or container of the same activity that was running when the error was raised (a statement event
has no outcome of its own). Any other event is counted and skipped.

Table lineage comes from :func:`harvesters.sql.engine.table_lineage` (T-SQL, the event's ``database_name`` action
or field as the default database, else the session's last ``USE``, else ``--default-database``, else the tables
named without a database are counted; ``dbo`` as the default schema; system objects left out), cached by the
statement's *shape* (literals replaced by ``?``) so a statement repeated with other values is parsed once; the SQL
facet keeps the original text (the emitter redacts it).

Drivers' prepared calls are resolved per session: ``sp_prepexec``/``sp_cursoropen`` carry their statement (the
engine unwraps it), ``sp_prepare``/``sp_cursorprepare`` remember it under the handle the event shows, and
``sp_execute <handle>`` gets that statement's lineage; a handle never seen prepared is counted as unparsed.

Conversion has two halves: :class:`EventReader` reads one event on its own (a :class:`Reading`: lineage, times,
status, parent ids) and :class:`EventConverter` applies what earlier events left (covered containers, pending
errors). Large files do the first half in a second process (:func:`read_readings_background`).
"""
from __future__ import annotations

import re
import sys
from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

import attrs

from emitter.naming.sqlserver import split_sqlserver_name
from harvesters.core.background import read_in_background, send_items
from harvesters.core.column_facets import output_facets
from harvesters.core.outcome import HarvestCounts, Skip
from harvesters.core.state import Window
from harvesters.core.tasks import Statement, TaskGrouper, find_parent_ids, is_run_marker, parse_parent_ids
from harvesters.sql.cache import NO_LINEAGE, reason_of
from harvesters.sql.cache import LineageCache as BoundedLineageCache
from harvesters.sql.prepared import prepared_call
from harvesters.sqlserver.xevents import (
    DEFAULT_MAX_EVENT_BYTES,
    Item,
    Unreadable,
    XEvent,
    read_file,
)

STATEMENT, CONTAINER, MODULE_END, ERROR = "statement", "container", "module_end", "error"
#: What a prepared call does with its handle (:attr:`Reading.prepared`).
PREPARES, EXECUTES = "prepares", "executes"
#: Summary note: distinct tables named without a database while no database was known (exit code 1).
NO_DATABASE = "tables without a database (add the database_name action or give --default-database)"
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
#: ``USE db`` in a statement: the database its session continues in (the last one of the text wins).
_USE = re.compile(r"(?i)(?:^|[\s;])use\s+(\[[^\]]+\]|\"[^\"]+\"|[\w@$#]+)")


def _last_use(sql: str) -> str | None:
    """The database of the last ``USE`` in ``sql`` (brackets/quotes removed), or None."""
    found = _USE.findall(sql)
    return found[-1].strip('[]"') if found else None


@attrs.frozen
class ModuleEnd:
    """A procedure execution ended (``module_end``)."""

    module_key: str
    end: datetime
    failed: bool = False


class LineageCache(BoundedLineageCache):
    """The engine's lineage in T-SQL (default schema ``dbo``), memoised by (statement shape, database); a name part
    holding a dot comes bracketed (``[10.0.0.5].db.dbo.t``) for :mod:`harvesters.sqlserver.linked_servers`, which
    names every dataset without brackets."""

    quote_dotted_parts = True

    def __init__(self, dialect: str = DIALECT, default_schema: str | None = DEFAULT_SCHEMA,
                 max_entries: int = 20_000) -> None:
        super().__init__(dialect, default_schema, max_entries)


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


@attrs.define(slots=True)  # one per event: not frozen (see harvesters.core.tasks.Statement); never changed
class Reading:
    """One event read on its own (:class:`EventReader`): what it says, before what the harvest remembers of
    earlier events (containers already covered, errors waiting for their statement) is applied to it."""

    timestamp: datetime
    role: str | None  # the event kind's role (STATEMENT, CONTAINER, MODULE_END, ERROR); None: not used
    activity: str
    #: a statement (its ``failed`` from the event alone), a module end, an error, or why there is nothing
    result: Statement | ModuleEnd | ErrorNote | Skip
    #: a driver's prepared call (harvesters/sql/prepared.py): (PREPARES or EXECUTES, handle, prepared SQL, database)
    prepared: tuple[str, str, str | None, str | None] | None = None
    #: the database the statement's names were qualified with (action or field), None when the event names none
    database: str | None = None


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
            if not sql.strip():
                return Reading(event.timestamp, kind.role, activity, Skip("no SQL text"))
            database = event.actions.get("database_name") or event.data.get("database_name") or None
            call = prepared_call(sql)
            if call is not None and call.handle is not None and (call.sql is not None or call.runs):
                # sp_prepare/sp_prepexec ... remember the handle; sp_execute <handle>: resolved by the converter
                handle = f"cursor:{call.handle}" if call.procedure.startswith("sp_cursor") else call.handle
                prepared = (EXECUTES if call.sql is None else PREPARES, handle, call.sql, database)
                return Reading(event.timestamp, kind.role, activity,
                               self._statement(event, kind, sql, activity, database), prepared, database)
            result = self._statement(event, kind, sql, activity, database)
            if call is not None and call.runs and call.sql is None and isinstance(result, Statement):
                # sp_execute @handle: a handle the event does not show cannot be resolved
                result = Skip("prepared call whose statement or handle the event does not show", unparsed=True,
                              statement=result)
            return Reading(event.timestamp, kind.role, activity, result, None, database)
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

    def _statement(self, event: XEvent, kind: EventKind, sql: str, activity: str,
                   database: str | None) -> Statement | Skip:
        actions, data = event.actions, event.data
        unparsed = None
        if len(sql) > self.max_statement_chars:
            found, unparsed = NO_LINEAGE, f"statement longer than {self.max_statement_chars} characters"
        else:
            found = self.lineage.lineage(sql, database)
            parse_error = found.error
            if parse_error:
                found, unparsed = NO_LINEAGE, reason_of(parse_error)
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
            # columnLineage of its outputs: one facet instance per statement shape (shared, built once)
            output_facets=output_facets(self.namespace, found.columns) if found.columns else {},
        )
        return statement if unparsed is None else Skip(unparsed, unparsed=True, statement=statement)


class EventConverter:
    """Turns XEvents (or their :class:`Reading`) into :class:`Statement` / :class:`ModuleEnd` / :class:`Skip`,
    remembering what later events need: the activities whose statements were read (their containers add
    nothing) and the errors raised but not yet given to a statement."""

    def __init__(self, namespace: str, lineage: LineageCache,
                 max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS, default_database: str | None = None) -> None:
        self.reader = EventReader(namespace, lineage, max_statement_chars)
        #: the database of statements whose event names none and whose session said none through USE
        self.default_database = default_database or None
        # (session, handle) -> (prepared SQL, database): sp_prepare/sp_prepexec seen, for sp_execute <handle>
        self._handles: OrderedDict[tuple[str, str], tuple[str, str | None]] = OrderedDict()
        # session -> the database its last USE switched to (events without the database_name action)
        self._session_database: OrderedDict[str, str] = OrderedDict()
        # tables named without a database while none was known (a summary note, exit code 1)
        self._without_database: OrderedDict[str, None] = OrderedDict()
        #: where notes for a person go (the harvest's ``counts.attention``; set by :class:`Harvest`)
        self.attention: Counter[str] = Counter()
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
        if reading.prepared is not None and reading.prepared[0] == PREPARES and isinstance(result, Statement):
            self._remember_handle(result.session, reading.prepared)
        if role == CONTAINER and activity in self._covered:
            del self._covered[activity]
            self._errors.pop(activity, None)  # the request is over
            return Skip("container of statements already read")
        if role == STATEMENT and activity:
            self._covered[activity] = None
            if len(self._covered) > ACTIVITY_MEMORY:
                self._covered.popitem(last=False)
        if isinstance(result, Statement):
            if reading.prepared is not None and reading.prepared[0] == EXECUTES:
                resolved = self._execute_handle(result, reading.prepared[1])
                if isinstance(resolved, Skip):
                    return attrs.evolve(resolved, statement=self._with_error(result, activity))
                result = resolved
            result = self._with_parent(self._with_database(result, reading.database))
            return self._with_error(result, activity)
        if isinstance(result, Skip) and result.statement is not None:
            statement = self._with_parent(self._with_database(result.statement, reading.database))
            return attrs.evolve(result, statement=self._with_error(statement, activity))
        return result

    def _with_parent(self, statement: Statement) -> Statement:
        """A statement naming a malformed or truncated Airflow parent id (a cut application name): counted, and
        read as naming none (an event with a cut run id fails the OpenLineage schema)."""
        if statement.parent_id is None:
            return statement
        problem = parse_parent_ids(statement.parent_id, statement.root_parent_id, "")[2]
        if problem is None:
            return statement
        self.attention[problem] += 1
        if statement.root_parent_id is not None and problem.startswith("malformed openlineage_root"):
            return attrs.evolve(statement, root_parent_id=None)
        return attrs.evolve(statement, parent_id=None, root_parent_id=None)

    # ---- prepared handles and databases: what a session said earlier -----------------------------------

    def _remember_handle(self, session: str, prepared: tuple[str, str, str | None, str | None]) -> None:
        _, handle, sql, database = prepared
        if sql is None:
            return
        key = (session, handle)
        self._handles[key] = (sql, database)
        self._handles.move_to_end(key)
        if len(self._handles) > ACTIVITY_MEMORY:
            self._handles.popitem(last=False)

    def _execute_handle(self, statement: Statement, handle: str) -> Statement | Skip:
        """``sp_execute <handle>``: the statement its session prepared under that handle, with that statement's
        lineage and text; a handle prepared before the log (or in another harvest) is counted, not guessed."""
        prepared = self._handles.get((statement.session, handle))
        if prepared is None:
            return Skip("prepared statement handle not seen in this session (sp_execute without its sp_prepare)",
                        unparsed=True)
        sql, database = prepared
        found = self.reader.lineage.lineage(sql, database)
        if found.error:
            return Skip(reason_of(found.error), unparsed=True)
        parent_id, root_parent_id = (statement.parent_id, statement.root_parent_id) if statement.parent_id \
            else find_parent_ids(statement.task, sql)
        return attrs.evolve(statement, sql=sql, inputs=found.inputs, outputs=found.outputs,
                            temp_inputs=found.temp_inputs, temp_outputs=found.temp_outputs,
                            statement_types=found.statement_types, parent_id=parent_id, root_parent_id=root_parent_id)

    def _with_database(self, statement: Statement, database: str | None) -> Statement:
        """A statement whose event named no database: qualified with its session's last ``USE`` database, else
        ``--default-database``; else its tables without a database are noted (exit code 1), not silently
        emitted as if two-part names were complete."""
        if "USE" in statement.statement_types:
            used = _last_use(statement.sql)
            if used:
                self._session_database[statement.session] = used
                self._session_database.move_to_end(statement.session)
                if len(self._session_database) > ACTIVITY_MEMORY:
                    self._session_database.popitem(last=False)
        if database is not None or not (statement.inputs or statement.outputs):
            return statement
        known = self._session_database.get(statement.session) or self.default_database
        if known is not None:
            found = self.reader.lineage.lineage(statement.sql, known)
            if not found.error:
                return attrs.evolve(statement, inputs=found.inputs, outputs=found.outputs)
        missing = [name for name in (*statement.inputs, *statement.outputs)
                   if len(split_sqlserver_name(name)) < 3]
        for name in missing:
            if name not in self._without_database and len(self._without_database) < ACTIVITY_MEMORY:
                self._without_database[name] = None
        if missing:
            self.attention[NO_DATABASE] = len(self._without_database)
        return statement

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
    """:func:`harvesters.sqlserver.xevents.read_file`, each event replaced by ``reader``'s :class:`Reading` of it."""
    for item in read_file(path, start_offset, max_event_bytes):
        if isinstance(item.value, XEvent):
            yield Item(reader.read(item.value), item.resume_offset)
        else:
            yield item


def read_readings_background(path: str, reader: EventReader, start_offset: int = 0,
                             max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Generator[Item, None, None]:
    """:func:`read_readings` done by a second process (:mod:`harvesters.core.background`): parsing the XML and
    reading each event (table lineage included) is half of a harvest's work; the harvest process is left with
    what needs the order of events (containers, errors, task runs) and the emitter. Same items, same order.

    The second process has its own lineage cache (:class:`LineageCache` defaults, as the harvest uses).
    """
    args = [path, reader.namespace, str(reader.max_statement_chars), str(start_offset), str(max_event_bytes),
            "keep" if reader.lineage.keep_system_objects else ""]
    return read_in_background(send_readings, args, _unpack_item,
                              lambda: read_readings(path, reader, start_offset, max_event_bytes), path)


def send_readings(path: str, namespace: str, max_statement_chars: str, start_offset: str,
                  max_event_bytes: str, keep_system_objects: str = "") -> None:
    """The reading process's side of :func:`read_readings_background`."""
    lineage = LineageCache()
    lineage.keep_system_objects = bool(keep_system_objects)
    reader = EventReader(namespace, lineage, int(max_statement_chars))
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
    value = cast("Reading | Unreadable", item.value)  # the items a reading process made
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
    return value.timestamp, value.role, value.activity, packed, item.resume_offset, value.prepared, value.database


def _unpack_item(packed: tuple[Any, ...]) -> Item:
    if len(packed) == 3:
        reason, offset, resume = packed
        return Item(Unreadable(reason, offset), resume)
    timestamp, role, activity, (kind, *fields), resume, prepared, database = packed
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
    return Item(Reading(timestamp, role, activity, result, prepared, database), resume)


# ---- the harvest loop -----------------------------------------------------------------------------------


class Harvest:
    """Feeds events through the converter into the task grouper, within a time window."""

    def __init__(self, converter: EventConverter, grouper: TaskGrouper, window: Window,
                 tick: Callable[[Harvest], None] | None = None) -> None:
        self.converter = converter
        self.grouper = grouper
        self.window = window
        self.counts = HarvestCounts()
        converter.attention = self.counts.attention  # notes for a person (tables without a database)
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
