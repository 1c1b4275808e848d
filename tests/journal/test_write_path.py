"""The journal's write path: its fast paths write exactly what the plain ones would."""

from __future__ import annotations

import hashlib
import os
import time
from datetime import datetime, timezone
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolledger.checkpoint import canonical_json

from .._internals import (
    FORMAT_VERSION,
    PHASES,
    HeaderFormat,
    canonical,
    chain_hash,
    header_json,
    journal_new_id,
    journal_now,
    point_event,
    record_header,
    stored_header,
    to_json,
)

new_id = journal_new_id
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=4)
    | st.tuples(st.integers()),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)


class TestNow:
    @settings(max_examples=300, deadline=None)
    @given(st.integers(0, 2**62))
    def test_now_is_the_isoformat_of_the_utc_time_in_microseconds(self, ns):
        """``now`` writes ``datetime.isoformat(timespec="microseconds")`` of the clock."""
        at = datetime.fromtimestamp(ns // 10**9, timezone.utc).replace(
            microsecond=ns // 1000 % 10**6
        )
        with mock.patch("time.time_ns", return_value=ns):
            text = journal_now()
        assert text == at.isoformat(timespec="microseconds")

    def test_now_follows_the_clock_across_seconds(self, monkeypatch):
        """A new second is formatted anew (the cached second is not reused)."""
        times = iter([1_700_000_000_999_999_000, 1_700_000_001_000_000_000])
        monkeypatch.setattr("time.time_ns", lambda: next(times))
        assert journal_now() == "2023-11-14T22:13:20.999999+00:00"
        assert journal_now() == "2023-11-14T22:13:21.000000+00:00"


hex_ids = st.text("0123456789abcdef", min_size=32, max_size=32)
times = st.datetimes(timezones=st.just(timezone.utc)).map(
    lambda at: at.isoformat(timespec="microseconds")
)
links = st.none() | st.fixed_dictionaries(
    {"namespace": st.text(max_size=8), "call_id": st.text(max_size=8)},
    optional={"revision": st.none() | st.integers(0, 2**53 - 1)},
)


class TestHeaderFormat:
    @settings(max_examples=300, deadline=None)
    @given(
        run_id=st.text(min_size=1, max_size=40),
        event_id=hex_ids,
        parent_id=st.none() | hex_ids,
        kind=st.text(min_size=1, max_size=12),
        name=st.text(min_size=1, max_size=20),
        status=st.text(min_size=1, max_size=12),
        phase=st.sampled_from(PHASES),
        at=times,
        digest=st.text("0123456789abcdef", min_size=64, max_size=64),
        checkpoint=links,
        why=st.none() | st.tuples(st.sampled_from(("developer", "model")), st.booleans()),
        span=st.none() | st.tuples(st.text(max_size=32), st.none() | st.text(max_size=16)),
        run_end=st.booleans(),
        seq=st.integers(0, 2**53 - 1),
    )
    def test_header_is_the_canonical_json_of_the_header_dict(
        self,
        run_id,
        event_id,
        parent_id,
        kind,
        name,
        status,
        phase,
        at,
        digest,
        checkpoint,
        why,
        span,
        run_end,
        seq,
    ):
        """The header text equals ``canonical_json`` of the dict the journal's layout names."""
        source, missing = why if why is not None else (None, False)
        trace_id, span_id = span if span is not None else (None, None)
        event = point_event((event_id, parent_id, kind, name, trace_id, span_id))
        header = HeaderFormat(run_id).header(
            event, status, phase, at, digest, checkpoint, source, missing, run_end=run_end
        )
        doc = {
            "v": FORMAT_VERSION,
            "run_id": run_id,
            "event_id": event_id,
            "seq": seq,
            "parent_id": parent_id,
            "kind": kind,
            "name": name,
            "status": status,
            "phase": phase,
            "at": at,
            "content_sha256": digest,
        }
        if checkpoint is not None:
            doc["checkpoint"] = checkpoint
        if source is not None:
            doc["justification_source"] = source
            doc["justification_missing"] = missing
        if trace_id is not None:
            doc["trace_id"] = trace_id
            if span_id is not None:
                doc["span_id"] = span_id
        if run_end:
            doc["run_end"] = True
        assert header.full(seq) == canonical_json(doc)
        assert header.stored == canonical_json(stored_header(doc))
        assert (header.full(seq), header.stored) == header_json(doc)
        columns = (header.run_id, header.event_id, header.parent_id, header.kind, header.name)
        assert columns == (run_id, event_id, parent_id, kind, name)
        assert (header.status, header.at) == (status, at)


