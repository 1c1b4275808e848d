"""The store contract for ``search_events``: the same answers on every backend.

Each check takes a fresh, empty store; ``contract.CHECKS`` includes them.
"""

# The Unicode battery's look-alike letters are what it tests.
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._search import EventQuery, parse_query
from .base import EventRow, RunRow, Store

__all__ = ["SEARCH_CHECKS"]


def _at(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000000+00:00"


def _data(content: dict[str, Any] | None, **header: Any) -> str:
    doc: dict[str, Any] = {"header": header}
    if content is not None:
        doc["content"] = content
    return json.dumps(doc, separators=(",", ":"))


def _seed(store: Store) -> None:
    """Two runs: r1 (refund; a step, an approval, a failed tool call), r2 (a report)."""
    for run_id, ns, agent, goal, start in (
        ("r1", "ns", "support", "Refund order A-1001 for Ana", 0),
        ("r2", "other", "reports", "Weekly report for the team", 30),
    ):
        store.create_run(
            RunRow(
                run_id=run_id,
                namespace=ns,
                agent=agent,
                goal=goal,
                status="completed",
                started_at=_at(start),
                data=json.dumps({"header": {}, "content": {"goal": goal}}),
            )
        )
    specs: dict[str, list[tuple[str, str, str | None, str, int, dict[str, Any] | None]]] = {
        "r1": [
            (
                "s1",
                "step",
                "lookup",
                "running",
                1,
                {"justification": "The customer asked twice", "inputs": {"order": "A-1001"}},
            ),
            ("s1", "step", "lookup", "completed", 2, {"outputs": {"refund_id": "RF-77", "n": 3}}),
            (
                "a1",
                "approval",
                "refund",
                "refused",
                3,
                {"approval": {"by": "bob", "reason": "Over the refund limit"}},
            ),
            ("t1", "tool_call", "charge_card", "running", 4, {"inputs": {"amount": 12.5}}),
            (
                "t1",
                "tool_call",
                "charge_card",
                "failed",
                5,
                {"error": {"type": "OutcomeUnknownError", "message": "gateway timeout"}},
            ),
        ],
        "r2": [
            ("n1", "note", "note", "completed", 31, {"text": "Numbers look fine; refund none"}),
            ("s2", "step", "lookup", "completed", 32, {"inputs": {"query": "weekly totals"}}),
        ],
    }
    for run_id, items in specs.items():
        rows = [
            EventRow(
                run_id=run_id,
                seq=seq,
                event_id=event_id,
                parent_id=None,
                kind=kind,
                name=name,
                status=status,
                at=_at(second),
                prev_hash=None if seq == 0 else f"{run_id}-h{seq - 1}",
                hash=f"{run_id}-h{seq}",
                data=_data(content, phase="point"),
            )
            for seq, (event_id, kind, name, status, second, content) in enumerate(items)
        ]
        assert store.append_events(run_id, rows, expected_count=0)


def _ids(store: Store, text: str | None = None, **fields: Any) -> list[str]:
    terms = parse_query(text) if text is not None else ()
    groups = store.search_events(EventQuery(terms=terms, **fields))
    for group in groups:
        assert group, "an event has records"
        assert len({r.event_id for r in group}) == 1, "one event per item"
        assert [r.seq for r in group] == sorted(r.seq for r in group), "records in seq order"
    return [f"{g[0].run_id}/{g[0].event_id}" for g in groups]


def check_search_text_matches_every_part_of_an_event(store: Store) -> None:
    _seed(store)
    assert _ids(store, "customer") == ["r1/s1"]  # justification (start record)
    assert _ids(store, "A-1001 lookup") == ["r1/s1"]  # input value and name
    assert _ids(store, "RF-77") == ["r1/s1"]  # output (end record)
    assert _ids(store, "customer rf 77") == ["r1/s1"]  # terms across both records
    assert _ids(store, "gateway timeout") == ["r1/t1"]  # error message
    assert _ids(store, "limit bob") == ["r1/a1"]  # approval reason and approver
    assert _ids(store, "12.5") == ["r1/t1"]  # numbers are text too
    assert _ids(store, "looks") == []  # words, not substrings
    assert _ids(store, "look*") == ["r2/s2", "r2/n1", "r1/s1"]  # a prefix (lookup, look)
    assert _ids(store, '"asked twice"') == ["r1/s1"]  # a phrase, in order
    assert _ids(store, '"twice asked"') == []
    assert _ids(store, "CUSTOMER Asked") == ["r1/s1"]  # case-insensitive


def check_search_goal_matches_every_event_of_its_run(store: Store) -> None:
    _seed(store)
    assert _ids(store, "Ana") == ["r1/t1", "r1/a1", "r1/s1"]  # newest first
    assert _ids(store, "refund") == ["r2/n1", "r1/t1", "r1/a1", "r1/s1"]
    assert _ids(store, "refund weekly") == ["r2/n1"]  # goal word and event word
    store.update_run("r1", data=json.dumps({"header": {}, "content": {"goal": "Something else"}}))
    assert _ids(store, "Ana") == []  # the goal index follows the run document


def check_search_filters_combine(store: Store) -> None:
    _seed(store)
    assert _ids(store) == ["r2/s2", "r2/n1", "r1/t1", "r1/a1", "r1/s1"]
    assert _ids(store, kinds=("step",)) == ["r2/s2", "r1/s1"]
    assert _ids(store, kinds=("step", "note")) == ["r2/s2", "r2/n1", "r1/s1"]
    assert _ids(store, name="lookup", agent="support") == ["r1/s1"]
    assert _ids(store, status="failed") == ["r1/t1"]  # the last record's status
    assert _ids(store, status="running") == []
    assert _ids(store, status="refused", namespace="ns", run_id="r1") == ["r1/a1"]
    assert _ids(store, namespace="other") == ["r2/s2", "r2/n1"]
    assert _ids(store, since=_at(3), until=_at(31)) == ["r1/t1", "r1/a1"]  # first record
    assert _ids(store, "refund", kinds=("tool_call",), status="failed") == ["r1/t1"]
    assert _ids(store, limit=2) == ["r2/s2", "r2/n1"]
    assert _ids(store, limit=2, offset=2) == ["r1/t1", "r1/a1"]
    assert _ids(store, agent="nobody") == []


def check_search_forgets_erased_content(store: Store) -> None:
    _seed(store)
    assert _ids(store, "gateway") == ["r1/t1"]
    erased = _data(None, phase="point")
    assert store.rewrite_event_data("r1", {3: erased, 4: erased}) == 2
    assert _ids(store, "gateway") == []
    assert _ids(store, "12.5") == []
    assert _ids(store, "charge_card") == ["r1/t1"]  # names are not content
    assert _ids(store, "customer") == ["r1/s1"]  # other records keep theirs


#: Stored words in many scripts and forms, and queries that must find each (the same
#: event, and only it, on every backend): text is NFKC-normalised and case-folded on both
#: sides, then split into runs of letters and digits.
UNICODE_BATTERY: list[tuple[str, tuple[str, ...]]] = [
    ("cafe\u0301", ("café", "CAFÉ", "cafe\u0301")),  # decomposed é
    ("İstanbul", ("İstanbul", "i\u0307stanbul", "İSTANBUL")),
    ("ᏣᎳᎩ", ("ᏣᎳᎩ", "ꮳꮃꭹ")),  # Cherokee (folds to its capitals)
    ("ᲥᲐᲠᲗᲣᲚᲘ", ("ᲥᲐᲠᲗᲣᲚᲘ", "ქართული")),  # Georgian Mtavruli / Mkhedruli
    ("𞤀𞤣𞤤𞤢𞤥", ("𞤀𞤣𞤤𞤢𞤥", "𞤢𞤣𞤤𞤢𞤥")),  # Adlam
    ("𐒰𐓏𐓘𐓀𐓘𐓍𐓇", ("𐒰𐓏𐓘𐓀𐓘𐓍𐓇", "𐓘𐓷𐓘𐓨𐓘𐓵𐓯")),  # Osage
    ("½", ("½",)),
    ("ﬁligree", ("filigree", "FILIGREE")),  # the ligature
    ("Straße", ("strasse", "STRASSE", "straße", "Straß*")),
    ("Οδός", ("ΟΔΌΣ", "οδόσ")),  # final sigma
    ("ＡＢＣ１２３", ("abc123", "ABC123")),  # full width
    ("𝐁𝐨𝐥𝐝", ("bold",)),  # mathematical bold
    ("東京", ("東京",)),
    ("हिन्दी", ("हिन्दी",)),
    ("العربية", ("العربية",)),
    ("ılık", ("ılık", "ILIK*")),  # dotless i: ILIK folds to ilik, not ılık
    ("Ǆemal", ("ǅemal", "ǆemal")),  # a titlecase digraph
    ("Ａ-1001", ("a-1001", '"a 1001"')),
]


def check_search_folds_every_script_alike(store: Store) -> None:
    store.create_run(
        RunRow(
            run_id="u1",
            namespace="ns",
            agent="unicode",
            goal="Reise nach Zu\u0308rich",
            status="completed",
            started_at=_at(0),
            data=json.dumps({"header": {}, "content": {"goal": "Reise nach Zu\u0308rich"}}),
        )
    )
    rows = [
        EventRow(
            run_id="u1",
            seq=seq,
            event_id=f"w{seq}",
            parent_id=None,
            kind="step",
            name="word",
            status="completed",
            at=_at(1 + seq),
            prev_hash=None if seq == 0 else f"u1-h{seq - 1}",
            hash=f"u1-h{seq}",
            data=_data({"outputs": {"text": f"the word {word} is stored"}}, phase="point"),
        )
        for seq, (word, _) in enumerate(UNICODE_BATTERY)
    ]
    assert store.append_events("u1", rows, expected_count=0)
    missed = []
    for seq, (word, queries) in enumerate(UNICODE_BATTERY):
        for text in queries:
            got = _ids(store, text)
            ilik = text == "ILIK*"
            if got != ([] if ilik else [f"u1/w{seq}"]):
                missed.append((word, text, got))
    assert not missed, missed
    assert len(_ids(store, "istanbul")) == 0  # İ folds to i + a combining dot: two tokens
    assert len(_ids(store, "reise ZÜRICH")) == len(UNICODE_BATTERY)  # the goal (decomposed)


def check_search_indexes_an_oversized_record(store: Store) -> None:
    """A record over every backend's index limit (1 MB of distinct words) is stored whole
    and found by its first words; nothing else of the run is lost."""
    _seed(store)
    words = " ".join(f"w{i:07d}" for i in range(140_000))  # 1.1 MB of distinct words
    data = _data({"outputs": {"log": "needle " + words}}, phase="point")
    row = EventRow(
        run_id="r2",
        seq=2,
        event_id="big",
        parent_id=None,
        kind="step",
        name="dump",
        status="completed",
        at=_at(40),
        prev_hash="r2-h1",
        hash="r2-h2",
        data=data,
    )
    assert store.append_events("r2", [row], expected_count=2)
    assert [e.data for e in store.read_events("r2", after_seq=1)] == [data]
    assert _ids(store, "needle") == ["r2/big"]
    assert _ids(store, "w0000001") == ["r2/big"]
    assert _ids(store, "dump") == ["r2/big"]
    assert _ids(store, "weekly totals") == ["r2/s2"]


SEARCH_CHECKS: list[Callable[[Store], None]] = [
    check_search_text_matches_every_part_of_an_event,
    check_search_goal_matches_every_event_of_its_run,
    check_search_filters_combine,
    check_search_forgets_erased_content,
    check_search_folds_every_script_alike,
    check_search_indexes_an_oversized_record,
]
