"""The one harvest sequence every source plugs into, and what every ``harvest`` subcommand shares.

:func:`run_harvest` runs a :class:`HarvestSource` through: validate the options, load the state, take the state's
lock, build the emitter, resume the open task runs, harvest, save the state, print the summary line. The state
is committed only after the emitter delivered (or spooled) every event: a failed delivery never advances it.

Exit codes (:data:`EXIT_OK`, :data:`EXIT_SKIPPED`, :data:`EXIT_USAGE`, :data:`EXIT_SPOOLED`): 0 everything
harvested; 1 some input was unreadable or unparseable and was skipped (counted in the summary, everything else
emitted), or events could not be delivered nor spooled (the state was then not advanced); 2 usage or
configuration error; 3 everything harvested and the state advanced, but events did not reach the backend: they
wait in the spool (backend unreachable) or were refused by it for good (dead letters). Another harvest
holding the state's lock is not an error: the second run prints a message and exits 0 (cron overlap is normal;
the running harvest covers the input).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

import attrs

from harvesters.core.outcome import UsageError
from harvesters.core.state import Checkpoint, StateError

EXIT_OK, EXIT_SKIPPED, EXIT_USAGE, EXIT_SPOOLED = 0, 1, 2, 3
DEFAULT_JOB_NAMESPACE = "default"
EXIT_CODES_HELP = ("exit codes: 0 everything harvested (or another harvest holds the state's lock); 1 input "
                   "skipped (unreadable or unparseable, counted in the summary) or events neither delivered nor "
                   "spooled (state not advanced); 2 usage, configuration or reading error; 3 events did not reach "
                   "the backend: spooled (backend unreachable; `lineage-capture replay` or the next run sends them) "
                   "or refused by it (dead letters: `lineage-capture replay --dead-letters list`); 1 outranks 3")


# ---- options every source shares -----------------------------------------------------------------------


def instant(text: str) -> datetime:
    """ISO 8601 date or time; naive means UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def minutes_option(*, zero_allowed: bool) -> Callable[[str], timedelta]:
    """An argparse type reading a number of minutes: an idle gap must be positive, a lag or overlap may be 0."""

    def minutes(text: str) -> timedelta:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
        if value < 0 or (value == 0 and not zero_allowed):
            raise argparse.ArgumentTypeError("minutes cannot be negative" if zero_allowed
                                             else "the idle gap must be positive")
        return timedelta(minutes=value)

    return minutes


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The options of every ``harvest`` subcommand: namespace, state, idle gap, window, dry run, overrides."""
    from lineage_capture.version import add_version_option

    add_version_option(parser)
    parser.add_argument("--namespace", help="job namespace of the task runs (default: $OPENLINEAGE_NAMESPACE, "
                                            f"else {DEFAULT_JOB_NAMESPACE!r}, as for the Spark plugin and Airflow)")
    parser.add_argument("--state", type=Path, metavar="FILE",
                        help="harvest state (position, open task runs); enables resuming and the lock")
    parser.add_argument("--idle-gap", type=minutes_option(zero_allowed=False), default=timedelta(minutes=30),
                        metavar="MINUTES",
                        help="a pause longer than this between statements of a session ends its task run "
                             "(default 30)")
    parser.add_argument("--since", type=instant, metavar="TIME", help="skip events before TIME (ISO 8601, UTC)")
    parser.add_argument("--until", type=instant, metavar="TIME",
                        help="stop at the first event at or after TIME; the state then resumes there")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the events as JSON lines on stdout instead of sending them; state untouched")
    parser.add_argument("--parent-namespace", metavar="NS",
                        help="Airflow's OpenLineage namespace, for the compact parent id 'ol=<dag>/<task>/<run>/<dag "
                             "run>' that leaves it out (default: the job namespace)")
    parser.add_argument("--keep-system-objects", action="store_true",
                        help="keep the server's own catalog and monitoring views (sys.*, INFORMATION_SCHEMA, msdb's "
                             "job tables, tempdb, SNOWFLAKE.ACCOUNT_USAGE ...) as datasets; left out by default")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="OpenLineage configuration override, e.g. transport.type=file (repeatable; wins over "
                             "openlineage.yml and OPENLINEAGE__* variables; keep secrets in those instead)")


def job_namespace(arg: str | None) -> str:
    """The task runs' job namespace: the option, else ``$OPENLINEAGE_NAMESPACE``, else ``default``."""
    return arg or os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_JOB_NAMESPACE


# ---- the emitter and the summary -----------------------------------------------------------------------


class _StdoutTransport:
    """--dry-run: events as JSON lines on stdout. A reader that stops reading (``| head``) ends the output, not
    the harvest: nothing of a dry run is kept, so nothing is lost."""

    #: what the emitter's closing line calls the events it handed over ("delivered" would say they were sent)
    outcome = "printed to stdout (dry run: none sent)"

    def __init__(self) -> None:
        self.reader_gone = False

    def emit(self, event: dict[str, Any]) -> None:
        if self.reader_gone:
            return
        try:
            sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        except BrokenPipeError:
            self._stop_writing()

    def close(self) -> None:
        if not self.reader_gone:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                self._stop_writing()

    def _stop_writing(self) -> None:
        from emitter.delivery_process import discard_writes

        self.reader_gone = True
        discard_writes(sys.stdout)


