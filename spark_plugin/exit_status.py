"""How did the application end? Answered inside an ``atexit`` handler, where Python does not say.

- An uncaught exception: CPython stores it in ``sys.last_value`` (3.12+: also ``sys.last_exc``) before
  calling ``sys.excepthook`` and long before ``atexit`` handlers run, whatever hook the app installed.
- A non-zero exit code: ``SystemExit`` never reaches ``sys.excepthook`` and its code is not kept, so
  ``sys.exit`` and the ``exit``/``quit`` builtins are wrapped to note the code asked for on the main
  thread (also where the script bound ``sys.exit`` to a name of its own before, ``from sys import exit``). A bare
  ``raise SystemExit(n)`` is not seen there; it is caught when it passes through ``SparkContext.stop``
  (``try/finally: spark.stop()``) via :func:`at_stop`, otherwise not at all (CPython drops it before ``atexit``).
- Interactive sessions (REPL, notebook) keep ``sys.last_value`` of errors the user already saw: there
  only the exit code counts.
- SIGTERM (a scheduler's kill or timeout, ``kill <pid>``): by default Python dies at once, without ``atexit``.
  Where SIGTERM still has that default action, :func:`install` puts a handler on it that ends the application's
  run as failed (``on_terminate``), then lets the signal take its default course: the process dies as it would
  have. An application's own handler is left alone (a handler that exits goes through ``atexit``).
"""
from __future__ import annotations

import builtins
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import attrs

_NO_CODE = object()
_state: dict[str, Any] = {"code": _NO_CODE, "originals": None, "sigterm": None}
#: The longest a SIGTERM waits for the application's run to be ended (its own time limits are shorter: the end's
#: delivery spools at once when the backend stalls) before the process dies of it.
SIGTERM_BUDGET_S = 10.0


@attrs.frozen
class Outcome:
    """The application's end: ``failed`` with a message and a Python stack trace, or not."""

    failed: bool
    message: str = ""
    stack_trace: str | None = None


def _note(code: object) -> None:
    if threading.current_thread() is threading.main_thread():  # SystemExit in a thread ends only that thread
        _state["code"] = code


class _RecordingQuitter:
    """Stands in for site's ``exit``/``quit`` builtins: notes the code, then behaves exactly like them."""

    def __init__(self, original: Any) -> None:
        self._original = original

    def __call__(self, code: object = None) -> None:
        _note(code)
        self._original(code)

    def __repr__(self) -> str:
        return repr(self._original)


def install(on_terminate: Callable[[Outcome], None] | None = None) -> None:
    """Wrap ``sys.exit``, ``exit`` and ``quit``, and handle SIGTERM with ``on_terminate`` (idempotent)."""
    if on_terminate is not None:
        _install_sigterm(on_terminate)
    if _state["originals"] is not None:
        return
    original_exit = sys.exit
    originals: dict[str, Any] = {"sys.exit": original_exit, "exit": getattr(builtins, "exit", None),
                                 "quit": getattr(builtins, "quit", None)}
    _state["originals"] = originals

    def exit(status: object = None) -> None:  # noqa: A001 - same name as what it wraps
        _note(status)
        original_exit(status)  # type: ignore[arg-type]  # sys.exit takes any object (typeshed: str | int | None)

    exit.__doc__ = original_exit.__doc__
    sys.exit = exit  # type: ignore[assignment]  # a wrapper, passing any status through like sys.exit
    # `from sys import exit` in the application's script, before its session existed, bound the original there
    main = sys.modules.get("__main__")
    rebound = [name for name, value in vars(main).items() if value is original_exit] if main is not None else []
    for name in rebound:
        setattr(main, name, exit)
    originals["rebound"] = rebound
    for name in ("exit", "quit"):
        if originals[name] is not None:
            setattr(builtins, name, _RecordingQuitter(originals[name]))


def _install_sigterm(on_terminate: Callable[[Outcome], None]) -> None:
    # only the main thread may set a handler; only the default action is replaced: an application's own
    # handler, or SIG_IGN, stays as it is
    if _state["sigterm"] is not None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        _state["sigterm"] = None
        try:
            # on a thread of its own: the main thread may be inside a py4j call (waiting on an action), and a
            # py4j call made from this handler would reuse that thread's connection mid-answer
            ending = threading.Thread(target=on_terminate, name="lineage-capture-sigterm", daemon=True,
                                      args=(Outcome(True, "the application was terminated by SIGTERM"),))
            ending.start()
            ending.join(SIGTERM_BUDGET_S)
        finally:
            os.kill(os.getpid(), signum)  # the default action: the process dies of the signal, as without us

    signal.signal(signal.SIGTERM, on_sigterm)
    _state["sigterm"] = on_sigterm


def uninstall() -> None:
    """Put the originals back (idempotent)."""
    handler = _state["sigterm"]
    if handler is not None and threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) is handler:  # not replaced by the application since
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _state["sigterm"] = None
    originals = _state["originals"]
    if originals is None:
        return
    main = sys.modules.get("__main__")
    for name in originals["rebound"]:
        if main is not None and getattr(main, name, None) is sys.exit:  # not rebound by the application since
            setattr(main, name, originals["sys.exit"])
    sys.exit = originals["sys.exit"]
    for name in ("exit", "quit"):
        if originals[name] is not None:
            setattr(builtins, name, originals[name])
    _state["originals"] = None


def _code_outcome(code: object) -> Outcome | None:
    """Python's own rule: None and 0 succeed, an int is the status, anything else prints and gives 1."""
    if code is None or code is _NO_CODE or code == 0:
        return None
    if isinstance(code, int):
        return Outcome(True, f"the application exited with code {code}")
    return Outcome(True, f"the application exited with code 1: {code}")


def _exception_outcome(error: BaseException) -> Outcome:
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return Outcome(True, f"{type(error).__name__}: {error}", trace)


def at_stop() -> Outcome | None:
    """The outcome to report when the app stops its SparkContext, judged from the exception propagating
    through ``stop`` (a ``finally`` block or ``__exit__``); None means "ask again at exit": an ordinary
    exception may still be caught by the app, only the interpreter's exit tells."""
    error = sys.exc_info()[1]
    if error is None:
        return Outcome(False)
    if isinstance(error, SystemExit):
        return _code_outcome(error.code) or Outcome(False)
    return None


def at_exit() -> Outcome:
    """The outcome, judged from an ``atexit`` handler."""
    interactive = hasattr(sys, "ps1") or bool(sys.flags.interactive)
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if error is not None and not interactive and not isinstance(error, SystemExit):
        return _exception_outcome(error)
    return _code_outcome(_state["code"]) or Outcome(False)
