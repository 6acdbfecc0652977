"""Delivery of built events: to the transport, else to the spool, else to the dead letters; in order.

Outcomes of one delivery (:func:`rejection` tells them apart):

- delivered;
- rejected for good: an HTTP 4xx other than 408/429 and those about the destination (401/407 credentials,
  404/405 no such endpoint: :data:`DESTINATION_4XX`) (Marquez answers 422 for an event it will never accept).
  Retrying cannot help and must not block the events behind it: the event goes to the spool's dead-letter file
  with the backend's answer, is counted, and delivery goes on;
- failed for now (connection refused, timeout, 408/429/5xx after the transport's own retries): the event goes to
  the spool, and so does every later event until a replay empties the spool (the backend sees the original
  order). The backend is then left alone for ``retry_after`` seconds, or for as long as its ``Retry-After``
  asked (at most :data:`RETRY_AFTER_MAX_S`): a dead or hanging backend costs one timeout, not one per event. The
  http transport does not retry a read timeout (``retry.read = 0`` unless configured): a backend that accepted
  the connection and does not answer will not answer the retry either;
- refused again and again while the backend takes other events: a replay whose first event is answered with a
  server error (:func:`server_error`: a 5xx other than 502/503/504, which say the backend or its proxy is down)
  sends the next event of another run; when that one is accepted and the first is refused once more, it is the
  event, not the backend (an event Marquez fails on with a 500): it is set aside as a dead letter, and the events
  behind it, which it would block forever, go on.

Two ways of sending. ``width == 1`` (file, console, kafka, composite, and any transport handed in): in the
caller's thread, in the order handed over. ``width > 1`` (http): up to ``width`` requests in flight on worker
threads, each with its own openlineage-python transport, while the order that matters is kept: an event waits
for the delivery of the previous event of its run, of the latest event of its parent run (a child never
reaches the backend before its parent's START), and a run's terminal event waits for every event of its
children handed over before it (the emitter hands a parent's terminal event over only after its children's).
"""
from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs

from emitter.redact import redact
from emitter.spool import MAX_FAILED_WITNESSES, Spool, SpoolError, Suspect

log = logging.getLogger(__name__)

#: HTTP answers that are not final: the backend may accept the same event later.
TRANSIENT_4XX = frozenset({408, 429})
#: Answers about the destination, not the event: credentials refused (401, 407 by a proxy), no such endpoint (404,
#: 405). Every event would get them until the configuration is fixed: they fail for now (spooled in order, sent by
#: the next run or `lineage-capture replay` once fixed) instead of setting every event aside as a dead letter.
DESTINATION_4XX = frozenset({401, 404, 405, 407})
#: Redirects a client follows with the same POST (301/302/303 turn it into a GET: the event would never arrive).
REPOSTED_REDIRECTS = frozenset({307, 308})
#: Server errors that say the backend (or the proxy before it) is down, not that it failed on this event.
UNAVAILABLE_5XX = frozenset({502, 503, 504})
#: A ``Retry-After`` up to this many seconds is waited for between the transport's retries; a longer one ends the
#: attempt at once, and the delivery leaves the backend alone that long (at most RETRY_AFTER_MAX_S).
RETRY_AFTER_WAIT_S, RETRY_AFTER_MAX_S = 5.0, 3600.0
#: Spooled events are written in batches of at most this many, at most this many seconds after the first.
SPOOL_BATCH, SPOOL_BATCH_SECONDS = 512, 0.2
#: Events handed over but not yet settled (in flight or waiting for an earlier one) before emit() blocks.
MAX_PENDING = 2000


@attrs.define
class Counts:
    """What happened to the events handed to the emitter."""

    delivered: int = 0  # reached the transport on the first try
    spooled: int = 0  # written to the durable spool for a later replay
    replayed: int = 0  # spooled earlier (by this or another process) and now delivered
    dropped: int = 0  # lost: the spool was full or unwritable, or an event could not be built
    dead_lettered: int = 0  # rejected by the backend for good; kept in the dead-letter file
    corrupt: int = 0  # spooled records a replay found torn or corrupt and skipped: their events are lost
    filtered: int = 0  # not sent: their job matches a configured filter (openlineage-python's ``filters``)

    def copy(self) -> Counts:
        return attrs.evolve(self)


