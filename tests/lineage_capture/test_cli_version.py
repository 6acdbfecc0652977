"""Every subcommand answers ``--version`` (README and --help say so), in-process through the real entry point."""
from __future__ import annotations

import pytest

from lineage_capture.cli import main
from lineage_capture.version import DISTRIBUTION, version

COMMANDS = [[], ["harvest"], ["harvest", "sqlserver"], ["harvest", "snowflake"], ["replay"], ["config"], ["demo"],
            ["graph"], ["graph", "ingest"], ["graph", "show"], ["graph", "dag"], ["graph", "html"], ["graph", "serve"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "lineage-capture")
def test_every_subcommand_prints_the_version(capsys, command):
    try:
        code = main([*command, "--version"])
    except SystemExit as ended:  # (argparse's exit; some subcommands return its code instead)
        code = ended.code
    assert code == 0
    assert capsys.readouterr().out == f"{DISTRIBUTION} {version()}\n"


def test_the_version_is_the_installed_distributions():
    """One source: pyproject.toml builds the wheel with emitter/version.py's VERSION, which the commands and the
    Spark facets report without looking the metadata up."""
    from importlib.metadata import version as installed_version

    from spark_plugin.facets import adapter_version

    assert version() == adapter_version() == installed_version(DISTRIBUTION)
