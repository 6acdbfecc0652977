"""Running SQL executions, seen from the worker thread by polling Spark's SQL status store.

Python cannot register a ``SparkListener`` without a jar (``SparkListenerInterface`` would get a py4j call
for every task event, on Spark's listener thread), and the ``QueryExecutionListener`` only fires when an
action ends. So the worker asks the session's ``SQLAppStatusStore`` about the next execution ids about once
a second (one py4j call, ~0.6 ms, when nothing new started): an execution still running gets its START from
the ``QueryExecution`` Spark keeps for it (``SQLExecution.getQueryExecution``), then a RUNNING event each time
a poll sees it has started more Spark jobs; its end still comes from the listener, which reuses the run.

Executions shorter than a poll interval are reported at their end only, as before (START and COMPLETE
together): the early START is for actions long enough to be watched in a lineage UI.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import attrs


@attrs.define
class Tracked:
    """A running execution whose START may have been sent."""

    execution_id: int
    qe: Any  # py4j proxy of its QueryExecution
    qe_id: int | None  # QueryExecution.id (Spark 3.4+), to match the listener's QueryExecution
    submitted: datetime
    jobs: int = 0
    #: set once its START was emitted: (run id, job name suffix) reused by its RUNNING and terminal events
    run_id: str | None = None
    job_suffix: str | None = None
    lineage: Any = None
    ignored: bool = False  # an action the JVM integration does not emit
    attempts: int = 0
    #: the time of the last RUNNING event the poll sent (the poll's clock: it may pass the execution's end)
    last_sent: datetime | None = None


class ExecutionPoll:
    """Which executions started since the last poll, and which of the watched ones started new jobs."""

    MAX_NEW_PER_POLL = 50  # a burst of tiny actions is reported by the listener alone
    MAX_START_ATTEMPTS = 3  # a plan that cannot be read while running waits for the end
    RECENT = 16  # executions looked at for the first one submitted since the plugin came
    TAKEN_KEPT = 8  # executions taken lately, for a second take of the same one (see take)

    def __init__(self, jsession: Any, jvm: Any, min_age_s: float, since_ms: int) -> None:
        """``since_ms``: when the plugin came (epoch ms); executions submitted before are not its to start."""
        self._store = jsession.sharedState().statusStore()
        self._sql_execution = jvm.org.apache.spark.sql.execution.SQLExecution
        self._min_age_s = min_age_s
        self._since_ms = since_ms
        self._next: int | None = None
        self.watched: dict[int, Tracked] = {}
        self._taken: list[Tracked] = []

    def _first_id(self) -> int:
        # by submission time, not "the next id": the first poll may come after the plugin's first actions began
        count = self._store.executionsCount()
        if count <= 0:
            return 0
        recent = self._store.executionsList(max(0, count - self.RECENT), self.RECENT)
        first = None
        for i in range(recent.size() - 1, -1, -1):  # newest first: usually none or one is that recent
            data = recent.apply(i)
            if data.submissionTime() < self._since_ms:
                break
            first = int(data.executionId())
        if first is not None:
            return first
        return int(recent.apply(recent.size() - 1).executionId()) + 1 if recent.size() else 0

    def poll(self) -> tuple[list[Tracked], list[Tracked]]:
        """(newly seen running executions old enough to report, watched ones that started new jobs)."""
        if self._next is None:
            self._next = self._first_id()  # executions before the plugin came are not ours to start
        now = datetime.now(timezone.utc)
        new: list[Tracked] = []
        for _ in range(self.MAX_NEW_PER_POLL):
            execution_id = self._next
            found = self._store.execution(execution_id)
            if not found.isDefined():
                break  # not started, or its start not in the store yet
            # Spark holds an execution's QueryExecution from before its start reaches the store until it ended: in
            # the store and without one (asked in this order) is ended, passed in 3 py4j calls and one proxy to
            # release where reading its completion time takes 5 and 3: most executions end before a poll sees them
            qe = self._sql_execution.getQueryExecution(execution_id)
            if qe is None:
                self._next += 1
                continue
            data = found.get()
            if data.completionTime().isDefined():  # it ended between the two calls
                self._next += 1
                continue
            submitted = datetime.fromtimestamp(data.submissionTime() / 1000.0, tz=timezone.utc)
            if (now - submitted).total_seconds() < self._min_age_s:
                break  # look again next time: it may well end before and be reported by the listener alone
            self._next += 1
            if qe.getClass().getSimpleName() == "IncrementalExecution":
                # a streaming micro-batch: the streaming listener reports it at the batch's end under a run of its
                # own (spark_plugin/streaming.py); the QueryExecutionListener never ends a run started here
                continue
            try:
                qe_id = int(qe.id())
            except Exception:  # noqa: BLE001 - Spark < 3.4: matched by equals() instead
                qe_id = None
            tracked = Tracked(execution_id, qe, qe_id, submitted, jobs=int(data.jobs().size()))
            self.watched[execution_id] = tracked
            new.append(tracked)
        progressed: list[Tracked] = []
        for execution_id, tracked in list(self.watched.items()):
            if any(t is tracked for t in new):
                continue
            found = self._store.execution(execution_id)
            if not found.isDefined() or found.get().completionTime().isDefined():
                continue  # ended: the listener's call (queued or coming) reports it, and forgets it
            jobs = int(found.get().jobs().size())
            if jobs > tracked.jobs:
                tracked.jobs = jobs
                progressed.append(tracked)
        return new, progressed

    def unfinished(self) -> list[Tracked]:
        """The watched executions whose START was sent and whose end Spark's store does not know (all of them when
        the store cannot be read: the driver's JVM is going away), no longer watched from now on. One that ended
        there is left out: its end was reported to the listener, which may just not have been called yet."""
        out = []
        for execution_id, tracked in list(self.watched.items()):
            if tracked.run_id is None:
                continue
            try:
                found = self._store.execution(execution_id)
                ended = bool(found.isDefined() and found.get().completionTime().isDefined())
            except Exception:  # noqa: BLE001 - no JVM to ask: not ended as far as anyone can tell
                ended = False
            if not ended:
                out.append(tracked)
        self.watched.clear()
        return out

    def take(self, qe: Any) -> Tracked | None:
        """The watched execution of the listener's ``qe``, no longer watched from now on; None when not watched.
        Taking the same ``qe`` again gives the same execution: the end of the application may make an action's
        events while the worker is making them (for the spool, a backend being down), and both must name the
        run the poll started, or the spool would hold a second run of the action beside one that never ends."""
        if not self.watched and not self._taken:  # no py4j call while the poll has seen no long action
            return None
        try:
            qe_id = int(qe.id())
        except Exception:  # noqa: BLE001 - Spark < 3.4: matched by equals() instead
            qe_id = None

        def same(tracked: Tracked) -> bool:
            return tracked.qe_id == qe_id if qe_id is not None and tracked.qe_id is not None else tracked.qe.equals(qe)

        for execution_id, tracked in list(self.watched.items()):  # a copy: the worker's poll may add meanwhile
            if same(tracked):
                self.watched.pop(execution_id, None)
                self._taken.append(tracked)
                del self._taken[:-self.TAKEN_KEPT]
                return tracked
        return next((tracked for tracked in reversed(self._taken) if same(tracked)), None)