header_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.text(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
        lambda d: {k: v for k, v in d.items() if type(v) is not int or abs(v) < 2**53}
    ),
)


class TestCheckpointLink:
    @settings(max_examples=300, deadline=None)
    @given(
        st.dictionaries(
            st.sampled_from(["namespace", "call_id", "revision", "x"]),
            st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
        )
    )
    def test_link_text_is_the_canonical_json_of_any_link(self, link):
        """Links of other shapes or values go through ``canonical``: the same text."""
        event = point_event(("e" * 32, None, "k", "n", None, None))
        header = HeaderFormat("r").header(event, "s", "end", "t", "0", link)
        assert header.stored == canonical_json(
            {"checkpoint": link, "content_sha256": "0", "phase": "end", "v": FORMAT_VERSION}
        )


class TestRecordHeader:
    @settings(max_examples=300, deadline=None)
    @given(
        st.dictionaries(st.text(max_size=12), header_values, max_size=8),
        st.integers(0, 2**53 - 1),
    )
    def test_any_header_dict_splits_around_seq_into_its_canonical_json(self, extra, seq):
        """``record_header`` of any header (a newer writer's keys too) is its canonical JSON."""
        header = {
            **extra,
            "run_id": "r",
            "event_id": "e" * 32,
            "parent_id": None,
            "kind": "step",
            "name": "n",
            "status": "completed",
            "at": "2026-01-01T00:00:00.000000+00:00",
        }
        header.pop("seq", None)
        record = record_header(header)
        assert record.full(seq) == canonical_json({**header, "seq": seq})
        assert record.stored == canonical_json(stored_header(header))


class TestNewId:
    def test_new_ids_are_distinct_32_hex_digits(self):
        """Ids handed out from one block and across blocks never repeat."""
        ids = [new_id() for _ in range(1000)]
        assert len(set(ids)) == len(ids)
        assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)

    def test_new_ids_start_with_the_time_in_ms_so_they_sort_by_creation(self):
        """The first 12 hex digits are the Unix time in ms when the id was made."""
        before = time.time_ns() // 1_000_000
        ids = [new_id() for _ in range(5000)]
        after = time.time_ns() // 1_000_000
        stamps = [int(i[:12], 16) for i in ids]
        assert before <= stamps[0]
        assert stamps[-1] <= after
        assert stamps == sorted(stamps)
        assert len({i[12:] for i in ids}) == len(ids)  # the random parts alone differ too

    def test_a_forked_child_never_hands_out_the_parents_ids(self):
        """The child drops the ids its parent had drawn but not used."""
        new_id()  # a block is drawn: its unused ids are buffered
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            os.write(write, " ".join(new_id() for _ in range(64)).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as pipe:
            child = set(pipe.read().split())
        parent = {new_id() for _ in range(64)}
        assert len(child) == 64
        assert not child & parent


class TestHashing:
    @settings(max_examples=200, deadline=None)
    @given(st.none() | st.text("0123456789abcdef", max_size=64), st.text())
    def test_chain_hash_is_sha256_of_prev_and_header(self, prev, text):
        """One sha256 call over ``prev_hash + header`` hashes the bytes the two updates did."""
        expected = hashlib.sha256((prev or "").encode("ascii"))
        expected.update(text.encode("utf-8"))
        assert chain_hash(prev, text) == expected.hexdigest()

    def test_chain_hash_refuses_a_prev_hash_that_is_not_ascii(self):
        """A head read from the store that is not ASCII still fails as before."""
        with pytest.raises(UnicodeEncodeError):
            chain_hash("é" * 64, "{}")

    @settings(max_examples=200, deadline=None)
    @given(anything)
    def test_acyclic_canonical_of_to_json_values_is_rfc8785(self, value):
        """Without cycle bookkeeping the encoder writes the same canonical text."""
        exact, floats = to_json(value)
        assert canonical(exact, maybe_float=floats, acyclic=True) == canonical_json(exact)
