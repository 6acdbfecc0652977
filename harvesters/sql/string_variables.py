"""Variables a text sets to one string literal, written in place of the references that use them: the loop that
T-SQL's ``EXEC (@sql)`` (tsql_text.py) and Snowflake Scripting's ``IDENTIFIER(:v)`` (scripting_variables.py) share.
Each dialect gives its pattern of assignments and references, and what a reference is replaced with."""
from __future__ import annotations

import re
from collections.abc import Callable

#: ``(group of the match to replace, replacement)`` for a reference, given the values known at that point; None
#: leaves the reference as written.
Replacement = Callable[[re.Match[str], dict[str, str]], "tuple[str, str] | None"]


def inline_assigned_strings(text: str, events: re.Pattern[str], replacement: Replacement) -> str:
    """``text`` with each reference ``events`` matches replaced as ``replacement`` says, in text order. An
    assignment match has the groups ``assign``, ``name`` (case-blind), ``value`` (the literal, None when the value
    is not one) and ``more`` (set when the literal goes on into an expression: the value is then unknown too); the
    last assignment before a reference is the one it sees."""
    values: dict[str, str] = {}
    out: list[str] = []
    position = 0
    for match in events.finditer(text):
        if match.group("assign") is not None:
            name = match.group("name").casefold()
            if match.group("value") is not None and match.group("more") is None:
                values[name] = match.group("value")
            else:
                values.pop(name, None)
            continue
        replaced = replacement(match, values)
        if replaced is None:
            continue
        group, literal = replaced
        out.append(text[position:match.start(group)])
        out.append(literal)
        position = match.end(group)
    out.append(text[position:])
    return "".join(out)
