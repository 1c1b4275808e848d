"""``toolledger lint-tools MODULE:ATTRIBUTE``: diagnostics on stdout, exit 0/1/2."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolledger.cli import main

MODULE = """
import toolledger

SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string", "maxLength": 99, "description": "Recipient."}},
    "additionalProperties": False,
}

def _send(input, ctx):
    return {"sent": True}

GOOD = toolledger.tool(
    "send_email", revision="1", execute=_send, input_schema=SCHEMA,
    description="Send one email to one recipient.", effects="side-effect",
    recover=lambda ctx: None,
)
WARN_ONLY = {"name": "lookup", "description": "Look up.", "input_schema": SCHEMA}
TOOLS = [
    GOOD,
    {"type": "function", "function": {"name": "bad name", "description": "Does a thing well.",
     "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
]
LISTING = {"tools": [{"name": "rm", "description": "Remove one file now.",
           "inputSchema": SCHEMA, "annotations": {"destructiveHint": True}}]}

class Holder:
    tools = [GOOD]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    name = f"lintmod_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / name


def lint(*args: str):
    return CliRunner().invoke(main, ["lint-tools", *args], catch_exceptions=False)


def test_lint_tools_ready_tool_exits_0(project: Path) -> None:
    """A ready tool prints nothing on stdout and exits 0."""
    result = lint(f"{project.name}:GOOD")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "1 tool, 0 errors, 0 warnings" in result.stderr


def test_lint_tools_warnings_only_exits_0(project: Path) -> None:
    """Warnings are printed but do not fail the check."""
    result = lint(f"{project.name}:WARN_ONLY")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "lookup\twarning\tdescription\tdescription\tdescribe what the tool does and when to "
        "use it in at least 3 words (found 2)"
    ]


def test_lint_tools_error_exits_1_and_names_paths(project: Path) -> None:
    """An error diagnostic fails the check (exit 1); each line names tool, code, path."""
    result = lint(f"{project.name}:TOOLS")
    assert result.exit_code == 1
    rows = [line.split("\t")[:4] for line in result.stdout.splitlines()]
    assert rows == [
        ["bad name", "error", "name", "function.name"],
        ["bad name", "error", "closed_input", "function.parameters"],
        ["bad name", "warning", "argument_description", "function.parameters.properties.q"],
        ["bad name", "error", "unbounded_string", "function.parameters.properties.q"],
    ]
    assert "2 tools, 3 errors, 1 warning" in result.stderr


def test_lint_tools_mcp_listing_each_tool_checked(project: Path) -> None:
    """A listing dict ``{"tools": [...]}`` and an object with ``.tools`` are expanded."""
    result = lint(f"{project.name}:LISTING", f"{project.name}:Holder", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [(r["tool"], r["code"], r["path"]) for r in rows] == [
        ("rm", "no_recover", "annotations")
    ]
    assert "2 tools" in result.stderr


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("no_colon", "expected MODULE:ATTRIBUTE"),
        ("surely_missing_module_xyz:T", "cannot import surely_missing_module_xyz"),
        ("{mod}:MISSING", "no attribute 'MISSING'"),
    ],
)
def test_lint_tools_bad_target_exits_2(project: Path, target: str, needle: str) -> None:
    """A target that cannot be resolved is a usage error (exit 2)."""
    result = lint(target.format(mod=project.name))
    assert result.exit_code == 2
    assert needle in result.stderr


def test_lint_tools_console_script_finds_modules_in_cwd(project: Path) -> None:
    """The installed command imports the target from the working directory."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("toolledger")), "lint-tools", f"{project.name}:TOOLS"],
        cwd=project.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "bad name\terror\tname\tfunction.name" in proc.stdout


def test_lint_tools_documented_with_every_option() -> None:
    """docs/integrations.md documents the command and each of its options; -h works."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text(
        encoding="utf-8"
    )
    command = main.commands["lint-tools"]
    assert "toolledger lint-tools" in doc
    for param in command.params:
        for opt in getattr(param, "opts", []):
            if opt.startswith("--"):
                assert opt in doc, opt
    result = CliRunner().invoke(main, ["lint-tools", "-h"])
    assert result.exit_code == 0
    assert "Example: toolledger lint-tools" in result.output


SERVER_MODULE = """
try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server

app = Server("lint me")

@app.tool()
def fetch(url: str) -> str:
    \"\"\"Fetch one page by URL.\"\"\"
    return url
"""


def test_lint_tools_mcp_server_object_lists_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCP server object is linted through its own ``list_tools()``."""
    pytest.importorskip("mcp")
    name = f"lintsrv_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(SERVER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = lint(f"{name}:app", "--json")
    assert result.exit_code == 1
    found = {(r["tool"], r["code"], r["path"]) for r in json.loads(result.stdout)}
    assert ("fetch", "closed_input", "inputSchema") in found
    assert ("fetch", "unbounded_string", "inputSchema.properties.url") in found
