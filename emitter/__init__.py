"""Turns what the producers found into OpenLineage RunEvents and delivers them.

Producers build plain records (:mod:`emitter.records`) and hand them to an :class:`emitter.Emitter`.
Kept import-light: heavy modules load on first use.
"""
from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs ~15 ms
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Emitter", "RunRecord", "Dataset", "JobRef", "RunRef", "JobType"]

if TYPE_CHECKING:
    from emitter.emitter import Emitter
    from emitter.records import Dataset, JobRef, JobType, RunRecord, RunRef


def __getattr__(name: str) -> Any:
    # Lazy re-exports: `import emitter` must stay cheap for processes that never emit.
    if name == "Emitter":
        from emitter.emitter import Emitter

        return Emitter
    if name in {"RunRecord", "Dataset", "JobRef", "RunRef", "JobType"}:
        from emitter import records

        return getattr(records, name)
    raise AttributeError(name)
