"""The one place the plugin catches broad exceptions: at each boundary where Spark or the app calls us.

Every entry point (listener callback, worker step, session hook, stop hook, exit hook) runs its body
through :meth:`Guard.call`. A failure is logged once per kind (part and exception type), later ones are
counted; a part that keeps failing is switched off for the rest of the run with one warning. Nothing
ever propagates into Spark or into the application.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

log = logging.getLogger("spark_plugin")

T = TypeVar("T")


@attrs.define
class Guard:
    """Failure bookkeeping for one instrumented application."""

    #: consecutive failures of one part after which it is switched off
    max_consecutive: int = 5
    failures: Counter = attrs.field(factory=Counter)  # part -> total failures
    _streak: Counter = attrs.field(factory=Counter)  # part -> failures since its last success
    _logged: set = attrs.field(factory=set)  # (part, exception type) already logged
    disabled: set = attrs.field(factory=set)  # parts switched off

    def call(self, part: str, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or None when ``part`` is switched off or ``fn`` raised (logged once per kind)."""
        if part in self.disabled:
            return None
        try:
            result = fn(*args)
        except Exception as error:  # noqa: BLE001 - the boundary: lineage may be lost, the app never is
            self._failed(part, error)
            return None
        self._streak[part] = 0
        return result

    def _failed(self, part: str, error: Exception) -> None:
        self.failures[part] += 1
        self._streak[part] += 1
        kind = (part, type(error).__name__)
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("lineage capture: %s failed (%s: %s); the application is not affected, further "
                        "failures of this kind are counted, not logged", part, type(error).__name__,
                        short_error(error), exc_info=log.isEnabledFor(logging.DEBUG))
        if self._streak[part] >= self.max_consecutive:
            self.disabled.add(part)
            log.warning("lineage capture: %s failed %d times in a row: switched off for this run",
                        part, self._streak[part])


def short_error(error: BaseException, limit: int = 300) -> str:
    """The first line of ``error``'s text, redacted and cut to ``limit`` characters: what a warning quotes (the
    host's log gets no traceback unless it logs the plugin at DEBUG)."""
    from emitter.redact import redact  # an exception text may quote a URL with credentials

    text = str(error).strip().splitlines()
    first = redact(text[0]) if text else ""
    return first if len(first) <= limit else first[:limit] + "..."
