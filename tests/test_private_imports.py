"""Tests reach toolledger's private modules only through ``tests/_internals.py``.

Every test file is read with ``ast``: an ``import`` or ``from ... import`` of a module
with a ``_private`` part (``toolledger.journal._read``), a private name imported from a
public module (``from toolledger.store import _rows``), or an attribute path through one
(``toolledger.telemetry._policy.DEFAULTS``) fails, unless the file is ``_internals.py``
(the one door) or the pair is listed in ``ALLOWED`` with the reason it cannot go through
the door. So a refactor that moves an internal edits one line of ``_internals.py``, not
the tests that use it, and ``toolledger.testing`` holds only what users test with: a test
imports from it only names in its ``__all__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: The one file that imports toolledger's private modules for the other tests.
DOOR = "_internals.py"

#: (test file, private module) pairs that cannot go through ``_internals.py``.
ALLOWED = {
    # PostgreSQL-only: the module imports psycopg (the optional extra), which every test
    # importing _internals.py would then need.
    ("store/test_postgres_failures.py", "toolledger.store._pg_schema"),
    ("journal/test_reader.py", "toolledger.store._pg_search"),
}


def _private(dotted: str) -> bool:
    return any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in dotted.split(".")[1:]
    )


def _reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, private module path)`` of each reach into a private toolledger module."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] != "toolledger":
                continue
            if _private(node.module):
                out.append((node.lineno, node.module))
            else:
                out.extend(
                    (node.lineno, f"{node.module}.{a.name}")
                    for a in node.names
                    if _private(f"{node.module}.{a.name}")
                )
        elif isinstance(node, ast.Import):
            out.extend(
                (node.lineno, a.name)
                for a in node.names
                if a.name.split(".")[0] == "toolledger" and _private(a.name)
            )
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Del):
            parts = []
            base: ast.expr = node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            path = ".".join(["toolledger", *reversed(parts)])
            # Only the outermost attribute of a chain reports (the inner ones are parts).
            if isinstance(base, ast.Name) and base.id == "toolledger" and _private(path):
                out.append((node.lineno, path))
    return _outermost(out)


def _outermost(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Drop a path that is a prefix of another found on the same line."""
    return sorted(
        (line, path)
        for line, path in set(found)
        if not any(l2 == line and p2.startswith(path + ".") for l2, p2 in found)
    )


def _module_of(path: str) -> str:
    """The private module a dotted path reaches: up to and including its first ``_part``."""
    parts = path.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[: i + 1])
    return path


def _violations(root: Path) -> list[str]:
    bad = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        if rel == DOOR:
            continue
        for line, path in _reaches(ast.parse(file.read_text(encoding="utf-8"))):
            if (rel, _module_of(path)) not in ALLOWED:
                bad.append(f"{rel}:{line} reaches {path}; import it from tests/{DOOR}")
    return bad


def test_private_imports_tests_go_through_internals() -> None:
    """No test file but ``_internals.py`` imports a private toolledger module (but the allowed)."""
    bad = _violations(TESTS)
    assert not bad, "\n".join(bad)


def test_private_imports_tests_take_only_api_from_testing() -> None:
    """What a test imports from ``toolledger.testing`` is in its ``__all__`` (what users get)."""
    import toolledger.testing

    outside = [
        f"{file.relative_to(TESTS).as_posix()}:{node.lineno} imports {alias.name}"
        for file in sorted(TESTS.rglob("*.py"))
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "toolledger.testing"
        for alias in node.names
        if alias.name not in toolledger.testing.__all__
    ]
    assert outside == []


def test_private_imports_every_allowed_entry_is_still_needed() -> None:
    """An allowed reach that no test makes any more leaves ``ALLOWED``."""
    used = set()
    for file in sorted(TESTS.rglob("*.py")):
        rel = file.relative_to(TESTS).as_posix()
        for _, path in _reaches(ast.parse(file.read_text(encoding="utf-8"))):
            used.add((rel, _module_of(path)))
    assert used >= ALLOWED, f"no longer needed: {sorted(ALLOWED - used)}"


def test_private_imports_each_form_is_reported(tmp_path: Path) -> None:
    """A private module imported, from-imported, named from its package or walked to fails,
    in any file but the door."""
    (tmp_path / DOOR).write_text(
        "from toolledger.store._rows import dump_record\n", encoding="utf-8"
    )
    (tmp_path / "test_x.py").write_text(
        "import toolledger\n"
        "import toolledger.journal._read\n"
        "from toolledger.store._rows import dump_record\n"
        "from toolledger.store import _sqlite_search\n"
        "from toolledger.testing import stored_run\n"
        "from toolledger import load_run\n"
        "x = toolledger.telemetry._policy.DEFAULTS\n",
        encoding="utf-8",
    )
    assert _violations(tmp_path) == [
        f"test_x.py:{line} reaches {path}; import it from tests/_internals.py"
        for line, path in [
            (2, "toolledger.journal._read"),
            (3, "toolledger.store._rows"),
            (4, "toolledger.store._sqlite_search"),
            (7, "toolledger.telemetry._policy.DEFAULTS"),
        ]
    ]
