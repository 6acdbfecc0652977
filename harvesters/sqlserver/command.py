"""``harvest sqlserver``: its options and its source for :func:`harvesters.core.run.run_harvest`.

Offline, exported XML files are read from their saved byte positions (a file replaced since is read from the
start); live, the event session's file target is read from its saved file and offset, or its ring buffer
whole, skipping what the watermark says was harvested before.
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import hashlib
import logging
import os
import re
import sys
from collections.abc import Generator, Mapping
from datetime import datetime, timezone
from typing import Any

from harvesters.core.outcome import UsageError, check_input_files, require_pyodbc
from harvesters.core.run import EXIT_CODES_HELP, Harvested, Progress, add_common_options, instant, run_harvest
from harvesters.core.state import Checkpoint
from harvesters.sqlserver.address import parse_server

log = logging.getLogger(__name__)

LABEL = "harvest sqlserver"
#: Bytes of an XML file's start remembered with its position, to notice a file replaced by another.
HEAD_BYTES = 4096
#: ODBC login timeout: a cron run against an unreachable server gives up instead of holding the lock.
LOGIN_TIMEOUT_SECONDS = 30


def add_sqlserver_parser(sub: Any) -> None:
    """Register ``harvest sqlserver`` on the ``harvest`` subcommand parser."""
    parser = sub.add_parser("sqlserver", help="harvest SQL Server Extended Events",
                            description="Harvest lineage from SQL Server Extended Events (see README).",
                            epilog=EXIT_CODES_HELP)
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
    parser.add_argument("--dataset-scheme", choices=("sqlserver", "mssql"), default="sqlserver",
                        help="dataset namespace: sqlserver://host:port (the JVM's JDBC form, default) or "
                             "mssql://host:port (Airflow's SQL Server hook); the other one is given as a symlinks "
                             "identifier of each dataset")
    parser.add_argument("--linked-server", action="append", metavar="NAME=HOST[:PORT]",
                        help="where the server linked as NAME is, for tables named NAME.db.schema.t (default: a "
                             "host called NAME, port 1433); repeatable")
    parser.add_argument("--default-database", metavar="NAME",
                        help="database of tables named without one when the event carries no database_name and "
                             "the session said no USE (else they are counted: exit code 1)")
    parser.add_argument("--max-statement-chars", type=int, default=None, metavar="N",
                        help="longer statements are not parsed for lineage (default 1000000)")
    add_common_options(parser)
    parser.set_defaults(run=run_sqlserver)


def run_sqlserver(args: argparse.Namespace) -> int:
    """``harvest sqlserver``: see the module docstring and the README section."""
    return run_harvest(SqlServerSource, LABEL, args)


class SqlServerSource:
    """Extended Events from XML files or a live event session (see :class:`harvesters.core.run.HarvestSource`)."""

    label = LABEL
    integration = "SQLSERVER"

    def __init__(self, args: argparse.Namespace) -> None:
        from emitter.naming import sqlserver_namespace
        from emitter.naming.sqlserver import mssql_namespace
        from harvesters.sqlserver.linked_servers import parse_linked_servers
        from harvesters.sqlserver.live import BACKENDS, connection_string, server_from_connection_string

        self.args = args
        self.live = bool(args.connection_string or args.dsn)
        if bool(args.xml) == self.live:
            raise UsageError("give --xml FILE, or --connection-string / --dsn for a live harvest")
        if args.backend not in BACKENDS:
            raise UsageError(f"unknown backend {args.backend!r}")
        server = parse_server(args.server) if args.server else (
            server_from_connection_string(args.connection_string) if self.live else None)
        if server is None:
            raise UsageError("--server HOST[:PORT] is needed to name the datasets (sqlserver://host:port)")
        jdbc_form, airflow_form = sqlserver_namespace(*server), mssql_namespace(*server)
        # the state belongs to the server whichever naming is primary
        self.state_namespace = jdbc_form
        self.namespace, self.also = (airflow_form, jdbc_form) if getattr(args, "dataset_scheme", None) == "mssql" \
            else (jdbc_form, airflow_form)
        try:
            self.linked_servers = parse_linked_servers(getattr(args, "linked_server", None))
        except ValueError as error:
            raise UsageError(str(error)) from None
        self.conn_str = connection_string(args.connection_string, args.dsn, args.user, args.password_env) \
            if self.live else None
        if args.xml and args.state and "-" in args.xml:
            raise UsageError("--state cannot keep a position in stdin ('--xml -')")
        check_input_files(args.xml or (), not_event_xml)
        self.state_name = f"sqlserver {self.state_namespace}"
        self.converter: Any = None

    def harvest(self, grouper: Any, checkpoint: Checkpoint, progress: Progress) -> Harvested:
        from harvesters.core.state import Window, closing_clock
        from harvesters.sqlserver.linked_servers import LinkedServers
        from harvesters.sqlserver.reading import DEFAULT_MAX_STATEMENT_CHARS, EventConverter, Harvest, LineageCache

        args = self.args
        grouper.symlinks[self.namespace] = self.also
        linked = LinkedServers(self.namespace.startswith("mssql://"), self.linked_servers, grouper.symlinks)
        grouper.locate = linked.locate
        lineage = LineageCache()
        lineage.keep_system_objects = bool(getattr(args, "keep_system_objects", False))
        self.converter = EventConverter(self.namespace, lineage,
                                        args.max_statement_chars or DEFAULT_MAX_STATEMENT_CHARS,
                                        default_database=getattr(args, "default_database", None))
        self.converter.restore(list(checkpoint.last.get("covered_activities", ())),
                               list(checkpoint.last.get("pending_errors", ())))
        harvest = Harvest(self.converter, grouper, Window(args.since, args.until), progress.tick)
        if self.live:
            assert self.conn_str is not None
            _harvest_live(args, self.conn_str, harvest, checkpoint.current, linked)
        else:
            _harvest_xml(args, harvest, checkpoint.current)
        return Harvested(harvest, closing_clock(datetime.now(timezone.utc), args.until))

    def save_state(self, state: dict[str, Any], harvested: Harvested) -> None:
        state["covered_activities"] = self.converter.covered_state()
        state["pending_errors"] = self.converter.errors_state()


# ---- offline: exported XML files -----------------------------------------------------------------------

#: What a file given to --xml is when it holds no Extended Events XML.
BINARY_XEL = "binary .xel file: export it as XML with sys.fn_xe_file_target_read_file or SSMS"
BINARY = f"a binary file, not event XML (an .xel file? {BINARY_XEL.split(': ', 1)[1]})"
NO_EVENTS = "no <event> elements found (not an Extended Events XML export)"


def not_event_xml(path: str) -> str | None:
    """Why ``path`` cannot be Extended Events XML, judged from its first 4 KiB (None when it may be): the
    binary ``.xel`` files SQL Server writes hold NUL bytes, which XML (UTF-8, or UTF-16 with its byte-order
    mark) never does."""
    from harvesters.sqlserver.xevents import looks_binary

    with open(path, "rb") as f:
        head = f.read(4096)
    if not looks_binary(head):
        return None
    return BINARY_XEL if path.lower().endswith(".xel") else BINARY


def _blank(path: str) -> bool:
    """True when the file holds nothing but whitespace (an export of an empty session: 0 events is right)."""
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            if block.strip():
                return False
    return True



def _file_head(path: str, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(size)).hexdigest()


def _xml_items(path: str, saved: Mapping[str, Any] | None, reader: Any) -> tuple[Generator[Any, None, None], int]:
    """Items of one XML file from its saved position (from the start when the file was replaced): events, or
    ``reader``'s readings of them when a second process reads a large file."""
    from harvesters.core.background import worth_a_second_process
    from harvesters.sqlserver.reading import read_readings_background
    from harvesters.sqlserver.xevents import read_events, read_file

    if path == "-":
        return read_events(sys.stdin.buffer), 0
    offset = int(saved.get("offset", 0)) if saved else 0
    if offset:
        assert saved is not None
        head_len = int(saved.get("head_len", 0))
        size = os.path.getsize(path)
        if size < offset or _file_head(path, head_len) != saved.get("head"):
            log.warning("%s was replaced since the last harvest: reading it from the start", path)
            offset = 0
    if worth_a_second_process(path):
        return read_readings_background(path, reader, offset), offset
    return read_file(path, offset), offset


