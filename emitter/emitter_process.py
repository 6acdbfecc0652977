"""An :class:`~emitter.emitter.Emitter` in a child process, for a host process that must not pay for it.

Why: a Spark driver that builds and delivers its own events imports openlineage-python (~0.25 s of CPU), the
transports and the emitter while its JVM keeps both cores busy, and holds the GIL its application's py4j calls
wait for. Here the host hands over plain records (facets as :class:`emitter.deferred.Deferred` calls, pickled in
batches on a pipe); a child process builds, redacts, orders and delivers them with the ordinary Emitter, and spools
what it cannot deliver. Its CPU is the same, but it is not the driver's: no GIL shared with the application's
py4j calls, and its imports overlap the JVM's start-up on the second core.

Nothing is lost to the second process:

- the host keeps every record until the child has taken it (an ``A`` frame: handed to its Emitter); if the child
  cannot start or dies, the records it had not taken are emitted by an Emitter in the host itself
  (``fallback``), and so is everything after;
- at the host's end (:meth:`EmitterProcess.close`), the child delivers what it holds within the end's budget,
  but as soon as a delivery has stalled for ``stall_s`` (a backend refusing connections, or hanging) it writes
  everything not delivered to the spool at once; :meth:`EmitterProcess.spool_now` makes it do so at any time;
- a child that does not answer in time is left to finish alone, and the host spools what it had not taken;
- if the host dies, the child reads the end of its input, ends the same way, and exits. It ignores SIGINT and
  SIGTERM, which reach the whole process group: the host decides when it ends.

The child is a plain ``python -c`` process (:mod:`emitter.process_launch`: a host may start it early, before it
knows its settings, and hand it to :meth:`EmitterProcess.start`), talking in :mod:`emitter.delivery_process`'s
frames (a kind byte, a 4-byte length, a payload). To the child: ``C`` settings (pickled: the configuration may
hold an API key, it never goes on the command line; the host's environment, working directory and ``sys.path``
come with them), ``P`` a batch of records (pickled), ``S`` spool now (pickled records), ``X`` end. From the child:
``B`` built (or why not), ``A`` records taken, ``W`` spooled, ``K`` the end's counts, ``L`` a log record.
"""
from __future__ import annotations

import collections
import contextlib
import importlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import attrs
import orjson

from emitter.config import EmitterConfig
from emitter.delivery import Counts
from emitter.delivery_process import _PipeLogHandler, _read_frame, _write_frame, discard_writes
from emitter.exit_spool import make_spool, spool_undelivered
from emitter.process_launch import child_environment, child_path, discard, launch
from emitter.records import RunRecord

log = logging.getLogger(__name__)

# The child's CPU priority is not lowered (``os.nice``): a niced child starves while the host's JVM (or any other
# process) keeps the cores busy, and the host's end then waits for it (at ``nice`` 19, seconds, under a second
# Spark application); measured, a child at 19 cost a Spark application no less than one at 0
# (``benchmarks/spark_second_process.py``).

#: How long past the end's budget the host waits for the child's answer (a child that only now gets a core).
ANSWER_MARGIN_S = 2.0
#: How long :meth:`EmitterProcess.spool_now` waits for the child to have spooled (it may still be importing).
SPOOL_WAIT_S = 1.5
#: The child's log records keep their logger's name when it is one of these families (the host routes them).
_OWN_LOGGERS = frozenset({"spark_plugin", "emitter", "openlineage", "harvesters"})
#: The modules every child imports before it reads its settings (see :mod:`emitter.process_launch`).
WARM_MODULES = ("emitter.emitter", "emitter.serialize", "emitter.transport")


