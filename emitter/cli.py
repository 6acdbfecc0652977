"""``emitter`` command: ``emitter replay`` re-sends spooled events; ``emitter config`` shows the resolved
configuration (secrets masked)."""
from __future__ import annotations

import argparse
import json
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="emitter", description=__doc__)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="configuration override in openlineage-spark form, e.g. transport.type=http "
                             "(repeatable; wins over openlineage.yml and OPENLINEAGE__* variables)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("replay", help="re-send events spooled after failed deliveries, oldest first")
    sub.add_parser("config", help="print the resolved configuration, secrets masked")
    return parser


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["transport.type=http"]`` -> ``{"transport.type": "http"}``; raises ValueError on a bad pair."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects KEY=VALUE, got {pair!r}")
        overrides[key.strip().removeprefix("spark.openlineage.")] = value
    return overrides


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit 0 when done, 1 when events remain spooled, 2 on usage/configuration errors."""
    from emitter.log import configure_cli_logging

    configure_cli_logging()
    args = _parser().parse_args(argv)
    try:
        overrides = parse_overrides(args.conf)
        from emitter.config import load_config
        from emitter.redact import redact_obj

        config = load_config(overrides)
        if args.command == "config":
            print(json.dumps(redact_obj({"transport": dict(config.transport or {}), "source": config.source,
                                         "spool": str(config.spool_dir), "disabled": config.disabled}), indent=2))
            return 0
        from emitter.emitter import Emitter

        emitter = Emitter(config)
    except ValueError as error:
        print(f"emitter: {error}", file=sys.stderr)
        return 2
    replayed, pending = emitter.replay()
    emitter.close()
    print(f"replayed {replayed} events; {pending} bytes still spooled in {emitter.spool.events_path}")
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main())
