"""Delivery in a second process, for a harvest sending to an HTTP backend.

Why: a harvest is one busy Python thread; sending each event over HTTP costs that process about 190 us of CPU
(the request, the answer, the threads that keep 64 in flight), which doubled a harvest against a backend that
answers in 10 ms (``benchmarks/delivery_faults.py``). Here the harvest only packs events into batches on a pipe
(a few us each); a child process runs the ordinary :class:`emitter.delivery.Delivery` (order, spool, dead
letters, back-off) on the machine's second core.

Nothing is lost to the second process:

- the harvest's checkpoint moves only after :meth:`DeliveryProcess.close` reported every event settled
  (delivered, spooled or set aside);
- if the child dies, the events it had not reported settled are counted as dropped (the harvest then keeps its
  state, and its next run sends them again, with the same run ids), and later events are delivered in the harvest
  process itself;
- if the harvest dies, the child reads the end of its input, delivers or spools what it was given, and ends.

The child is a plain ``python -c`` process (as the harvesters' reader child): multiprocessing's spawn re-runs the
caller's main script, and its fork copies the locks of the caller's threads. The transport configuration (it may
hold an API key) travels on the pipe, never on the command line.

Frames on both pipes: a kind byte, a 4-byte length, a payload. To the child: ``C`` configuration, ``E`` a batch of
events (a JSON array), ``F`` flush, ``R`` replay, ``X`` close. From the child: ``K`` counts (after F, R and X),
``L`` a log record.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

import attrs
import orjson

from emitter.delivery import Counts, Delivery
from emitter.spool import Spool

log = logging.getLogger(__name__)

#: Events per frame: the per-frame cost vanishes, and a batch is small against the pipe's memory.
BATCH = 256
#: Events kept here while the child starts (about 0.3 s of imports) instead of waiting for it: the harvest goes on.
START_BUFFER = 16 * BATCH
_HEADER = struct.Struct(">cI")
#: ``python -c _CHILD_MAIN <sys.path>``: runs :func:`serve` on stdin and stdout.
_CHILD_MAIN = ("import os, sys; sys.path[:] = sys.argv[1].split(os.pathsep); "
               "from emitter.delivery_process import serve; serve()")


def _write_frame(out: IO[bytes], kind: bytes, payload: bytes = b"") -> None:
    out.write(_HEADER.pack(kind, len(payload)) + payload)


def _read_frame(source: IO[bytes]) -> tuple[bytes, bytes] | None:
    header = source.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    kind, size = _HEADER.unpack(header)
    payload = source.read(size) if size else b""
    return (kind, payload) if len(payload) == size else None


class DeliveryProcess:
    """The parts of :class:`Delivery` an emitter uses, served by a child process (see the module docstring)."""

    def __init__(self, child: subprocess.Popen[bytes], spool: Spool, fallback: Callable[[], Delivery]) -> None:
        self.spool = spool
        self.counts = Counts()
        self.spool_error: str | None = None
        self.failure: str | None = None  # as Delivery.failure, reported by the child
        self._child = child
        self._make_fallback = fallback
        self._fallback: Delivery | None = None
        self._batch: list[dict[str, Any]] = []
        self._sent = 0  # events handed to the child
        self._closed = False
        self._started = False  # the child said it is ready (read before the first events go)

    @classmethod
    def start(cls, transport: Mapping[str, Any], width: int, spool: Spool, spool_settings: Mapping[str, Any],
              retry_after: float, fallback: Callable[[], Delivery]) -> DeliveryProcess | None:
        """The child, started and configured; None when it cannot be (no process, a configuration that is not
        plain data): the caller then delivers in its own process."""
        try:
            settings = orjson.dumps({"transport": dict(transport), "width": width, "retry_after": retry_after,
                                     **spool_settings})
        except TypeError:  # a requests session or an adapter object: only this process can use it
            return None
        try:
            child = subprocess.Popen([sys.executable, "-c", _CHILD_MAIN, os.pathsep.join(sys.path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError:
            return None
        assert child.stdin is not None
        process = cls(child, spool, fallback)
        process._send(b"C", settings)
        return process

    # ---- the Delivery interface ----------------------------------------------------------------------------

    def submit(self, event: dict[str, Any]) -> None:
        """Hand ``event`` over; it reaches the child with its batch."""
        if self._fallback is not None:
            self._fallback.submit(event)
            return
        self._batch.append(event)
        if len(self._batch) >= BATCH and (self._started or len(self._batch) >= START_BUFFER or self._child_ready()):
            self._send_batch()

    def flush(self) -> None:
        """Wait until the child settled every event handed over (and synced its spool)."""
        self._call(b"F")

    def replay(self) -> None:
        """Re-send the spool now, ignoring the back-off."""
        self._call(b"R")

    def close(self) -> None:
        """Flush and end the child."""
        if self._closed:
            return
        self._call(b"X")
        self._closed = True
        if self._fallback is not None:
            self._fallback.close()
        try:
            self._child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()

    def pending_events(self) -> list[dict[str, Any]]:
        """Events not yet handed to the child (what it holds is its own to spool when this process ends)."""
        return list(self._batch)

    def stalled_for(self) -> float:
        """Always 0.0: the child times its own requests, and spools what it holds when this process ends."""
        return 0.0

    # ---- the pipe ----------------------------------------------------------------------------------------

    def _send_batch(self) -> None:
        if not self._started:
            self._await_start()
        batch, self._batch = self._batch, []
        if batch and self._send(b"E", orjson.dumps(batch)):
            self._sent += len(batch)
        elif batch and self._fallback is not None:
            for event in batch:
                self._fallback.submit(event)

    def _send(self, kind: bytes, payload: bytes = b"") -> bool:
        if self._fallback is not None:
            return False
        try:
            assert self._child.stdin is not None
            _write_frame(self._child.stdin, kind, payload)
            self._child.stdin.flush()
        except (OSError, ValueError):
            self._child_died()
            return False
        return True

    def _call(self, kind: bytes) -> None:
        """Send the pending batch and ``kind``, then read the child's answer (its counts), logging what it logged
        meanwhile."""
        self._send_batch()
        if self._send(kind):
            answer = self._read_answer()
            if answer is None:
                self._child_died()
            else:
                self._take_counts(answer)
        if self._fallback is not None:
            getattr(self._fallback, "flush" if kind != b"R" else "replay")()
            self.spool_error = self.spool_error or self._fallback.spool_error
            self.failure = self._fallback.failure or self.failure

    def _read_answer(self) -> dict[str, Any] | None:
        """The child's next counts (``K``), logging the records it logged before them; None at its end."""
        assert self._child.stdout is not None
        while (frame := _read_frame(self._child.stdout)) is not None:
            if frame[0] == b"L":
                name, level, message = orjson.loads(frame[1])
                logging.getLogger(name).log(level, "%s", message)
                continue
            answer: dict[str, Any] = orjson.loads(frame[1])
            return answer
        return None

    def _child_ready(self) -> bool:
        """Whether the child has written something (its ready frame, or a log record before it), without waiting.
        Where pipes cannot be polled (Windows), True: the first batch then waits for the child."""
        import select

        assert self._child.stdout is not None
        try:
            readable, _, _ = select.select([self._child.stdout], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _await_start(self) -> None:
        """Read the child's ready frame. A child that could not start (no emitter package for this interpreter, a
        transport it cannot build) has taken no event yet: delivery moves into this process, nothing lost."""
        self._started = True
        if self._fallback is None and self._read_answer() is not None:
            return
        if self._fallback is None:
            log.warning("the lineage delivery process could not start (exit code %s); delivering in this "
                        "process", self._child.poll())
            self._fallback = self._make_fallback()
            self._fallback.counts = self.counts
            self._fallback.replay()  # what an earlier run spooled goes first, as at any start

    def _take_counts(self, report: dict[str, Any]) -> None:
        self.spool_error = report.pop("spool_error", None) or self.spool_error
        self.failure = report.pop("failure", None) or self.failure
        self.counts = Counts(**report)

    def _child_died(self) -> None:
        """Events the child had not reported settled are lost for this run: counted as dropped, so a harvest
        keeps its state; the rest of the run delivers in this process."""
        if self._fallback is not None:
            return
        code = self._child.poll()
        settled = self.counts.delivered + self.counts.spooled + self.counts.dead_lettered + self.counts.dropped
        lost = max(0, self._sent - settled)
        log.error("the lineage delivery process ended unexpectedly (exit code %s): %d events it had not "
                  "confirmed are counted as dropped; delivering in this process from now on", code, lost)
        self._fallback = self._make_fallback()
        counts = attrs.evolve(self.counts, dropped=self.counts.dropped + lost)
        self._fallback.counts = self.counts = counts  # one tally from here on


# ---- the child -------------------------------------------------------------------------------------------


class _PipeLogHandler(logging.Handler):
    """The child's log records go to the harvest, which logs them as its own."""

    def __init__(self, out: IO[bytes], lock: threading.Lock) -> None:
        super().__init__(logging.INFO)
        self._out, self._lock = out, lock

    def emit(self, record: logging.LogRecord) -> None:
        try:
            payload = orjson.dumps([record.name, record.levelno, record.getMessage()[:2000]])
            with self._lock:
                _write_frame(self._out, b"L", payload)
                self._out.flush()
        except Exception:  # noqa: BLE001 - the harvest may be gone; the record is not worth a failure
            pass


def _answer(out: IO[bytes], lock: threading.Lock, report: dict[str, Any]) -> None:
    """A ``K`` frame to the harvest. A harvest that is gone (killed) closed the pipe: no answer then, and no
    traceback in the cron log; this child goes on keeping what it was handed (delivered or spooled)."""
    with lock:
        try:
            _write_frame(out, b"K", orjson.dumps(report))
            out.flush()
        except (BrokenPipeError, ValueError):  # (ValueError: the stream was already closed here)
            discard_writes(out)


def discard_writes(stream: IO[Any]) -> None:
    """Send what is still written to ``stream``, whose reader is gone, to /dev/null: what it buffers would fail
    again when it is flushed at exit (Python's advice for SIGPIPE)."""
    with contextlib.suppress(OSError, ValueError):  # (ValueError: the stream was closed already)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def serve() -> None:
    """The child: configuration, then events, until ``X`` or the end of input (the harvest ended): everything
    it was given is delivered, spooled or set aside before it exits."""
    from emitter.transport import create_transport

    # Ctrl-C reaches the whole process group: the harvest decides what happens (it closes this child, which then
    # delivers or spools what it holds, or it dies, and this child still does so at the end of its input).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    source, out = sys.stdin.buffer, sys.stdout.buffer
    lock = threading.Lock()
    root = logging.getLogger()
    root.handlers[:] = [_PipeLogHandler(out, lock)]
    root.setLevel(logging.INFO)
    frame = _read_frame(source)
    if frame is None or frame[0] != b"C":
        return
    settings = orjson.loads(frame[1])
    transport_config = settings["transport"]
    spool = Spool(settings["spool_dir"], settings["spool_max_bytes"], settings["destination"])
    legacy = Spool(settings["spool_dir"], settings["spool_max_bytes"])

    def make() -> Any:
        return create_transport(transport_config, announce=False)

    delivery = Delivery(make(), spool, settings["retry_after"], settings["width"], make, legacy_spool=legacy)
    _answer(out, lock, attrs.asdict(delivery.counts))  # ready: events may come
    delivery.replay()  # the spool of an earlier run first, before anything new
    while (frame := _read_frame(source)) is not None:
        kind, payload = frame
        if kind == b"E":
            for event in orjson.loads(payload):
                delivery.submit(event)
            continue
        if kind == b"R":
            delivery.replay()
        elif kind == b"X":
            delivery.close()
        else:
            delivery.flush()
        _answer(out, lock, {**attrs.asdict(delivery.counts), "spool_error": delivery.spool_error,
                            "failure": delivery.failure})
        if kind == b"X":
            return
    delivery.close()  # the harvest is gone: keep what it handed over
