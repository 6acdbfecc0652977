"""What a harvest counts and how it fails: shared by every source, printed in the summary line.

Every record read is either harvested or counted here with a reason (``unreadable``, ``skipped``, ``unparsed``,
``source`` notes); the exit code follows from these counts (:func:`harvesters.core.run.finish_harvest`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

if TYPE_CHECKING:
    from harvesters.core.tasks import Statement


class UsageError(Exception):
    """A configuration mistake the user must fix (exit code 2)."""


def require_pyodbc(extra: str) -> Any:
    """The pyodbc module; a :class:`UsageError` saying what to install when it or unixODBC's libodbc is missing
    (ImportError: "libodbc.so.2: cannot open shared object file" for the latter)."""
    try:
        import pyodbc
    except ImportError as error:
        raise UsageError(f"reading live over ODBC needs pyodbc and unixODBC: pip install 'lineage-capture[{extra}]', "
                         f"and the unixodbc system package with the database's ODBC driver ({error})") from None
    return pyodbc


def check_input_files(names: Iterable[str], problem_of: Callable[[str], str | None]) -> None:
    """Raise :class:`UsageError` naming the first input that is not a regular file, else the first whose
    ``problem_of(name)`` (the source's look at its start) says it cannot be an export ('-' is stdin: not looked
    at)."""
    import os

    files = [name for name in names if name != "-"]
    for name in files:
        if not os.path.isfile(name):
            if not os.path.exists(name):
                raise UsageError(f"no such file: {name}")
            kind = "a directory" if os.path.isdir(name) else "not a regular file"
            raise UsageError(f"{name}: {kind}; give the export file itself")
    for name in files:
        problem = problem_of(name)
        if problem:
            raise UsageError(f"{name}: {problem}")


@attrs.frozen
class Unreadable:
    """A piece of input that is not a readable record: why, and where it started (byte offset, when known)."""

    reason: str
    offset: int = 0


@attrs.frozen
class Skip:
    """A record that yields no statement, and why (counted in the summary)."""

    reason: str
    unparsed: bool = False  # a statement whose lineage could not be worked out (exit code 1)
    #: the unparsed statement without lineage: it still continues or ends its task run (markers, parent ids)
    statement: Statement | None = None


@attrs.define
class HarvestCounts:
    """What a harvest read and skipped, for the summary line and the exit code."""

    READ: ClassVar[str] = "events"  # what ``events`` counts, in the summary line
    events: int = 0  # readable records read
    unreadable: Counter[str] = attrs.field(factory=Counter)  # by reason
    skipped: Counter[str] = attrs.field(factory=Counter)  # records without a statement, by reason
    unparsed: Counter[str] = attrs.field(factory=Counter)  # statements whose lineage failed, by reason
    outside_window: int = 0
    #: statements harvested with a flaw a person should fix (tables without a database), by note (exit code 1)
    attention: Counter[str] = attrs.field(factory=Counter)
    source: Counter[str] = attrs.field(factory=Counter)  # reader notes (rollover, duplicates, window sides)

    def to_look_at(self) -> int:
        """Records a person should look at (exit code 1): unparsed, unreadable, and the ``attention`` notes."""
        return sum(self.unparsed.values()) + sum(self.unreadable.values()) + sum(self.attention.values())
