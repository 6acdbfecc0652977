"""``lineage-capture graph ...``: ingest, serve, show, upstream, downstream, dag, history, html.

``add_graph_parser(subparsers)`` adds the ``graph`` subcommand to the project's command; ``run(args)`` executes
parsed arguments and returns the exit code; ``main(argv)`` is the same as a standalone command.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lineage_capture.version import add_version_option

EXIT_CODES = """exit codes:
  0  done
  1  done, but something needs a look: bad lines were skipped (each named file:line with the reason){extra}
  2  usage error or unreadable input: a file that cannot be read, a node not found, an ambiguous prefix
     (the candidates are listed)"""

LEVEL_HELP = """level of the job hierarchy the DAG is drawn at: 'task' (default) folds every job into its top-most
ancestor that is not a container (a container is a jobType DAG job, e.g. an Airflow DAG, or a parent known only
from ParentRun facets): harvested task runs and Spark applications stay, their statements and actions fold into
them; 'root' folds into the root ancestor; 'leaf' keeps every job but those whose children have lineage of
their own (drawn as those children); a number N folds into the ancestor at depth N
(0 = root)"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", type=Path, help="state directory (default $LINEAGE_CAPTURE_STATE_DIR, else "
                   "~/.local/state/lineage-capture)")
    p.add_argument("--db", type=Path, help="graph database (default {state dir}/lineage-graph.sqlite)")


