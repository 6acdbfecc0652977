"""What ``pip install lineage-capture`` brings: the base install is what a cron box harvesting exported files
needs (no PySpark, no pyodbc); every third-party module the packages import is declared, in the base
dependencies or in the extra of the part that imports it."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from importlib.metadata import packages_distributions

import pytest
import tomllib

from paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PACKAGES = ("emitter", "harvesters", "spark_plugin", "lineage_graph", "lineage_capture")
# the extra a package's optional imports belong to: (package prefix, extra)
OPTIONAL = {"pyspark": "spark", "py4j": "spark", "pyodbc": "sqlserver", "snowflake": "snowflake",
            "cryptography": "snowflake", "confluent_kafka": "kafka"}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


BASE = _requirement_names(PYPROJECT["dependencies"])
EXTRAS = {name: _requirement_names(reqs) for name, reqs in PYPROJECT["optional-dependencies"].items()}


def _third_party_imports() -> dict[str, set[str]]:
    """top-level module -> the project modules importing it (module level or deferred)."""
    ours = set(PACKAGES)
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                for name in names:
                    top = name.split(".")[0]
                    if top not in ours and top not in sys.stdlib_module_names:
                        found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("distribution", ["pyspark", "pyodbc", "py4j", "snowflake-connector-python"])
def test_base_install_pulls_no_integration(distribution: str) -> None:
    assert distribution not in BASE


@pytest.mark.parametrize(("extra", "distribution"), [("spark", "pyspark"), ("spark", "py4j"),
                                                      ("sqlserver", "pyodbc"),
                                                      ("snowflake", "snowflake-connector-python")])
def test_each_integration_has_its_extra(extra: str, distribution: str) -> None:
    assert distribution in EXTRAS[extra]


def test_every_imported_third_party_module_is_declared() -> None:
    distributions = packages_distributions()
    undeclared = []
    for module, where in sorted(_third_party_imports().items()):
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        extra = OPTIONAL.get(module)
        declared = BASE | (EXTRAS[extra] if extra else set())
        if not names & declared:
            undeclared.append(f"{module} ({', '.join(sorted(names))}) imported by {', '.join(sorted(where))}")
    assert undeclared == []


@pytest.mark.parametrize("argv", [["config"], ["graph", "show"], ["--help"]])
def test_a_reader_leaving_the_pipe_gets_no_traceback(tmp_path, argv: list[str]) -> None:
    """`lineage-capture config | head -1`: the reader closes the pipe first; the command ends without a word."""
    env = {**os.environ, "LINEAGE_CAPTURE_STATE_DIR": str(tmp_path), "OPENLINEAGE_CONFIG": str(tmp_path / "none.yml")}
    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails with EPIPE
    try:
        run = subprocess.run([sys.executable, "-m", "lineage_capture", *argv], stdout=write, stderr=subprocess.PIPE,
                             env=env, timeout=60)
    finally:
        os.close(write)
    assert b"Traceback" not in run.stderr and b"BrokenPipe" not in run.stderr, run.stderr.decode()
