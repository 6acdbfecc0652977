"""SQL Server prepared and cursor calls: which statement a driver's ``sp_prepexec`` / ``sp_execute`` ... runs.

Drivers (JDBC, ODBC, OLE DB, FreeTDS) send parameterised statements as remote procedure calls. SQL Server logs
them (``rpc_completed``'s ``statement``) as the call, with the output handle set to the value the call returned:

.. code-block:: sql

    declare @p1 int
    set @p1=1073741825
    exec sp_prepexec @p1 output,N'@P1 int',N'INSERT INTO dbo.t SELECT * FROM dbo.s WHERE a = @P1',42
    select @p1

:func:`prepared_call` reads such a text: which procedure, the handle it prepared or runs, the statement text
(unescaped). :data:`PROCEDURES` says, per procedure, which argument is what and whether it runs a statement.
``sp_prepexec``, ``sp_cursorprepexec`` and ``sp_cursoropen`` run the text they carry (the engine reads it as it
reads ``sp_executesql``); ``sp_prepare`` / ``sp_cursorprepare`` only prepare it (no lineage of their own);
``sp_execute`` / ``sp_cursorexecute`` run a handle prepared earlier in the same session, which only the harvester,
reading the session in order, can resolve.
"""
from __future__ import annotations

import re

import attrs


@attrs.frozen
class Procedure:
    """Where a prepared/cursor procedure's arguments are (0-based positions), and what it does."""

    handle: int | None  # the prepared handle: an output (prepare) or input (execute) argument
    sql: int | None  # the statement text
    runs: bool  # whether the call runs a statement (prepare-only calls do not)


#: Procedure name -> its arguments (documented signatures of the system procedures).
PROCEDURES: dict[str, Procedure] = {
    "sp_prepexec": Procedure(handle=0, sql=2, runs=True),  # @handle OUTPUT, @params, @stmt, values...
    "sp_prepare": Procedure(handle=0, sql=2, runs=False),  # @handle OUTPUT, @params, @stmt, @options
    "sp_execute": Procedure(handle=0, sql=None, runs=True),  # @handle, values...
    "sp_cursorprepexec": Procedure(handle=0, sql=3, runs=True),  # @handle OUTPUT, @cursor OUTPUT, @params, @stmt
    "sp_cursorprepare": Procedure(handle=0, sql=2, runs=False),  # @handle OUTPUT, @params, @stmt, @options
    "sp_cursorexecute": Procedure(handle=0, sql=None, runs=True),  # @handle, @cursor OUTPUT, ...
    "sp_cursoropen": Procedure(handle=None, sql=1, runs=True),  # @cursor OUTPUT, @stmt, ...
    # no statement of their own: fetch, close and free what the calls above opened
    "sp_unprepare": Procedure(handle=None, sql=None, runs=False),
    "sp_cursorunprepare": Procedure(handle=None, sql=None, runs=False),
    "sp_cursorfetch": Procedure(handle=None, sql=None, runs=False),
    "sp_cursorclose": Procedure(handle=None, sql=None, runs=False),
    "sp_cursoroption": Procedure(handle=None, sql=None, runs=False),
    "sp_cursor": Procedure(handle=None, sql=None, runs=False),
    "sp_reset_connection": Procedure(handle=None, sql=None, runs=False),
}

#: What follows ``sp_`` in the names of :data:`PROCEDURES` (``execute`` only as a whole word: not sp_executesql).
_NAME_STARTS = ("prep", "cursor", "unprepare", "reset_connection")
#: How far into a text the call may start (after the driver's `declare @p1 int set @p1=...` lines).
SEARCH_CHARS = 600
_DECLARE = re.compile(r"(?is)\s*declare\s+@\w+\s+[\w()]+(?:\s*,\s*@\w+\s+[\w()]+)*\s*;?")
_SET = re.compile(r"(?is)\s*set\s+(@\w+)\s*=\s*(-?\d+|NULL)\s*;?")
_EXEC = re.compile(r"(?is)\s*exec(?:ute)?\s+(?:\[?sys\]?\s*\.\s*)?\[?(sp_\w+)\]?(?=[\s;(]|$)")
#: One argument: `@name = value`, `N'...'`, `'...'`, a number, `@var [output]`, NULL.
_ARGUMENT = re.compile(
    r"\s*(?:@\w+\s*=\s*)?(N?'(?:[^']|'')*'|[^,']*?)\s*(?:\b(?:output|out)\b)?\s*(?:,|$|(?=\n\s*select\b))",
    re.IGNORECASE | re.DOTALL,
)


