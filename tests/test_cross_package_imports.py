"""A package uses another package's public names, not its ``_private`` modules or names.

Every module of ``src/toolledger`` is read with ``ast`` (top-level, inside functions and
under ``TYPE_CHECKING`` alike; relative imports resolved). Packages are the units of
``tests/test_layers.py``: a subpackage (``journal``), a top-level module (``settle``) or
the root package. An import is a *reach* when it names, inside another unit, a module or a
name with a ``_private`` part: ``from ..journal._records import parse_many``,
``from toolledger.store import _search``, ``import toolledger.checkpoint._json``. Each
(importing module, private module or name) pair counts once, and the count may only go
down: what another package needs is a public name of its package (its ``__init__``
re-exports it; names imported ``as`` themselves outside ``__all__`` are for toolledger's
own packages, not users).

Not counted: ``_version``, the foundation unit itself (a top-level module is its own package, and
``__version__`` is its public name).
"""

from __future__ import annotations

import ast
from pathlib import Path

import toolledger

PACKAGE = Path(toolledger.__file__).resolve().parent

#: The most reaches allowed; lower it when one goes (each one that stays is named below).
MAX_REACHES = 0


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _unit(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "toolledger"


def _reach(importer: str, dotted: str) -> str | None:
    """The private module or name ``dotted`` reaches in another unit, if it does."""
    parts = dotted.split(".")
    if parts[0] != "toolledger" or _unit(dotted) == _unit(importer):
        return None
    # parts[1] names the unit itself; a private part below it is the unit's internal.
    for i, part in enumerate(parts[2:], start=2):
        if _private(part):
            return ".".join(parts[: i + 1])
    return None


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _reaches(root: Path) -> list[tuple[str, str]]:
    """Sorted ``(importing module, private module or name)`` pairs under ``root``."""
    found: set[tuple[str, str]] = set()
    for module, path in _modules(root).items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            paths: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([*base, node.module] if node.module else base)
                else:
                    origin = node.module or ""
                paths = [f"{origin}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                paths = [alias.name for alias in node.names]
            for dotted in paths:
                reached = _reach(module, dotted)
                if reached is not None:
                    found.add((module, reached))
    return sorted(found)


def test_cross_package_imports_stay_at_most_the_pinned_count() -> None:
    """No more modules reach into another package's private modules or names than pinned."""
    reaches = _reaches(PACKAGE)
    listed = "\n".join(f"{module} reaches {target}" for module, target in reaches)
    assert len(reaches) <= MAX_REACHES, (
        f"{len(reaches)} private cross-package imports (at most {MAX_REACHES}); import a "
        f"public name of the package instead:\n{listed}"
    )


def test_cross_package_imports_each_form_is_counted(tmp_path: Path) -> None:
    """A private module or name of another unit counts, once per module; its own do not."""
    files = {
        "guard/_flow.py": (
            "from ..journal._records import parse_many, chain_hash\n"
            "from toolledger.store import _search, open_store\n"
            "from .._version import __version__\n"
            "from . import _call\n"
            "from ._call import Call\n"
            "def f():\n"
            "    import toolledger.checkpoint._json\n"
            "    from ..checkpoint.model import _KNOWN, Binding\n"
        ),
        "settle.py": "from .journal import _append\nfrom .approvals import _clip\n",
        "testing.py": "from .journal._records import chain_hash\n",
    }
    package = tmp_path / "toolledger"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    assert _reaches(package) == [
        ("toolledger.guard._flow", "toolledger.checkpoint._json"),
        ("toolledger.guard._flow", "toolledger.checkpoint.model._KNOWN"),
        ("toolledger.guard._flow", "toolledger.journal._records"),
        ("toolledger.guard._flow", "toolledger.store._search"),
        ("toolledger.settle", "toolledger.approvals._clip"),
        ("toolledger.settle", "toolledger.journal._append"),
        ("toolledger.testing", "toolledger.journal._records"),  # no module is a door
    ]
