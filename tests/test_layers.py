"""The layering in docs/architecture.md is a test: no import runs up a layer, no new cycle.

Every ``import`` in ``src/toolledger`` is read with ``ast`` (top-level, inside functions and
under ``TYPE_CHECKING`` alike) and mapped to its unit: a subpackage (``guard``), a
top-level module (``replay``), the root package (``toolledger``) or the foundation
(``errors``, ``_version``). An import from one unit of another is legal when the diagram in
docs/architecture.md has a path of arrows from the first to the second. Cycles are checked
between modules over the imports that run (``TYPE_CHECKING`` blocks do not), so a lazy
import that dodges a cycle still counts.

A short AST walk rather than import-linter: the rules are one diagram plus two allowed
cycles, the diagram itself is the configuration (no second copy in pyproject), and the
test needs no extra dev dependency.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import toolledger

PACKAGE = Path(toolledger.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

#: Units every module may import; they import nothing of toolledger.
FOUNDATION = {"errors", "_version"}

#: Diagram node ids that are not unit names.
NODE_UNITS = {"main": {"__main__"}, "foundation": FOUNDATION}


def _cli_registration(cycle: frozenset[str]) -> bool:
    """Commands in cli/ register themselves on the click group in cli/__init__.py."""
    return all(m == "toolledger.cli" or m.startswith("toolledger.cli.") for m in cycle)


#: The only import cycles allowed (see docs/architecture.md).
ALLOWED_CYCLES = [
    lambda c: c == {"toolledger.checkpoint.model", "toolledger.checkpoint.validate"},
    _cli_registration,
]


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module
    line: int
    runtime: bool  # False under ``if TYPE_CHECKING:``


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(root: Path) -> list[Import]:
    modules = _modules(root)

    def resolve(name: str) -> str | None:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in modules else None

    found: list[Import] = []
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]

        def visit(node: ast.AST, runtime: bool, module: str = module, package: str = package):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                for child in node.body:
                    visit(child, False)
                for child in node.orelse:
                    visit(child, runtime)
                return
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([*base, node.module] if node.module else base)
                else:
                    origin = node.module or ""
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
                names = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
                    for a in node.names
                ]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                target = resolve(name) if name.split(".")[0] == "toolledger" else None
                if target is not None and target != module:
                    found.append(Import(module, target, node.lineno, runtime))
            for child in ast.iter_child_nodes(node):
                visit(child, runtime)

        visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "toolledger"


def _diagram() -> dict[str, set[str]]:
    """Unit -> the units it may import (transitively), from the doc's Mermaid arrows."""
    block = re.search(r"```mermaid\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert block, "docs/architecture.md has no mermaid block"
    arrows = re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", block.group(1), re.MULTILINE)
    edges: dict[str, set[str]] = defaultdict(set)
    nodes: set[str] = set()
    for a, b in arrows:
        edges[a].add(b)
        nodes |= {a, b}
    allowed: dict[str, set[str]] = {}
    for node in nodes:
        seen: set[str] = set()
        todo = [node]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert node not in seen, f"the layer diagram has a cycle through {node}"
        for unit in NODE_UNITS.get(node, {node}):
            allowed[unit] = {u for n in seen for u in NODE_UNITS.get(n, {n})}
    return allowed


def _upward(imports: list[Import], allowed: dict[str, set[str]]) -> list[Import]:
    bad = []
    for imp in imports:
        a, b = _unit(imp.source), _unit(imp.target)
        if a == b or (b in FOUNDATION and a not in FOUNDATION):
            continue
        if b not in allowed.get(a, set()):
            bad.append(imp)
    return bad


def _cycles(imports: list[Import]) -> list[frozenset[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if imp.runtime:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_layers_every_unit_is_in_the_diagram() -> None:
    """A new package or top-level module fails until docs/architecture.md places it."""
    allowed = _diagram()
    units = {_unit(m) for m in _modules(PACKAGE)}
    missing = units - set(allowed)
    assert not missing, f"place these in the diagram of docs/architecture.md: {sorted(missing)}"


def test_layers_foundation_imports_nothing_of_toolledger() -> None:
    """errors and _version import no other toolledger module."""
    bad = [i for i in _imports(PACKAGE) if _unit(i.source) in FOUNDATION]
    assert bad == []


def _described(imports: list[Import]) -> list[str]:
    return [
        f"{i.source}:{i.line} imports {i.target} ({_unit(i.source)} -> {_unit(i.target)} "
        "is not an arrow of docs/architecture.md)"
        for i in imports
    ]


def test_layers_no_import_runs_up_a_layer() -> None:
    """Every import between units follows the diagram's arrows."""
    bad = _described(_upward(_imports(PACKAGE), _diagram()))
    assert not bad, "\n".join(bad)


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A package ``toolledger`` under ``root`` holding ``files`` (every folder a package)."""
    package = root / "toolledger"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return package


def test_layers_upward_import_inside_a_function_is_reported(tmp_path: Path) -> None:
    """A store module importing the guard, even lazily, is named with its line."""
    package = _tree(
        tmp_path,
        {"guard/_drivers.py": "", "store/sqlite.py": "def f():\n    from ..guard import call\n"},
    )
    assert _described(_upward(_imports(package), _diagram())) == [
        "toolledger.store.sqlite:2 imports toolledger.guard (store -> guard is not an arrow "
        "of docs/architecture.md)"
    ]


def test_layers_cycle_between_modules_is_reported(tmp_path: Path) -> None:
    """Two guard modules importing each other at run time form a cycle."""
    package = _tree(
        tmp_path,
        {"guard/_a.py": "from . import _b\n", "guard/_b.py": "from . import _a\n"},
    )
    assert _cycles(_imports(package)) == [frozenset({"toolledger.guard._a", "toolledger.guard._b"})]


def test_layers_no_import_cycle_but_the_allowed_ones() -> None:
    """The only cycles are checkpoint model <-> validate and cli's click registration."""
    cycles = [
        sorted(c) for c in _cycles(_imports(PACKAGE)) if not any(ok(c) for ok in ALLOWED_CYCLES)
    ]
    assert not cycles, "new import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
