"""``harvest snowflake``: lineage from Snowflake's query history (an export file, or read live), run from cron.

Same cron behaviour, exit codes and summary line as ``harvest sqlserver`` (see :mod:`harvesters.core.run`). The
state keeps the end of the last window (on END_TIME), the QUERY_IDs harvested inside the next window's
overlap, and the task runs still open.
"""
from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from harvesters.core.outcome import UsageError, check_input_files
from harvesters.core.run import (
    EXIT_CODES_HELP,
    Harvested,
    Progress,
    add_common_options,
    minutes_option,
    run_harvest,
)
from harvesters.core.state import Checkpoint

LABEL = "harvest snowflake"

#: Overlap of an offline harvest with the previous one (rows of the next export that end this long before the
#: last harvested END_TIME are still taken, if not harvested before).
OFFLINE_OVERLAP = timedelta(hours=1)


def add_snowflake_parser(sub: Any) -> None:
    """Register ``harvest snowflake`` on the ``harvest`` subcommand parser."""
    from harvesters.snowflake.live import SOURCES, USER_SOURCES

    parser = sub.add_parser("snowflake", help="harvest Snowflake query history",
                            description="Harvest lineage from Snowflake's query history (see README).",
                            epilog=EXIT_CODES_HELP)
    source = parser.add_argument_group("source (one of)")
    source.add_argument("--history", action="append", metavar="FILE",
                        help="QUERY_HISTORY export (optionally joined with ACCESS_HISTORY): CSV with a header row "
                             "or JSON lines, the views' column names; '-' reads stdin (repeatable)")
    source.add_argument("--connector", action="store_true",
                        help="read live with snowflake-connector-python (extra 'snowflake')")
    source.add_argument("--odbc", metavar="CONNSTR",
                        help="read live through pyodbc, e.g. 'Driver=SnowflakeDSIIDriver;"
                             "Server=myorg-acct.snowflakecomputing.com;Warehouse=WH;Role=R' (no secrets in it)")
    parser.add_argument("--account", required=True, metavar="ORG-ACCOUNT",
                        help="account identifier: names the datasets (snowflake://org-account) and the connection")
    parser.add_argument("--user", help="login for a live harvest")
    parser.add_argument("--password-env", metavar="VAR", help="environment variable holding the password")
    parser.add_argument("--private-key-file", metavar="PATH", help="private key (PEM) for key-pair authentication")
    parser.add_argument("--private-key-passphrase-env", metavar="VAR",
                        help="environment variable holding the private key's passphrase")
    parser.add_argument("--warehouse", help="warehouse of the live harvest's own queries")
    parser.add_argument("--role", help="role of the live harvest (needs IMPORTED PRIVILEGES on SNOWFLAKE for "
                                       "ACCOUNT_USAGE)")
    parser.add_argument("--source", default="account_usage", metavar="{" + ",".join(USER_SOURCES) + "}",
                        choices=[*USER_SOURCES, *(s for s in SOURCES if s not in USER_SOURCES)],
                        help="live: account_usage (QUERY_HISTORY joined with ACCESS_HISTORY when readable; "
                             "default) or information_schema (INFORMATION_SCHEMA.QUERY_HISTORY(), low latency)")
    parser.add_argument("--lag", type=minutes_option(zero_allowed=True), metavar="MINUTES",
                        help="live: read up to now minus this (default: the source's latency, 180 with "
                             "ACCESS_HISTORY, 45 without, 1 for information_schema)")
    parser.add_argument("--overlap", type=minutes_option(zero_allowed=True), metavar="MINUTES",
                        help="each window starts this long before the previous one ended; late rows in it are "
                             "taken, rows already harvested skipped (default 60; 15 for information_schema)")
    parser.add_argument("--max-statement-chars", type=int, default=None, metavar="N",
                        help="longer query texts are not parsed for lineage (default 1000000)")
    add_common_options(parser)
    parser.set_defaults(run=run_snowflake)


def run_snowflake(args: argparse.Namespace) -> int:
    """``harvest snowflake``: see the module docstring and the README section."""
    return run_harvest(SnowflakeSource, LABEL, args)


