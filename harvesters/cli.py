"""``lineage-capture harvest`` (alias ``harvest``): the cron-run harvesters' subcommands.

``harvest sqlserver`` reads SQL Server Extended Events, ``harvest snowflake`` Snowflake query history; both run
the one sequence of :func:`harvesters.core.run.run_harvest`.

Exit codes: 0 everything harvested; 1 some input was unreadable or unparseable and was skipped (counted in
the summary, everything else emitted), or events could not be delivered nor spooled (the state was then not
advanced); 2 usage or configuration error; 3 events did not reach the backend (spooled or refused as dead
letters; the state advanced). Another harvest holding the state's lock is not an error: the
second run prints a message and exits 0 (cron overlap is normal; the running harvest covers the input).
"""
from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable
from typing import Any

#: What ``harvest --help`` prints (plain text: the module docstring is for readers of the code).
DESCRIPTION = """Read SQL logs into OpenLineage events, from cron.

  harvest sqlserver   SQL Server Extended Events (exported XML files, or a live event session over ODBC)
  harvest snowflake   Snowflake query history (export files, or live through the connector or ODBC)

Each statement becomes a child run (its input and output tables parsed from the SQL) of the task run that
issued it. With --state a harvest resumes where the last one stopped; overlapping cron runs are harmless.

exit codes:
  0  everything harvested (or another harvest holds the state's lock and covers the input)
  1  some input was unreadable or unparseable and was skipped (counted in the summary), or events could
     neither be delivered nor spooled (the state was then not advanced)
  2  usage, configuration or reading error
  3  everything harvested and the state advanced, but events did not reach the backend: they wait in
     the spool (backend unreachable; `lineage-capture replay` or the next run sends them) or the backend
     refused them for good (dead letters: `lineage-capture replay --dead-letters list`)
  130 interrupted (Ctrl-C); the state was not advanced past what was delivered or spooled
"""


def _add_sqlserver(sub: Any) -> None:
    from harvesters.sqlserver.command import add_sqlserver_parser

    add_sqlserver_parser(sub)


def _add_snowflake(sub: Any) -> None:
    # deferred: registering the options loads the Snowflake harvester (~0.3 s), which `harvest sqlserver`
    # does not need
    from harvesters.snowflake.command import add_snowflake_parser

    add_snowflake_parser(sub)


#: Subcommands: name -> function adding its parser.
SUBCOMMANDS: dict[str, Callable[[Any], None]] = {"sqlserver": _add_sqlserver, "snowflake": _add_snowflake}


def add_subcommands(parser: argparse.ArgumentParser, command: str | None = None) -> None:
    """Add the harvest subcommands to ``parser``; with ``command``, only that one (start-up time)."""
    sub = parser.add_subparsers(dest="source", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}")
    for name, add in SUBCOMMANDS.items():
        if command is None or name == command:
            add(sub)


def build_parser(command: str | None = None, prog: str = "harvest") -> argparse.ArgumentParser:
    """The ``harvest`` parser; with ``command``, only that subcommand is registered (start-up time)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from lineage_capture.version import add_version_option

    add_version_option(parser)
    add_subcommands(parser, command)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a parsed harvest subcommand: the harvest owns this process, so gc and attrs are tuned for it."""
    from emitter.records import unvalidated
    from harvesters.core.background import HARVEST_GC_THRESHOLDS

    thresholds = gc.get_threshold()
    gc.set_threshold(*HARVEST_GC_THRESHOLDS)
    try:
        # A harvest builds every facet from its own records, three per statement: validators off once for the
        # whole run instead of around each build (the events are checked against the schemas in tests).
        with unvalidated():
            return int(args.run(args))
    finally:
        gc.set_threshold(*thresholds)  # main() may be called in a longer-lived process (tests, a scheduler)


def main(argv: list[str] | None = None, prog: str = "harvest") -> int:
    """Entry point of the ``harvest`` console script (and of ``lineage-capture harvest``)."""
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    argv = sys.argv[1:] if argv is None else argv
    # the subcommand is the first argument (``harvest`` has no options of its own); anything else (--help,
    # a typo) gets the full parser, so help and "invalid choice" list every subcommand
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    try:
        return run(build_parser(command, prog).parse_args(argv))
    except KeyboardInterrupt:  # Ctrl-C: one line; the state advances only once the events are delivered or spooled
        print(f"{prog}: interrupted; the state was not advanced past what was delivered", file=sys.stderr)
        return 130  # (the delivery child keeps what it was handed; the rest is harvested again by the next run)


if __name__ == "__main__":
    sys.exit(main())
