"""Frame-level behaviour against a scripted gateway (a websockets server in this process): what
the worker sends, in which order, and what it does with answers a real gateway gives rarely
(``unavailable``, ``stale_lease``, a protocol 1 instance refusing ``resume``, batched acks)."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List

from scripted_gateway import IMAGE, ScriptedGateway, lease, run

from switchyard_worker import Worker


def test_registers_with_its_token_kinds_models_and_versions_and_heartbeats_name_its_leases():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            release = asyncio.Event()

            async def handler(job: Any) -> None:
                await release.wait()

            w = Worker(gw.url, "swt_token", handlers={IMAGE: handler}, slots=2, models={IMAGE: ["flux"]}, hardware={"gpu": "test"})
            start = asyncio.ensure_future(w.start())
            reg = await gw.register(protocol=3)
            await start
            assert gw.conns[0]["auth"] == "Bearer swt_token"
            assert reg["protocol"] == [1, 2, 3, 4, 5, 6, 7] and reg["kinds"] == [IMAGE] and reg["tier"] == "open" and reg["slots"] == 2
            assert reg["models"] == {IMAGE: [{"id": "flux"}]}
            assert reg["hardware"]["gpu"] == "test" and reg["software"]["sdk"] == "switchyard-worker-python"
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "heartbeat" and f["leases"] == ["lse_1"])
            w.set_models({IMAGE: ["flux", "sdxl"]})
            assert (await gw.frame(lambda f: f["type"] == "models"))["models"] == {IMAGE: [{"id": "flux"}, {"id": "sdxl"}]}
            release.set()
            done = await gw.frame(lambda f: f["type"] == "complete")
            assert (done["lease_id"], done["fence"], done["output"]) == ("lse_1", 1, {"urls": []})
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "complete"})
            await w.stop(0)

    run(test)


def test_a_frame_answered_unavailable_goes_again_and_the_final_report_waits_for_its_answer():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            def handler(job: Any) -> Dict[str, Any]:
                job.log("first line")
                return {"seed": 3}

            w = Worker(gw.url, "swt_t", handlers={IMAGE: handler})
            start = asyncio.ensure_future(w.start())
            await gw.register()
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "log")
            await gw.send({"type": "error", "code": "unavailable", "lease_id": "lse_1", "of": "log", "retryable": True})
            again = await gw.frame(lambda f: f["type"] == "log", after=2)
            assert again["line"] == "first line"
            assert "complete" not in gw.types(), "the final report waits for the log line's answer"
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "log"})
            done = await gw.frame(lambda f: f["type"] == "complete")
            assert done["output"] == {"seed": 3, "urls": []}
            assert gw.types() == ["register", "log", "log", "complete"]
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "complete"})
            await w.stop(0)

    run(test)


def test_a_stale_lease_answer_cancels_the_handler_and_nothing_more_is_reported():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            cancelled = asyncio.Event()

            async def handler(job: Any) -> None:
                job.progress(0.1)
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            dropped: List[str] = []
            w = Worker(gw.url, "swt_t", handlers={IMAGE: handler})
            w.on("dropped", lambda info, reason: dropped.append(reason))
            start = asyncio.ensure_future(w.start())
            await gw.register()
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "progress")
            await gw.send({"type": "error", "code": "stale_lease", "lease_id": "lse_1", "of": "progress"})
            await asyncio.wait_for(cancelled.wait(), 5)
            while not dropped:
                await asyncio.sleep(0.01)
            assert dropped == ["the gateway said the lease is stale"]
            assert gw.types() == ["register", "progress"]
            await w.stop(0)

    run(test)


def test_on_reconnect_the_running_lease_is_claimed_and_a_protocol_1_instance_refusing_identity_then_the_claim_gets_a_plain_register():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            release = asyncio.Event()

            async def handler(job: Any) -> None:
                job.progress(0.5)
                await release.wait()

            dropped: List[str] = []
            w = Worker(gw.url, "swt_t", handlers={IMAGE: handler})
            w.on("dropped", lambda info, reason: dropped.append(reason))
            start = asyncio.ensure_future(w.start())
            await gw.register()
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "progress")
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "progress"})
            await gw.send({"type": "reconnect"})
            # The next socket claims the lease with its token ...
            claim = await gw.frame(lambda f: f["type"] == "register", conn=1)
            assert claim["resume"] == [{"lease_id": "lse_1", "fence": 1, "upload_token": "tok1"}]
            # ... a protocol 1 instance refuses the register as bad: first without its identity, the claim kept ...
            assert "identity" in claim
            await gw.send({"type": "error", "code": "bad_frame", "message": "identity is not allowed"}, conn=1)
            await gw.conns[1]["ws"].close(4400, "bad register")
            unnamed = await gw.frame(lambda f: f["type"] == "register", conn=2)
            assert "identity" not in unnamed and unnamed["resume"] == claim["resume"]
            # ... then without the claim.
            await gw.send({"type": "error", "code": "bad_frame", "message": "resume is not allowed"}, conn=2)
            await gw.conns[2]["ws"].close(4400, "bad register")
            plain = await gw.frame(lambda f: f["type"] == "register", conn=3)
            assert "resume" not in plain and "identity" not in plain
            await gw.register(protocol=1, conn=3)
            while not dropped:
                await asyncio.sleep(0.01)
            assert "lost in the move" in dropped[0]
            release.set()
            await w.stop(0)
            assert w.state == "stopped"

    run(test)


def test_outputs_are_numbered_and_one_ack_with_a_count_answers_that_many_before_the_final_report_goes():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            async def handler(job: Any) -> Dict[str, Any]:
                for word in ("Light", "houses ", "guide ", "ships."):
                    job.output(word)
                return {"text": "done"}

            completed: List[Any] = []
            w = Worker(gw.url, "swt_t", handlers={IMAGE: handler})
            w.on("completed", lambda info, output: completed.append(output))
            start = asyncio.ensure_future(w.start())
            await gw.register(protocol=4)
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "output" and f["seq"] == 4)
            assert [(f["seq"], f["delta"]) for f in gw.outputs()] == [(1, "Light"), (2, "houses "), (3, "guide "), (4, "ships.")]
            assert "complete" not in gw.types(), "the final report waits for the outputs' answers"
            # The gateway logged the four together: one ack answers them all, and the report follows.
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "output", "count": 4})
            done = await gw.frame(lambda f: f["type"] == "complete", timeout=5)
            assert done["output"] == {"text": "done", "urls": []}
            await gw.send({"type": "ack", "lease_id": "lse_1", "of": "complete"})
            while not completed:
                await asyncio.sleep(0.01)
            assert gw.types() == ["register", "output", "output", "output", "output", "complete"]
            await w.stop(0)

    run(test)


async def _move_mid_stream(gw: ScriptedGateway, protocol: int) -> None:
    """The handler streams a, b, c; the first instance acks a and b (one ack), asks the worker to
    move and closes before answering c; d is written while the lease moves, e once it has moved."""
    moved, release = asyncio.Event(), asyncio.Event()

    async def handler(job: Any) -> None:
        for d in "abc":
            job.output(d)
        await moved.wait()
        job.output("d")
        await release.wait()
        job.output("e")

    w = Worker(gw.url, "swt_t", handlers={IMAGE: handler})
    start = asyncio.ensure_future(w.start())
    await gw.register(protocol=protocol)
    await start
    await gw.send(lease(1))
    await gw.frame(lambda f: f["type"] == "output" and f["delta"] == "c")
    await gw.send({"type": "ack", "lease_id": "lse_1", "of": "output", "count": 2})
    await gw.send({"type": "reconnect"})
    await gw.conns[0]["ws"].close()
    claim = await gw.frame(lambda f: f["type"] == "register", conn=1)
    assert [c["lease_id"] for c in claim["resume"]] == ["lse_1"]
    moved.set()
    while not w.runner.leases["lse_1"].held:  # d waits for the lease to be taken back
        await asyncio.sleep(0.01)
    await gw.register(protocol=protocol, conn=1, resumed=["lse_1"])
    release.set()
    await gw.frame(lambda f: f["type"] == "output" and f["delta"] == "e", conn=1)
    for _ in gw.outputs(conn=1):
        await gw.send({"type": "ack", "lease_id": "lse_1", "of": "output"}, conn=1)
    await gw.frame(lambda f: f["type"] == "complete", conn=1)
    await gw.send({"type": "ack", "lease_id": "lse_1", "of": "complete"}, conn=1)
    await w.stop(0)


def test_after_a_move_the_outputs_not_acked_go_again_first_with_their_numbers_and_the_acked_ones_never():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            await _move_mid_stream(gw, 4)
            assert [(f["seq"], f["delta"]) for f in gw.outputs(conn=0)] == [(1, "a"), (2, "b"), (3, "c")]
            assert [(f["seq"], f["delta"]) for f in gw.outputs(conn=1)] == [(3, "c"), (4, "d"), (5, "e")]

    run(test)


def test_an_instance_of_protocol_3_gets_no_numbers_and_nothing_again_as_it_could_log_it_twice():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            await _move_mid_stream(gw, 3)
            assert all("seq" not in f for f in gw.outputs())
            assert [f["delta"] for f in gw.outputs(conn=1)] == ["d", "e"]

    run(test)


def test_complete_carries_the_usage_read_from_the_result_on_protocol_7_and_none_on_older_instances():
    """What a run used goes in ``complete`` (docs/worker-protocol.md, "Usage"); an older gateway refuses the field."""
    async def test() -> None:
        for protocol in (7, 6):
            async with ScriptedGateway() as gw:
                async def handler(job: Any) -> Dict[str, Any]:
                    return {"usage": {"prompt_tokens": 3, "completion_tokens": 4}, "frames": 5, "fps": 2}

                w = Worker(gw.url, "swt_token", handlers={IMAGE: handler})
                start = asyncio.ensure_future(w.start())
                await gw.register(protocol=protocol)
                await start
                await gw.send(lease(1))
                done = await gw.frame(lambda f: f["type"] == "complete")
                if protocol == 7:
                    assert done["usage"] == {"input_tokens": 3, "output_tokens": 4, "seconds": 2.5, "images": 0}
                else:
                    assert "usage" not in done
                assert done["output"]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4}
                await gw.send({"type": "ack", "lease_id": "lse_1", "of": "complete"})
                await w.stop(0)

    run(test)
