"""The same-action keys' stored text stays the hash of ``json.dumps`` of the action.

The keys are built without the JSON encoder (issue 33); a key stored by an earlier release
must keep matching the same action, so the bytes hashed are pinned here against
``json.dumps`` for parts that need escaping (a conversation id with quotes,
backslashes, controls, non-ASCII; names and revisions are plain ASCII identifiers).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

import toolledger
from toolledger.checkpoint import fingerprint
from toolledger.store import SQLiteStore


def _key(parts: list[str]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@pytest.mark.parametrize(
    ("revision", "conversation"),
    [
        ("1", "conv-1"),
        ("2.0:rc-1", 'c"\\onv\n\t\x01'),
        ("3", "会话 ✓ 😀 \u2028"),
    ],
)
def test_stored_keys_hash_the_json_text(tmp_path: Path, revision: str, conversation: str) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite")
    tool = toolledger.tool("pay", revision=revision, execute=lambda input, ctx: {"ok": 1})
    given = {"to": "ä", "n": 1}
    with toolledger.run("keys", db=store, conversation_id=conversation) as run:
        run.call(tool, call_id="c1", input=given)
    store.close()
    fp = fingerprint(given)
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        stored = {row[0] for row in conn.execute("SELECT effect_key FROM effect_keys")}
    assert stored == {
        _key(["action", "pay", revision, fp]),
        _key(["seen", "pay", revision, fp, conversation]),
    }
