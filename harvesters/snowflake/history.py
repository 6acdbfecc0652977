"""Snowflake query history -> statements: rows, tags, lineage (ACCESS_HISTORY, else the SQL text), the harvest loop.

A history row is one query of ``ACCOUNT_USAGE.QUERY_HISTORY`` (optionally joined with ``ACCESS_HISTORY``),
``INFORMATION_SCHEMA.QUERY_HISTORY()``, or a CSV / JSON-lines export of them (:func:`read_history`). Each
row becomes a :class:`harvesters.core.tasks.Statement` handed to the source-neutral
:class:`harvesters.core.tasks.TaskGrouper`, so every query is one run (id fixed by QUERY_ID) under a task run.

* **Lineage**: where the row carries ACCESS_HISTORY, its objects are the lineage (``DIRECT_OBJECTS_ACCESSED``,
  else ``BASE_OBJECTS_ACCESSED`` -> inputs; ``OBJECTS_MODIFIED`` and ``OBJECT_MODIFIED_BY_DDL`` -> outputs;
  only the domains in :data:`LINEAGE_DOMAINS`); otherwise QUERY_TEXT is parsed with
  :func:`harvesters.sql.engine.table_lineage` (dialect ``snowflake``, the row's DATABASE_NAME and SCHEMA_NAME as
  defaults), memoised by QUERY_PARAMETERIZED_HASH or the statement shape.
* **Task** (:func:`task_of`): a plain QUERY_TAG is the task's name; ``openlineage_parent_id=<ns>/<job>/<runId>``
  in the tag (plain, or the key of a JSON tag) makes that run the task run's parent; a tag with only a
  parent id names the task ``{parent job}.snowflake``; an untagged query belongs to the task
  ``{USER_NAME}.{WAREHOUSE_NAME}`` of its session (grouped by session, so temp tables resolve through).
* **Procedures**: a query with a PARENT_QUERY_ID runs inside that CALL: the grouper's module run
  ``{task}.{procedure}`` stands for the CALL (it carries the CALL's externalQuery and sql facets and
  completes at the CALL's END_TIME, FAIL when the CALL failed), the query's run is its child.
* **Temp tables**: names created by ``CREATE TEMPORARY TABLE`` in a session are passed to the parser for the
  session's later queries (and recognised in ACCESS_HISTORY objects), so the grouper resolves them to the
  tables that filled them.
* **Windows and duplicates** (:class:`SeenQueries`): rows are de-duplicated by QUERY_ID; the ids whose
  END_TIME falls in the overlap of the next window are kept in the state, so overlapping windows (late rows)
  never emit a query twice.
* **Large files**: a second process reads them and prepares each row (:func:`prepare_row`: its task,
  procedure, lineage without temp tables, ACCESS_HISTORY's datasets); the harvest process adds what needs
  its state (the session's temp tables, the window, the CALLs read).
"""
from __future__ import annotations

import csv
import heapq
import io
import itertools
import json
import re
import sys
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import IO, Any, ClassVar, NamedTuple, cast

import attrs
import orjson
from openlineage.client.facet_v2 import error_message_run, external_query_run, sql_job

from emitter.records import unvalidated
from harvesters.core.background import read_in_background, send_items
from harvesters.core.column_facets import Columns, output_facets, restricted
from harvesters.core.outcome import HarvestCounts as _BaseCounts
from harvesters.core.outcome import Skip, Unreadable
from harvesters.core.state import Window
from harvesters.core.tasks import (
    UNKNOWN_TASK,
    Statement,
    TaskGrouper,
    find_parent_ids,
    is_run_marker,
    statement_run_id,
    task_job_name,
)
from harvesters.snowflake.variables import resolve
from harvesters.sql.cache import Lineage, reason_of, statement_shape
from harvesters.sql.cache import LineageCache as BoundedLineageCache
from harvesters.sql.system import without_system_objects

DIALECT = "snowflake"
INTEGRATION = "SNOWFLAKE"
#: ACCESS_HISTORY object domains that are datasets (case-insensitive); stages, streams, functions are not.
LINEAGE_DOMAINS = frozenset({"table", "view", "materialized view", "secure view", "external table",
                             "dynamic table", "iceberg table"})
#: EXECUTION_STATUS of a query that ran to its end; any other finished status is a failure.
SUCCESS_STATUSES = frozenset({"SUCCESS"})
#: Statuses of queries not finished yet (INFORMATION_SCHEMA shows them): skipped, a later harvest takes them.
UNFINISHED_STATUSES = frozenset({"RUNNING", "QUEUED", "BLOCKED", "RESUMING_WAREHOUSE", "QUEUED_REPAIRING_WAREHOUSE"})
#: QUERY_TYPEs that never read or write a table: not parsed, counted as statements without lineage.
NO_LINEAGE_QUERY_TYPES = frozenset({
    "SHOW", "DESCRIBE", "DESCRIBE_QUERY", "USE", "ALTER_SESSION", "COMMIT", "ROLLBACK", "BEGIN_TRANSACTION",
    "SET", "UNSET", "GRANT", "REVOKE", "EXPLAIN", "PUT_FILES", "GET_FILES", "LIST_FILES", "REMOVE_FILES",
    "ALTER_USER", "CREATE_USER", "CREATE_ROLE", "ALTER_WAREHOUSE_SUSPEND", "ALTER_WAREHOUSE_RESUME",
})
#: QUERY_TYPE of a stored procedure call (also recognised from the text, for exports without QUERY_TYPE).
CALL_QUERY_TYPES = frozenset({"CALL", "CALL_PROCEDURE"})
_CALL = re.compile(r'^\s*CALL\s+((?:"(?:[^"]|"")+"|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[\w$]+))*)', re.I)
#: A table named by a string literal (``IDENTIFIER('db.s.t')``): the literal is part of the lineage, so it is
#: kept in the cache key (see :func:`_literal_as_identifier`).
_NAMED_BY_LITERAL = re.compile(r"(?i)\b(identifier|table)(\s*\(\s*)'((?:[^']|'')*)'")
#: Keys of a JSON QUERY_TAG naming the task (first present wins).
JSON_TASK_KEYS = ("openlineage_task", "task", "job", "app")
PARENT_KEY, ROOT_PARENT_KEY = "openlineage_parent_id", "openlineage_root_parent_id"
#: Task of a tag that only names a parent: ``{parent job}.snowflake`` (a child name Marquez keeps as is).
PARENT_ONLY_TASK_SUFFIX = "snowflake"
#: Module name of a procedure child whose CALL row was not read (outside the window).
UNKNOWN_PROCEDURE = "procedure"
#: How exports write NULL: empty (Snowsight, most CSV writers) or ``\N`` (COPY INTO @stage's default NULL_IF).
NULL_TEXTS = frozenset({"", "\\N"})
DEFAULT_MAX_STATEMENT_CHARS = 1_000_000
#: Rows held to put a nearly ordered input (e.g. ordered by END_TIME) in START_TIME order.
DEFAULT_REORDER_ROWS = 10_000
#: Sessions whose temp table names are remembered (least recently used out).
SESSION_MEMORY = 10_000
_NO_VARIABLES: Mapping[str, str] = {}  # (shared, never changed: resolve returns a new mapping for a change)

