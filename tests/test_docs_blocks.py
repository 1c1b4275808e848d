"""Every code block in the docs is executed, so a claim in them cannot drift from the code.

- ```python blocks of README.md and docs/*.md run, page by page, in a fresh process whose
  working directory is a temporary directory (no network: the blocks use SQLite files there).
  The blocks of one page share one namespace, in page order, like a notebook: a later block may
  use what an earlier one defined. A block that cannot run offline (a server, a network, a
  fragment that leaves out its setup) carries a marker on the line right before its fence:
  ``<!-- not-run: the reason -->``. A marker without a reason fails.
- Every ``toolledger ...`` command line in ```sh / ```console blocks is parsed by the real CLI
  (global options, the command, its options and arguments) without running it: a command or an
  option that does not exist fails. Synopsis syntax (``[--opt X]``, ``a|b``, ``...``) is read as
  the first alternative of each part. A shell block marked ``<!-- run -->`` (only ``toolledger``
  lines, no placeholders) is also run, in page order with the page's python blocks, and each
  command must exit 0.

The test prints how many blocks ran and how many were marked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from toolledger.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
SETUP = "<!-- setup:"
RUN = "<!-- run -->"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked
    setup: str = ""  # hidden code run first: a fragment's context, in an HTML comment
    run: bool = False  # a shell block whose commands run too

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m["lang"]:
            i += 1
            continue
        indent, start = len(m["indent"]), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        marker = NOT_RUN.match(lines[start - 1]) if start > 0 else None
        reason = None
        if marker:
            reason = marker["reason"].strip()
            assert reason, f"{page.name}:{start + 1}: a not-run marker needs a reason"
        out.append(
            Block(
                page,
                start + 1,
                m["lang"],
                "\n".join(body) + "\n",
                reason,
                _setup(lines, start),
                start > 0 and lines[start - 1].strip() == RUN,
            )
        )
        i += 1
    return out


def _setup(lines: list[str], fence: int) -> str:
    """The code of a ``<!-- setup:`` comment that ends right before the fence, else ''."""
    end = fence - 1
    if end < 0 or lines[end].strip() != "-->":
        return ""
    begin = end
    while begin > 0 and not lines[begin].lstrip().startswith("<!--"):
        begin -= 1
    if lines[begin].strip() != SETUP:
        return ""
    return "\n".join(lines[begin + 1 : end]) + "\n"


ALL = [b for page in PAGES for b in blocks(page)]
PY = [b for b in ALL if b.lang == "python"]
SHELL = [b for b in ALL if b.lang in ("sh", "bash", "shell", "console")]

# Runs one page's blocks in order in one namespace; reports the first failure by block line.
DRIVER = r"""
import json, sys, traceback, warnings
warnings.simplefilter("ignore")  # NewLedgerWarning and friends: every ledger here is new
import shlex, subprocess
blocks = json.loads(sys.stdin.read())
ns = {"__name__": "__main__"}
for kind, line, code in blocks:
    if kind == "sh":
        for offset, text in enumerate(code.splitlines(), start=1):
            words = shlex.split(text, comments=True)
            if not words:
                continue
            if words[0] != "toolledger":
                sys.exit(f"BLOCK FAILED at line {line + offset}: not a toolledger command: {text}")
            proc = subprocess.run([sys.executable, "-m", *words], capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(
                    f"BLOCK FAILED at line {line + offset}: {text!r} exited "
                    f"{proc.returncode}: {proc.stderr.strip()}"
                )
        continue
    try:
        exec(compile(code, f"<block at line {line}>", "exec"), ns)
    except BaseException:
        print(f"BLOCK FAILED at line {line}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLLEDGER_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["OTEL_SDK_DISABLED"] = "true"  # configure() in a block must not try to reach a collector
    env["NO_COLOR"] = "1"
    return env


def test_counts(capsys: pytest.CaptureFixture[str]) -> None:
    ran = [b for b in PY if b.not_run is None]
    marked = [b for b in PY if b.not_run is not None]
    run_sh = [b for b in SHELL if b.run]
    with capsys.disabled():
        print(
            f"\ndocs python blocks: {len(ran)} run, {len(marked)} marked not-run; "
            f"shell blocks: {len(SHELL)} with toolledger lines parsed, {len(run_sh)} run"
        )
    assert ran, "no python block runs"
    # The markers stay the exception: most of what the docs show must run.
    assert len(ran) > len(marked), [b.where for b in marked]


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if any(b.page == p and b.not_run is None for b in PY)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    todo = [
        ("sh" if b.lang != "python" else "py", b.line, b.setup + b.code)
        for b in ALL
        if b.page == page and ((b.lang == "python" and b.not_run is None) or b.run)
    ]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(todo),
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{page.relative_to(ROOT)}: {proc.stderr[-3000:]}"


def _synopsis(tokens: list[str]) -> list[str]:
    """Reads usage syntax as the first alternative of each part: [--a X] -> --a X, a|b -> a."""
    out: list[str] = []
    for raw in tokens:
        if raw in (">", ">>", "|", "&&", ";", "2>"):
            break  # the shell's part of the line
        tok = raw.strip("[]")
        if tok in ("", "...", "…"):
            continue
        if "|" in tok and not tok.startswith(("http", "postgres", "sqlite")):
            tok = tok.split("|")[0]
        out.append(tok)
    return out


def _commands(block: Block) -> list[tuple[int, list[str]]]:
    found: list[tuple[int, list[str]]] = []
    for offset, raw in enumerate(block.code.splitlines(), start=1):
        line = raw.strip()
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            words.pop(0)  # VAR=value prefixes
        if words[:3] == ["python", "-m", "toolledger"]:
            words = ["toolledger", *words[3:]]
        if words[:1] == ["toolledger"]:
            found.append((block.line + offset, _synopsis(words[1:])))
    return found


COMMANDS = [(b, line, args) for b in SHELL for line, args in _commands(b)]


def _parse(args: list[str]) -> None:
    """Parses a command line with the real CLI's parsers, without invoking anything.

    Only click's tokenizer runs (no callbacks, no type conversion: a run id would open a
    database): an unknown command or option, an option missing its value, or an argument too
    many fails.
    """
    group = cli_main
    assert isinstance(group, click.Group)
    # The command's own context settings (help_option_names=-h/--help): click caches each
    # command's help option from the first context it sees, so a bare Context here would
    # leave `-h` unknown to every later invocation in this process.
    ctx = click.Context(group, info_name="toolledger", **group.context_settings)
    _, rest, _ = group.make_parser(ctx).parse_args(list(args))
    if not rest or rest[0] == "COMMAND":  # --version / --help, or the generic synopsis
        return
    cmd = group.get_command(ctx, rest[0])
    assert cmd is not None, f"no command {rest[0]!r}"
    sub_ctx = click.Context(cmd, info_name=rest[0], parent=ctx, **cmd.context_settings)
    _, extra, _ = cmd.make_parser(sub_ctx).parse_args(rest[1:])
    if not sub_ctx.allow_extra_args:
        assert not extra, f"unexpected arguments {extra}"


def test_there_are_cli_lines() -> None:
    assert len(COMMANDS) > 20


def test_the_parser_refuses_what_does_not_exist() -> None:
    _parse(["--db", "x.db", "runs", "--status", "failed", "--limit", "3"])
    with pytest.raises(click.UsageError):
        _parse(["runs", "--no-such-option"])
    with pytest.raises(AssertionError):
        _parse(["no-such-command"])
    with pytest.raises(click.UsageError):
        _parse(["runs", "--limit"])
    with pytest.raises(AssertionError):
        _parse(["verify", "RUN", "EXTRA"])


@pytest.mark.parametrize(
    ("block", "line", "args"),
    COMMANDS,
    ids=[f"{b.page.name}:{line}" for b, line, _ in COMMANDS],
)
def test_cli_lines_parse(block: Block, line: int, args: list[str]) -> None:
    try:
        _parse(args)
    except (click.ClickException, AssertionError) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        pytest.fail(f"{block.page.name}:{line}: toolledger {shlex.join(args)}: {message}")