#: How much of a file's start and end is read to find its first and last event times.
PEEK_BYTES = 256 * 1024
_EVENT_TIME = re.compile(r'<event\s+name="[^"]*"\s+package="[^"]*"\s+timestamp="([^"]+)"')


def _peek_times(path: str) -> tuple[datetime | None, datetime | None]:
    """(first, last) event time of an XML file, from its first and last PEEK_BYTES (None: none found there)."""
    from harvesters.sqlserver.xevents import parse_time

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
        f.seek(max(0, size - PEEK_BYTES) & ~1)  # even offset: a UTF-16 export stays aligned
        tail = f.read()
    encoding = "utf-16-le" if head[:2] == codecs.BOM_UTF16_LE else "utf-16-be" if head[:2] == codecs.BOM_UTF16_BE \
        else "latin-1"
    times = []
    for chunk, pick in ((head, 0), (tail, -1)):
        found = _EVENT_TIME.findall(chunk.decode(encoding, "ignore"))
        try:
            times.append(parse_time(found[pick]) if found else None)
        except ValueError:
            times.append(None)
    return times[0], times[1]


def time_ordered(names: list[str]) -> tuple[list[str], list[str]]:
    """The --xml files in the order of their first event (stdin and files without a readable event time keep
    their place after the others), and a warning for each pair of consecutive files whose times overlap: a task
    run, or a temp table's flow, spanning both is then read out of order."""
    peeked = {name: (None, None) if name == "-" else _peek_times(name) for name in dict.fromkeys(names)}
    timed = sorted((n for n in peeked if peeked[n][0] is not None), key=lambda n: peeked[n][0])  # type: ignore
    ordered = timed + [n for n in names if n not in timed]
    warnings = []
    for before, after in zip(timed, timed[1:]):
        last, first = peeked[before][1], peeked[after][0]
        if last is not None and first is not None and last > first:
            warnings.append(f"{before} ends ({last.isoformat()}) after {after} begins ({first.isoformat()}): "
                            "their events overlap in time and are read one file after the other")
    return ordered, warnings


