"""The internal event API the guard and approvals use, and telemetry safety."""

from __future__ import annotations

import contextlib

import pytest

import toolledger
from toolledger.telemetry import NoopSpan
from toolledger.testing import stored_run


class RecordingSpan(NoopSpan):
    def __init__(self, log: list, name: str) -> None:
        self.log = log
        self.name = name
        self.trace_id = "1" * 32
        self.span_id = name.encode().hex()[:16].ljust(16, "0")

    def activate(self):
        self.log.append(("activate", self.name))
        return contextlib.nullcontext()

    def update(self, attributes) -> None:
        self.log.append(("update", self.name, dict(attributes)))

    def end(self, event, error=None) -> None:
        self.log.append(("end", self.name, event["status"], type(error).__name__))


class RecordingHooks:
    def __init__(self) -> None:
        self.log: list = []

    def run_started(self, run):
        self.log.append(("run_started", run["goal"]))
        return RecordingSpan(self.log, "run")

    def event_started(self, event, parent):
        self.log.append(("event_started", event["name"], getattr(parent, "name", None)))
        return RecordingSpan(self.log, event["name"])


class RaisingHooks:
    def run_started(self, run):
        raise RuntimeError("exporter down")

    def event_started(self, event, parent):
        raise RuntimeError("exporter down")


class TestBeginEvent:
    def test_begin_event_update_end_writes_a_linked_tool_call(self, store):
        with toolledger.run("g", db=store) as run, run.step("outer") as outer:
            h = run.begin_event(
                "tool_call",
                "send_email",
                justification=None,
                justification_source="model",
                inputs={"to": "a@b.c"},
                meta={"attempt": 1},
                checkpoint={"namespace": "default", "call_id": "c1", "revision": 0},
            )
            with run.step("inside_call") as inner:
                pass
            h.update(
                outputs={"id": 7},
                checkpoint={"namespace": "default", "call_id": "c1", "revision": 2},
            )
            h.end("replayed", meta={"replayed": True})
            h.end("completed")  # a second end is a no-op
        evs = {e["name"]: e for e in stored_run(store, run.run_id).events}
        call = evs["send_email"]
        assert call["kind"] == "tool_call"
        assert call["status"] == "replayed"
        assert call["parent_id"] == outer.event_id
        assert evs["inside_call"]["parent_id"] == h.event_id == inner.handle.parent_id
        assert call["checkpoint"] == {"namespace": "default", "call_id": "c1", "revision": 2}
        assert call["outputs"] == {"id": 7}
        assert call["meta"] == {"attempt": 1, "replayed": True, "justification_source": "model"}
        assert call["justification_missing"] is True

    def test_end_with_error_dict_is_recorded(self, store):
        with toolledger.run("g", db=store) as run:
            h = run.begin_event("tool_call", "t")
            h.end("failed", error={"type": "OUTCOME_UNKNOWN", "message": "not re-run"})
        ev = stored_run(store, run.run_id).events[0]
        assert ev["error"] == {"type": "OUTCOME_UNKNOWN", "message": "not re-run"}


class TestTelemetry:
    def test_hooks_see_run_and_events_and_ids_are_stored(self, store, monkeypatch):
        hooks = RecordingHooks()
        monkeypatch.setattr("toolledger.telemetry.hooks_for", lambda **_: hooks)
        with toolledger.run("goal", db=store) as run, run.step("a"), run.step("b"):
            pass
        assert hooks.log[:5] == [
            ("run_started", "goal"),
            ("activate", "run"),  # entering the run makes its span current (one trace)
            ("event_started", "a", None),
            ("activate", "a"),
            ("event_started", "b", "a"),
        ]
        assert ("end", "b", "completed", "NoneType") in hooks.log
        assert hooks.log[-1] == ("end", "run", "completed", "NoneType")
        view = stored_run(store, run.run_id)
        assert view.doc["trace_id"] == "1" * 32  # the run span's ids, for re-export
        assert view.doc["span_id"] == b"run".hex().ljust(16, "0")
        assert "genesis" in view.doc
        ev = view.events[0]
        assert ev["trace_id"] == "1" * 32
        assert ev["span_id"] == b"a".hex().ljust(16, "0")

    def test_raising_telemetry_never_breaks_the_run(self, store, monkeypatch):
        monkeypatch.setattr("toolledger.telemetry.hooks_for", lambda **_: RaisingHooks())
        with toolledger.run("goal", db=store) as run, run.step("a") as st:
            st.record_output(ok=True)
        assert stored_run(store, run.run_id).events[0]["outputs"] == {"ok": True}
        assert run.errors == []


class FailingAppendStore:
    """Wraps a store; append_events fails while ``fail`` is set."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.fail = True

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def append_events(self, *a, **kw):
        if self.fail:
            raise toolledger.StoreUnavailableError(message="disk gone")
        return self.inner.append_events(*a, **kw)


class TestRecordingFailures:
    def test_storage_failure_goes_to_errors_and_warns_not_raises(self, store):
        wrapped = FailingAppendStore(store)
        with toolledger.run("g", db=wrapped) as run:
            with run.step("s"):
                pass
            with pytest.warns(toolledger.JournalWarning):
                flushed = run.flush()
            assert flushed is False
            wrapped.fail = False  # the store comes back: buffered records are written
        assert run.errors
        assert run.errors[0].code == "STORE_UNAVAILABLE"
        assert [r.kind for r in store.read_events(run.run_id)] == ["step", "finish"]
        assert toolledger.verify(store, run.run_id).ok

    def test_strict_mode_raises_storage_failures(self, store):
        wrapped = FailingAppendStore(store)
        with toolledger.run("g", db=wrapped, strict=True) as run:
            with pytest.raises(toolledger.StoreUnavailableError):
                run.note("x")
            wrapped.fail = False


class TestCrossContextEnd:
    def test_event_ended_in_another_thread_is_never_a_parent_again(self, store):
        import threading

        with toolledger.run("g", db=store) as run:
            h = run.begin_event("tool_call", "t")
            worker = threading.Thread(target=h.end, args=("completed",))
            worker.start()
            worker.join()
            run.note("after")
        note = next(e for e in stored_run(store, run.run_id).events if e["kind"] == "note")
        assert note["parent_id"] is None
