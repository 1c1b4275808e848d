"""The same action across real processes: one executes, the other blocks or is served;
a live attempt's claim is reported as live, never marked uncertain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolledger.checkpoint import Status

from ._children import effects_of, ledger_fixture, open_store, report, spawn, wait_for

CHILD = Path(__file__).with_name("_same_action_child.py")

ledger = ledger_fixture("tl_same_")


def _spawn(db: str, folder: Path, call_id: str, mode: str, env: dict[str, str]) -> Any:
    return spawn(CHILD, db, folder, call_id, mode, env)


def test_two_processes_racing_one_action_execute_it_once(ledger, tmp_path: Path) -> None:
    """Two call ids for one payment, claimed at once: one pays, the other never does."""
    db, env = ledger
    procs = {cid: _spawn(db, tmp_path, cid, "race", env) for cid in ("call-a", "call-b")}
    for cid in procs:
        wait_for(tmp_path / f"ready-{cid}", list(procs.values()))
    (tmp_path / "go").touch()
    reports = {cid: report(p) for cid, p in procs.items()}
    effects = effects_of(tmp_path)
    assert len(effects) == 1
    winner = effects[0]
    loser = "call-b" if winner == "call-a" else "call-a"
    assert reports[winner]["call"] == "new"
    lost = reports[loser]
    # The loser found the winner paying (blocked) or done (served its result).
    assert lost in (
        {"call": "replayed", "deduplicated_from": winner},
        {**lost, "call": "OUTCOME_UNKNOWN", "same_action_as": winner},
    )


def test_live_attempt_holding_a_call_is_reported_live_never_marked_uncertain(
    ledger, tmp_path: Path
) -> None:
    """A second process on the same call id, while the first is inside the tool."""
    db, env = ledger
    holder = _spawn(db, tmp_path, "call-1", "hold", env)
    wait_for(tmp_path / "holding", [holder])
    second = report(_spawn(db, tmp_path, "call-1", "plain", env))
    assert second["call"] == "OUTCOME_UNKNOWN"
    assert second["live"] is True
    assert "held by a live attempt since" in second["message"]
    assert "stays" not in second["message"]
    store = open_store(db, env)
    try:
        assert store.get("default", "call-1").status is Status.EXECUTING
        (tmp_path / "release").touch()
        assert report(holder)["call"] == "new"
        assert store.get("default", "call-1").status is Status.COMPLETED
    finally:
        store.close()
    assert effects_of(tmp_path) == ["call-1"]


def test_live_attempt_blocks_the_same_action_under_a_new_id_as_live(ledger, tmp_path: Path) -> None:
    """A re-plan while the first attempt is alive: blocked, named, the holder untouched."""
    db, env = ledger
    holder = _spawn(db, tmp_path, "call-1", "hold", env)
    wait_for(tmp_path / "holding", [holder])
    second = report(_spawn(db, tmp_path, "call-2", "plain", env))
    assert (second["call"], second["same_action_as"], second["live"]) == (
        "OUTCOME_UNKNOWN",
        "call-1",
        True,
    )
    (tmp_path / "release").touch()
    assert report(holder)["call"] == "new"
    # Settled and unseen in the same conversation: served, not paid again.
    third = report(_spawn(db, tmp_path, "call-3", "plain", env))
    assert third == {"call": "replayed", "deduplicated_from": "call-1"}
    assert effects_of(tmp_path) == ["call-1"]


def test_dead_attempt_after_its_effect_blocks_the_re_plan(ledger, tmp_path: Path) -> None:
    """SIGKILL inside the tool after the effect: the re-plan is blocked, not re-run."""
    db, env = ledger
    killed = _spawn(db, tmp_path, "call-1", "kill", env)
    killed.communicate(timeout=120)
    assert killed.returncode == -9
    again = report(_spawn(db, tmp_path, "call-2", "plain", env))
    assert (again["call"], again["same_action_as"], again["live"]) == (
        "OUTCOME_UNKNOWN",
        "call-1",
        False,
    )
    assert "may already have happened" in again["message"]
    assert effects_of(tmp_path) == ["call-1"]