# ---- rows -----------------------------------------------------------------------------------------------

_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?$", re.I)


def parse_time(value: Any) -> datetime:
    """``2024-06-01 01:00:00.000 +0000`` (Snowflake's export), ISO 8601, or a datetime; naive means UTC.

    Raises ValueError on anything else. Nanoseconds are cut to microseconds.
    """
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    text = str(value).strip()
    if len(text) >= 16 and text[10] in " T":  # fast path (Python 3.11 reads all of these); the regex otherwise
        try:
            instant = datetime.fromisoformat(text.replace(" +", "+").replace(" -", "-"))
            return instant if instant.tzinfo else instant.replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    match = _TIME.match(text)
    if not match:
        raise ValueError(f"not a timestamp: {value!r}")
    day, clock, fraction, zone = match.groups()
    text = f"{day}T{clock}" + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
    if zone and zone.upper() != "Z":
        text += zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    instant = datetime.fromisoformat(text)
    return instant if instant.tzinfo else instant.replace(tzinfo=timezone.utc)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _count(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _objects(value: Any) -> tuple[Any, ...] | None:
    """An ACCESS_HISTORY column: JSON text or already decoded; None when absent (no ACCESS_HISTORY row)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, Mapping):  # OBJECT_MODIFIED_BY_DDL is one object, not an array
        return (value,)
    return tuple(value or ())


@attrs.frozen(slots=True)
class HistoryRow:
    """One query of the history, with the columns the harvester uses."""

    query_id: str
    text: str
    start: datetime
    end: datetime
    database: str | None = None
    schema: str | None = None
    query_type: str = ""
    session: str = ""
    user: str = ""
    role: str = ""
    warehouse: str = ""
    tag: str = ""
    status: str = "SUCCESS"
    error_message: str | None = None
    rows_inserted: int | None = None
    rows_updated: int | None = None
    parameterized_hash: str = ""
    direct: tuple[Any, ...] | None = None  # ACCESS_HISTORY objects; None = no ACCESS_HISTORY row
    base: tuple[Any, ...] | None = None
    modified: tuple[Any, ...] | None = None
    modified_by_ddl: tuple[Any, ...] | None = None
    parent_query_id: str = ""
    root_query_id: str = ""

    @property
    def has_access_history(self) -> bool:
        return self.direct is not None or self.base is not None or self.modified is not None \
            or self.modified_by_ddl is not None


def row_from_mapping(values: Mapping[str, Any]) -> HistoryRow | Unreadable:
    """A :class:`HistoryRow` from a mapping keyed by the views' column names (any case)."""
    # exports and cursors use the views' upper-case names (anything else is upper-cased), NULL as None
    get = {k if type(k) is str and k.isupper() else str(k).upper(): None if type(v) is str and v in NULL_TEXTS else v
           for k, v in values.items()}.get

    query_id = _text(get("QUERY_ID")).strip()
    if not query_id:
        return Unreadable("no QUERY_ID")
    try:
        start = parse_time(get("START_TIME"))
        end = parse_time(get("END_TIME")) if get("END_TIME") not in (None, "") else start
    except ValueError:
        return Unreadable("bad START_TIME/END_TIME")
    try:
        objects = [_objects(get(c)) for c in ("DIRECT_OBJECTS_ACCESSED", "BASE_OBJECTS_ACCESSED",
                                              "OBJECTS_MODIFIED", "OBJECT_MODIFIED_BY_DDL")]
    except (ValueError, TypeError):
        return Unreadable("malformed ACCESS_HISTORY JSON")
    return HistoryRow(
        query_id=query_id, text=_text(get("QUERY_TEXT")), start=start, end=max(start, end),
        database=_text(get("DATABASE_NAME")) or None, schema=_text(get("SCHEMA_NAME")) or None,
        query_type=_text(get("QUERY_TYPE")).upper(), session=_text(get("SESSION_ID")), user=_text(get("USER_NAME")),
        role=_text(get("ROLE_NAME")), warehouse=_text(get("WAREHOUSE_NAME")), tag=_text(get("QUERY_TAG")),
        status=_text(get("EXECUTION_STATUS")).upper() or "SUCCESS", error_message=_text(get("ERROR_MESSAGE")) or None,
        rows_inserted=_count(get("ROWS_INSERTED")), rows_updated=_count(get("ROWS_UPDATED")),
        parameterized_hash=_text(get("QUERY_PARAMETERIZED_HASH")),
        direct=objects[0], base=objects[1], modified=objects[2], modified_by_ddl=objects[3],
        parent_query_id=_text(get("PARENT_QUERY_ID")), root_query_id=_text(get("ROOT_QUERY_ID")),
    )


# csv's default field limit (128 KiB) is below real query texts
csv.field_size_limit(64 * 1024 * 1024)


def read_history(stream: IO[str]) -> Iterator[HistoryRow | Unreadable]:
    """Rows of a history export, streamed: JSON lines (one object per line) or CSV with a header row.

    The format is told by the first non-blank character (``{`` = JSON lines).
    """
    head = ""
    while not head:
        line = stream.readline()
        if not line:
            return
        head = line.lstrip("\ufeff")
        if not head.strip():
            head = ""
    if head.lstrip().startswith("{"):
        yield from _json_lines(head, stream)
    else:
        yield from _csv_rows(head, stream)


def _chain(first: str, stream: IO[str]) -> Iterator[str]:
    yield first
    yield from stream


#: Why a piece of an export is not a row (counted as unreadable; the rest of the file is still read).
BAD_UTF8 = "invalid UTF-8"
UNCLOSED_QUOTE = "unclosed quote (the row's text ran into the next rows)"


def _bad_utf8(line: str) -> bool:
    """The line held bytes that are not UTF-8 (:func:`open_history` decodes them as lone surrogates)."""
    if line.isascii():  # nearly every line: one fast C pass
        return False
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _json_lines(first: str, stream: IO[str]) -> Iterator[HistoryRow | Unreadable]:
    for line in _chain(first, stream):
        if not line.strip():
            continue
        try:
            values = orjson.loads(line)
        except ValueError:  # orjson.JSONDecodeError is one (and orjson refuses the lone surrogates of bad bytes)
            yield Unreadable(BAD_UTF8 if _bad_utf8(line) else "malformed JSON line")
            continue
        yield row_from_mapping(values) if isinstance(values, Mapping) else Unreadable("malformed JSON line")


class _UnclosedQuoteError(Exception):
    """A line read to continue a quoted field is a row of its own: the field's quote was never closed."""


class _Lines:
    """The physical lines of a CSV export, fed to :mod:`csv` one at a time, remembering those of the record being
    read (to start again after a broken one) and watching the lines that continue a quoted field: one that is
    itself a well-formed row means the quote was never closed, and stops the record there (:class:`_UnclosedQuoteError`)
    instead of letting it swallow every row up to the next stray quote or the end of the file."""

    def __init__(self, lines: Iterator[str], is_row: Callable[[str], bool]) -> None:
        self._lines = lines
        self._back: list[str] = []  # lines to read again, last first
        self._is_row = is_row
        self.record: list[str] = []  # the lines of the record being read
        self.bad_bytes = False  # one of them held bytes that are not UTF-8

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._back.pop() if self._back else next(self._lines)
        if self.record and self._is_row(line):
            self._back.append(line)
            raise _UnclosedQuoteError
        self.record.append(line)
        if _bad_utf8(line):
            self.bad_bytes = True
        return line

    def take(self) -> tuple[list[str], bool]:
        """The lines of the record just read (and whether they held bad bytes); the next record starts empty."""
        record, bad, self.record, self.bad_bytes = self.record, self.bad_bytes, [], False
        return record, bad

    def again(self, lines: list[str]) -> None:
        """Read ``lines`` again (the rest of a broken record: the rows its open quote swallowed)."""
        self._back.extend(reversed(lines))


def _csv_rows(first: str, stream: IO[str]) -> Iterator[HistoryRow | Unreadable]:
    """The rows of a CSV export (header in ``first``), every physical record accounted for: a row with the header's
    number of fields, or an :class:`Unreadable` with its reason. A quote left open stops at the next line that is a
    row of its own (that row and the ones after it are read as usual); a record with bytes that are not UTF-8 is
    one unreadable row."""
    names = [name.strip() for name in next(csv.reader([first]), [])]
    width = len(names)
    upper = [name.upper() for name in names]
    id_col = upper.index("QUERY_ID") if "QUERY_ID" in upper else None
    time_col = upper.index("START_TIME") if "START_TIME" in upper else None

    def is_row(line: str) -> bool:
        # cheap first: a row has at least width - 1 commas; then its QUERY_ID and START_TIME must read
        if id_col is None or time_col is None or line.count(",") < width - 1:
            return False
        fields = next(csv.reader([line]), [])
        if len(fields) != width or not fields[id_col].strip():
            return False
        try:
            parse_time(fields[time_col])
        except ValueError:
            return False
        return True

    lines = _Lines(stream, is_row)
    while True:
        reader = csv.reader(lines)  # a new reader after a broken record: the old one's state is lost
        try:
            for fields in reader:
                record, bad_bytes = lines.take()
                if not fields or (len(fields) == 1 and not fields[0].strip() and len(record) == 1):
                    continue  # a blank line
                if bad_bytes:
                    yield Unreadable(BAD_UTF8)
                elif len(fields) == width:
                    yield row_from_mapping(dict(zip(names, fields)))
                elif len(record) > 1:  # a quote left open to the end of the file
                    yield Unreadable(UNCLOSED_QUOTE)
                    lines.again(record[1:])
                    break
                else:
                    yield Unreadable(f"{len(fields)} fields where the header has {width}")
            else:
                return
        except _UnclosedQuoteError:
            lines.take()
            yield Unreadable(UNCLOSED_QUOTE)
        except csv.Error as error:  # a field over csv.field_size_limit: read its lines again as rows
            record, _ = lines.take()
            yield Unreadable(f"malformed CSV record ({error})")
            lines.again(record[1:])


def in_start_order(rows: Iterable[HistoryRow | Unreadable], hold: int = DEFAULT_REORDER_ROWS
                   ) -> Generator[HistoryRow | Unreadable, None, None]:
    """The rows by START_TIME (then QUERY_ID), holding at most ``hold`` rows: sorts an input that is ordered
    or nearly ordered (by END_TIME, or concatenated overlapping exports) in bounded memory."""
    heap: list[tuple[datetime, str, int, HistoryRow]] = []
    for seq, row in enumerate(rows):
        if isinstance(row, Unreadable):
            yield row
            continue
        heapq.heappush(heap, (row.start, row.query_id, seq, row))
        if len(heap) > hold:
            yield heapq.heappop(heap)[3]
    while heap:
        yield heapq.heappop(heap)[3]


def read_history_files(paths: Iterable[str]) -> Generator[HistoryRow | Unreadable, None, None]:
    """The rows of several export files, in START_TIME order (:func:`in_start_order`)."""
    def rows() -> Iterator[HistoryRow | Unreadable]:
        for path in paths:
            with open_history(path) as stream:
                yield from read_history(stream)
    return in_start_order(rows())


def read_history_files_background(paths: list[str], namespace: str,
                                  max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS,
                                  keep_system_objects: bool = False
                                  ) -> Generator[PreparedRow | HistoryRow | Unreadable, None, None]:
    """:func:`read_history_files`, the reading, parsing and ordering done by a second process
    (:mod:`harvesters.core.background`), which also prepares the rows (:func:`prepare_row`, for the account's dataset
    ``namespace`` and ``max_statement_chars``); HistoryRows, not prepared, when no second process can be started."""
    return read_in_background(send_history_rows,
                              [namespace, str(max_statement_chars), "keep" if keep_system_objects else "", *paths],
                              _unpack_row,
                              lambda: read_history_files(paths), ", ".join(paths))


def send_history_rows(namespace: str, max_statement_chars: str, keep_system_objects: str, *paths: str) -> None:
    """The reading process's side of :func:`read_history_files_background`."""
    lineage, max_chars = LineageCache(), int(max_statement_chars)
    lineage.keep_system_objects = bool(keep_system_objects)
    rows = (prepare_row(row, lineage, max_chars, namespace) if isinstance(row, HistoryRow) else row
            for row in read_history_files(paths))
    send_items(rows, _pack_row, ", ".join(paths))


def _pack_row(row: PreparedRow | Unreadable) -> PreparedRow | str:
    # a PreparedRow is a tuple: pickled as is
    return row.reason if isinstance(row, Unreadable) else row


def _unpack_row(packed: PreparedRow | str) -> PreparedRow | Unreadable:
    # ``type() is`` (not isinstance) for speed; mypy does not narrow the else branch of it
    return Unreadable(packed) if type(packed) is str else cast(PreparedRow, packed)


# ---- tags -------------------------------------------------------------------------------------------------


@attrs.frozen
class TaskTag:
    """What a query's tag (and comments) say about its task: the raw task name and the Airflow parent."""

    task: str
    parent_id: str | None = None
    root_parent_id: str | None = None
    #: the task's exact job name (a dbt node: as openlineage-dbt names it), else None (from ``task``)
    job_name: str | None = None
    #: ``{job}/{runId}`` of the dbt invocation that ran the node, in the harvest's job namespace (see
    #: :func:`dbt_node`); only when no Airflow parent is named
    dbt_parent: str | None = None


#: dbt's query comment: ``/* {"app": "dbt", ..., "node_id": "model.proj.orders"} */`` (first or last in the text)
_JSON_COMMENT = re.compile(r"/\*\s*(\{.*?\})\s*\*/", re.DOTALL)
#: Keys a custom dbt ``query-comment`` macro may add to name the node's relation (first present wins).
DBT_DATABASE_KEYS = ("node_database", "database")
DBT_SCHEMA_KEYS = ("node_schema", "schema")


@attrs.frozen
class DbtNode:
    """What dbt's query comment (or a dbt JSON query tag) says about the node that ran a query."""

    node_id: str  # model.proj.orders
    job_name: str  # openlineage-dbt's job name for the node's run
    parent: str | None  # dbt-run-{project}/{invocation_id} when the comment carries a UUID invocation_id


def dbt_job_name(node_id: str, database: str | None, schema: str | None) -> str:
    """The job name openlineage-dbt gives a node's run: ``{database}.{schema}.{node id without "model."}``
    (``.snapshot`` for snapshots; other nodes keep their whole id), the database and schema of the node's
    relation (openlineage-dbt's ``_get_job_name``; ``dbt build`` adds ``.build.run``, which a query does not
    tell). Without a database and schema, the node part alone."""
    if node_id.startswith("model."):
        node, suffix = node_id[len("model."):], ""
    elif node_id.startswith("snapshot."):
        node, suffix = node_id[len("snapshot."):], ".snapshot"
    else:
        node, suffix = node_id, ""
    prefix = f"{database}.{schema}." if database and schema else ""
    return f"{prefix}{node}{suffix}"


def _dbt_fields(text: str) -> Mapping[str, Any] | None:
    """The fields of dbt's JSON query comment in ``text`` (or of a JSON tag), None when there is none."""
    for body in _JSON_COMMENT.findall(text) if "/*" in text else (text.strip(),):
        fields = _dbt_json(body)
        if fields is not None:
            return fields
    return None


@lru_cache(maxsize=8192)  # a dbt run repeats the same comment for every query of a node
def _dbt_json(body: str) -> Mapping[str, Any] | None:
    if not body.startswith("{") or "node_id" not in body:
        return None
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    if not isinstance(fields, Mapping) or fields.get("app") != "dbt" or not isinstance(fields.get("node_id"), str):
        return None
    return fields


def _first(fields: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((str(fields[k]) for k in keys if isinstance(fields.get(k), str) and fields[k]), None)


def dbt_node(text: str, tag: str, database: str | None, schema: str | None) -> DbtNode | None:
    """The dbt node that ran a query, from dbt's JSON query comment in its text, else a dbt JSON query tag.

    The job name is openlineage-dbt's (:func:`dbt_job_name`): the relation's database and schema come from
    the comment when a custom ``query-comment`` adds them (``node_database``/``node_schema``), else from the
    query's DATABASE_NAME/SCHEMA_NAME (the target's, which is the model's unless it has a custom schema). The
    invocation is the parent (job ``dbt-run-{project}``, openlineage-dbt's name for it, run id =
    ``invocation_id``) when the comment carries an ``invocation_id`` that is a UUID; dbt's default comment
    does not."""
    fields = _dbt_fields(text) if "node_id" in text else None
    if fields is None and "node_id" in tag:
        fields = _dbt_fields(tag)
    if fields is None:
        return None
    node_id = str(fields["node_id"])
    job = dbt_job_name(node_id, _first(fields, DBT_DATABASE_KEYS) or database,
                       _first(fields, DBT_SCHEMA_KEYS) or schema)
    parent = None
    invocation = fields.get("invocation_id")
    project = node_id.split(".")[1] if node_id.count(".") >= 2 else ""
    if isinstance(invocation, str) and project and _is_uuid(invocation):
        parent = f"dbt-run-{project}/{invocation.lower()}"
    return DbtNode(node_id, job, parent)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _parent_task(parent_id: str | None) -> str | None:
    """``ns/dag.task/runId`` -> ``dag::task::snowflake`` (job ``dag.task.snowflake``)."""
    if not parent_id:
        return None
    _, _, rest = parent_id.rpartition("/")
    job = parent_id[: -len(rest) - 1].rpartition("/")[2] if rest else ""
    parts = [p for p in job.split(".") if p]
    return "::".join([*parts, PARENT_ONLY_TASK_SUFFIX]) if parts else None


@lru_cache(maxsize=8192)  # few distinct tags, users and warehouses
def _tag_task(tag: str, user: str, warehouse: str) -> TaskTag:
    untagged = "::".join(p for p in (user, warehouse) if p) or UNKNOWN_TASK
    stripped = tag.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, Mapping):
            parent = _text(data.get(PARENT_KEY)).strip() or None
            root = _text(data.get(ROOT_PARENT_KEY)).strip() or None if parent else None
            task = next((_text(data[k]).strip() for k in JSON_TASK_KEYS if _text(data.get(k)).strip()), "")
            return TaskTag(task or _parent_task(parent) or untagged, parent, root)
    if not stripped:
        return TaskTag(untagged)
    parent, root = find_parent_ids(stripped, "")
    if task_job_name(stripped) == UNKNOWN_TASK:  # the tag held only the parent hint
        return TaskTag(_parent_task(parent) or untagged, parent, root)
    return TaskTag(stripped, parent, root)


def task_of(row: HistoryRow) -> TaskTag:
    """The task of a query: the dbt node named by dbt's query comment (:func:`dbt_node`), else its QUERY_TAG,
    else its user and warehouse; the parent from the tag, else from an ``openlineage_parent_id=`` comment in
    the text, else (dbt) the dbt invocation."""
    found = _plain_task_of(row)
    if "node_id" in row.text or "node_id" in row.tag:
        node = dbt_node(row.text, row.tag, row.database, row.schema)
        if node is not None:
            return TaskTag(node.job_name, found.parent_id, found.root_parent_id, node.job_name,
                           None if found.parent_id else node.parent)
    return found


def _plain_task_of(row: HistoryRow) -> TaskTag:
    found = _tag_task(row.tag, row.user, row.warehouse)
    if found.parent_id is None and "openlineage_" in row.text:
        parent, root = find_parent_ids("", row.text)
        if parent:
            task = found.task
            if not row.tag.strip():
                task = _parent_task(parent) or task
            return TaskTag(task, parent, root)
    return found


# ---- lineage ----------------------------------------------------------------------------------------------

_NAME_PART = re.compile(r'"((?:[^"]|"")*)"|([^."]+)')


def object_name(name: str) -> str:
    """ACCESS_HISTORY ``objectName`` -> ``DB.SCHEMA.TABLE``: quoted parts exact without their quotes,
    unquoted parts as Snowflake stored them (upper-case unless created quoted)."""
    if '"' not in name:
        return name
    parts = []
    for match in _NAME_PART.finditer(name):
        quoted, plain = match.groups()
        parts.append(quoted.replace('""', '"') if quoted is not None else plain)
    return ".".join(parts)


def access_columns(modified: Iterable[Any] | None, direct: bool = True) -> Columns:
    """Column lineage from ACCESS_HISTORY's OBJECTS_MODIFIED: each written column's ``directSources`` (else its
    ``baseSources``; the other way round when ``direct`` is false: the row's inputs are its base objects), tables
    and views only; a column with no source (a literal, a sequence) is left out. ACCESS_HISTORY does not say how
    a value was computed: no subtype."""
    first, second = ("directSources", "baseSources") if direct else ("baseSources", "directSources")
    found: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {}
    for item in modified or ():
        if not (isinstance(item, Mapping) and str(item.get("objectDomain", "")).lower() in LINEAGE_DOMAINS
                and item.get("objectName") and isinstance(item.get("columns"), list)):
            continue
        for column in item["columns"]:
            if not isinstance(column, Mapping) or not column.get("columnName"):
                continue
            sources = tuple(dict.fromkeys(
                (object_name(str(source["objectName"])), str(source["columnName"]), "")
                for source in column.get(first) or column.get(second) or ()
                if isinstance(source, Mapping) and source.get("objectName") and source.get("columnName")
                and str(source.get("objectDomain", "")).lower() in LINEAGE_DOMAINS))
            if sources:
                found.setdefault(object_name(str(item["objectName"])), {})[str(column["columnName"])] = sources
    return tuple((table, tuple(fields.items())) for table, fields in found.items())


def _dataset_names(objects: Iterable[Any] | None) -> list[str]:
    names: dict[str, None] = {}
    for item in objects or ():
        if isinstance(item, Mapping) and str(item.get("objectDomain", "")).lower() in LINEAGE_DOMAINS \
                and item.get("objectName"):
            names[object_name(str(item["objectName"]))] = None
    return list(names)


@lru_cache(maxsize=8192)  # a few table names, checked for every query of a session with temp tables
def _last_part(name: str) -> str:
    return name.rsplit(".", 1)[-1].strip('"').casefold()


def _literal_as_identifier(match: re.Match[str]) -> str:
    """``IDENTIFIER('db.s.t')`` -> ``IDENTIFIER(__lit_<hex of db.s.t>``: a name the statement shape keeps."""
    return f"{match.group(1)}{match.group(2)}__lit_{match.group(3).encode('utf-8').hex()}"


def named_temps(sql: str, temps: frozenset[str]) -> frozenset[str]:
    """The temp tables among ``temps`` whose name is in the text (those that may change its lineage)."""
    lowered = sql.casefold()
    return frozenset(t for t in temps if _last_part(t) in lowered)


class LineageCache(BoundedLineageCache):
    """``table_lineage`` in the Snowflake dialect, memoised (least recently used out) by
    (QUERY_PARAMETERIZED_HASH or statement shape, database, schema, the session's temp tables)."""

    def __init__(self, max_entries: int = 20_000) -> None:
        super().__init__(DIALECT, None, max_entries)

    def lineage(self, sql: str, database: str | None, schema: str | None = None,
                temps: frozenset[str] = frozenset(), parameterized_hash: str = "") -> Lineage:
        if "(" in sql and _NAMED_BY_LITERAL.search(sql):
            shape = statement_shape(_NAMED_BY_LITERAL.sub(_literal_as_identifier, sql))
        else:
            shape = "hash:" + parameterized_hash if parameterized_hash else statement_shape(sql)
        if temps:  # only the temp tables the text may name: the others must not split the cache
            temps = named_temps(sql, temps)
        return self.memoised((shape, database, schema, temps), sql, default_database=database,
                             default_schema=schema, temp_tables=temps)


@attrs.frozen
class Call:
    """A stored procedure call read from the history: its children's module run stands for it."""

    query_id: str
    procedure: str
    sql: str
    end: datetime
    failed: bool
    error_message: str | None
    parent_query_id: str = ""  # the CALL that ran this one (nested procedures)


def procedure_name(sql: str) -> str | None:
    """``CALL db.sch."Load_Orders"(1)`` -> ``Load_Orders`` (the procedure's own name), None if not a CALL."""
    match = _CALL.match(sql)
    if not match:
        return None
    last = list(_NAME_PART.finditer(match.group(1).replace(" ", "")))[-1]
    return last.group(1).replace('""', '"') if last.group(1) is not None else last.group(2)


# ---- prepared rows -----------------------------------------------------------------------------------------


class PreparedRow(NamedTuple):
    """A history row as the harvest uses it: the columns it reads, and what the row alone tells (its task,
    procedure, the lineage of its text, ACCESS_HISTORY's datasets), worked out by :func:`prepare_row` where the
    row is read. A tuple: a second process sends it at half the cost of an attrs object."""

    query_id: str
    text: str
    start: datetime
    end: datetime
    database: str | None
    schema: str | None
    query_type: str
    session: str
    user: str
    status: str
    error: str | None  # a failed query's error message (else its status); None when it succeeded
    row_count: int | None
    parameterized_hash: str
    parent_query_id: str
    task: str  # the task and parent of :func:`task_of`
    parent_id: str | None
    root_parent_id: str | None
    procedure: str | None  # of a CALL
    marker: bool  # an explicit run marker (:func:`harvesters.core.tasks.is_run_marker`)
    parsed: Lineage | Skip | None  # the text's lineage (see prepare_row's temps); None: not parsed (CALL, SHOW)
    read: tuple[str, ...] | None  # ACCESS_HISTORY's datasets read; None when the row has no ACCESS_HISTORY
    written: tuple[str, ...]
    run_id: str  # of the query's run (:func:`harvesters.core.tasks.statement_run_id`)
    job_name: str | None = None  # the task's exact job name (a dbt node), see :class:`TaskTag`
    dbt_parent: str | None = None  # ``{job}/{runId}`` of the dbt invocation (:class:`TaskTag`)
    access_columns: Columns = ()  # ACCESS_HISTORY's column lineage (:func:`access_columns`)


def prepare_row(row: HistoryRow, lineage: LineageCache, max_statement_chars: int, namespace: str,
                temps: frozenset[str] = frozenset()) -> PreparedRow:
    """The :class:`PreparedRow` of a history row: the per-row work that needs no harvest state, done by the
    reading process for large files. ``namespace``: the account's dataset namespace (in the run id);
    ``temps``: the session's temp tables, known to the harvest process only (it parses again the rows a
    reading process prepared that name one)."""
    tag = task_of(row)
    query_type = row.query_type
    procedure = procedure_name(row.text) if query_type in CALL_QUERY_TYPES or query_type == "" else None
    parsed = _parse(row, temps, lineage, max_statement_chars) \
        if procedure is None and query_type not in NO_LINEAGE_QUERY_TYPES else None
    read: tuple[str, ...] | None = None
    written: tuple[str, ...] = ()
    if row.has_access_history:
        read = tuple(_dataset_names(row.direct) if row.direct else _dataset_names(row.base))
        written = tuple(dict.fromkeys([*_dataset_names(row.modified), *_dataset_names(row.modified_by_ddl)]))
        if not lineage.keep_system_objects:  # INFORMATION_SCHEMA, SNOWFLAKE.ACCOUNT_USAGE ...: not datasets
            read, written = without_system_objects(read, DIALECT), without_system_objects(written, DIALECT)
    failed = row.status not in SUCCESS_STATUSES
    intern = sys.intern  # values repeated across rows as one object: pickle sends each once per batch
    return PreparedRow(
        row.query_id, row.text, row.start, row.end, row.database and intern(row.database),
        row.schema and intern(row.schema), intern(query_type), intern(row.session), intern(row.user),
        intern(row.status), (row.error_message or f"EXECUTION_STATUS {row.status}") if failed else None,
        _row_count(row), intern(row.parameterized_hash), row.parent_query_id, tag.task, tag.parent_id,
        tag.root_parent_id, procedure, is_run_marker(row.text), parsed, read, written,
        statement_run_id(row.start, namespace, row.query_id), tag.job_name, tag.dbt_parent,
        access_columns(row.modified, bool(row.direct)) if row.modified else ())


def _parse(row: HistoryRow | PreparedRow, temps: frozenset[str], lineage: LineageCache, max_statement_chars: int,
           text: str | None = None) -> Lineage | Skip:
    """The lineage of the row's text (or of ``text``: the row's with its session's variables resolved, which the
    row's QUERY_PARAMETERIZED_HASH does not describe)."""
    if len(text or row.text) > max_statement_chars:
        return Skip(f"statement longer than {max_statement_chars} characters", unparsed=True)
    found = lineage.lineage(text or row.text, row.database, row.schema, temps,
                            "" if text else row.parameterized_hash)
    if found.error:
        return Skip(reason_of(found.error), unparsed=True)
    return found


def _row_count(row: HistoryRow) -> int | None:
    if row.rows_inserted is None and row.rows_updated is None:
        return None
    return (row.rows_inserted or 0) + (row.rows_updated or 0)


class RowConverter:
    """Turns history rows into :class:`Statement` / :class:`Skip`, remembering CALLs (:attr:`calls`) for their
    children."""

    def __init__(self, namespace: str, lineage: LineageCache,
                 max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS) -> None:
        self.namespace = namespace
        self.lineage = lineage
        self.max_statement_chars = max_statement_chars
        self._temps: OrderedDict[str, frozenset[str]] = OrderedDict()  # session -> temp tables it created
        #: session -> its variables holding strings (in memory only: a value may be a secret; see variables.py)
        self._variables: OrderedDict[str, Mapping[str, str]] = OrderedDict()
        self.calls: dict[str, Call] = {}  # CALLs read, by QUERY_ID, until their end is passed
        #: the harvest's job namespace, for a dbt invocation parent (set by :class:`Harvest` from its grouper)
        self.job_namespace = "default"

    def convert(self, row: HistoryRow | PreparedRow) -> Statement | Skip:
        """The statement of a row (read here, or prepared by a reading process), or why it is skipped."""
        if row.status in UNFINISHED_STATUSES:
            return Skip("query not finished")
        temps = self._temps.get(row.session, frozenset())
        if temps:
            self._temps.move_to_end(row.session)
        if type(row) is PreparedRow:  # by a reading process, which parsed the text without the temp tables
            parsed = row.parsed
            if parsed is not None and temps and named_temps(row.text, temps):
                parsed = _parse(row, temps, self.lineage, self.max_statement_chars)
        else:
            row = prepare_row(cast(HistoryRow, row), self.lineage, self.max_statement_chars, self.namespace, temps)
            parsed = row.parsed
        failed = row.error is not None
        # tables named by the session's variables (IDENTIFIER($v)): parsed again as what ran
        variables = self._variables.get(row.session, _NO_VARIABLES)
        resolved, after = resolve(row.text, variables)
        if parsed is not None and resolved != row.text:
            parsed = _parse(row, temps, self.lineage, self.max_statement_chars, resolved)
        if after is not variables and not failed:
            self._remember(self._variables, row.session, after)
        if row.procedure is not None:
            # a CALL: its children carry the lineage; it becomes their module run
            self.calls[row.query_id] = Call(row.query_id, row.procedure, row.text, row.end, failed, row.error,
                                            row.parent_query_id)
        inputs: tuple[str, ...] = ()
        outputs: tuple[str, ...] = ()
        temp_inputs: tuple[str, ...] = ()
        temp_outputs: tuple[str, ...] = ()
        types: tuple[str, ...] = (row.query_type,) if row.query_type else ()
        if parsed is not None:
            if isinstance(parsed, Skip) and row.read is None:
                return parsed
            if not isinstance(parsed, Skip):
                temp_inputs, temp_outputs = parsed.temp_inputs, parsed.temp_outputs
                types = types or parsed.statement_types
            if row.read is not None:
                inputs, outputs, temp_inputs, temp_outputs = self._access_lineage(
                    row, temps | {t.casefold() for t in temp_outputs}, temp_inputs, temp_outputs)
            elif not isinstance(parsed, Skip):
                inputs, outputs = parsed.inputs, parsed.outputs
        # column lineage: ACCESS_HISTORY's where it has some, else the text's; kept to the final datasets
        columns: Columns = ()
        if outputs and (row.access_columns or type(parsed) is Lineage):
            found = row.access_columns or parsed.columns  # type: ignore[union-attr]
            # the text's own lineage is already kept to its tables (LineageCache): no second look
            columns = found if row.read is None and found is not row.access_columns else \
                restricted(found, inputs, outputs)
        if temp_outputs:
            self._remember(self._temps, row.session, temps | {t.casefold() for t in temp_outputs})
        module_key = row.parent_query_id or None
        module, outer, module_facets = self._modules(module_key) if module_key else (None, (), {})
        return Statement(
            query_id=row.query_id, start=row.start, end=row.end, task=row.task, host=row.user,
            session=row.session, sql=row.text, namespace=self.namespace, dialect=DIALECT, inputs=inputs,
            outputs=outputs, temp_inputs=temp_inputs, temp_outputs=temp_outputs, statement_types=types,
            failed=failed, error_message=row.error,
            parent_id=row.parent_id or (f"{self.job_namespace}/{row.dbt_parent}" if row.dbt_parent else None),
            root_parent_id=row.root_parent_id, job_name=row.job_name,
            output_facets=output_facets(self.namespace, columns) if columns else {},
            marker=row.marker, module=module, module_key=module_key, outer_modules=outer,
            module_facets=module_facets, row_count=row.row_count, run_facets=query_facets(row.query_id, self.namespace),
            run_id=row.run_id,
        )

    def _modules(self, call_id: str) -> tuple[str, tuple[tuple[str, str], ...], dict[str, Any]]:
        """The procedure of the CALL ``call_id``, the CALLs that called it (outermost first), and the facets of
        each one's run: its QUERY_ID (externalQuery) and its text (sql)."""
        chain: list[tuple[str, str]] = []
        facets: dict[str, Any] = {}
        seen: set[str] = set()
        while call_id and call_id not in seen:  # a loop in PARENT_QUERY_ID would be a bad export: stop
            seen.add(call_id)
            call = self.calls.get(call_id)
            chain.append((call.procedure if call else UNKNOWN_PROCEDURE, call_id))
            facets[call_id] = (query_facets(call_id, self.namespace), _sql_facets(call.sql) if call else {})
            call_id = call.parent_query_id if call else ""
        chain.reverse()
        return chain[-1][0], tuple(chain[:-1]), facets

    @staticmethod
    def _access_lineage(row: PreparedRow, temps: frozenset[str], parsed_temp_inputs: tuple[str, ...],
                        parsed_temp_outputs: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        """ACCESS_HISTORY's objects, the session's temp tables set apart (ACCESS_HISTORY lists them as tables)."""
        read, written = row.read or (), row.written
        temp_names = {_last_part(t) for t in temps}
        temp_in = [n for n in read if _last_part(n) in temp_names]
        temp_out = [n for n in written if _last_part(n) in temp_names]
        inputs = tuple(n for n in read if n not in temp_in)
        outputs = tuple(n for n in written if n not in temp_out)
        temp_inputs = tuple(dict.fromkeys([*parsed_temp_inputs, *(n.rsplit(".", 1)[-1] for n in temp_in)]))
        temp_outputs = tuple(dict.fromkeys([*parsed_temp_outputs, *(n.rsplit(".", 1)[-1] for n in temp_out)]))
        return inputs, outputs, temp_inputs, temp_outputs

    @staticmethod
    def _remember(memory: OrderedDict[str, Any], session: str, value: Any) -> None:
        """``memory[session] = value``, the least recently used session forgotten past :data:`SESSION_MEMORY`."""
        memory[session] = value
        memory.move_to_end(session)
        if len(memory) > SESSION_MEMORY:
            memory.popitem(last=False)


# ---- facets the grouper does not add --------------------------------------------------------------------


def _sql_facets(sql: str) -> dict[str, Any]:
    """The ``sql`` job facet of a CALL's run."""
    with unvalidated():
        return {"sql": sql_job.SQLJobFacet(query=sql, dialect=DIALECT)}


def query_facets(query_id: str, namespace: str) -> dict[str, Any]:
    """The ``externalQuery`` run facet: the query's id in Snowflake, and the account's namespace."""
    with unvalidated():  # the validators only urlparse the constant schema URL and producer
        return {"externalQuery": external_query_run.ExternalQueryRunFacet(externalQueryId=query_id,
                                                                          source=namespace)}


# ---- de-duplication ------------------------------------------------------------------------------------


class SeenQueries:
    """QUERY_IDs already harvested, by END_TIME: the saved ones (the previous window's overlap) and this
    harvest's, pruned as the input's START_TIME clock passes (a duplicate of a row comes at its START_TIME,
    so an id whose END_TIME lies more than ``slack`` behind the clock can no longer repeat)."""

    def __init__(self, saved: Mapping[str, str] | None = None, slack: timedelta = timedelta(hours=1)) -> None:
        self._ends: dict[str, datetime] = {qid: parse_time(end) for qid, end in (saved or {}).items()}
        self.slack = slack
        self._clock: datetime | None = None
        self._added = 0

    def add(self, query_id: str, start: datetime, end: datetime) -> bool:
        """Record the query; False when it was seen before (a duplicate)."""
        if query_id in self._ends:
            return False
        self._ends[query_id] = end
        self._clock = start if self._clock is None or start > self._clock else self._clock
        self._added += 1
        if self._added % 4096 == 0:
            floor = self._clock - self.slack
            self._ends = {q: e for q, e in self._ends.items() if e >= floor}
        return True

    def __len__(self) -> int:
        return len(self._ends)

    def state(self, since: datetime) -> dict[str, str]:
        """The ids ending at or after ``since`` (the next window's start), JSON-ready."""
        return {q: e.isoformat() for q, e in sorted(self._ends.items()) if e >= since}


# ---- the harvest loop ----------------------------------------------------------------------------------


#: How far after the harvest's own clock a row may end (clocks drift a little): later ones are from the future.
FUTURE_TOLERANCE = timedelta(minutes=5)
FROM_THE_FUTURE = "END_TIME in the future"


class HarvestCounts(_BaseCounts):
    """What a Snowflake harvest read and skipped; ``events`` counts history rows, rows outside the window are
    counted in ``source`` with their side."""

    READ: ClassVar[str] = "history rows"


class Harvest:
    """Feeds history rows through the converter into the task grouper, within a window on END_TIME."""

    def __init__(self, converter: RowConverter, grouper: TaskGrouper, window: Window, seen: SeenQueries,
                 tick: Callable[[Harvest], None] | None = None, now: datetime | None = None) -> None:
        self.converter = converter
        self.grouper = grouper
        #: rows ending after this are from the future: counted, never harvested (they would move the window,
        #: saved as the latest END_TIME, past every row still to come)
        self.not_after = (now or datetime.now(timezone.utc)) + FUTURE_TOLERANCE
        converter.job_namespace = grouper.job_namespace  # a dbt invocation's run is a job of this namespace
        self.window = window
        self.seen = seen
        self.counts = HarvestCounts()
        self.last_end: datetime | None = None  # latest END_TIME harvested
        self._tick = tick
        self._call_ends: list[tuple[datetime, str]] = []

    def feed(self, row: HistoryRow | PreparedRow | Unreadable) -> None:
        """Handle one row (rows must come in START_TIME order, see :func:`in_start_order`)."""
        if isinstance(row, Unreadable):
            self.counts.unreadable[row.reason] += 1
            return
        if row.end > self.not_after:
            self.counts.unreadable[FROM_THE_FUTURE] += 1
            return
        self.counts.events += 1
        if self._tick is not None and self.counts.events % 2048 == 0:
            self._tick(self)
        if self.window.start is not None and row.end < self.window.start:
            self.counts.source["rows ending before the window"] += 1
            return
        if self.window.end is not None and row.end >= self.window.end:
            self.counts.source["rows after the window (next harvest)"] += 1
            return
        if row.status in UNFINISHED_STATUSES:
            self.counts.skipped["query not finished"] += 1
            return
        if not self.seen.add(row.query_id, row.start, row.end):
            self.counts.source["duplicate rows"] += 1
            return
        self._end_calls(row.start)
        self.last_end = row.end if self.last_end is None or row.end > self.last_end else self.last_end
        result = self.converter.convert(row)
        if isinstance(result, Skip):
            (self.counts.unparsed if result.unparsed else self.counts.skipped)[result.reason] += 1
            return
        call = self.converter.calls.get(row.query_id)
        if call is not None:
            heapq.heappush(self._call_ends, (call.end, call.query_id))
        self.grouper.add(result)
        self.grouper.advance(row.start)

    def finish(self) -> None:
        """End of the input: complete the module runs of every CALL read (their children all started)."""
        self._end_calls(None)

    def _end_calls(self, before: datetime | None) -> None:
        while self._call_ends and (before is None or self._call_ends[0][0] < before):
            end, query_id = heapq.heappop(self._call_ends)
            call = self.converter.calls.pop(query_id)
            error = None
            if call.failed:
                with unvalidated():
                    error = {"errorMessage": error_message_run.ErrorMessageRunFacet(
                        message=call.error_message or "procedure failed", programmingLanguage="SQL")}
            self.grouper.end_module(query_id, end, call.failed, error)


def not_history_export(path: str) -> str | None:
    """Why ``path`` cannot be a history export, judged from its first non-blank line (None when it may be, or is
    empty): a CSV export's header names QUERY_ID; JSON lines start with ``{``."""
    with open_history(path) as stream:
        for line in itertools.islice(stream, 1000):
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                return None
            names = {name.strip().upper() for name in next(csv.reader([line]), [])}
            return None if "QUERY_ID" in names else \
                "not a QUERY_HISTORY export (JSON lines, or CSV whose header line names QUERY_ID)"
    return None


def open_history(path: str) -> IO[str]:
    """A history file (``-`` = stdin) as text; UTF-8 with or without a byte order mark. A byte that is not UTF-8
    is read as a lone surrogate (``surrogateescape``), so it costs its row (:data:`BAD_UTF8`), not the file."""
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="surrogateescape", newline="")
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
