"""T-SQL text fixes: dynamic SQL held in a variable (``DECLARE @sql NVARCHAR(MAX) = N'INSERT ...'; EXEC (@sql)``),
and the ``WITH CHANGE_TRACKING_CONTEXT (...)`` prefix of a write. :func:`tsql_text` is the T-SQL dialects' ``text_fix``.

The engine reads ``EXEC ('<batch>')`` and ``EXEC sp_executesql N'<batch>'`` as the batch in the string. Written
through a variable, the batch was lost (no lineage). :func:`inline_string_variables` writes the string a variable
holds in place of the variable in ``EXEC (@v)`` and ``EXEC sp_executesql @v``, when the batch itself assigned the
variable one string literal (``DECLARE @v <type> = N'...'``, ``SET @v = N'...'``). A value built by concatenation or
from a query is unknown, and the ``EXEC`` is left as written (no lineage, as before). Variables live for one batch,
as in T-SQL: the text_fix runs per batch.

A harvest does not count a statement twice: an Extended Events session that also captures the statements run by
the dynamic SQL reads the batch as a container only (harvesters/sqlserver/reading.py), and the ``EXEC (@sql)``
statement event carries no assignment.
"""
from __future__ import annotations

import re

from harvesters.sql.string_variables import inline_assigned_strings

_LITERAL = r"N?'(?:[^']|'')*'"
_VARIABLE = r"@[\w@#$]+"
_EVENTS = re.compile(
    # an assignment: DECLARE (or a further variable of a DECLARE list) with a type, or SET
    rf"(?P<assign>(?:\bDECLARE\s+|,\s*|\bSET\s+)(?P<name>{_VARIABLE})"
    rf"(?:\s+(?:AS\s+)?\w+(?:\s*\(\s*(?:\d+|MAX)\s*\))?)?\s*=\s*(?P<value>{_LITERAL})?(?P<more>\s*[-+*/%|&^])?)"
    # a batch run from a variable
    rf"|(?P<run>\bEXEC(?:UTE)?\s*\(\s*|\bEXEC(?:UTE)?\s+(?:\w+\.){{0,2}}sp_executesql\s+(?:@stmt\s*=\s*)?)"
    rf"(?P<ref>{_VARIABLE})(?![\w@#$])",
    re.IGNORECASE)
#: The cheap first test: no batch without these runs a variable.
_RUNS_A_VARIABLE = re.compile(r"\bEXEC(?:UTE)?\b[^;]*?@", re.IGNORECASE)
#: ``WITH CHANGE_TRACKING_CONTEXT (<varbinary>)`` before an INSERT/UPDATE/DELETE/MERGE: tags the change for change
#: tracking, nothing for lineage; sqlglot reads the WITH as a CTE list and rejects the statement.
_CHANGE_TRACKING_CONTEXT = re.compile(  # (parentheses nested three deep: CAST('etl' AS VARBINARY(128)))
    r"\bWITH\s+CHANGE_TRACKING_CONTEXT\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)", re.IGNORECASE)


def tsql_text(text: str) -> str:
    """The T-SQL ``text_fix``: :func:`without_change_tracking_context`, then :func:`inline_string_variables`."""
    return inline_string_variables(without_change_tracking_context(text))


def without_change_tracking_context(text: str) -> str:
    """``text`` with each ``WITH CHANGE_TRACKING_CONTEXT (...)`` blanked (same length: positions in the text stay)."""
    if "CHANGE_TRACKING_CONTEXT" not in text.upper():
        return text
    return _CHANGE_TRACKING_CONTEXT.sub(lambda match: " " * len(match.group(0)), text)


def inline_string_variables(text: str) -> str:
    """``text`` with each ``EXEC (@v)`` / ``EXEC sp_executesql @v`` whose variable the batch set to one string
    literal written with that literal in the variable's place."""
    if "@" not in text or not _RUNS_A_VARIABLE.search(text):
        return text
    return inline_assigned_strings(text, _EVENTS, _replacement)


def _replacement(match: re.Match[str], values: dict[str, str]) -> tuple[str, str] | None:
    value = values.get(match.group("ref").casefold())  # (names follow the collation: usually case-blind)
    return None if value is None else ("ref", value)
