"""The typed surface: bare ``Any`` in public signatures and ``type: ignore`` only go down.

What is measured (``python tests/test_typing_surface.py`` prints it):

- The public surface: every name a public module exposes (a module none of whose path
  parts starts with ``_``; its ``__all__`` when it has one, else its names without a
  leading ``_``), followed through ``from ... import`` to where it is defined; for a class,
  its bases defined in the package too (``Run``'s methods come from ``journal``'s ``Run``
  and the recorder).
- Its named parameters: those of public functions, of public methods of public classes
  (``__init__`` and ``__call__`` included: they are the constructor's and the call's
  signature) and a dataclass's fields (its constructor's parameters); ``self``/``cls`` and
  ``*args``/``**kwargs`` are not counted.
- A parameter is *bare Any* when its annotation is exactly ``Any`` (or ``typing.Any``).
- ``type: ignore`` comments anywhere under ``src/toolledger``.

The limits below are the numbers reached; lower them when a change lowers the count.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "toolledger"
TYPED_USE = Path(__file__).resolve().parent / "typing" / "api.py"

#: Upper bounds: the share of bare-``Any`` named parameters (percent) and the count of
#: ``type: ignore`` comments. They may only go down.
MAX_BARE_ANY_SHARE = 3.74
MAX_TYPE_IGNORES = 15


@dataclass(frozen=True, slots=True)
class Surface:
    """The measured public surface."""

    parameters: tuple[str, ...]  # ``module.function(name)`` of every named parameter
    bare_any: tuple[str, ...]  # those annotated exactly ``Any``

    @property
    def share(self) -> float:
        """The share of bare-``Any`` named parameters, in percent."""
        return 100.0 * len(self.bare_any) / len(self.parameters)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_public_module(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


class _Module:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.is_package = path.name == "__init__.py"
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (module, name)
        self.all: list[str] | None = None
        self._collect(self.tree.body)

    def _collect(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defs[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                source = self._resolve(node)
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                    assert node.value is not None
                    self.all = list(ast.literal_eval(node.value))
            elif isinstance(node, ast.If | ast.Try):
                self._collect(node.body)

    def _resolve(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.name.split(".")
        if not self.is_package:
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base)

    def exposed(self) -> list[str]:
        if self.all is not None:
            return self.all
        names = [
            *self.defs,
            *(n for n, (m, _) in self.imports.items() if m.startswith("toolledger")),
        ]
        return [n for n in names if not n.startswith("_")]


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in ("Any", "typing.Any")
    return ast.unparse(annotation) in ("Any", "typing.Any")


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target).split(".")[-1] == "dataclass":
            return True
    return False


def measure() -> Surface:
    """Walk ``src/toolledger`` and measure its public signatures."""
    modules = {_module_name(p): _Module(_module_name(p), p) for p in sorted(SRC.rglob("*.py"))}
    seen: set[tuple[str, str]] = set()
    parameters: list[str] = []
    bare_any: list[str] = []

    def count(where: str, args: list[ast.arg]) -> None:
        for arg in args:
            if arg.arg in ("self", "cls"):
                continue
            parameters.append(f"{where}({arg.arg})")
            if _is_any(arg.annotation):
                bare_any.append(f"{where}({arg.arg})")

    def visit(module_name: str, name: str) -> None:
        # Follow re-exports to the definition; count each definition once.
        for _ in range(20):
            module = modules.get(module_name)
            if module is None or (module_name, name) in seen:
                return
            if name in module.defs:
                break
            if name not in module.imports:
                return
            module_name, name = module.imports[name]
        else:  # pragma: no cover (an import cycle)
            return
        seen.add((module_name, name))
        node = module.defs[name]
        where = f"{module_name}.{name}"
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Name):
                    visit(module_name, base.id)
            # A name defined again (``@overload``s, then the implementation) counts once: the
            # last definition, as for module-level names.
            methods = {
                item.name: item
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    if item is not methods[item.name]:
                        continue
                    if not item.name.startswith("_") or item.name in ("__init__", "__call__"):
                        a = item.args
                        count(f"{where}.{item.name}", [*a.posonlyargs, *a.args, *a.kwonlyargs])
                elif (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and _is_dataclass(node)
                    and "ClassVar" not in ast.unparse(item.annotation)
                ):
                    count(where, [ast.arg(arg=item.target.id, annotation=item.annotation)])
        else:
            a = node.args
            count(where, [*a.posonlyargs, *a.args, *a.kwonlyargs])

    for module_name, module in modules.items():
        if _is_public_module(module_name):
            for name in module.exposed():
                visit(module_name, name)
    return Surface(parameters=tuple(parameters), bare_any=tuple(bare_any))


def count_type_ignores() -> int:
    """Count ``type: ignore`` comments under ``src/toolledger``."""
    total = 0
    for path in SRC.rglob("*.py"):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        total += sum(1 for t in tokens if t.type == tokenize.COMMENT and "type: ignore" in t.string)
    return total


def test_public_signatures_bare_any_share_does_not_grow() -> None:
    """The share of bare-``Any`` named parameters in public signatures is at most the limit."""
    surface = measure()
    assert surface.share <= MAX_BARE_ANY_SHARE, "\n".join(surface.bare_any)


def test_type_ignores_do_not_grow() -> None:
    """``src/toolledger`` holds at most the limit's ``type: ignore`` comments."""
    assert count_type_ignores() <= MAX_TYPE_IGNORES


def test_measure_follows_reexports_and_bases_but_skips_private_names() -> None:
    """The walk reaches public names defined in private modules, and only public names."""
    measured = set(measure().parameters)
    assert {
        "toolledger.guard._run.Run.call(input)",  # re-exported from a private module
        "toolledger.journal._run.Run.__init__(db)",  # a base of the exported Run
        "toolledger.tools.Tool(approval)",  # a dataclass field
        "toolledger.tools.tool(approval)",
    } <= measured
    assert not any("._flow." in p or "._seams." in p for p in measured)
    functions = {p.split("(")[0].rsplit(".", 1)[-1] for p in measured}
    assert {f for f in functions if f.startswith("_")} <= {"__init__", "__call__"}


def test_typed_use_of_the_api_passes_strict_mypy(tmp_path: Path) -> None:
    """tests/typing/api.py (what a user's type checker sees) passes ``mypy --strict``.

    It pins ``Tool[I, R]`` as inferred by ``@toolledger.tool``, ``run.call``'s
    ``ToolOutcome[R]`` and the ``approval=`` literal; its ``type: ignore[code]`` lines must
    stay errors (strict mypy reports an unneeded ignore).
    """
    pytest.importorskip("mypy")
    env = {**os.environ, "MYPYPATH": str(SRC.parent)}  # this checkout's toolledger
    config = tmp_path / "mypy.ini"  # not pyproject's: its tests.* override relaxes strict
    config.write_text("[mypy]\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.10",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path),
            "--config-file",
            str(config),
            str(TYPED_USE),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout


if __name__ == "__main__":
    surface = measure()
    print(f"named parameters: {len(surface.parameters)}")
    print(f"bare Any: {len(surface.bare_any)} ({surface.share:.1f} %)")
    print(f"type: ignore: {count_type_ignores()}")
    for entry in surface.bare_any:
        print("  ", entry)