class EventRefused(Exception):
    """A transport's final refusal of one event, not of its destination (kafka: a message too large for the
    broker): set aside as a dead letter, as an HTTP 4xx is. ``status``: the HTTP status of the same refusal (what
    the dead letters record), ``answer``: what the destination said."""

    def __init__(self, status: int, answer: str) -> None:
        super().__init__(answer)
        self.status, self.answer = status, answer


def rejection(error: BaseException) -> tuple[int, str] | None:
    """(status, answer) when ``error`` is the backend's final refusal of an event (an HTTP 4xx other than
    408/429, or a redirect that a POST cannot follow: 3xx but 307/308; read from the ``response`` that requests'
    and httpx's errors carry; or an :class:`EventRefused`), else None."""
    if isinstance(error, EventRefused):
        return error.status, error.answer
    status = _status(error)
    if status is None or not 300 <= status < 500 or status in TRANSIENT_4XX | REPOSTED_REDIRECTS | DESTINATION_4XX:
        return None
    return status, _answer_text(error)


def _status(error: BaseException) -> int | None:
    """The HTTP status of the answer a transport's error carries (requests', httpx's and our own errors hold it in
    ``response.status_code``), else None."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def _answer_text(error: BaseException) -> str:
    """The body of the answer a transport's error carries, "" when it has none or it cannot be read."""
    try:
        return str(error.response.text)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an unreadable body must not hide the status
        return ""


#: What a destination's refusal says about the configuration, in a summary line.
DESTINATION_HINTS = {401: " (credentials refused: check transport.auth)", 407: " (the proxy wants credentials)",
                     404: " (no such endpoint: check transport.url and transport.endpoint)",
                     405: " (no such endpoint: check transport.url and transport.endpoint)"}


def server_error(error: BaseException) -> int | None:
    """The status of a server error that may be the event's own doing (a 5xx but 502/503/504), else None."""
    status = _status(error)
    if status is not None and 500 <= status < 600 and status not in UNAVAILABLE_5XX:
        return status
    return None


def failure_reason(error: BaseException) -> str:
    """Why a delivery failed for now, for a summary line: the backend's answer, else that it was unreachable and
    how (``cannot connect to h:p: Connection refused (6 attempts)``, ``no answer within 5 s``), redacted."""
    status = _status(error)
    asked = getattr(error, "retry_after", None)
    if isinstance(asked, (int, float)):
        return f"the backend asked to be left alone for {asked:g} s"
    if status is not None:
        return f"the backend answered HTTP {status}" + DESTINATION_HINTS.get(status, "")
    lines = redact(str(error)).strip().splitlines()  # (redacted whole, then cut: a cut could split a secret)
    how = lines[0][:200] if lines else type(error).__name__
    return f"backend unreachable: {how}"


def _other_run(event: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether ``other`` belongs to a run unrelated to ``event``'s: another run, neither its parent or root nor one
    of its descendants. A backend failing on a run fails on all its events (only another run's event tells whether
    it fails on everything), and sending a related run's event ahead would break the order the backend needs (a
    child's START before its parent's, a parent's COMPLETE before its child's)."""
    run, other_run = _run_id(event), _run_id(other)
    if run == other_run:
        return False
    return run not in _ancestors(other) and other_run not in _ancestors(event)


def _field(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, None where a level is missing or not an object (a spooled event may be odd)."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _run_id(event: dict[str, Any]) -> str | None:
    return _text(_field(event, "run", "runId"))


def _parent_run_id(event: dict[str, Any]) -> str | None:
    return _text(_field(event, "run", "facets", "parent", "run", "runId"))


def _ancestors(event: dict[str, Any]) -> set[str]:
    """The run ids of ``event``'s parent and root (its ParentRunFacet)."""
    root = _text(_field(event, "run", "facets", "parent", "root", "run", "runId"))
    return {run for run in (_parent_run_id(event), root) if run}


@attrs.define(eq=False)
class _Node:
    """One event handed over in parallel mode, until it is settled."""

    event: dict[str, Any]
    run_id: str | None
    parent_id: str | None
    waiting: int = 0  # unsettled events it must wait for
    dependents: list[int] = attrs.Factory(list)
    replay_index: int | None = None  # a replayed event's position in the batch the spool handed over


