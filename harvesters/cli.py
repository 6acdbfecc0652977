"""``harvest``: cron-run lineage harvesters. ``harvest sqlserver`` reads SQL Server Extended Events.

Exit codes: 0 everything harvested; 1 some input was unreadable or unparseable and was skipped (counted in
the summary, everything else emitted), or events could not be delivered nor spooled (the state was then not
advanced); 2 usage or configuration error. Another harvest holding the state's lock is not an error: the
second run prints a message and exits 0 (cron overlap is normal; the running harvest covers the input).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger("harvesters.cli")

EXIT_OK, EXIT_SKIPPED, EXIT_USAGE = 0, 1, 2
DEFAULT_JOB_NAMESPACE = "default"
#: Bytes of an XML file's start remembered with its position, to notice a file replaced by another.
HEAD_BYTES = 4096
#: ODBC login timeout: a cron run against an unreachable server gives up instead of holding the lock.
LOGIN_TIMEOUT_SECONDS = 30


def _instant(text: str) -> datetime:
    """ISO 8601 date or time; naive means UTC."""
    try:
        instant = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return instant if instant.tzinfo else instant.replace(tzinfo=timezone.utc)


def _minutes(text: str) -> timedelta:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the idle gap must be positive")
    return timedelta(minutes=value)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", help="job namespace of the task runs (default: $OPENLINEAGE_NAMESPACE, "
                                            f"else {DEFAULT_JOB_NAMESPACE!r}, as for the Spark plugin and Airflow)")
    parser.add_argument("--state", type=Path, metavar="FILE",
                        help="harvest state (position, open task runs); enables resuming and the lock")
    parser.add_argument("--idle-gap", type=_minutes, default=timedelta(minutes=30), metavar="MINUTES",
                        help="a pause longer than this between statements of a session ends its task run "
                             "(default 30)")
    parser.add_argument("--since", type=_instant, metavar="TIME", help="skip events before TIME (ISO 8601, UTC)")
    parser.add_argument("--until", type=_instant, metavar="TIME",
                        help="stop at the first event at or after TIME; the state then resumes there")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the events as JSON lines on stdout instead of sending them; state untouched")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="OpenLineage configuration override, e.g. transport.type=file (repeatable; wins over "
                             "openlineage.yml and OPENLINEAGE__* variables; keep secrets in those instead)")


def _add_sqlserver(sub: Any) -> None:
    parser = sub.add_parser("sqlserver", help="harvest SQL Server Extended Events",
                            description="Harvest lineage from SQL Server Extended Events (see README).")
    source = parser.add_argument_group("source (one of)")
    source.add_argument("--xml", action="append", metavar="FILE",
                        help="exported event XML: one <event> per line, a stream of <event>s or a "
                             "<RingBufferTarget> document; '-' reads stdin (repeatable)")
    source.add_argument("--connection-string", metavar="ODBC",
                        help="ODBC connection string without the password, e.g. "
                             "'Driver={ODBC Driver 18 for SQL Server};Server=db01,1433;Encrypt=yes'")
    source.add_argument("--dsn", help="ODBC data source name (odbc.ini)")
    parser.add_argument("--user", help="login (UID) for --connection-string/--dsn")
    parser.add_argument("--password-env", metavar="VAR", help="environment variable holding the password")
    parser.add_argument("--target", choices=("event_file", "ring_buffer"), default="event_file",
                        help="event session target to read live (default event_file)")
    parser.add_argument("--xe-session", default="openlineage", metavar="NAME",
                        help="event session name (default openlineage)")
    parser.add_argument("--xe-path", metavar="PATTERN",
                        help="event_file path pattern for fn_xe_file_target_read_file (default NAME*.xel, "
                             "resolved in the server's log directory)")
    parser.add_argument("--backend", default="sqlserver", help=argparse.SUPPRESS)  # "sqlite": the test stand-in
    parser.add_argument("--server", metavar="HOST[:PORT]",
                        help="server the datasets live on: namespace sqlserver://host:port (port 1433 by "
                             "default; HOST\\INSTANCE for a named instance). Required with --xml and --dsn")
    parser.add_argument("--max-statement-chars", type=int, default=None, metavar="N",
                        help="longer statements are not parsed for lineage (default 1000000)")
    _add_common(parser)
    parser.set_defaults(run=run_sqlserver)


def _add_snowflake(sub: Any) -> None:
    # deferred: registering the options loads the Snowflake harvester (~0.3 s), which `harvest sqlserver`
    # does not need
    from harvesters.snowflake_cli import add_snowflake_parser

    add_snowflake_parser(sub)


#: Subcommands: name -> function adding its parser (the Snowflake harvester registers here too).
SUBCOMMANDS: dict[str, Callable[[Any], None]] = {"sqlserver": _add_sqlserver, "snowflake": _add_snowflake}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``harvest`` parser; with ``command``, only that subcommand is registered (start-up time)."""
    parser = argparse.ArgumentParser(prog="harvest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in SUBCOMMANDS.items():
        if command is None or name == command:
            add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``harvest`` console script."""
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    argv = sys.argv[1:] if argv is None else argv
    # the subcommand is the first argument (``harvest`` has no options of its own); anything else (--help,
    # a typo) gets the full parser, so help and "invalid choice" list every subcommand
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(command).parse_args(argv)
    from emitter.records import unvalidated
    from harvesters.background import HARVEST_GC_THRESHOLDS

    thresholds = gc.get_threshold()
    gc.set_threshold(*HARVEST_GC_THRESHOLDS)
    try:
        # A harvest builds every facet from its own records, three per statement: validators off once for the
        # whole run instead of around each build (the events are checked against the schemas in tests).
        with unvalidated():
            return args.run(args)
    finally:
        gc.set_threshold(*thresholds)  # main() may be called in a longer-lived process (tests, a scheduler)


# ---- shared pieces -------------------------------------------------------------------------------------


class _StdoutTransport:
    """--dry-run: events as JSON lines on stdout."""

    def emit(self, event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")

    def close(self) -> None:
        sys.stdout.flush()


def make_emitter(conf: list[str], dry_run: bool) -> Any:
    """The emitter from the OpenLineage configuration (raises ValueError on a bad one)."""
    from emitter.cli import parse_overrides
    from emitter.config import load_config
    from emitter.emitter import Emitter

    config = load_config(parse_overrides(conf))
    return Emitter(config, transport=_StdoutTransport()) if dry_run else Emitter(config)


def job_namespace(arg: str | None) -> str:
    return arg or os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_JOB_NAMESPACE


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
    if c.source:
        parts.append(_by_reason(c.source))
    if open_runs:
        parts.append(f"{open_runs} task runs kept open")
    return f"{label}: " + ", ".join(parts) + f"; {note}"


# ---- harvest sqlserver ---------------------------------------------------------------------------------


def _parse_server(text: str) -> tuple[str, str | None]:
    """``host``, ``host:1433``, ``host,1433`` (SQL Server style), ``host\\instance``."""
    if "\\" in text:
        return text, None
    if text.count(":") == 1 or "," in text:
        host, _, port = text.replace(",", ":").rpartition(":")
        return host, port or None
    return text, None


def _file_head(path: str, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(size)).hexdigest()


def _xml_items(path: str, saved: Mapping[str, Any] | None, reader: Any) -> tuple[Generator[Any, None, None], int]:
    """Items of one XML file from its saved position (from the start when the file was replaced): events, or
    ``reader``'s readings of them when a second process reads a large file."""
    from harvesters.background import worth_a_second_process
    from harvesters.sqlserver import read_readings_background
    from harvesters.xevents import read_events, read_file

    if path == "-":
        return read_events(sys.stdin.buffer), 0
    offset = int(saved.get("offset", 0)) if saved else 0
    if offset:
        head_len = int(saved.get("head_len", 0))
        size = os.path.getsize(path)
        if size < offset or _file_head(path, head_len) != saved.get("head"):
            log.warning("%s was replaced since the last harvest: reading it from the start", path)
            offset = 0
    if worth_a_second_process(path):
        return read_readings_background(path, reader, offset), offset
    return read_file(path, offset), offset


def run_sqlserver(args: argparse.Namespace) -> int:
    """``harvest sqlserver``: see the module docstring and the README section."""
    from emitter.naming import sqlserver_namespace
    from harvesters.sqlserver import (
        BACKENDS,
        DEFAULT_MAX_STATEMENT_CHARS,
        EventConverter,
        Harvest,
        LineageCache,
        UsageError,
        connection_string,
        server_from_connection_string,
    )
    from harvesters.state import Checkpoint, StateError, Window, closing_clock
    from harvesters.tasks import TaskGrouper

    label = "harvest sqlserver"
    live = bool(args.connection_string or args.dsn)
    try:
        if bool(args.xml) == live:
            raise UsageError("give --xml FILE, or --connection-string / --dsn for a live harvest")
        if args.backend not in BACKENDS:
            raise UsageError(f"unknown backend {args.backend!r}")
        server = _parse_server(args.server) if args.server else (
            server_from_connection_string(args.connection_string) if live else None)
        if server is None:
            raise UsageError("--server HOST[:PORT] is needed to name the datasets (sqlserver://host:port)")
        namespace = sqlserver_namespace(*server)
        conn_str = connection_string(args.connection_string, args.dsn, args.user, args.password_env) if live \
            else None
        if args.xml and args.state and "-" in args.xml:
            raise UsageError("--state cannot keep a position in stdin ('--xml -')")
        missing = [name for name in args.xml or () if name != "-" and not os.path.isfile(name)]
        if missing:
            raise UsageError(f"no such file: {', '.join(missing)}")
        checkpoint = Checkpoint.load(args.state, f"sqlserver {namespace}")
    except (UsageError, StateError) as error:
        print(f"{label}: {error}", file=sys.stderr)
        return EXIT_USAGE

    with state_lock(label, args) as free:
        if not free:
            return EXIT_OK
        try:
            emitter = make_emitter(args.conf, args.dry_run)
            lineage = LineageCache()
        except ValueError as error:
            print(f"{label}: {error}", file=sys.stderr)
            return EXIT_USAGE
        grouper = TaskGrouper(emitter.emit, job_namespace(args.namespace), "SQLSERVER", args.idle_gap)
        grouper.restore(checkpoint.last.get("open_runs", ()))
        converter = EventConverter(namespace, lineage, args.max_statement_chars or DEFAULT_MAX_STATEMENT_CHARS)
        converter.restore(list(checkpoint.last.get("covered_activities", ())),
                          list(checkpoint.last.get("pending_errors", ())))
        progress = Progress(label)
        harvest = Harvest(converter, grouper, Window(args.since, args.until), progress.tick)
        state = checkpoint.current
        try:
            if live:
                _harvest_live(args, conn_str, harvest, state)
            else:
                _harvest_xml(args, harvest, state)
        except Exception as error:  # noqa: BLE001 - a live server may fail in many ways; nothing is committed
            from emitter.redact import redact

            reason = str(error) if isinstance(error, UsageError) else \
                f"reading failed ({type(error).__name__}: {redact(str(error))}); state not advanced"
            print(f"{label}: {reason}", file=sys.stderr)
            emitter.close()
            return EXIT_USAGE
        progress.done()
        if args.state:
            grouper.close_idle(closing_clock(datetime.now(timezone.utc), args.until))
            state["open_runs"] = grouper.open_runs_state()
            state["covered_activities"] = converter.covered_state()
            state["pending_errors"] = converter.errors_state()
        else:
            grouper.close_all()  # no next harvest to continue them
        return finish_harvest(label, args, emitter, checkpoint, harvest, grouper)


@contextlib.contextmanager
def state_lock(label: str, args: argparse.Namespace) -> Iterator[bool]:
    """Hold the state file's lock for the harvest (none without ``--state`` or with ``--dry-run``). Yields False,
    after saying so, when another harvest holds it: that harvest covers the input, so this one does nothing."""
    from harvesters.state import HarvestLock, LockBusy

    lock = HarvestLock(args.state) if args.state and not args.dry_run else None
    if lock is not None:
        try:
            lock.acquire()
        except LockBusy as error:
            print(f"{label}: {error}; nothing done (that harvest covers the input)", file=sys.stderr)
            yield False
            return
    try:
        yield True
    finally:
        if lock is not None:
            lock.release()


def finish_harvest(label: str, args: argparse.Namespace, emitter: Any, checkpoint: Any, harvest: Any,
                   grouper: Any, window_note: str = "") -> int:
    """Deliver what is left, advance the checkpoint only when no event was lost, print the summary line and
    return the exit code (shared by every ``harvest`` subcommand)."""
    counts = emitter.close()
    if counts.dropped:
        note = f"{counts.dropped} events could not be delivered nor spooled: state not advanced"
        print(summary_line(label, harvest, grouper, grouper.open_count, note), file=sys.stderr)
        return EXIT_SKIPPED
    if args.state and not args.dry_run:
        checkpoint.commit()
        note = f"state saved to {args.state}"
    else:
        note = "dry run, state untouched" if args.dry_run and args.state else "no state kept"
    if window_note:
        note = f"{window_note}; {note}"
    print(summary_line(label, harvest, grouper, grouper.open_count if args.state else 0, note), file=sys.stderr)
    bad = sum(harvest.counts.unparsed.values()) + sum(harvest.counts.unreadable.values())
    return EXIT_SKIPPED if bad else EXIT_OK


def _harvest_xml(args: argparse.Namespace, harvest: Any, state: dict[str, Any]) -> None:
    files = state.setdefault("files", {})
    for name in args.xml:
        path = name if name == "-" else os.path.abspath(name)
        items, offset = _xml_items(path, files.get(path), harvest.converter.reader)
        position = offset
        stopped = False
        with contextlib.closing(items):  # stops a background reader at once when stopping early
            for item in items:
                if not harvest.feed(item.value):
                    stopped = True
                    break
                position = item.resume_offset
        if path != "-":
            head_len = min(HEAD_BYTES, position)
            files[path] = {"offset": position, "head_len": head_len, "head": _file_head(path, head_len)}
        if stopped:
            break


def _harvest_live(args: argparse.Namespace, conn_str: str, harvest: Any, state: dict[str, Any]) -> None:
    import pyodbc  # deferred: needs unixODBC's libodbc

    from harvesters.sqlserver import BACKENDS, FilePosition, read_event_file

    queries = BACKENDS[args.backend]
    connection = pyodbc.connect(conn_str, autocommit=True, timeout=LOGIN_TIMEOUT_SECONDS)
    try:
        if args.target == "event_file":
            saved = state.get("event_file") or {}
            position = FilePosition(**saved)
            path = args.xe_path or f"{args.xe_session}*.xel"
            for value, after in read_event_file(connection, queries, path, position, harvest.counts.source):
                if not harvest.feed(value):
                    break
                position = after
            state["event_file"] = position.to_json()
        else:
            _harvest_ring_buffer(args, connection, harvest, state, queries)
    finally:
        connection.close()


def _harvest_ring_buffer(args: argparse.Namespace, connection: Any, harvest: Any, state: dict[str, Any],
                         queries: Any) -> None:
    """A ring buffer has no position: every harvest reads the whole buffer and skips what the watermark
    (latest event time, and the events at exactly that time) says was harvested before."""
    from harvesters.sqlserver import read_ring_buffer
    from harvesters.xevents import XEvent

    mark = state.get("ring_buffer") or {}
    mark_time = _instant(mark["time"]) if mark.get("time") else None
    mark_keys = set(mark.get("keys", ()))
    new_time, new_keys = mark_time, set(mark_keys)
    for item in read_ring_buffer(connection, queries, args.xe_session):
        value = item.value
        if isinstance(value, XEvent):
            key = "|".join((value.name, value.actions.get("session_id", ""), value.actions.get("event_sequence", ""),
                            value.actions.get("attach_activity_id", "")))
            if mark_time is not None and (value.timestamp < mark_time or
                                          (value.timestamp == mark_time and key in mark_keys)):
                continue
            if not harvest.feed(value):
                continue  # beyond --until: a later harvest takes it (the buffer is not consumed)
            if new_time is None or value.timestamp > new_time:
                new_time, new_keys = value.timestamp, set()
            if value.timestamp == new_time:
                new_keys.add(key)
        else:
            harvest.feed(value)
    if new_time is not None:
        state["ring_buffer"] = {"time": new_time.isoformat(), "keys": sorted(new_keys)}


if __name__ == "__main__":
    sys.exit(main())
