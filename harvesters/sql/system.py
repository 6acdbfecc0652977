"""System objects: the server's own catalog and monitoring views, which are not datasets.

A monitoring tool polling ``sys.dm_exec_requests`` or ``SNOWFLAKE.ACCOUNT_USAGE.QUERY_HISTORY`` every minute
would otherwise fill the lineage graph with runs reading catalog views. Each dialect lists its system objects as
data (:attr:`harvesters.sql.dialects.DialectRules.system_objects`, regular expressions over the qualified name as
:func:`harvesters.sql.engine.table_lineage` reports it, matched whole and case-insensitively); the harvesters drop
those names from a statement's inputs and outputs unless asked to keep them (``--keep-system-objects``).
"""
from __future__ import annotations

import re
from functools import lru_cache

from harvesters.sql.dialects import rules_for


@lru_cache(maxsize=64)
def _pattern(dialect: str) -> re.Pattern[str] | None:
    rules = rules_for(dialect)
    if rules is None or not rules.system_objects:
        return None
    return re.compile("|".join(f"(?:{p})" for p in rules.system_objects), re.IGNORECASE)


def is_system_object(name: str, dialect: str) -> bool:
    """Whether the table ``name`` (``db.schema.table`` or shorter) is a system object of ``dialect``."""
    pattern = _pattern(dialect)
    return bool(pattern and pattern.fullmatch(name))


def without_system_objects(names: tuple[str, ...], dialect: str) -> tuple[str, ...]:
    """``names`` without the dialect's system objects (the same tuple when there are none: the common case)."""
    pattern = _pattern(dialect)
    if pattern is None or not names:
        return names
    kept = tuple(name for name in names if not pattern.fullmatch(name))
    return names if len(kept) == len(names) else kept