@attrs.define
class _ReplayBatch:
    """Spooled events handed over together (:meth:`Delivery._replay_many`), until all are settled or left."""

    outcomes: dict[int, BaseException | None] = attrs.Factory(dict)
    #: run ids whose events wait for a later replay: a failed event's run and parent (its children, its parent's
    #: terminal event and, conservatively, its siblings stay behind it)
    blocked: set[str] = attrs.Factory(set)
    stopped: bool = False  # a failure that is not the event's own: nothing more is sent
    delivered: int = 0
    suspects: int = 0


class Delivery:
    """Sends events through the transport(s), spooling and dead-lettering as the module docstring says."""

    def __init__(self, transport: Any, spool: Spool, retry_after: float, width: int = 1,
                 make_transport: Callable[[], Any] | None = None, legacy_spool: Spool | None = None,
                 keep_refused: bool = False) -> None:
        self.transport = transport  # the caller's thread's transport: inline sending and replays
        #: a refused spooled event that cannot be set aside (dead letters full) stays in the spool and stops the
        #: replay (``lineage-capture replay``, run by hand); a producer's own replay counts it as lost instead: it
        #: must never block the events behind it
        self.keep_refused = keep_refused
        self.spool = spool
        self.legacy_spool = legacy_spool  # a spool of an older version (no destination recorded): adopted
        self.retry_after = retry_after
        self.width = width if make_transport is not None else 1
        self.counts = Counts()
        self.spool_error: str | None = None  # the first reason the spool could not be written
        self.failure: str | None = None  # why the last delivery that failed for now failed (failure_reason)
        self._make_transport = make_transport
        lock = threading.RLock()
        self._cv = threading.Condition(lock)  # settled events: wakes a caller waiting in flush() or for room
        # ready events: wakes one worker per event (waking all sixteen for each event cost more CPU than the POST)
        self._wakeup = threading.Condition(lock)
        self._blocked_until = 0.0
        self._replay_failure: BaseException | None = None  # what stopped the replay in progress
        self._failures: set[str] = set()
        self._buffer: list[dict[str, Any]] = []  # events on their way into the spool (see _keep)
        self._buffered_at = 0.0
        # Whether events wait in a spool: checked on disk once here, then tracked, so the hot path does not
        # stat the spool for every event.
        self._diverting = spool.pending_bytes() > 0 or bool(legacy_spool and legacy_spool.pending_bytes())
        # parallel mode
        self._seq = 0
        self._nodes: dict[int, _Node] = {}
        self._last_of_run: dict[str, int] = {}
        self._children: dict[str, set[int]] = {}
        self._ready: list[int] = []  # a heap: the oldest ready event goes first
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._in_flight = 0
        # Until a request succeeds (at start, after a failure) only one is in flight: a dead or hanging backend
        # gets one request, not `width`, and the events behind it reach the spool in the order handed over.
        self._healthy = False
        self._probe_since: float | None = None  # when that one request was sent (time.monotonic())
        # coroutine mode: `width` coroutines on one thread's event loop (see _run_coroutines)
        self._coroutines: bool | None = None
        self._loop: Any = None
        self._signal: Any = None  # an asyncio.Event: ready events, or stopping
        self._poked = False
        self._idle = 0  # coroutines waiting for a wake-up
        self._replaying: _ReplayBatch | None = None  # a replay's batch on the sending threads

    # ---- entry points (the emitter holds its own lock around these) ---------------------------------------


    def pending_events(self) -> list[dict[str, Any]]:
        """Events handed over in parallel mode and not yet settled (in flight included), oldest first. Read
        without the lock: a delivery stuck on the network may hold it, and this serves a process that is ending."""
        # (a replayed event is in the spool still)
        return [node.event for _, node in sorted(dict(self._nodes).items()) if node.replay_index is None]

    def stalled_for(self) -> float:
        """Seconds the one request probing a backend that has not answered yet (since start, or since a failure)
        has been in flight; 0.0 when none is (parallel mode only). A process that is ending and sees a stall need
        not wait to know the backend is down or hanging. Read without the lock, as :meth:`pending_events`."""
        since = self._probe_since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    def submit(self, event: dict[str, Any]) -> None:
        """Deliver, spool or dead-letter ``event``; in parallel mode it may still be in flight on return."""
        with self._cv:
            self._wait_for_replay()
            if self._diverting and time.monotonic() >= self._blocked_until:
                self._quiesce()
                self._drain()
            if self.width > 1 and not self._stopping:
                if len(self._nodes) >= MAX_PENDING:  # full: wait until half is settled (see _finish)
                    while len(self._nodes) > MAX_PENDING // 2:
                        self._cv.wait()
                self._start_workers()  # may set width to 1 when no thread can be started
            if self.width == 1 or self._stopping:  # one at a time, or after close(): in this thread
                if self._diverting:
                    self._keep(event)
                else:
                    self._settle(event, self._attempt(self.transport, event))
                return
            self._add_node(event)

    def replay(self) -> None:
        """Re-send the spool now, ignoring the back-off."""
        with self._cv:
            self._wait_for_replay()
            self._quiesce()
            self._blocked_until = 0.0
            self._drain(force=True)

    def flush(self) -> None:
        """Wait until every event handed over is settled; fsync the spool."""
        with self._cv:
            self._wait_for_replay()
            self._quiesce()
            self._write_buffer()
            try:
                self.spool.sync()
            except SpoolError as error:
                self._spool_failed(error, lost=0)

    def close(self) -> None:
        """Flush, stop the workers, close the transports."""
        self.flush()
        with self._cv:
            self._stopping = True
            self._wakeup.notify_all()
            self._poke()
        for thread in self._threads:
            thread.join()

    # ---- one delivery ------------------------------------------------------------------------------------

    @staticmethod
    def _attempt(transport: Any, event: dict[str, Any]) -> BaseException | None:
        try:
            transport.emit(event)
        except Exception as error:  # noqa: BLE001 - any transport failure is an outcome, never raised
            return error
        return None

    def _settle(self, event: dict[str, Any], error: BaseException | None) -> None:
        """Count a delivery, or keep the event as a dead letter or in the spool. Called with the lock held."""
        if error is None:
            self.counts.delivered += 1
            self._answered()
            return
        refused = rejection(error)
        if refused is not None:
            self._dead_letter(event, *refused)
            return
        wait = self._back_off(error)
        self._diverting = True  # later events queue behind this one (even when the spool cannot take it)
        self._healthy = False
        self._log_once("deliver", f"lineage delivery failed ({type(error).__name__}: {redact(str(error))}); "
                                  f"events go to the spool {self.spool.directory}, the backend is tried again "
                                  f"in {wait:g} s; further failures are counted, not logged")
        self._keep(event)

    def _answered(self) -> None:
        """A delivery went through: after a failure, as many requests in flight as there is work again."""
        if not self._healthy:
            self._healthy = True
            self._start_workers(coming=0)
            self._wakeup.notify(len(self._ready))
            self._poke()

    def _back_off(self, error: BaseException) -> float:
        """Leave the backend alone for ``retry_after`` seconds, or as long as it asked (``Retry-After``, capped);
        note why. Returns the seconds."""
        asked = getattr(error, "retry_after", None)
        wait = self.retry_after
        if isinstance(asked, (int, float)):
            wait = max(wait, min(float(asked), RETRY_AFTER_MAX_S))
        self._blocked_until = time.monotonic() + wait
        self.failure = failure_reason(error)
        return wait

    def _dead_letter(self, event: dict[str, Any], status: int, answer: str, why: str = "for good",
                     spooled: bool = False) -> None:
        """Set ``event`` aside with the backend's answer. One that cannot be (dead letters full, disk full) is lost
        and counted, unless it is ``spooled`` (a replay's by hand, :attr:`keep_refused`): then it stays in the spool
        (:class:`SpoolError` stops the replay at it), as the runs that spooled it have moved on."""
        try:
            kept = self.spool.add_dead_letter(event, status, answer)
        except SpoolError as error:
            if spooled:
                self._note_spool_error(error)
                raise
            self._spool_failed(error, lost=1)
            return
        if not kept:
            if spooled:
                full = SpoolError(f"lineage dead letters {self.spool.dead_letters_path} are full (spool.maxBytes): "
                                  f"an event the backend refused stays in the spool")
                self._note_spool_error(full)
                raise full
            self.counts.dropped += 1
            return
        self.counts.dead_lettered += 1
        self._log_once(f"reject{status}", f"the lineage backend refused an event {why} (HTTP {status}: "
                                          f"{redact(answer[:200])!r}); it was set aside in "
                                          f"{self.spool.dead_letters_path} (`lineage-capture replay "
                                          f"--dead-letters list`) and delivery goes on")

    def _keep(self, event: dict[str, Any]) -> None:
        """Into the spool; later events queue behind it until a replay empties the spool. Events are written in
        batches (one lock, one write): a dead backend at harvest rates spooled a few thousand events a second
        one at a time. The batch reaches the file within SPOOL_BATCH_SECONDS, and on flush() and close()."""
        self._diverting = True
        if not self._buffer:
            self._buffered_at = time.monotonic()
        self._buffer.append(event)
        if len(self._buffer) >= SPOOL_BATCH or time.monotonic() - self._buffered_at > SPOOL_BATCH_SECONDS:
            self._write_buffer()

    def _write_buffer(self) -> None:
        events, self._buffer = self._buffer, []
        if not events:
            return
        try:
            kept = self.spool.append_many(events)
        except SpoolError as error:
            self.counts.spooled += error.kept
            self._spool_failed(error, lost=len(events) - error.kept)
            return
        self.counts.spooled += kept
        self.counts.dropped += len(events) - kept

    def _spool_failed(self, error: SpoolError, lost: int) -> None:
        self.counts.dropped += lost
        if self.spool_error is None:
            self.spool_error = str(error)
            log.error("%s: undeliverable lineage events are LOST (counted) until it can be written", error)

    def _note_spool_error(self, error: SpoolError) -> None:
        """A refused spooled event that cannot be set aside: it stays in the spool; said once."""
        if self.spool_error is None:
            self.spool_error = str(error)
            log.error("%s; the replay stops at it until there is room (`lineage-capture replay --dead-letters "
                      "list|discard`)", error)

    def _log_once(self, kind: str, message: str) -> None:
        if kind not in self._failures:
            self._failures.add(kind)
            log.warning("%s", message)

    # ---- the spool -----------------------------------------------------------------------------------------

    def _drain(self, force: bool = False) -> None:
        """Replay the spool(s) in order, unless backing off. Called with the lock held and nothing in flight."""
        if not force and time.monotonic() < self._blocked_until:
            return
        self._write_buffer()  # the spool holds every kept event, in order, before it is replayed
        pending = 0
        for spool in (self.legacy_spool, self.spool):
            if spool is None or pending:
                continue
            corrupt = spool.corrupt
            self._replay_failure = None
            many = self._replay_many if self.width > 1 and self._make_transport is not None else None
            try:
                _, pending = spool.replay(self._replay_one, self._set_aside, _other_run, many)
            except SpoolError as error:
                self._spool_failed(error, lost=0)
                pending = spool.pending_bytes() or 1
            self.counts.corrupt += spool.corrupt - corrupt
        if pending:
            failure = self._replay_failure
            if failure is None:
                self._blocked_until = time.monotonic() + self.retry_after
            else:
                self._back_off(failure)
        self._diverting = bool(pending)

    def _replay_one(self, event: dict[str, Any]) -> None:
        outcome = self._replayed(event, self._attempt(self.transport, event))
        if outcome is not None:
            raise outcome

    def _replayed(self, event: dict[str, Any], error: BaseException | None) -> BaseException | None:
        """Settle one re-sent spooled event: counted, or set aside (refused for good); else what stops the replay
        there: :class:`Suspect` for a server error (the spool tries the event behind it, see the module
        docstring), the error itself (the event stays in the spool), or the SpoolError of a dead letter that
        cannot be kept (:meth:`_dead_letter`)."""
        if error is None:
            self.counts.replayed += 1
            return None
        refused = rejection(error)
        if refused is None:
            self._replay_failure = error
            return Suspect(error) if server_error(error) is not None else error
        try:
            self._dead_letter(event, *refused, spooled=self.keep_refused)
        except SpoolError as full:
            return full
        return None

    def _replay_many(self, events: list[dict[str, Any]]) -> dict[int, BaseException | None]:
        """Send spooled ``events`` on the sending threads, as many at once as fresh ones (a replay one request at
        a time took ten times as long as delivering the same events fresh), in the order that matters
        (:meth:`_add_node`); each settled as :meth:`_replay_one` settles it. What :meth:`_replay_one` would raise
        is returned by position in ``events``; an event not sent (behind a failure) has no outcome. Called with
        the lock held and nothing in flight (see :meth:`_drain`)."""
        self._start_workers(coming=len(events))
        if self.width == 1:  # no thread could be started: one at a time, in this thread
            return self._replay_here(events)
        batch = self._replaying = _ReplayBatch()
        try:
            for index, event in enumerate(events):
                self._add_node(event, replay_index=index)
            self._quiesce()
        finally:
            self._replaying = None
            self._cv.notify_all()  # callers waiting for the replay (see _wait_for_replay)
        return batch.outcomes

    def _replay_here(self, events: list[dict[str, Any]]) -> dict[int, BaseException | None]:
        outcomes: dict[int, BaseException | None] = {}
        for index, event in enumerate(events):
            try:
                self._replay_one(event)
                outcomes[index] = None
            except Exception as error:  # noqa: BLE001 - what stops the replay, read by the spool
                outcomes[index] = error
                break
        return outcomes

    def _settle_replayed(self, node: _Node, error: BaseException | None) -> None:
        """Settle a spooled event a sending thread re-sent, as :meth:`_replay_one` does, and note its outcome.
        Called with the lock held."""
        batch = self._replaying
        assert batch is not None and node.replay_index is not None
        outcome = self._replayed(node.event, error)
        if error is None:
            batch.delivered += 1
            self._answered()
        elif outcome is error:  # down or refusing for now: one request at a time again, the probe (_take_one)
            self._healthy = False
        if outcome is not None:
            batch.blocked.update(run for run in (node.run_id, node.parent_id) if run)
            batch.suspects += isinstance(outcome, Suspect)
            # a failure not of the event's own, or server errors on every event sent: the destination's
            if not isinstance(outcome, Suspect) or (batch.suspects > MAX_FAILED_WITNESSES and not batch.delivered):
                batch.stopped = True
        batch.outcomes[node.replay_index] = outcome

    def _wait_for_replay(self) -> None:
        """Until a replay on the sending threads (which waits with the lock released) has ended."""
        while self._replaying is not None:
            self._cv.wait()

    def _set_aside(self, event: dict[str, Any], suspect: Suspect) -> None:
        """A spooled event the backend failed on twice while it accepted the one behind it: a dead letter."""
        self._replay_failure = None
        status = server_error(suspect.error) or 500
        self._dead_letter(event, status, _answer_text(suspect.error) or str(suspect.error),
                          why="again and again while it accepted the next one", spooled=self.keep_refused)

    # ---- parallel mode -----------------------------------------------------------------------------------

    def _start_workers(self, coming: int = 1) -> None:
        if self.width == 1 or self._make_transport is None:  # one at a time, in the caller's thread
            return
        if self._coroutines is None:  # decided once: coroutines when the transport can await its posts
            sender = getattr(self.transport, "async_sender", None)
            self._coroutines = sender is not None and sender() is not None
        if self._coroutines:
            if not self._threads:
                self._start_thread(self._run_coroutines, "lineage-delivery")
            return
        self._start_threads(coming)

    def _start_thread(self, target: Callable[[], None], name: str) -> bool:
        thread = threading.Thread(target=target, name=name, daemon=True)
        try:
            thread.start()
        except RuntimeError as error:  # no more threads in this process: deliver with those there are
            self._log_once("thread", f"lineage delivery: no thread for parallel sending ({error}); "
                                     f"{len(self._threads) or 'none'} running")
            if not self._threads:
                self.width = 1  # in the caller's thread, one at a time
            return False
        self._threads.append(thread)
        return True

    def _start_threads(self, coming: int = 1) -> None:
        """Start delivery threads while every running one is busy, up to ``width``: a Spark driver sending a few
        events a second keeps one or two, a harvest against a slow backend gets them all (with 10 ms answers it
        takes 40 or more requests in flight to keep up with a harvest). While the backend is failing, one is
        enough. ``coming``: events about to be handed over, on top of those ready."""
        running = len(self._threads)
        if running and not self._healthy:
            return
        wanted = min(self.width, self._in_flight + len(self._ready) + coming)  # one thread per event to send
        while running < wanted and self._start_thread(self._work, f"lineage-delivery-{running}"):
            running += 1

    def _quiesce(self) -> None:
        """Wait until no event is in flight or waiting (a replay must not overtake them)."""
        while self._nodes:
            self._cv.wait()

    def _add_node(self, event: dict[str, Any], replay_index: int | None = None) -> None:
        run_id = _run_id(event)
        node = _Node(event, run_id, _parent_run_id(event), replay_index=replay_index)
        parent_id = node.parent_id
        seq = self._seq = self._seq + 1
        waits_for = set()
        if run_id in self._last_of_run:
            waits_for.add(self._last_of_run[run_id])
        if parent_id in self._last_of_run:
            waits_for.add(self._last_of_run[parent_id])
        if run_id in self._children and event.get("eventType") in ("COMPLETE", "FAIL", "ABORT"):
            waits_for |= self._children[run_id]
        for earlier in waits_for:
            self._nodes[earlier].dependents.append(seq)
        node.waiting = len(waits_for)
        self._nodes[seq] = node
        if run_id:
            self._last_of_run[run_id] = seq
        if parent_id:
            self._children.setdefault(parent_id, set()).add(seq)
        if not node.waiting:
            self._make_ready(seq)
        self._spill_ready()

    def _make_ready(self, seq: int) -> None:
        heapq.heappush(self._ready, seq)
        self._wakeup.notify()
        self._poke()

    def _finish(self, seq: int) -> None:
        node = self._nodes.pop(seq)
        if node.run_id and self._last_of_run.get(node.run_id) == seq:
            del self._last_of_run[node.run_id]
        if node.parent_id:
            siblings = self._children.get(node.parent_id)
            if siblings is not None:
                siblings.discard(seq)
                if not siblings:
                    del self._children[node.parent_id]
        for later in node.dependents:
            waiting = self._nodes[later]
            waiting.waiting -= 1
            if not waiting.waiting:
                self._make_ready(later)
        if len(self._nodes) <= MAX_PENDING // 2:
            # Waiters want room (half empty) or nothing left (flush). Waking a blocked emit() for every settled
            # event made the two threads hand the GIL back and forth once per event: half the delivery's CPU.
            self._cv.notify_all()

    def _spill_ready(self) -> None:
        """While diverting (the spool holds earlier events): the events ready to go follow them into the spool,
        oldest first, and so do the events each of them released, so the spool keeps the order handed over. (Not
        a replay's: they are in the spool still.)"""
        while self._diverting and self._replaying is None and self._ready:
            seq = heapq.heappop(self._ready)
            self._keep(self._nodes[seq].event)
            self._finish(seq)

    def _own_transport(self) -> Any:
        """A transport for a sending thread (its own connections), else the caller's."""
        assert self._make_transport is not None
        try:
            return self._make_transport()
        except Exception as error:  # noqa: BLE001 - it was built once already; share the caller's instead
            self._log_once("worker", f"lineage delivery: a second transport could not be built "
                                     f"({type(error).__name__}: {redact(str(error))}); sharing the first")
            return self.transport

    def _attempted(self, seq: int, event: dict[str, Any], failure: BaseException | None) -> None:
        """Settle an event a thread or coroutine sent, and release what waited for it."""
        with self._cv:
            self._in_flight -= 1
            self._probe_since = None
            node = self._nodes[seq]
            try:
                if node.replay_index is None:
                    self._settle(event, failure)
                else:
                    self._settle_replayed(node, failure)
            except Exception as bug:  # noqa: BLE001 - a bug costs this event, never the others
                if node.replay_index is None:
                    self.counts.dropped += 1
                self._log_once("settle", f"lineage delivery failed ({type(bug).__name__}: {bug})")
            finally:
                self._finish(seq)
                self._spill_ready()

    def _take_ready(self) -> tuple[int, dict[str, Any]] | None:
        """The oldest ready event, counted as a request about to be sent (lock held); None when none may go now.
        While the backend has not answered, one request is the only one, and :meth:`stalled_for` times it. A
        replayed event behind a failure of its replay (see :class:`_ReplayBatch`) is left unsent: it stays in the
        spool."""
        while self._ready and (self._healthy or not self._in_flight):
            seq = heapq.heappop(self._ready)
            node = self._nodes[seq]
            batch = self._replaying
            if node.replay_index is not None and batch is not None and (
                    batch.stopped or node.run_id in batch.blocked or node.parent_id in batch.blocked):
                batch.blocked.update(run for run in (node.run_id, node.parent_id) if run)  # its children too
                self._finish(seq)
                continue
            self._in_flight += 1
            if not self._healthy:
                self._probe_since = time.monotonic()
            return seq, node.event
        return None

    def _work(self) -> None:
        transport = self._own_transport()
        try:
            while True:
                with self._cv:
                    while not self._stopping and not (self._ready and (self._healthy or not self._in_flight)):
                        self._wakeup.wait()
                    if self._stopping and not self._ready:
                        return
                    self._spill_ready()
                    taken = self._take_ready()
                    if taken is None:
                        continue
                seq, event = taken
                self._attempted(seq, event, self._attempt(transport, event))
        finally:
            try:
                if transport is not self.transport:
                    transport.close()
            except Exception:  # noqa: BLE001 - closing a session must not kill the worker noisily
                pass

    # ---- coroutine mode ----------------------------------------------------------------------------------
    # An http transport that can await its posts (emitter.keepalive_http) is driven by `width` coroutines on one
    # thread's event loop instead of `width` threads: 64 requests in flight cost about 85 us of CPU per request
    # instead of about 150 us in thread switches. Same graph, same lock, same settling as the threads.

    def _poke(self) -> None:
        """Wake the coroutines (called with the lock held, from any thread); one wake-up call at a time, and
        none while every coroutine is busy (each takes the next ready event itself when its request ends): a
        wake-up is a write to the loop's pipe and a thread switch, which per event cost a fifth of the delivery."""
        if self._loop is not None and not self._poked and (self._idle or self._stopping):
            self._poked = True
            try:
                self._loop.call_soon_threadsafe(self._wake_coroutines)
            except RuntimeError:  # the loop has ended
                self._poked = False

    def _wake_coroutines(self) -> None:
        with self._cv:
            self._poked = False
        self._signal.set()

    def _run_coroutines(self) -> None:
        try:
            loop = _new_event_loop()
            try:
                loop.run_until_complete(self._serve())
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
        except BaseException as bug:  # noqa: BLE001 - a dead sender must not leave flush() waiting forever
            self._sender_died(bug)

    def _sender_died(self, bug: BaseException) -> None:
        """The thread that sends ended by a bug: what it had not settled goes to the spool (a replay sends it; an
        event that was in flight may then arrive twice), and later events are sent one at a time in the caller's
        thread."""
        with self._cv:
            self._log_once("sender", f"lineage delivery: the sending thread failed ({type(bug).__name__}: "
                                     f"{redact(str(bug))}); undelivered events go to the spool")
            self.width = 1
            self._diverting = True
            for seq in sorted(self._nodes):
                self._keep(self._nodes[seq].event)
            self._nodes.clear()
            self._ready.clear()
            self._last_of_run.clear()
            self._children.clear()
            self._in_flight = 0
            self._write_buffer()
            self._cv.notify_all()

    async def _serve(self) -> None:
        import asyncio

        transport = self._own_transport()
        senders = [transport.async_sender() for _ in range(self.width)]
        with self._cv:
            self._signal = asyncio.Event()
            self._loop = asyncio.get_running_loop()
        try:
            await asyncio.gather(*(self._send_ready(sender) for sender in senders))
        finally:
            with self._cv:
                self._loop = None
            for sender in senders:
                sender.close()
            if transport is not self.transport:
                try:
                    transport.close()
                except Exception:  # noqa: BLE001 - closing must not fail the delivery
                    pass

    async def _send_ready(self, sender: Any) -> None:
        """One coroutine: take the oldest ready event, post it, settle it; until stopped."""
        while True:
            with self._cv:
                if self._stopping and not self._ready:
                    return
                self._spill_ready()
                taken = self._take_ready()
                if taken is None:
                    self._signal.clear()
                    self._idle += 1  # from here on a new ready event pokes (see _poke)
            if taken is None:
                await self._signal.wait()
                with self._cv:
                    self._idle -= 1
                continue
            seq, event = taken
            try:
                await sender.emit(event)
                failure: BaseException | None = None
            except Exception as error:  # noqa: BLE001 - any transport failure is an outcome, never raised
                failure = error
            self._attempted(seq, event, failure)


def _new_event_loop() -> Any:
    """The delivery thread's own event loop: uvloop's where it is installed (Linux, macOS), a quarter less CPU per
    request than asyncio's loop in benchmarks/delivery_faults.py; asyncio's otherwise. The process-wide event loop
    policy is left alone (the host may run asyncio code of its own)."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
