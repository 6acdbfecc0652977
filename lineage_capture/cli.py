"""lineage-capture: one command for everything the package does.

  lineage-capture harvest sqlserver|snowflake ...   read SQL logs into lineage events (cron; alias: harvest)
  lineage-capture replay                            re-send events spooled after failed deliveries
  lineage-capture config                            print the resolved OpenLineage configuration, masked
  lineage-capture demo [--no-spark]                 the main job in miniature, then its lineage graph
  lineage-capture graph ...                         the lineage graph, job hierarchy and task DAG

The Spark plugin has no command: add --conf spark.openlineage.python.enabled=true to spark-submit.
Every subcommand has ``--help`` (with its exit codes) and ``--version``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Callable

from lineage_capture.version import add_version_option

PROG = "lineage-capture"

#: subcommand -> (one line of help, "module:function" taking (argv, prog) and returning the exit code)
COMMANDS: dict[str, tuple[str, str]] = {
    "harvest": ("harvest SQL Server Extended Events or Snowflake query history (cron)", "harvesters.cli:main"),
    "replay": ("re-send events spooled after failed deliveries, oldest first", "emitter.cli:replay_main"),
    "config": ("print the resolved OpenLineage configuration, secrets masked", "emitter.cli:config_main"),
    "demo": ("run the demo: emitter, SQL Server harvest and Spark, then show their lineage",
             "lineage_capture.demo:main"),
    "graph": ("the lineage graph, job hierarchy and task DAG of the events (ingest, show, dag, html, serve...)",
              "lineage_graph.cli:main"),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: only for ``--help``, ``--version`` and unknown subcommands (each subcommand
    parses its own arguments, so only its modules load)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="exit codes: 0 done; 1 something to look at (the subcommand's "
                                            "--help says what); 2 usage or configuration error")
    add_version_option(parser)
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, (help_line, _) in COMMANDS.items():
        sub.add_parser(name, help=help_line, add_help=False)
    return parser


def _command(name: str) -> Callable[..., int]:
    module, _, function = COMMANDS[name][1].partition(":")
    return getattr(importlib.import_module(module), function)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lineage-capture``: dispatch to the subcommand; the exit code is the subcommand's."""
    try:
        return _dispatch(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # `lineage-capture config | head -1`: the reader left; no traceback about it
        _quiet_stdout()
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT (a harvest's state only advances
        print(f"{PROG}: interrupted", file=sys.stderr)  # once its events are delivered or spooled)
        return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: Python flushes it once more at exit, which would raise again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # (stdout already closed or not a file)
        pass
    finally:
        os.close(devnull)


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in COMMANDS:
        command = _command(argv[0])
        if "prog" in inspect.signature(command).parameters:
            return int(command(argv[1:], prog=f"{PROG} {argv[0]}") or 0)
        return int(command(argv) or 0)  # a part with its own prog (lineage_graph: "lineage-capture graph ...")
    parser = build_parser()
    parser.parse_args(argv)  # --help, --version and mistakes exit here
    parser.print_help(sys.stderr)
    return 2


def harvest_main() -> int:
    """The ``harvest`` alias (short, for cron lines): ``harvest sqlserver ...`` = ``lineage-capture harvest ...``."""
    from harvesters.cli import main as harvest

    return harvest()


if __name__ == "__main__":
    sys.exit(main())