def make_emitter(conf: list[str], dry_run: bool) -> Any:
    """The emitter from the OpenLineage configuration (raises ValueError on a bad one). A dry run's emitter has a
    spool of its own, removed with it: the configured destination's spool is neither replayed to stdout (its
    events would never reach their backend) nor added to."""
    from emitter.config import load_config, parse_overrides
    from emitter.emitter import Emitter

    config = load_config(parse_overrides(conf))
    if not dry_run:
        return Emitter(config, delivery_process=True)
    import tempfile
    import weakref

    scratch = tempfile.TemporaryDirectory(prefix="lineage-capture-dry-run-")
    emitter = Emitter(attrs.evolve(config, spool_dir=Path(scratch.name)), transport=_StdoutTransport())
    weakref.finalize(emitter, scratch.cleanup)  # the scratch spool lives (and is removed) with the emitter
    return emitter


class Progress:
    """A status line on stderr, at most once a second, only when stderr is a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty()
        self.started = self._last = time.monotonic()

    def tick(self, harvest: Any) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < 1.0:
            return
        self._last = now
        statements = harvest.grouper.counts.statements
        rate = statements / max(now - self.started, 1e-9)
        sys.stderr.write(f"\r{self.label}: {harvest.counts.events:,} events, {statements:,} statements "
                         f"({rate:,.0f}/s)   ")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled and time.monotonic() - self.started >= 1.0:
            sys.stderr.write("\n")


def _by_reason(counter: Any) -> str:
    return ", ".join(f"{reason}: {n}" for reason, n in counter.most_common())


def summary_line(label: str, harvest: Any, grouper: Any, open_runs: int, note: str) -> str:
    """One line: events (or history rows) read, statements, runs emitted, unparsed with reasons, unreadable
    events."""
    c, g = harvest.counts, grouper.counts
    unparsed, unreadable = sum(c.unparsed.values()), sum(c.unreadable.values())
    parts = [f"{c.events} {c.READ} read", f"{g.statements} statements ({g.with_lineage} with lineage)",
             f"{g.runs} runs emitted ({g.records} events)",
             f"{unparsed} unparsed" + (f" ({_by_reason(c.unparsed)})" if unparsed else ""),
             f"{unreadable} unreadable" + (f" ({_by_reason(c.unreadable)})" if unreadable else "")]
    if c.outside_window:
        parts.append(f"{c.outside_window} before --since")
    parts.extend(f"{n} {note}" for note, n in c.attention.items() if n)
    if c.source:
        parts.append(_by_reason(c.source))
    if open_runs:
        parts.append(f"{open_runs} task runs kept open")
    return f"{label}: " + ", ".join(parts) + f"; {note}"


# ---- the run sequence ----------------------------------------------------------------------------------


@contextlib.contextmanager
def state_lock(label: str, args: argparse.Namespace) -> Iterator[bool | None]:
    """Hold the state file's lock for the harvest (none without ``--state`` or with ``--dry-run``). Yields False,
    after saying so, when another harvest holds it: that harvest covers the input, so this one does nothing; None,
    after saying why, when the lock cannot be taken at all (the state's directory is unusable)."""
    from harvesters.core.state import HarvestLock, LockBusy

    lock = HarvestLock(args.state) if args.state and not args.dry_run else None
    if lock is not None:
        try:
            lock.acquire()
        except LockBusy as error:
            print(f"{label}: {error}; nothing done (that harvest covers the input)", file=sys.stderr)
            yield False
            return
        except StateError as error:
            print(f"{label}: {error}", file=sys.stderr)
            yield None
            return
    try:
        yield True
    finally:
        if lock is not None:
            lock.release()


def finish_harvest(label: str, args: argparse.Namespace, emitter: Any, checkpoint: Any, harvest: Any,
                   grouper: Any, window_note: str = "") -> int:
    """Deliver what is left, advance the checkpoint only when no event was lost, print the summary line and
    return the exit code."""
    counts = emitter.close()
    if counts.dropped:
        reason = emitter.spool_error
        note = (f"{counts.dropped} events could not be delivered nor spooled"
                + (f" ({reason})" if reason else "") + ": state not advanced")
        print(summary_line(label, harvest, grouper, grouper.open_count, note), file=sys.stderr)
        return EXIT_SKIPPED
    if args.state and not args.dry_run:
        try:
            checkpoint.commit()
        except OSError as error:  # delivered, but the next harvest will read the same input again
            note = (f"state NOT saved to {args.state} ({error.strerror or error}): the next harvest sends the same "
                    "events again")
            print(summary_line(label, harvest, grouper, grouper.open_count, note), file=sys.stderr)
            return EXIT_SKIPPED
        note = f"state saved to {args.state}"
    else:
        note = "dry run, state untouched" if args.dry_run and args.state else "no state kept"
    undelivered = delivery_note(counts, emitter)
    if undelivered:
        note = f"{undelivered}; {note}"
    if window_note:
        note = f"{window_note}; {note}"
    if getattr(getattr(emitter, "config", None), "disabled", False):  # ("runs emitted" alone read as if sent)
        note = f"emission disabled (OPENLINEAGE_DISABLED or disabled: true): no event was sent; {note}"
    print(summary_line(label, harvest, grouper, grouper.open_count if args.state else 0, note), file=sys.stderr)
    if harvest.counts.to_look_at() or counts.corrupt:  # (before 3: the spool is sent again by itself, a skipped
        return EXIT_SKIPPED                                # input is not, and no later run says it again)
    if undelivered and (emitter.spool.pending_bytes() or counts.dead_lettered):
        return EXIT_SPOOLED
    return EXIT_OK


def delivery_note(counts: Any, emitter: Any) -> str:
    """What the summary line says when events did not reach the backend (exit code 3), else ''."""
    parts = []
    spool = emitter.spool
    if spool.pending_bytes():  # spooled events a replay during the run did not send
        why = emitter.delivery_failure or "backend unreachable"
        parts.append(f"{counts.spooled} events spooled, not delivered ({why}; "
                     f"`lineage-capture replay` or the next run sends them from {spool.directory})")
    if counts.dead_lettered:
        parts.append(f"{counts.dead_lettered} events refused by the backend and set aside "
                     f"(`lineage-capture replay --dead-letters list`)")
    if counts.corrupt:
        parts.append(f"{counts.corrupt} torn or corrupt spool records skipped (their events are lost)")
    return "; ".join(parts)


@attrs.define
class Harvested:
    """What a source's harvest returns to the run sequence."""

    harvest: Any  #: the source's harvest loop: its ``counts`` and ``grouper`` make the summary line
    clock: datetime  #: the time task runs are judged idle against
    note: str = ""  #: added to the summary line (e.g. the live window read)


class HarvestSource(Protocol):
    """One kind of log, plugged into :func:`run_harvest`. Built from the parsed options (raising
    :class:`~harvesters.core.outcome.UsageError` on bad ones), it knows its state's identity, harvests into the
    task grouper and saves what it needs to resume."""

    label: str  #: ``harvest sqlserver``: prefixes every message and the summary line
    integration: str  #: the jobType facet's integration (SQLSERVER, SNOWFLAKE)
    state_name: str  #: what the state file belongs to; a state of another source is refused

    def harvest(self, grouper: Any, checkpoint: Checkpoint, progress: Progress) -> Harvested:
        """Read the input into ``grouper``; state positions go into ``checkpoint.current``."""

    def save_state(self, state: dict[str, Any], harvested: Harvested) -> None:
        """Add what the next harvest resumes from (besides the open task runs) to ``state``."""


def run_harvest(make_source: Callable[[argparse.Namespace], HarvestSource], label: str,
                args: argparse.Namespace) -> int:
    """Validate, lock, build the emitter, resume, harvest, save the state and print the summary: the exit code."""
    try:
        source = make_source(args)
        checkpoint = Checkpoint.load(args.state, source.state_name)
    except (UsageError, StateError) as error:
        print(f"{label}: {error}", file=sys.stderr)
        return EXIT_USAGE

    with state_lock(label, args) as free:
        if free is None:
            return EXIT_USAGE
        if not free:
            return EXIT_OK
        return _harvest(source, checkpoint, label, args)


def _harvest(source: HarvestSource, checkpoint: Checkpoint, label: str, args: argparse.Namespace) -> int:
    """The run sequence once the state is locked."""
    from harvesters.core.tasks import TaskGrouper

    try:
        emitter = make_emitter(args.conf, args.dry_run)
    except ValueError as error:
        print(f"{label}: {error}", file=sys.stderr)
        return EXIT_USAGE
    grouper = TaskGrouper(emitter.emit, job_namespace(args.namespace), source.integration, args.idle_gap)
    grouper.parent_namespace = getattr(args, "parent_namespace", None) or grouper.job_namespace
    grouper.restore(checkpoint.last.get("open_runs", ()))
    progress = Progress(label)
    try:
        harvested = source.harvest(grouper, checkpoint, progress)
    except UsageError as error:
        print(f"{label}: {error}", file=sys.stderr)
        emitter.close()
        return EXIT_USAGE
    except Exception as error:  # noqa: BLE001 - a live source may fail in many ways; nothing is committed
        from emitter.redact import redact

        print(f"{label}: reading failed ({type(error).__name__}: {redact(str(error))}); state not advanced",
              file=sys.stderr)
        emitter.close()
        return EXIT_USAGE
    progress.done()
    if args.state:
        grouper.close_idle(harvested.clock)
        checkpoint.current["open_runs"] = grouper.open_runs_state()
        source.save_state(checkpoint.current, harvested)
    else:
        grouper.close_all()  # no next harvest to continue them
    return finish_harvest(label, args, emitter, checkpoint, harvested.harvest, grouper, harvested.note)
