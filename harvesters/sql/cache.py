"""Statement fingerprints and the bounded lineage cache: one parse per statement shape.

A cron harvest sees the same statement thousands of times with other literal values; :func:`statement_shape`
replaces literals by ``?`` so those runs share one :func:`harvesters.sql.engine.table_lineage` call, memoised by
:class:`LineageCache` (least recently used out). Dynamic SQL keeps its literal: that text decides its lineage.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from harvesters.sql.prepared import prepared_call
from harvesters.sql.system import without_system_objects

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

    ``sp_executesql`` calls are shaped by the statement inside their first literal (the rest are parameters), the
    driver's prepared and cursor calls (``sp_prepexec``, ``sp_cursoropen``, ...) by the statement they carry, and
    calls carrying none (``sp_execute 5``, ``sp_unprepare``) by the procedure's name alone.
    Other dynamic SQL is its own shape: the text in its literal decides its lineage.
    """
    inner = _SP_EXECUTESQL.match(sql)
    if inner:
        return "sp_executesql:" + statement_shape(inner.group(1).replace("''", "'"))
    call = prepared_call(sql)
    if call is not None:  # sp_prepexec / sp_cursoropen ...: shaped by the statement they carry, like sp_executesql
        return f"{call.procedure}:{statement_shape(call.sql)}" if call.sql is not None else call.procedure
    if _DYNAMIC_SQL.search(sql):
        return sql
    return _SHAPE_TOKENS.sub(_keep_identifiers, sql)


@attrs.frozen(slots=True)
class Lineage:
    """The part of :func:`harvesters.sql.engine.table_lineage`'s answer the harvester keeps."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    temp_inputs: tuple[str, ...]
    temp_outputs: tuple[str, ...]
    statement_types: tuple[str, ...]
    error: str | None
    #: column lineage of its outputs (:func:`harvesters.sql.columns.column_lineage`), only tables and columns
    #: among ``inputs``/``outputs``: ((output, ((column, ((input, input column, subtype), ...)), ...)), ...)
    columns: tuple[tuple[str, tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...]], ...] = ()


NO_LINEAGE = Lineage((), (), (), (), (), None)


class LineageCache:
    """``table_lineage`` memoised by (statement shape, default database), bounded (least recently used out).

    :meth:`memoised` is the cache itself; the Snowflake harvester's cache keys it differently. The dialect's system
    objects (:mod:`harvesters.sql.system`: catalog views, ``SNOWFLAKE.ACCOUNT_USAGE`` ...) are left out of the
    lineage it keeps unless :attr:`keep_system_objects` is set (once per statement shape, not per statement).
    """

    #: keep the dialect's system objects as datasets (``--keep-system-objects``)
    keep_system_objects: bool = False
    #: names with a part holding a dot quoted (the engine's ``quote_dotted_parts``), for a harvester that splits
    #: them back into parts (SQL Server's linked servers)
    quote_dotted_parts: bool = False

    def __init__(self, dialect: str, default_schema: str | None, max_entries: int = 20_000) -> None:
        from harvesters.sql.engine import table_lineage

        self._table_lineage = table_lineage
        self.dialect = dialect
        self.default_schema = default_schema
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[Any, ...], Lineage] = OrderedDict()
        self.hits = self.misses = 0
        #: the known columns of a table (``*`` in column lineage), e.g. the live SQL Server's INFORMATION_SCHEMA
        self.table_columns: Callable[[str], Sequence[str] | None] | None = None

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
            found = self._table_lineage(sql, self.dialect, quote_dotted_parts=self.quote_dotted_parts,
                                        **engine_options)
            inputs, outputs = tuple(found.inputs), tuple(found.outputs)
            if not self.keep_system_objects:
                inputs = without_system_objects(inputs, self.dialect)
                outputs = without_system_objects(outputs, self.dialect)
            result = Lineage(inputs, outputs, tuple(found.temp_inputs),
                             tuple(found.temp_outputs), tuple(found.statement_types), found.error,
                             self._columns(sql, inputs, outputs, engine_options) if outputs else ())
        except Exception as error:  # noqa: BLE001 - the engine promises not to raise; a bug costs one statement
            result = Lineage((), (), (), (), (), f"lineage engine error: {type(error).__name__}")
        self._cache[key] = result
        if len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return result

    def _columns(self, sql: str, inputs: Iterable[str], outputs: Iterable[str], options: dict[str, Any]
                 ) -> tuple[Any, ...]:
        """Column lineage, cached with the table lineage (once per statement shape); kept only where it agrees
        with the table lineage: its outputs, columns whose every source is one of its inputs."""
        from harvesters.sql.columns import column_lineage

        inner = _SP_EXECUTESQL.match(sql)  # the statement sp_executesql runs is the one that names columns
        call = None if inner else prepared_call(sql)  # so is the one a driver's sp_prepexec/sp_cursoropen carries
        text = inner.group(1).replace("''", "'") if inner else call.sql if call is not None and call.sql else sql
        found = column_lineage(text, self.dialect,
                               options.get("default_database"), options.get("default_schema"),
                               table_columns=self.table_columns, temp_tables=options.get("temp_tables", ()),
                               quote_dotted_parts=self.quote_dotted_parts)
        read, written = set(inputs), set(outputs)
        return tuple((table, kept) for table, columns in found.items() if table in written
                     for kept in [tuple((column, sources) for column, sources in columns.items()
                                        if all(source[0] in read for source in sources))] if kept)


def reason_of(error: str) -> str:
    """A short, countable reason from the engine's message (its first clause, at most 60 characters)."""
    return re.split(r"[:\n]", error, maxsplit=1)[0].strip()[:60] or "unparseable"
