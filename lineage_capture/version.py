"""The installed distribution's version, for every ``--version``."""
from __future__ import annotations

import argparse

DISTRIBUTION = "lineage-capture"


def version() -> str:
    """This package's version: emitter/version.py's ``VERSION``, which pyproject.toml builds the wheel with."""
    from emitter.version import VERSION

    return VERSION


class _VersionAction(argparse.Action):
    """``--version`` that looks the version up only when asked (metadata lookups cost start-up time)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{DISTRIBUTION} {version()}")
        parser.exit()


def add_version_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--version`` to ``parser``."""
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
