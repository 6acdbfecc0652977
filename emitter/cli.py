"""``lineage-capture replay`` re-sends spooled events; ``lineage-capture config`` shows the resolved
configuration (secrets masked)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emitter.config import EmitterConfig

REPLAY_EXIT_CODES = "exit codes: 0 the spool is empty; 1 events remain spooled (the backend is still failing); " \
                    "2 usage or configuration error"
CONFIG_EXIT_CODES = "exit codes: 0 printed; 2 usage or configuration error"


def _parser(prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    from lineage_capture.version import add_version_option

    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)
    add_version_option(parser)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="configuration override in openlineage-spark form, e.g. transport.type=http "
                             "(repeatable; wins over openlineage.yml and OPENLINEAGE__* variables)")
    return parser


def _config(prog: str, description: str, epilog: str, argv: list[str] | None) -> EmitterConfig:
    from emitter.config import load_config, parse_overrides
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    args = _parser(prog, description, epilog).parse_args(argv)
    return load_config(parse_overrides(args.conf))


def config_main(argv: list[str] | None = None, prog: str = "lineage-capture config") -> int:
    """Print the resolved configuration with secrets masked; exit 2 on a bad one."""
    from emitter.redact import redact_obj

    try:
        config = _config(prog, "Print the resolved OpenLineage configuration, secrets masked.", CONFIG_EXIT_CODES,
                         argv)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    print(json.dumps(redact_obj({"transport": dict(config.transport or {}),
                                 "source": config.source,
                                 "spool": str(config.spool_dir),
                                 "disabled": config.disabled}), indent=2))
    return 0


def replay_main(argv: list[str] | None = None, prog: str = "lineage-capture replay") -> int:
    """Re-send the spool, oldest first: exit 0 when done, 1 when events remain spooled, 2 on a bad configuration."""
    from emitter.emitter import Emitter

    try:
        config = _config(prog, "Re-send events spooled after failed deliveries, oldest first.", REPLAY_EXIT_CODES,
                         argv)
        emitter = Emitter(config)
    except ValueError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    replayed, pending = emitter.replay()
    emitter.close()
    print(f"replayed {replayed} events; {pending} bytes still spooled in {emitter.spool.events_path}")
    return 1 if pending else 0
