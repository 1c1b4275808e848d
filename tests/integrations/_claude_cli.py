"""The fake Claude Code CLI of ``examples/_fake_claude_cli.py``, for the tests.

It lives beside the examples (``examples/framework_claude_agent_sdk.py`` runs standalone with
it); the tests load the same module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "_fake_claude_cli.py"
_spec = importlib.util.spec_from_file_location("_fake_claude_cli", _PATH)
assert _spec is not None
assert _spec.loader is not None
fake = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("_fake_claude_cli", fake)
_spec.loader.exec_module(fake)

FakeCLI = fake.FakeCLI
tool_results = fake.tool_results
