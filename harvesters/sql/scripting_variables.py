"""Snowflake Scripting variables that name a table or hold a statement: ``IDENTIFIER(:v)``, ``TABLE(:v)`` and
``EXECUTE IMMEDIATE :v`` read with the string the block gave ``v``. :func:`inline_scripting_variables` is part of the
Snowflake dialect's ``text_fix``.

A block that runs now (``[DECLARE ...] BEGIN ... END``, also inside ``EXECUTE IMMEDIATE $$...$$``) is read as its
statements (harvesters/sql/scripting.py); a statement naming its table through a variable had no table::

    DECLARE
      target VARCHAR DEFAULT 'ANALYTICS.PUBLIC.DAILY';
    BEGIN
      LET source := 'RAW.PUBLIC.EVENTS';
      INSERT INTO IDENTIFIER(:target) SELECT * FROM IDENTIFIER(:source);
    END;

The value a variable was given by the block itself, one string literal (``DEFAULT``/``:=`` in the DECLARE section,
``LET v [type] := | DEFAULT``, ``v := ...``), is written in place of ``:v`` there; a value computed from anything
else (``'a' || :x``, a query, an argument) is unknown and the reference is left as written (no table, as before).
Assignments count in text order, the last one before a reference wins (a branch not taken cannot be told). A
procedure's child statements are logged without their block, so this reads blocks run as one text.
Harvester-level session variables (``SET v = ...`` then ``$v``) are harvesters/snowflake/variables.py's.
"""
from __future__ import annotations

import re

from harvesters.sql.string_variables import inline_assigned_strings

_NAME = r"[A-Za-z_][\w$]*"
#: A Snowflake string literal: single-quoted (``''`` and backslash escapes) or dollar-quoted (holding no ``$$``:
#: ``$$a$$ || $$b$$`` is an expression, not one literal). Session variables' values too (harvesters/snowflake/).
LITERAL = r"'(?:[^'\\]|''|\\.)*'|\$\$(?:(?!\$\$).)*\$\$"
#: Words that open a statement or a block: never a variable's name (``;\nBEGIN x := ...`` assigns x).
_WORDS = r"(?:BEGIN|DECLARE|LET|END|IF|ELSEIF|ELSE|THEN|FOR|WHILE|LOOP|REPEAT|RETURN|EXCEPTION|CASE|WHEN)"
_EVENTS = re.compile(
    # an assignment, at a statement's start (a DECLARE section's entries, LET, v := ...): a column's DEFAULT in a
    # CREATE TABLE follows "(" or ",", never one of these
    rf"(?P<assign>(?:^|;|\b(?:DECLARE|BEGIN|THEN|ELSE|DO|LOOP)\b)\s*(?:LET\s+)?(?!{_WORDS}\b)(?P<name>{_NAME})"
    rf"(?:\s+[A-Za-z_]\w*(?:\s*\([\d\s,]*\))?)?\s*(?:\bDEFAULT\b|:=)\s*(?P<value>{LITERAL})?(?P<more>\s*[^\s;])?)"
    # a reference the string may stand in for: a table's name, or a statement to run
    rf"|(?:\b(?:IDENTIFIER|TABLE)\s*\(\s*(?P<table>:{_NAME})(?=\s*\))"
    rf"|\bEXECUTE\s+IMMEDIATE\s+(?P<statement>:?{_NAME})(?=\s*(?:;|\)|\bUSING\b|$)))",
    re.IGNORECASE | re.DOTALL)
#: The first test, on the upper-cased text: no text without one of these words followed by its tail refers to a
#: Scripting variable in such a place. Each word found with ``str.find`` and its tail matched there: a regex
#: searching for the alternatives took 0.3 ms for a 9 KB text full of ``::`` casts, this 0.02 ms.
_REFERS = (("IDENTIFIER", re.compile(r"\s*\(\s*:")), ("TABLE", re.compile(r"\s*\(\s*:")),
           ("IMMEDIATE", re.compile(r"\s+:?[A-Z_]")))


def inline_scripting_variables(text: str) -> str:
    """``text`` with each ``IDENTIFIER(:v)`` / ``TABLE(:v)`` / ``EXECUTE IMMEDIATE :v`` whose variable the text
    set to one string literal written with that literal in the reference's place."""
    if not _refers(text.upper()):
        return text
    return inline_assigned_strings(text, _EVENTS, _replacement)


def _replacement(match: re.Match[str], values: dict[str, str]) -> tuple[str, str] | None:
    group = "table" if match.group("table") is not None else "statement"
    literal = values.get(match.group(group).lstrip(":").casefold())  # (unquoted names are case-blind)
    if literal is not None and group == "table":
        literal = single_quoted_name(literal)
    return None if literal is None else (group, literal)


def _refers(upper: str) -> bool:
    for word, tail in _REFERS:
        at = upper.find(word)
        while at != -1:
            if tail.match(upper, at + len(word)):
                return True
            at = upper.find(word, at + 1)
    return False


def single_quoted_name(literal: str | None) -> str | None:
    """A name's :data:`LITERAL` as ``IDENTIFIER('...')`` takes it: a ``$$name$$`` written in single quotes (None when
    it holds a quote or a backslash, which would need escaping, or when ``literal`` is None)."""
    if literal is None or not literal.startswith("$$"):
        return literal
    inner = literal[2:-2]
    return None if "'" in inner or "\\" in inner else f"'{inner}'"
