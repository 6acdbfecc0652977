"""The one-way flow, as a contract on imports (module level and deferred ones alike):

source -> records -> events -> transport -> (any backend, or the local graph). The emitter knows no producer; the
SQL engine knows no emitter and no harvester; harvesters run without Spark; the graph knows no producer and no
producer knows the graph. ``lineage_capture`` (the command) may import everything; its ``version`` module is a leaf
every ``--version`` uses.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths import REPO

PACKAGES = ("emitter", "harvesters", "spark_plugin", "lineage_graph", "lineage_capture")
LEAF = "lineage_capture.version"

# (importing package prefix, forbidden prefixes, allowed exceptions)
CONTRACT = [
    ("emitter", ("harvesters", "spark_plugin", "lineage_graph", "lineage_capture"), (LEAF,)),
    ("harvesters.sql", ("emitter", "harvesters", "spark_plugin", "lineage_graph", "lineage_capture"),
     ("harvesters.sql",)),
    ("harvesters", ("spark_plugin", "lineage_graph", "lineage_capture"), (LEAF,)),
    ("spark_plugin", ("harvesters", "lineage_graph", "lineage_capture"), ("harvesters.sql", LEAF)),
    ("lineage_graph", ("emitter", "harvesters", "spark_plugin", "lineage_capture"), (LEAF,)),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement is (deferred imports count)."""
    module = _module_name(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[: -node.level] if not path.name == "__init__.py" else \
                    module.split(".")[: len(module.split(".")) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)  # ``from pkg import module``
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _violations(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    problems = []
    for path in sorted((REPO / package.split(".")[0]).rglob("*.py")):
        module = _module_name(path)
        if not _within(module, package):
            continue
        for name in sorted(_imports(path)):
            if any(_within(name, f) for f in forbidden) and not any(_within(name, a) for a in allowed):
                problems.append(f"{module} imports {name}")
    return problems


@pytest.mark.parametrize(("package", "forbidden", "allowed"), CONTRACT, ids=[row[0] for row in CONTRACT])
def test_import_contract(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    assert _violations(package, forbidden, allowed) == []


def test_the_contract_catches_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: an emitter module importing a harvester, even inside a function, is reported."""
    fake = tmp_path / "emitter"
    fake.mkdir()
    (fake / "bad.py").write_text("def f():\n    from harvesters.core import tasks\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert _violations("emitter", CONTRACT[0][1], CONTRACT[0][2]) == [
        "emitter.bad imports harvesters.core", "emitter.bad imports harvesters.core.tasks"]


def test_no_unix_only_import_at_module_level() -> None:
    """fcntl, pwd, grp, resource, termios exist only on POSIX: deferred behind a check, never at the top."""
    unix_only = {"fcntl", "pwd", "grp", "resource", "termios"}
    problems = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                problems += [f"{_module_name(path)}: {n}" for n in names if n.split(".")[0] in unix_only]
    assert problems == []