def _harvest_xml(args: argparse.Namespace, harvest: Any, state: dict[str, Any]) -> None:
    files = state.setdefault("files", {})
    names, warnings = time_ordered(list(args.xml))  # given out of order, one task run would be split in two
    for warning in warnings:
        print(f"{LABEL}: warning: {warning}", file=sys.stderr)
        harvest.counts.source["--xml files overlapping in time"] += 1
    for name in names:
        path = name if name == "-" else os.path.abspath(name)
        items, offset = _xml_items(path, files.get(path), harvest.converter.reader)
        position = offset
        stopped = False
        read_any = False
        with contextlib.closing(items):  # stops a background reader at once when stopping early
            for item in items:
                read_any = True
                if not harvest.feed(item.value):
                    stopped = True
                    break
                position = item.resume_offset
        if not read_any and offset == 0 and path != "-" and not _blank(path):
            # text with no <event> in it at all (an .xel renamed, a CSV, an HTML error page): reading it "0 events,
            # exit 0" would let cron believe the server had nothing to say
            raise UsageError(f"{name}: {NO_EVENTS}")
        if path != "-":
            head_len = min(HEAD_BYTES, position)
            files[path] = {"offset": position, "head_len": head_len, "head": _file_head(path, head_len)}
        if stopped:
            break


# ---- live: the event session ---------------------------------------------------------------------------


def _harvest_live(args: argparse.Namespace, conn_str: str, harvest: Any, state: dict[str, Any],
                  linked: Any) -> None:
    pyodbc = require_pyodbc("sqlserver")  # deferred: needs unixODBC's libodbc

    from harvesters.sqlserver.linked_servers import catalog_hosts
    from harvesters.sqlserver.live import BACKENDS, FilePosition, TableColumns, read_event_file, read_linked_servers

    queries = BACKENDS[args.backend]
    connection = pyodbc.connect(conn_str, autocommit=True, timeout=LOGIN_TIMEOUT_SECONDS)
    # where each linked server is (sys.servers.data_source), so a four-part name's table is named on its host;
    # --linked-server wins. Unreadable (permissions): said once, the names stay as given.
    rows = read_linked_servers(connection, queries)
    if isinstance(rows, str):
        log.warning("cannot read the linked servers (sys.servers): %s; their tables are named by their names "
                    "(or --linked-server)", rows)
    else:
        linked.learn(catalog_hosts(rows))
    # column lineage through `*`: the columns of the tables it meets, from the server (a connection of its own)
    table_columns = harvest.converter.reader.lineage.table_columns = TableColumns(conn_str, queries)
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
        table_columns.close()
        connection.close()


def _harvest_ring_buffer(args: argparse.Namespace, connection: Any, harvest: Any, state: dict[str, Any],
                         queries: Any) -> None:
    """A ring buffer has no position: every harvest reads the whole buffer and skips what the watermark
    (latest event time, and the events at exactly that time) says was harvested before."""
    from harvesters.sqlserver.live import read_ring_buffer
    from harvesters.sqlserver.xevents import XEvent

    mark = state.get("ring_buffer") or {}
    mark_time = instant(mark["time"]) if mark.get("time") else None
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