class EmitterProcess:
    """The parts of :class:`~emitter.emitter.Emitter` a host uses (``emit``, ``close``, ``stalled_for``, ``spool``),
    served by an Emitter in a child process; see the module docstring."""

    def __init__(self, child: subprocess.Popen[bytes], config: EmitterConfig, end_timeout: float,
                 fallback: Callable[[], Any], on_setup_error: Callable[[str, str], None]) -> None:
        self.config = config
        self._end_timeout = end_timeout + ANSWER_MARGIN_S
        self.spool = make_spool(config)  # (named in messages; the child's own spool has the same destination)
        self.counts = Counts()
        self._child = child
        self._make_fallback = fallback
        self._on_setup_error = on_setup_error
        self._fallback: Any = None
        self._lock = threading.Lock()
        self._unacked: collections.deque[RunRecord] = collections.deque()  # handed over, not yet taken
        self._outbox: list[RunRecord] = []  # handed over, not yet written to the pipe
        self._wake = threading.Condition(self._lock)
        self._write_lock = threading.Lock()  # one frame at a time: the out-loop and the end
        self._answers: dict[bytes, Any] = {}
        self._answered = threading.Condition(threading.Lock())
        self._gone = False  # the child's output ended
        self._ending = False
        self.disabled = False  # the child found no usable transport: nothing would be delivered
        #: what the child's end spooled at once (a delivery stalled): (spooled, dropped, problems, spool file)
        self.spooled_at_end: tuple[int, int, list[str], str] | None = None
        threading.Thread(target=self._write_loop, name="lineage-capture-emitter-out", daemon=True).start()
        threading.Thread(target=self._read_loop, name="lineage-capture-emitter-in", daemon=True).start()

    @classmethod
    def start(cls, config: EmitterConfig, *, end_timeout: float, stall_s: float, announce_logger: str | None,
              fallback: Callable[[], Any], on_setup_error: Callable[[str, str], None],
              child: subprocess.Popen[bytes] | None = None) -> EmitterProcess | None:
        """The child, started and configured; None when it cannot be (the caller then emits in its own process).
        ``announce_logger``: the logger that announces a default file transport's file (None: not announced).
        ``child``: one :func:`emitter.process_launch.launch` started earlier, adopted while it runs (else closed)."""
        try:
            settings = pickle.dumps({"config": config, "end_timeout": end_timeout, "stall_s": stall_s,
                                     "announce_logger": announce_logger, "environ": child_environment(),
                                     "cwd": os.getcwd(), "path": child_path()})
        except Exception:  # noqa: BLE001 - a configuration that is not plain data: emit here
            discard(child)
            return None
        if child is None or child.poll() is not None:
            discard(child)
            try:
                child = launch(child_path())
            except Exception:  # noqa: BLE001 - no process: emit here
                return None
        process = cls(child, config, end_timeout, fallback, on_setup_error)
        process._send(b"C", settings)
        return process

    # ---- the Emitter interface ---------------------------------------------------------------------------

    def emit(self, record: RunRecord) -> None:
        """Hand one record over (never blocks on the child, never raises)."""
        with self._lock:
            if self._fallback is not None:
                fallback = self._fallback
            else:
                self._unacked.append(record)
                self._outbox.append(record)
                self._wake.notify()
                return
        fallback.emit(record)

    def stalled_for(self) -> float:
        """Always 0.0: the child times its own deliveries and spools at once when one stalls."""
        return 0.0

    def close(self) -> Counts:
        """End the child: it delivers or spools everything, within the end's budget. Never raises."""
        if self._fallback is None:
            self._ending = True
            self._flush_outbox()
            if self._send(b"X") and (answer := self._await(b"K", self._end_timeout)) is not None:
                end = answer.pop("spooled_at_end", None)
                if end is not None:
                    self.spooled_at_end = (end["spooled"], end["dropped"], end["problem"], end["events_path"])
                self.counts = Counts(**answer)
                return self.counts
            if self._fallback is None:  # the end's budget is spent: spool what it had not taken, deliver nothing
                self.spooled_at_end = self._spool_untaken("did not answer at the end")
                self.counts.spooled += self.spooled_at_end[0]
                self.counts.dropped += self.spooled_at_end[1]
                return self.counts
        if self._fallback is not None:
            self.counts = self._fallback.close()
        return self.counts

    def _spool_untaken(self, why: str) -> tuple[int, int, list[str], str]:
        """The records the child had not taken, to the spool at once (the child, if alive, keeps what it took)."""
        with self._lock:
            untaken = self._take_untaken()
        log.warning("the lineage delivery process %s (exit code %s): the %d lineage events it had not taken go to "
                    "the spool", why, self._child.poll(), len(untaken))
        return spool_undelivered(None, self.spool, untaken)  # (no emitter here holds any)

    def spool_now(self, records: list[RunRecord]) -> tuple[int, int, list[str], str]:
        """Spool at once what the child holds, then ``records``: (spooled, dropped, problems, spool file)."""
        if self._fallback is None:
            self._flush_outbox()
            if self._send(b"S", pickle.dumps(records)) and (answer := self._await(b"W", SPOOL_WAIT_S)) is not None:
                return answer["spooled"], answer["dropped"], answer["problem"], answer["events_path"]
            self._abandon("did not answer in time at the end")
        fallback = self._fallback
        if fallback is None:  # (another thread's abandon is still making it)
            return 0, len(records), ["no emitter"], str(self.spool.events_path)
        return spool_undelivered(fallback, fallback.spool, records)

    # ---- the pipe ----------------------------------------------------------------------------------------

    def _send(self, kind: bytes, payload: bytes = b"") -> bool:
        try:
            assert self._child.stdin is not None
            with self._write_lock:
                _write_frame(self._child.stdin, kind, payload)
                self._child.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def _flush_outbox(self) -> None:
        with self._lock:
            batch, self._outbox = self._outbox, []
        if batch:
            self._send_records(batch)

    def _send_records(self, batch: list[RunRecord]) -> None:
        try:
            payload = pickle.dumps(batch)
        except Exception as error:  # noqa: BLE001 - a record that cannot be pickled: emitted here instead
            log.warning("lineage records cannot be handed to the delivery process (%s): emitting them in this "
                        "process", type(error).__name__)
            self._abandon("could not be handed a record")
            return
        if not self._send(b"P", payload):
            self._abandon("ended unexpectedly")

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._outbox and not self._gone and self._fallback is None:
                    self._wake.wait()
                if self._gone or self._fallback is not None:
                    return
                batch, self._outbox = self._outbox, []
            self._send_records(batch)

    def _read_loop(self) -> None:
        assert self._child.stdout is not None
        while (frame := _read_frame(self._child.stdout)) is not None:
            kind, payload = frame
            if kind == b"L":
                name, level, message = orjson.loads(payload)
                if name.partition(".")[0] not in _OWN_LOGGERS:  # (py.warnings...: the host's root would print it)
                    name = __name__
                logging.getLogger(name).log(level, "%s", message)
            elif kind == b"A":
                with self._lock:
                    for _ in range(min(int(payload), len(self._unacked))):
                        self._unacked.popleft()
            elif kind == b"B":
                built = orjson.loads(payload)
                if built.get("error") is not None:
                    self.disabled = True
                    self._on_setup_error(built["error_type"], built["error"])
                elif built.get("disabled"):
                    self.disabled = True
            else:
                with self._answered:
                    self._answers[kind] = orjson.loads(payload)
                    self._answered.notify_all()
        with self._answered:
            self._gone = True
            self._answered.notify_all()
        with self._lock:
            self._wake.notify()
        if not self._ending:
            self._abandon("ended unexpectedly")

    def _await(self, kind: bytes, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        with self._answered:
            while kind not in self._answers and not self._gone and (left := deadline - time.monotonic()) > 0:
                self._answered.wait(left)
            return self._answers.pop(kind, None)

    def _take_untaken(self) -> list[RunRecord]:
        """(Under ``_lock``.) The records the child has not taken, now the host's alone."""
        untaken = list(self._unacked)
        self._unacked.clear()
        self._outbox.clear()
        return untaken

    def _abandon(self, why: str) -> None:
        """From now on, emit in this process: first the records the child had not taken (in order)."""
        with self._lock:
            if self._fallback is not None:
                return
            untaken = self._take_untaken()
        log.warning("the lineage delivery process %s (exit code %s): %d lineage events it had not taken are "
                    "emitted from this process", why, self._child.poll(), len(untaken))
        fallback = self._make_fallback()
        with self._lock:
            self._fallback = fallback
            self._wake.notify()
        for record in untaken:
            fallback.emit(record)


# ---- the child -------------------------------------------------------------------------------------------


@attrs.define
class _Child:
    """The child's state: the emitter (built on its own thread: it replays an earlier run's spool first), the
    records not yet handed to it, and how long the current hand-over or build has taken."""

    config: EmitterConfig
    out: IO[bytes]
    out_lock: threading.Lock
    announce_logger: str | None
    inbox: collections.deque[RunRecord] = attrs.field(factory=collections.deque)
    wake: threading.Condition = attrs.field(factory=threading.Condition)
    emitter: Any = None
    busy_since: float | None = None  # building the emitter, or inside one emit
    current: RunRecord | None = None
    spooling: bool = False  # the end took over: nothing more is handed to the emitter
    done: threading.Event = attrs.field(factory=threading.Event)
    closing: bool = False
    counts: Counts | None = None
    spooled: int = 0
    dropped: int = 0

    def answer(self, kind: bytes, payload: bytes) -> None:
        with self.out_lock:
            try:
                _write_frame(self.out, kind, payload)
                self.out.flush()
            except (BrokenPipeError, ValueError):  # the host is gone: keep working, quietly
                discard_writes(self.out)

    def build(self) -> None:
        from emitter.emitter import Emitter

        announce: Any = False if self.announce_logger is None else logging.getLogger(self.announce_logger).warning
        self.busy_since = time.monotonic()
        try:
            self.emitter = Emitter(self.config, announce_file=announce)
        except Exception as error:  # noqa: BLE001 - reported to the host, which says so as for its own emitter
            self.answer(b"B", orjson.dumps({"error_type": type(error).__name__, "error": str(error)[:500]}))
            return
        finally:
            self.busy_since = None
        self.answer(b"B", orjson.dumps({"disabled": bool(self.config.disabled)}))

    def run(self) -> None:
        """The emitter's thread: build it, then hand it each record in order; close it at the end."""
        try:
            self.build()
            while True:
                with self.wake:
                    while not self.inbox and not self.closing and not self.spooling:
                        self.wake.wait()
                    if self.spooling or (self.closing and not self.inbox):
                        break
                    taken = self.current = self.inbox.popleft()
                if self.emitter is not None:
                    self.busy_since = time.monotonic()
                    self.emitter.emit(taken)
                    self.busy_since = None
                with self.wake:
                    taken_here = self.current is taken  # (else the end spooled it meanwhile, and said so)
                    self.current = None
                if taken_here:
                    self.answer(b"A", b"1")
            if not self.spooling and self.emitter is not None:
                self.busy_since = time.monotonic()
                self.counts = self.emitter.close()
        finally:
            self.busy_since = None
            self.done.set()

    def stalled_for(self, now: float) -> float:
        since = self.busy_since
        return max(0.0 if since is None else now - since,
                   self.emitter.stalled_for() if self.emitter is not None else 0.0)

    def spool_now(self, records: list[RunRecord]) -> dict[str, Any]:
        """Everything not delivered, then ``records``, to the spool at once (see the module docstring)."""
        with self.wake:
            self.spooling = True
            waiting = ([self.current] if self.current is not None else []) + list(self.inbox)
            self.inbox.clear()
            self.current = None
            self.wake.notify()
        emitter = self.emitter
        spool = emitter.spool if emitter is not None else make_spool(self.config)
        spooled, dropped, problem, events_path = spool_undelivered(emitter, spool, [*waiting, *records])
        self.spooled += spooled
        self.dropped += dropped
        if waiting:  # taken now (spooled): the host need not keep them
            self.answer(b"A", str(len(waiting)).encode())
        return {"spooled": spooled, "dropped": dropped, "problem": problem, "events_path": events_path}

    def end(self, timeout: float, stall_s: float) -> None:
        """Deliver within ``timeout``; spool the rest at once when a delivery stalls longer than ``stall_s``."""
        with self.wake:
            self.closing = True
            self.wake.notify()
        deadline = time.monotonic() + timeout
        spooled_at_end = None
        while not self.done.wait(0.02):
            now = time.monotonic()
            if now >= deadline or self.stalled_for(now) > stall_s:
                spooled_at_end = self.spool_now([])
                break
        counts = self.counts.copy() if self.counts is not None and not self.spooling else \
            (self.emitter.counts.copy() if self.emitter is not None else Counts())
        counts.spooled += self.spooled
        counts.dropped += self.dropped
        self.answer(b"K", orjson.dumps({**attrs.asdict(counts), "spooled_at_end": spooled_at_end}))


def serve(warm: list[str] | None = None) -> None:
    """The child: imports (:data:`WARM_MODULES`, then ``warm``), settings, then records, until ``X`` or the end of
    its input (the host is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host decides when this child ends (see the docstring)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source, out = sys.stdin.buffer, sys.stdout.buffer
    out_lock = threading.Lock()
    root = logging.getLogger()
    root.handlers[:] = [_PipeLogHandler(out, out_lock)]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    _import_all([*WARM_MODULES, *(warm or [])])
    frame = _read_frame(source)
    if frame is None or frame[0] != b"C":
        return
    settings = pickle.loads(frame[1])  # noqa: S301 - written by the host that started this child
    _take_host_state(settings)
    child = _Child(settings["config"], out, out_lock, settings["announce_logger"])
    threading.Thread(target=child.run, name="lineage-capture-emitter", daemon=True).start()
    while (frame := _read_frame(source)) is not None:
        kind, payload = frame
        if kind == b"P":
            with child.wake:
                child.inbox.extend(pickle.loads(payload))  # noqa: S301 - the host's own records
                child.wake.notify()
        elif kind == b"S":
            child.answer(b"W", orjson.dumps(child.spool_now(pickle.loads(payload))))  # noqa: S301
        elif kind == b"X":
            break
    child.end(settings["end_timeout"], settings["stall_s"])
    with contextlib.suppress(OSError, ValueError):
        out.flush()
    os._exit(0)  # (a delivery thread stuck on a hanging backend must not keep this process alive)


def _import_all(names: list[str]) -> None:
    # before the settings: a child started early imports while its host has an idle core (emitter.process_launch)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the emitter's build imports them again and reports
            continue


def _take_host_state(settings: dict[str, Any]) -> None:
    """The host's environment, working directory and ``sys.path`` as they were when it sent the settings (it may
    have changed them since this child started: a relative spool directory, a proxy set by the application)."""
    os.environ.clear()
    os.environ.update(settings["environ"])
    with contextlib.suppress(OSError):
        os.chdir(settings["cwd"])
    sys.path[:] = [p for p in settings["path"].split(os.pathsep) if p] or sys.path
