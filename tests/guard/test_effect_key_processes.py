"""Effect keys across real processes: racing re-plans, and a SIGKILL after the effect.

Every process uses its own call id for the same action (the model re-planned it): the
store's effect-key claim decides, so the email is sent once, whatever the interleaving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolledger.checkpoint import Status

from ._children import effects_of, ledger_fixture, open_store, report, spawn, wait_for

CHILD = Path(__file__).with_name("_effect_key_child.py")


ledger = ledger_fixture("tl_effect_")


def _spawn(db: str, folder: Path, call_id: str, mode: str, env: dict[str, str]) -> Any:
    return spawn(CHILD, db, folder, call_id, mode, env)


def _run(db: str, folder: Path, call_id: str, mode: str, env: dict[str, str]) -> dict[str, Any]:
    return report(_spawn(db, folder, call_id, mode, env))


def _killed(db: str, folder: Path, call_id: str, point: str, env: dict[str, str]) -> None:
    proc = _spawn(db, folder, call_id, f"kill:{point}", env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -9, err  # SIGKILLed where asked


@pytest.mark.slow
def test_racing_processes_with_new_call_ids_send_once(ledger, tmp_path: Path) -> None:
    """Six processes, six call ids, one action, all claiming at once: the store picks one."""
    db, env = ledger
    procs = [_spawn(db, tmp_path, f"toolu_{i}", "race", env) for i in range(6)]
    for i, proc in enumerate(procs):  # every racer read the key as free and stopped
        wait_for(tmp_path / f"ready-toolu_{i}", [proc])
    (tmp_path / "go").touch()
    reports = [report(p) for p in procs]
    effects = effects_of(tmp_path)
    assert len(effects) == 1
    winner = effects[0].removeprefix("order-")
    by_call = {f"toolu_{i}": r for i, r in enumerate(reports)}
    assert by_call[winner]["call"] == "new"
    for call_id, r in by_call.items():
        if call_id == winner:
            continue
        assert r["call"] in ("replayed", "OUTCOME_UNKNOWN"), r
        if r["call"] == "replayed":
            assert r["deduplicated_from"] == winner
        else:
            assert r["holder"] == winner
    store = open_store(db, env)
    try:
        assert [k.call_id for k in store.list_effect_keys()] == [winner]
        executed = [
            h
            for r in store.list()
            for h in store.history(*r.key)
            if h.transition == "claim_execution"
        ]
        # Only the winner and the copies were claimed; a copy's claim never executed.
        assert {h.record.binding.call_id for h in executed} == {
            c for c, r in by_call.items() if r["call"] in ("new", "replayed")
        }
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("again", ["plain", "recover"])
def test_sigkill_after_effect_then_replanned_new_id_never_sends_twice(
    ledger, tmp_path: Path, again: str
) -> None:
    """Killed after the effect; the restarted framework re-plans under a new id: one effect."""
    db, env = ledger
    _killed(db, tmp_path, "toolu_A", "in-execute-after-effect", env)
    assert effects_of(tmp_path) == ["order-toolu_A"]
    r = _run(db, tmp_path, "toolu_B", again, env)
    if again == "plain":
        assert r["call"] == "OUTCOME_UNKNOWN"
        assert r["holder"] == "toolu_A"
    else:
        assert r["call"] == "replayed"
        assert r["deduplicated_from"] == "toolu_A"
    # A third re-plan, and the original id: still one effect.
    r2 = _run(db, tmp_path, "toolu_C", again, env)
    r3 = _run(db, tmp_path, "toolu_A", again, env)
    assert effects_of(tmp_path) == ["order-toolu_A"]
    store = open_store(db, env)
    try:
        a = store.get("default", "toolu_A")
        assert a is not None
        if again == "plain":
            assert (r2["call"], r2["holder"]) == ("OUTCOME_UNKNOWN", "toolu_A")
            assert r3["call"] == "OUTCOME_UNKNOWN"
            assert a.status is Status.UNCERTAIN
            assert store.get("default", "toolu_B") is None
        else:
            assert (r2["call"], r2["deduplicated_from"]) == ("replayed", "toolu_A")
            assert r3["call"] == "replayed"
            assert a.status is Status.COMPLETED
            b = store.get("default", "toolu_B")
            assert b is not None
            assert b.result == a.result
    finally:
        store.close()


@pytest.mark.slow
def test_sigkill_after_completion_then_replanned_new_id_copies_the_result(
    ledger, tmp_path: Path
) -> None:
    """The result was stored but the turn was lost: the new id returns it, nothing is sent."""
    db, env = ledger
    _killed(db, tmp_path, "toolu_A", "after-completion", env)
    r = _run(db, tmp_path, "toolu_B", "plain", env)
    assert (r["call"], r["deduplicated_from"]) == ("replayed", "toolu_A")
    assert effects_of(tmp_path) == ["order-toolu_A"]


@pytest.mark.slow
def test_sigkill_before_the_claim_leaves_the_action_free(ledger, tmp_path: Path) -> None:
    """Killed before the claim committed: nothing happened, the re-plan sends it once."""
    db, env = ledger
    _killed(db, tmp_path, "toolu_A", "before-claim", env)
    assert effects_of(tmp_path) == []
    r = _run(db, tmp_path, "toolu_B", "plain", env)
    assert r["call"] == "new"
    back = _run(db, tmp_path, "toolu_A", "plain", env)  # the original id comes back too
    assert (back["call"], back["deduplicated_from"]) == ("replayed", "toolu_B")
    assert effects_of(tmp_path) == ["order-toolu_B"]
