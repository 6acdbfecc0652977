"""Snowflake session variables naming tables: ``SET tbl = 'db.s.t'`` then ``INSERT INTO IDENTIFIER($tbl) ...``.

dbt macros and hand-written scripts name tables through session variables; QUERY_HISTORY keeps each query's text
as written, so ``IDENTIFIER($tbl)`` (or ``TABLE($tbl)``) names a table only for whoever saw the session's ``SET``
(an earlier row of the session, or an earlier statement of the same text). :func:`resolve` reads a text's
``SET``/``UNSET`` statements in order and writes each reference to a variable that holds a string as that string
(``IDENTIFIER('db.s.t')``, which the parser reads as the table), and ``EXECUTE IMMEDIATE $stmt`` as the statement
the variable holds (``EXECUTE IMMEDIATE '<sql>'``, read as that SQL), so the text parses as what ran.

Only string literals are taken (``SET v = 'x'``, ``SET v = $$x$$``, ``SET (a, b) = ('x', 'y')``); a variable set
from an expression or a query is unknown from then on, and its references are left as they are (no dataset, as
before). The values live in the harvest's memory only: a variable may hold a secret, so they are never logged nor
kept in the state.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from harvesters.sql.scripting_variables import LITERAL, single_quoted_name

#: An unquoted Snowflake identifier (a variable's name; Snowflake compares them case-insensitively).
_NAME = r"[A-Za-z_][A-Za-z0-9_$]*"
#: What may stand between a statement's start and its first word: blanks and comments.
_GAP = r"(?:\s|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*"
#: A statement that sets or unsets variables (at the text's start or after a `;`), or a reference that names a table
_EVENTS = re.compile(
    rf"(?P<set>(?:\A|;){_GAP}(?P<verb>UNSET|SET)\s+(?:(?P<one>{_NAME})\s*(?:=\s*(?P<value>(?:{LITERAL}|[^;'$]|\$(?!\$))*))?"
    rf"|\(\s*(?P<many>{_NAME}(?:\s*,\s*{_NAME})*)\s*\)\s*(?:=\s*(?P<values>\([^;]*))?))"
    rf"|(?P<ref>\b(?:IDENTIFIER|TABLE)\s*\(\s*)\$(?P<var>{_NAME})(?P<close>\s*\))"
    # a statement held by a variable (``SET stmt = $$INSERT ...$$; EXECUTE IMMEDIATE $stmt``)
    rf"|(?P<run>\bEXECUTE\s+IMMEDIATE\s+)\$(?P<statement>{_NAME})(?=\s*(?:;|\bUSING\b|\Z))",
    re.IGNORECASE | re.DOTALL)
#: The items of a ``SET (a, b) = ('x', 'y')`` list: string literals, or anything else up to a comma.
_ITEM = re.compile(rf"{LITERAL}|[^,]+")
#: A statement setting variables, at the text's start (``match``) or after a ``;`` (``search``): the cheap first
#: test, two patterns because one starting with ``(?:\A|;)`` is tried at every position (3.8 us for an UPDATE's
#: 150 characters; these, 0.5 us, 1.2 us with a `;`: every history row is tested).
_SETS_FIRST = re.compile(rf"{_GAP}(?:UN)?SET\s", re.IGNORECASE | re.DOTALL)
_SETS_LATER = re.compile(rf";{_GAP}(?:UN)?SET\s", re.IGNORECASE | re.DOTALL)


def resolve(text: str, variables: Mapping[str, str]) -> tuple[str, Mapping[str, str]]:
    """``text`` with each ``IDENTIFIER($v)`` / ``TABLE($v)`` whose variable holds a string (set in ``variables``,
    the session's so far, or by the text's own earlier ``SET``) written as ``IDENTIFIER('<value>')``; and the
    session's variables after the text (its ``SET`` and ``UNSET`` applied; ``variables`` itself when the text can
    hold neither, the common case, checked cheaply). Names are upper-cased, as Snowflake stores unquoted ones."""
    # (every history row comes here: a text that sets nothing, without a `$` or a session variable, returns at once)
    if not ((variables and "$" in text) or _SETS_FIRST.match(text) or (";" in text and _SETS_LATER.search(text))):
        return text, variables
    current = dict(variables)
    out: list[str] = []
    position = 0
    for match in _EVENTS.finditer(text):
        if match.group("set") is not None:
            _apply(match, current)
            continue
        if match.group("run") is not None:  # (EXECUTE IMMEDIATE takes either kind of literal)
            value = current.get(match.group("statement").upper())
            replaced = None if value is None else f"{match.group('run')}{value}"
        else:
            value = single_quoted_name(current.get(match.group("var").upper()))
            replaced = None if value is None else f"{match.group('ref')}{value}{match.group('close')}"
        if replaced is None:
            continue
        out.append(text[position:match.start()])
        out.append(replaced)
        position = match.end()
    out.append(text[position:])
    return "".join(out), current


def _apply(match: re.Match[str], variables: dict[str, str]) -> None:
    unset = match.group("verb").upper() == "UNSET"
    if match.group("one") is not None:
        names = [match.group("one")]
        values = [None if unset else _literal(match.group("value"))]
    else:
        names = [n.strip() for n in match.group("many").split(",")]
        values = [None] * len(names) if unset else _literals(match.group("values"), len(names))
    for name, value in zip(names, values):
        if value is None:
            variables.pop(name.upper(), None)
        else:
            variables[name.upper()] = value


def _literal(value: str | None) -> str | None:
    """The literal as written (quotes kept: it goes back into SQL), None when the value is not one string."""
    value = (value or "").strip()
    return value if re.fullmatch(LITERAL, value) else None


def _literals(values: str | None, count: int) -> list[str | None]:
    """The literals of ``(v1, v2, ...)`` by position; all unknown when the list does not split into ``count``
    items (an expression with commas of its own)."""
    inner = (values or "").strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        return [None] * count
    items = [_literal(item) for item in _ITEM.findall(inner[1:-1])]
    return items if len(items) == count else [None] * count
