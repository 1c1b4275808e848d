"""The journal's write path: its fast paths write exactly what the plain ones would."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from toolledger.journal import _recorder


class TestNow:
    @settings(max_examples=300, deadline=None)
    @given(st.integers(0, 2**62))
    def test_now_is_the_isoformat_of_the_utc_time_in_microseconds(self, ns):
        """``now`` writes ``datetime.isoformat(timespec="microseconds")`` of the clock."""
        at = datetime.fromtimestamp(ns // 10**9, timezone.utc).replace(
            microsecond=ns // 1000 % 10**6
        )
        clock = _recorder._time_ns
        _recorder._time_ns = lambda: ns
        try:
            text = _recorder.now()
        finally:
            _recorder._time_ns = clock
        assert text == at.isoformat(timespec="microseconds")

    def test_now_follows_the_clock_across_seconds(self, monkeypatch):
        """A new second is formatted anew (the cached second is not reused)."""
        times = iter([1_700_000_000_999_999_000, 1_700_000_001_000_000_000])
        monkeypatch.setattr(_recorder, "_time_ns", lambda: next(times))
        assert _recorder.now() == "2023-11-14T22:13:20.999999+00:00"
        assert _recorder.now() == "2023-11-14T22:13:21.000000+00:00"