@attrs.frozen
class PreparedCall:
    """One call of a procedure of :data:`PROCEDURES`, as read from a logged text."""

    procedure: str  # lower-case name, e.g. sp_prepexec
    runs: bool  # the call runs a statement (sp_prepexec, sp_execute, sp_cursoropen, ...)
    handle: str | None = None  # prepared handle (its value), when the text shows one
    sql: str | None = None  # the statement text the call carries (unescaped), if it carries one


def prepared_call(text: str) -> PreparedCall | None:
    """The prepared/cursor procedure call ``text`` is (see the module docstring), or None for anything else.

    The handle is the value the log shows for it: the argument of ``sp_execute 5``, or the ``set @p1=5`` line a
    prepare call's output variable gets (``-1``/``NULL`` there mean no handle was returned: None).
    """
    if not _mentions_procedure(text[:SEARCH_CHARS].lower()):
        return None
    at, values = 0, {}
    while True:  # `declare @p1 int` / `set @p1=1073741825` lines before the call
        match = _DECLARE.match(text, at)
        if match:
            at = match.end()
            continue
        match = _SET.match(text, at)
        if match:
            values[match.group(1).lower()] = match.group(2)
            at = match.end()
            continue
        break
    call = _EXEC.match(text, at)
    if call is None:
        return None
    name = call.group(1).lower()
    procedure = PROCEDURES.get(name)
    if procedure is None:
        return None
    wanted = max((i for i in (procedure.handle, procedure.sql) if i is not None), default=-1) + 1
    arguments = _arguments(text, call.end(), wanted)
    handle = sql = None
    if procedure.handle is not None and procedure.handle < len(arguments):
        raw = arguments[procedure.handle]
        raw = values.get(raw.lower(), raw) if raw.startswith("@") else raw
        handle = raw if re.fullmatch(r"\d+", raw) else None
    if procedure.sql is not None and procedure.sql < len(arguments):
        literal = arguments[procedure.sql]
        if literal[:1] in ("'", "N", "n") and literal.endswith("'"):
            sql = literal[literal.index("'") + 1 : -1].replace("''", "'")
    return PreparedCall(name, procedure.runs, handle, sql)


def _mentions_procedure(head: str) -> bool:
    """Whether the (lower-cased) start of a text names one of :data:`PROCEDURES`. Runs for every statement a
    harvest reads: str.find costs ~1 us where a case-insensitive regex search costs 15-30 us on an sp_executesql
    text (most statements name none of them)."""
    at = head.find("sp_")
    while at >= 0:
        name = head[at + 3 : at + 20]
        if name.startswith(_NAME_STARTS) or (name.startswith("execute") and not (name[7:8].isalnum() or
                                                                             name[7:8] == "_")):
            return True
        at = head.find("sp_", at + 3)
    return False


def _arguments(text: str, at: int, wanted: int) -> list[str]:
    """The call's first ``wanted`` arguments from ``at``, as written (string literals whole, `output` dropped);
    stops at the driver's trailing ``select @p1``."""
    arguments: list[str] = []
    end = len(text)
    while at < end and len(arguments) < wanted:
        match = _ARGUMENT.match(text, at)
        if match is None or match.end() == at:
            break
        arguments.append(match.group(1).strip())
        at = match.end()
        if re.match(r"\s*(?:;|\bselect\b|$)", text[at : at + 20], re.IGNORECASE):
            break
    return arguments