def _reader(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    _common(p)
    p.add_argument("--no-ingest", action="store_true",
                   help="do not read what is new in the events files first")
    if json_flag:
        p.add_argument("--json", action="store_true", help="answer as JSON")


def _sub(subs, name: str, help: str, extra: str = "") -> argparse.ArgumentParser:
    parser = subs.add_parser(name, help=help, description=help, epilog=EXIT_CODES.format(extra=extra),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_option(parser)
    return parser


def add_graph_parser(subparsers, only: str | None = None) -> argparse.ArgumentParser:
    """Add ``graph`` (with its subcommands; only the one named ``only`` if given) to an argparse subparsers
    object; returns the ``graph`` parser."""
    graph = subparsers.add_parser(
        "graph", help="lineage graph: current graph, job hierarchy, task DAG from OpenLineage events",
        description="Reads OpenLineage run events from any producer into a local SQLite database and answers "
                    "lineage questions. Every read command first ingests what is new in the files ingested "
                    "before and in the default events file.",
        epilog=EXIT_CODES.format(extra=", a cycle in the task DAG"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version_option(graph)
    subs = graph.add_subparsers(dest="graph_command", metavar="COMMAND", required=True)

    if only in (None, "ingest"):
        p = _sub(subs, "ingest", "read JSON-lines event files (or files of one JSON event / an array) into the "
                 "database; incremental and idempotent")
        _common(p)
        p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                       help="events files (default: {state dir}/openlineage-events.jsonl)")
        p.add_argument("--json", action="store_true", help="report as JSON")

    if only in (None, "serve"):
        p = _sub(subs, "serve", "receive events over HTTP (POST /api/v1/lineage, as Marquez) and show the lineage "
                 "page live (GET /)")
        _common(p)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=5000)
        p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on POST (default: none required; "
                       "also $LINEAGE_GRAPH_API_KEY)")

    if only in (None, "show"):
        p = _sub(subs, "show", "jobs with their current inputs and outputs, grouped by parent")
        _reader(p)

    if only in (None, "upstream", "downstream"):
        for name, what in (("upstream", "what NODE reads from, transitively (troubleshooting)"),
                           ("downstream", "what depends on NODE, transitively (impact analysis)")):
            p = _sub(subs, name, what)
            _reader(p)
            p.add_argument("node", metavar="NODE", help="a dataset as namespace/name (e.g. "
                           "sqlserver://db01:1433/Sales.dbo.Orders) or a job (namespace/name, its fully qualified "
                           "name or its name); an unambiguous prefix is enough")
            p.add_argument("--depth", type=int, help="edges to follow (dataset -> job -> dataset is 2); default all")

    if only in (None, "dag"):
        p = _sub(subs, "dag", "the task DAG: task A -> task B when B reads a dataset A writes; levels can run in "
                 "parallel", extra=", a cycle (reported with its tasks and datasets)")
        _reader(p, json_flag=False)
        p.add_argument("--level", default="task", help=LEVEL_HELP)
        p.add_argument("--format", default="text", choices=("text", "json", "dot", "mermaid", "dag-factory"))
        p.add_argument("--json", action="store_const", const="json", dest="format", help="same as --format json")
        p.add_argument("--dag-id", default="lineage_dag", help="dag-factory: the DAG id")
        p.add_argument("--bash-command", default="echo {task}",
                       help="dag-factory: bash_command template; {task} {fqn} {name} {namespace} (default %(default)r)")
        p.add_argument("--schedule", help="dag-factory: schedule_interval (default null)")

    if only in (None, "history"):
        p = _sub(subs, "history", "versions of a job and what changed between them")
        _reader(p)
        p.add_argument("job", metavar="JOB")

    if only in (None, "html"):
        p = _sub(subs, "html", "write one self-contained page (works offline) drawing the current graph")
        _reader(p, json_flag=False)
        p.add_argument("-o", "--output", type=Path, default=Path("lineage.html"))
    return graph


def _db_path(args) -> Path:
    from .store import default_db

    return args.db or default_db(args.state_dir)


def _open_and_ingest(args, files: list[Path] | None = None):
    """Open the database and ingest what is new; returns (connection, report or None).

    A read command with nothing new to read and nothing to derive imports neither the ingest nor the derivation
    (they import attrs, hashlib, subprocess...): a traversal answers in the time of Python's start-up and a few
    indexed queries."""
    from .store import connect, default_events_file, nothing_new

    conn = connect(_db_path(args))
    report = None
    if files is not None or not getattr(args, "no_ingest", False):
        default = default_events_file(args.state_dir)
        if files is not None or not nothing_new(conn, default):
            from . import ingest

            if files:
                report = ingest.ingest(conn, files)
            elif files is not None:  # `ingest` without files: the default file must exist
                report = ingest.ingest(conn, [default])
            else:
                report = ingest.ingest(conn, [p for p in ingest.known_files(conn) if p.exists()], default=default)
    if conn.execute("SELECT 1 FROM dirty_jobs LIMIT 1").fetchone() is not None:
        from .derive import refresh

        refresh(conn)
    return conn, report


def _bad_lines(report) -> int:
    if report is None or not report.bad_count:
        return 0
    for bad in report.bad[:20]:
        print(f"bad line: {bad}", file=sys.stderr)
    if report.bad_count > 20:
        print(f"... {report.bad_count - 20} more bad lines", file=sys.stderr)
    return 1


def _out(text: str | bytes) -> None:
    if isinstance(text, bytes):
        sys.stdout.buffer.write(text)
        sys.stdout.flush()
    else:
        sys.stdout.write(text)


def _json(obj) -> None:
    import orjson

    _out(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``graph`` command; returns the exit code (0, 1 or 2)."""
    from . import query, render

    cmd = args.graph_command
    if args.state_dir is not None:
        args.state_dir = args.state_dir.expanduser()
    try:
        if cmd == "ingest":
            conn, report = _open_and_ingest(args, list(args.files))
            if args.json:
                _json(report.to_json())
            else:
                print(f"{report.files} files, {report.lines} lines: {report.new_events} new events, "
                      f"{report.duplicates} already known, {report.ignored} not run events, "
                      f"{report.bad_count} bad lines"
                      + (f", {report.other_job_events} events with the run id of another job's run (kept as runs of"
                         " their own)" if report.other_job_events else "")
                      + (f", {report.merged_datasets} datasets found to be other names of one (joined)"
                         if report.merged_datasets else ""))
            return _bad_lines(report)
        if cmd == "serve":
            import os

            from .server import serve

            return serve(_db_path(args), args.state_dir, args.host, args.port,
                         args.api_key or os.environ.get("LINEAGE_GRAPH_API_KEY"))
        conn, report = _open_and_ingest(args)
        status = _bad_lines(report)
        if cmd in ("show", "dag"):
            from . import derive
        if cmd == "show":
            graph = derive.load_graph(conn)
            _json(render.show_json(graph)) if args.json else _out(render.show_text(graph))
            return status
        if cmd in ("upstream", "downstream"):
            node = query.resolve(conn, args.node)
            w = query.walk(conn, node, cmd, args.depth)
            _json(w.to_json()) if args.json else _out(render.walk_text(w))
            return status
        if cmd == "history":
            node = query.resolve(conn, args.job)
            if node.kind != "job":
                print(f"{render.shown(node.key)} is a dataset, not a job", file=sys.stderr)
                return 2
            versions = query.history(conn, node.id)
            if args.json:
                _json({"job": node.key, "versions": [{**v, "since": render.iso(v["since"])} for v in versions]})
            else:
                _out(render.history_text(node.key, versions))
            return status
        if cmd == "dag":
            try:
                level = derive.parse_level(args.level)
            except ValueError as exc:
                print(exc, file=sys.stderr)
                return 2
            graph = derive.load_graph(conn)
            dag = derive.task_dag(graph, level)
            fmt = args.format
            if fmt == "json":
                _json(render.dag_json(graph, dag, level))
            elif fmt == "dot":
                _out(render.dag_dot(graph, dag))
            elif fmt == "mermaid":
                _out(render.dag_mermaid(graph, dag))
            elif fmt == "dag-factory":
                _out(render.dag_factory(graph, dag, dag_id=args.dag_id, bash_command=args.bash_command,
                                        schedule=args.schedule))
            else:
                _out(render.dag_text(graph, dag, level))
            for c in render.dag_json(graph, dag, level)["cycles"] if dag.cycles else ():
                print(render.cycle_text(c, "cycle: tasks", ", ", "tasks", "; datasets"), file=sys.stderr)
            return max(status, 1 if dag.cycles else 0)
        if cmd == "html":
            from .html import page

            args.output.write_text(page(conn), encoding="utf-8")
            print(f"wrote {args.output}")
            return status
    except query.NodeNotFound as exc:
        if exc.candidates:
            print(f"{exc.text!r} matches {len(exc.candidates)} nodes; say which:", file=sys.stderr)
            for c in exc.candidates:
                print(f"  {render.shown(c)}", file=sys.stderr)
        else:
            print(f"no dataset or job matches {exc.text!r}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    raise AssertionError(cmd)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The standalone parser: ``lineage-capture graph ...`` (with only the subcommand ``only`` if given)."""
    parser = argparse.ArgumentParser(prog="lineage-capture")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_graph_parser(subs, only)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``lineage-capture graph ...`` as a standalone command (``graph`` may be left out of ``argv``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("graph", "-h", "--help"):
        argv.insert(0, "graph")  # `python -m lineage_graph show` means `... graph show`
    # a quick question builds only its own subcommand's parser (the same definitions; `graph --help` and a
    # mistyped command build them all): argparse takes a few ms per subcommand
    parser = build_parser(argv[1] if len(argv) > 1 and argv[1] in ("upstream", "downstream", "history") else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return run(args)