class SnowflakeSource:
    """Query history from export files or a live account (see :class:`harvesters.core.run.HarvestSource`)."""

    label = LABEL

    def __init__(self, args: argparse.Namespace) -> None:
        from emitter.naming import snowflake_namespace
        from harvesters.snowflake.history import INTEGRATION
        from harvesters.snowflake.live import (
            connect_connector,
            connect_odbc,
            connector_arguments,
            odbc_connection_string,
        )

        self.args = args
        self.integration = INTEGRATION
        self.live = bool(args.connector or args.odbc)
        if sum((bool(args.history), bool(args.connector), bool(args.odbc))) != 1:
            raise UsageError("give --history FILE, or --connector / --odbc CONNSTR for a live harvest")
        if not args.account.strip():
            raise UsageError("--account is empty")
        self.namespace = snowflake_namespace(args.account)
        if args.history and args.state and "-" in args.history:
            raise UsageError("--state cannot be kept for stdin ('--history -')")
        if args.history:  # before anything is built: a wrong file is a usage error, said alone
            from harvesters.snowflake.history import not_history_export

            check_input_files(args.history, not_history_export)
        self.connect: Callable[[], Any] | None = None
        if args.odbc:
            conn_str = odbc_connection_string(args.odbc, args.user, args.password_env, args.private_key_file,
                                              args.private_key_passphrase_env)
            self.connect = lambda: connect_odbc(conn_str)
        elif args.connector:
            arguments = connector_arguments(args.account, args.user, args.password_env, args.private_key_file,
                                            args.private_key_passphrase_env, args.warehouse, args.role)
            self.connect = lambda: connect_connector(arguments)
        self.state_name = f"snowflake {self.namespace}"
        self.overlap = timedelta(0)
        self.window_end: datetime | None = None

    def harvest(self, grouper: Any, checkpoint: Checkpoint, progress: Progress) -> Harvested:
        from harvesters.snowflake.history import DEFAULT_MAX_STATEMENT_CHARS, LineageCache, RowConverter, parse_time

        args = self.args
        lineage = LineageCache()
        lineage.keep_system_objects = bool(getattr(args, "keep_system_objects", False))
        converter = RowConverter(self.namespace, lineage, args.max_statement_chars or DEFAULT_MAX_STATEMENT_CHARS)
        saved_end = checkpoint.last.get("window_end")
        previous_end = parse_time(saved_end) if saved_end else None
        now = datetime.now(timezone.utc)
        if self.connect is not None:
            harvest, self.overlap, self.window_end, clock = _harvest_live(
                args, self.connect, converter, grouper, checkpoint, previous_end, now, progress)
        else:
            harvest, self.overlap, self.window_end, clock = _harvest_files(
                args, converter, grouper, checkpoint, previous_end, now, progress)
        window = f"window {harvest.window.start.isoformat()} to {harvest.window.end.isoformat()}" \
            if self.live else ""
        return Harvested(harvest, clock, window)

    def save_state(self, state: dict[str, Any], harvested: Harvested) -> None:
        if self.window_end is not None:
            state["window_end"] = self.window_end.isoformat()
            state["seen"] = harvested.harvest.seen.state(self.window_end - self.overlap)


def _harvest_files(args: argparse.Namespace, converter: Any, grouper: Any, checkpoint: Any,
                   previous_end: datetime | None, now: datetime, progress: Any) -> tuple[Any, timedelta, Any, datetime]:
    """Offline: the export files, from the previous harvest's end minus the overlap (or --since) to --until."""
    from harvesters.core.background import worth_a_second_process
    from harvesters.core.state import Window, closing_clock
    from harvesters.snowflake.history import (
        Harvest,
        SeenQueries,
        read_history_files,
        read_history_files_background,
    )

    overlap = args.overlap if args.overlap is not None else OFFLINE_OVERLAP
    start = args.since if args.since is not None else (previous_end - overlap if previous_end else None)
    seen = SeenQueries(checkpoint.last.get("seen"), overlap)
    harvest = Harvest(converter, grouper, Window(start, args.until), seen, progress.tick)

    if "-" not in args.history and worth_a_second_process(*args.history):
        rows = read_history_files_background(args.history, converter.namespace,
                                             converter.max_statement_chars, converter.lineage.keep_system_objects)
    else:
        rows = read_history_files(args.history)
    with contextlib.closing(rows):  # stops a background reader at once when stopping early
        for row in rows:
            harvest.feed(row)
    harvest.finish()
    ends = [e for e in (previous_end, harvest.last_end) if e is not None]
    return harvest, overlap, max(ends) if ends else None, closing_clock(now, args.until)


def _harvest_live(args: argparse.Namespace, connect: Callable[[], Any], converter: Any, grouper: Any,
                  checkpoint: Any, previous_end: datetime | None, now: datetime, progress: Any
                  ) -> tuple[Any, timedelta, Any, datetime]:
    """Live: the window ``[previous end - overlap, now - lag)`` of the chosen source, de-duplicated."""
    from harvesters.snowflake.history import Harvest, SeenQueries, in_start_order
    from harvesters.snowflake.live import SOURCES, choose_source, live_window, read_rows

    connection = connect()
    try:
        notes: Counter[str] = Counter()
        source = SOURCES[choose_source(connection, args.source, notes)]
        window = live_window(previous_end, now, source, args.since, args.until, args.lag, args.overlap)
        overlap = args.overlap if args.overlap is not None else source.overlap
        harvest = Harvest(converter, grouper, window, SeenQueries(checkpoint.last.get("seen"), overlap),
                          progress.tick)
        harvest.counts.source.update(notes)
        for row in in_start_order(read_rows(connection, source, window, harvest.counts.source)):
            harvest.feed(row)
        harvest.finish()
    finally:
        connection.close()
    # the window's end is where the next one continues (never moved back, e.g. by an earlier --until); task
    # runs are judged idle against it (later rows of a still running task are not visible yet)
    assert window.end is not None
    return harvest, overlap, max(window.end, previous_end or window.end), window.end
