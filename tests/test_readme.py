"""The README's Quick start runs as written: twice, with one effect."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _quick_start_code() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") : text.index("<!-- section:")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_readme_quick_start_second_run_replays_without_a_second_effect(tmp_path: Path) -> None:
    """Running the snippet twice sends one email and posts the stored result once."""
    code = _quick_start_code()
    marker = 'return {"sent_to"'
    assert marker in code
    counted = code.replace(marker, 'open("effects.txt", "a").write("x\\n"); ' + marker)
    counted += "\nprint('replayed' if outcome.replayed else 'executed')\n"
    script = tmp_path / "quick.py"
    script.write_text(counted, encoding="utf-8")
    outputs = [
        subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0].splitlines() == [
        "to the model: {'sent_to': 'ana@example.com'}",
        "executed",
    ]
    assert outputs[1].splitlines() == ["replayed"]
    assert (tmp_path / "effects.txt").read_text() == "x\n"
    assert (tmp_path / ".toolledger.db").exists()
