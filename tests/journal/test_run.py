"""The Run API: steps, nesting, approvals, artifacts, failures, provenance."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

import toolledger
from toolledger.checkpoint import Binding, create_checkpoint, fingerprint
from toolledger.errors import InvalidArgumentError
from toolledger.testing import stored_run


def _events(store, run_id):
    return stored_run(store, run_id).events


class TestRunSteps:
    def test_step_start_and_end_records_merge_into_one_event(self, store):
        run = toolledger.run("Answer", agent="bot", db=store)
        with run, run.step("repo_search", justification="names a codebase", query="gate") as st:
            run.flush()  # the start record is stored: the end is a record of its own
            st.record_output(n_hits=3)
        rows = store.read_events(run.run_id)
        assert [(r.kind, r.status) for r in rows] == [
            ("step", "running"),
            ("step", "completed"),
            ("finish", "completed"),
        ]
        ev = _events(store, run.run_id)[0]
        assert ev["inputs"] == {"query": "gate"}
        assert ev["outputs"] == {"n_hits": 3}
        assert ev["justification"] == "names a codebase"
        assert ev["meta"]["justification_source"] == "developer"
        assert ev["justification_missing"] is False
        assert ev["goal"] == "Answer"
        assert ev["duration_ms"] >= 0
        assert len(ev["event_id"]) == 32
        assert len(run.run_id) == 32

    def test_a_step_that_ends_while_its_start_is_buffered_is_one_record(self, store):
        run = toolledger.run("Answer", agent="bot", db=store)
        with run:
            with run.step("repo_search", justification="names a codebase", query="gate") as st:
                st.record_output(n_hits=3)
            with run.step("outer"), run.step("inner"):
                pass  # the outer step's start is followed by the inner one's: two records
        rows = store.read_events(run.run_id)
        assert [(r.kind, r.name, r.status) for r in rows] == [
            ("step", "repo_search", "completed"),
            ("step", "outer", "running"),
            ("step", "inner", "completed"),
            ("step", "outer", "completed"),
            ("finish", "finish", "completed"),
        ]
        header = json.loads(rows[0].data)["header"]
        assert header["phase"] == "point"
        assert rows[0].at < header["ended_at"]
        ev = _events(store, run.run_id)[0]
        assert ev["inputs"] == {"query": "gate"}
        assert ev["outputs"] == {"n_hits": 3}
        assert ev["justification"] == "names a codebase"
        assert ev["meta"]["justification_source"] == "developer"
        assert ev["status"] == "completed"
        assert (ev["started_at"], ev["ended_at"]) == (rows[0].at, header["ended_at"])
        assert ev["duration_ms"] > 0
        assert toolledger.verify(store, run.run_id).ok

    def test_nested_steps_get_parent_id_from_context(self, store):
        with toolledger.run("g", db=store) as run:
            with run.step("outer") as outer, run.step("inner") as inner:
                inner.note("deep")
            run.note("top")
        evs = {e["name"]: e for e in _events(store, run.run_id) if e["kind"] != "note"}
        notes = [e for e in _events(store, run.run_id) if e["kind"] == "note"]
        assert evs["outer"]["parent_id"] is None
        assert evs["inner"]["parent_id"] == outer.event_id
        assert notes[0]["parent_id"] == inner.event_id
        assert notes[0]["text"] == "deep"
        assert notes[1]["parent_id"] is None

    def test_threads_keep_their_own_stack(self, store):
        barrier = threading.Barrier(2)
        with toolledger.run("g", db=store) as run, run.step("main") as main:

            def worker(i: int) -> None:
                with run.step(f"t{i}"):
                    barrier.wait(timeout=10)
                    with run.step(f"t{i}.child"):
                        pass

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        evs = {e["name"]: e for e in _events(store, run.run_id)}
        assert evs["t0"]["parent_id"] is None  # a new thread starts with an empty stack
        assert evs["t0.child"]["parent_id"] == evs["t0"]["event_id"]
        assert evs["t1.child"]["parent_id"] == evs["t1"]["event_id"]
        assert evs["main"]["event_id"] == main.event_id
        assert toolledger.verify(store, run.run_id).ok

    def test_async_tasks_keep_their_own_stack(self, store):
        async def main() -> str:
            async with toolledger.run("g", db=store) as run, run.step("root"):

                async def task(i: int) -> None:
                    async with run.step(f"a{i}"):
                        await asyncio.sleep(0)
                        async with run.step(f"a{i}.child"):
                            await asyncio.sleep(0)

                await asyncio.gather(task(0), task(1))
            return run.run_id

        run_id = asyncio.run(main())
        evs = {e["name"]: e for e in _events(store, run_id)}
        assert evs["a0"]["parent_id"] == evs["root"]["event_id"]
        assert evs["a0.child"]["parent_id"] == evs["a0"]["event_id"]
        assert evs["a1.child"]["parent_id"] == evs["a1"]["event_id"]

    def test_exception_in_step_is_recorded_and_reraised(self, store):
        run = toolledger.run("g", db=store)
        with run, pytest.raises(ValueError, match="boom"), run.step("fails"):
            raise ValueError("boom")
        ev = _events(store, run.run_id)[0]
        assert ev["status"] == "failed"
        assert ev["error"] == {"type": "ValueError", "message": "boom"}

    def test_exception_leaving_run_marks_it_failed(self, store):
        with pytest.raises(KeyError), toolledger.run("g", db=store) as run:
            raise KeyError("x")
        row = store.get_run(run.run_id)
        assert row.status == "failed"
        finish = _events(store, run.run_id)[-1]
        assert finish["kind"] == "finish"
        assert finish["status"] == "failed"
        assert finish["error"]["type"] == "KeyError"

    def test_model_without_justification_is_marked_missing(self, store):
        run = toolledger.run("g", db=store)
        with run, run.step("s", justification_source="model"):
            pass
        ev = _events(store, run.run_id)[0]
        assert ev["justification"] is None
        assert ev["justification_missing"] is True
        assert ev["meta"]["justification_source"] == "model"


class TestApprovalsArtifacts:
    def test_refused_approval_is_an_event(self, store):
        with toolledger.run("g", db=store) as run:
            run.approval("email_findings", granted=False, by="user", reason="Answer locally.")
            run.finish("Answered from code evidence; no email sent.")
        evs = _events(store, run.run_id)
        assert evs[0]["kind"] == "approval"
        assert evs[0]["status"] == "refused"
        assert evs[0]["approval"]["by"] == "user"
        assert evs[0]["approval"]["granted"] is False
        assert evs[-1]["text"] == "Answered from code evidence; no email sent."
        assert len([e for e in evs if e["kind"] == "finish"]) == 1

    def test_approval_for_call_binds_the_binding_fingerprint(self, store):
        from datetime import datetime, timezone

        binding = Binding("default", "c1", "send", "1", fingerprint({"a": 1}))
        store.create_if_absent(create_checkpoint(binding, at=datetime.now(timezone.utc)))
        with toolledger.run("g", db=store) as run:
            run.approval("send", granted=True, by="policy", for_call="c1")
            run.approval("send", granted=True, by="policy", for_call="unknown-call")
        evs = _events(store, run.run_id)
        assert evs[0]["approval"]["binding_fingerprint"].startswith("sha256:")
        assert evs[0]["checkpoint"] == {"namespace": "default", "call_id": "c1", "revision": 0}
        assert evs[1]["approval"]["binding_fingerprint"] is None

    def test_artifact_is_hashed_and_stays_on_disk(self, store, tmp_path: Path):
        f = tmp_path / "report.txt"
        f.write_bytes(b"hello")
        with toolledger.run("g", db=store) as run, run.step("write") as st:
            art = st.add_artifact(f, name="report")
            st.add_artifact(b"raw", name="blob", media_type="application/x-raw")
        assert art.sha256 == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        assert art.size == 5
        assert art.media_type == "text/plain"
        assert art.path == str(f)
        step = _events(store, run.run_id)[0]
        assert [a["name"] for a in step["artifacts"]] == ["report", "blob"]
        assert f.read_bytes() == b"hello"

    def test_missing_artifact_file_raises_at_call_site(self, store, tmp_path: Path):
        run = toolledger.run("g", db=store)
        with run, run.step("s") as st, pytest.raises(InvalidArgumentError) as err:
            st.add_artifact(tmp_path / "nope", name="x")
        assert err.value.code == "INVALID_ARGUMENT"


class TestBadValues:
    def test_non_json_values_are_converted_with_markers(self, store):
        cyc: list = []
        cyc.append(cyc)
        run = toolledger.run("g", db=store)
        with run, run.step("s", nan=float("nan"), keys={1: "a"}, obj=object(), cyc=cyc) as st:
            st.record_output(big=2**60, raw=b"ab", when=Path("/x"))
        ev = _events(store, run.run_id)[0]
        assert ev["inputs"]["nan"] == {"$float": "NaN"}
        assert ev["inputs"]["keys"] == {"$dict": [[1, "a"]]}
        assert ev["inputs"]["obj"]["$type"] == "builtins.object"
        assert ev["inputs"]["cyc"] == [{"$cycle": True}]
        assert ev["outputs"]["big"] == {"$int": str(2**60)}
        assert ev["outputs"]["raw"]["$bytes"] == 2
        for row in store.read_events(run.run_id):
            json.loads(row.data)  # always valid JSON
        assert toolledger.verify(store, run.run_id).ok

    @pytest.mark.parametrize(
        "kwargs",
        [{"justification": 3}, {"justification_source": "oracle"}],
    )
    def test_bad_step_arguments_raise_invalid_argument(self, store, kwargs):
        with toolledger.run("g", db=store) as run, pytest.raises(InvalidArgumentError):
            run.step("s", **kwargs)

    @pytest.mark.parametrize("field", ["justification", "name"])
    def test_lone_surrogates_in_text_are_refused_at_the_call_site(self, store, field):
        with toolledger.run("g", db=store) as run:
            args = {"name": "s", "justification": "ok"}
            args[field] = "bad\ud800"
            with pytest.raises(InvalidArgumentError):
                run.step(args.pop("name"), **args)
        assert toolledger.verify(store, run.run_id).ok

    def test_bad_run_arguments_raise_invalid_argument(self, store):
        with pytest.raises(InvalidArgumentError):
            toolledger.run(3, db=store)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            toolledger.run("g", db=store, run_id="has space")

    def test_recording_outside_the_block_raises(self, store):
        run = toolledger.run("g", db=store)
        with pytest.raises(InvalidArgumentError):
            run.note("too early")


class TestTraced:
    def test_traced_records_arguments_and_result(self, store):
        @toolledger.traced
        def add(a: int, b: int = 2) -> int:
            return a + b

        @toolledger.traced(name="mul", justification="math")
        async def mul(a: int, b: int) -> int:
            return a * b

        assert add(1) == 3  # outside a run: just a call
        with toolledger.run("g", db=store) as run:
            assert add(1, b=5) == 6
            assert asyncio.run(mul(2, 3)) == 6
        evs = _events(store, run.run_id)
        assert evs[0]["name"].endswith("add")
        assert evs[0]["inputs"] == {"a": 1, "b": 5}
        assert evs[0]["outputs"] == {"result": 6}
        assert evs[1]["name"] == "mul"
        assert evs[1]["justification"] == "math"


class TestResume:
    def test_same_run_id_resumes_the_chain(self, store):
        with toolledger.run("g", db=store, run_id="run-1") as run:
            run.note("one")
        with toolledger.run("g", db=store, run_id="run-1") as again:
            again.note("two")
        texts = [e["text"] for e in _events(store, "run-1") if e["kind"] == "note"]
        assert texts == ["one", "two"]
        assert toolledger.verify(store, "run-1").ok


class TestLateAndMethods:
    def test_step_ending_after_its_run_closed_is_still_written(self, store):
        run = toolledger.run("g", db=store)
        with run:
            step = run.step("slow")
            step.__enter__()
        step.__exit__(None, None, None)
        kinds = [(r.kind, r.status) for r in store.read_events(run.run_id)]
        assert kinds[-1] == ("step", "completed")
        assert toolledger.verify(store, run.run_id).ok

    def test_traced_method_does_not_record_self(self, store):
        class Agent:
            @toolledger.traced
            def act(self, x: int) -> int:
                return x + 1

        with toolledger.run("g", db=store) as run:
            assert Agent().act(1) == 2
        ev = _events(store, run.run_id)[0]
        assert ev["inputs"] == {"x": 1}


def test_exception_message_with_lone_surrogate_is_recorded_with_a_marker(store):
    run = toolledger.run("g", db=store)
    with run, pytest.raises(ValueError), run.step("s"):
        raise ValueError("bad \udcff byte")
    ev = _events(store, run.run_id)[0]
    assert ev["error"]["message"] == {"$str": "bad \\udcff byte"}
    assert toolledger.verify(store, run.run_id).ok
