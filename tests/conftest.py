"""Test-wide isolation: no test reads the developer's OpenLineage configuration or writes to ~/.local/state."""
from __future__ import annotations

import logging
import os
import subprocess

import pytest

# Every memo hit of the emitter re-checks that the remembered instance did not change after it was handed over
# (emitter/serialize.py): set before any test imports the emitter.
os.environ.setdefault("LINEAGE_CAPTURE_CHECK_MEMOS", "1")

#: This repository's packages, byte-compiled once per test session (:func:`pytest_sessionstart`).
PACKAGES = ("spark_plugin", "emitter", "harvesters", "lineage_graph", "lineage_capture")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the packages as ``pip install`` does for an installed distribution. The suite starts hundreds of
    Python processes (spark-submit drivers, the emitter's children, harvests); in an editable checkout under
    ``PYTHONDONTWRITEBYTECODE`` (as on CI) each would compile the same modules from source, ~0.25 s of CPU a
    driver and its child that no installed user pays."""
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for package in PACKAGES:
        compileall.compile_dir(root / package, quiet=1)


@pytest.fixture(autouse=True)
def isolated_lineage_env(tmp_path_factory, monkeypatch):
    """Each test gets its own state dir (default event file, spool) and no inherited OPENLINEAGE_* config."""
    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    state = tmp_path_factory.mktemp("lineage-state")
    monkeypatch.setenv("LINEAGE_CAPTURE_STATE_DIR", str(state))
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(state / "no-openlineage.yml"))
    return state



@pytest.fixture(autouse=True)
def restore_root_logging():
    """Command-line entry points run in-process here configure logging for a whole process (a handler on the
    root logger, redaction filters on it): undo that after each test so no test sees another's set-up."""
    root = logging.getLogger()
    handlers = [(handler, list(handler.filters)) for handler in root.handlers]
    level = root.level
    yield
    for handler in root.handlers[:]:
        if all(handler is not kept for kept, _ in handlers):
            root.removeHandler(handler)
    for handler, filters in handlers:
        handler.filters[:] = filters
    root.setLevel(level)


@pytest.fixture
def child_processes(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen]:
    """Every process the test starts through ``subprocess.Popen`` (really started), to check how they end."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started
