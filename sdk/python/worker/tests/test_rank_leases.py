"""Rank leases (protocol 6) against a scripted gateway: ``job.rank``, the pipeline frames a rank
sends (numbered, its lease's id and fence, ended once) and receives (in order, kept until read,
ended by the end flag), the reports of a rank, and the ways a rank lease ends."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict, List, Optional

import pytest
from scripted_gateway import LLM, ScriptedGateway, lease, pipeline_frame, rank_lease, rank_lease_id, run, until

from switchyard_worker import Artifact, JobCancelled, JobRank, Worker, rank_stream
from switchyard_worker.pipeline_frame import PipelineFrameError, decode_pipeline_frame, encode_pipeline_frame
from switchyard_worker.protocol import parse_lease

L = rank_lease_id(0xA1)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def said(self, level: int, text: str) -> bool:
        return any(r.levelno == level and text in r.getMessage() for r in self.records)


def logger(name: str) -> "tuple[logging.Logger, Records]":
    log = logging.getLogger(f"test_rank_leases.{name}")
    log.setLevel(logging.DEBUG)
    records = Records()
    log.addHandler(records)
    return log, records


async def connected(gw: ScriptedGateway, handler: Any, **options: Any) -> Worker:
    w = Worker(gw.url, "swt_t", handlers={LLM: handler}, **options)
    start = asyncio.ensure_future(w.start())
    await gw.register(protocol=6)
    await start
    return w


def reports_of(gw: ScriptedGateway, lease_id: str) -> List[Dict[str, Any]]:
    return [f for f in gw.conns[-1]["frames"] if f.get("lease_id") == lease_id and f["type"] not in ("pipeline", "heartbeat")]


# ---- the frame and the lease ------------------------------------------------------------------


def test_pipeline_frames_are_the_bytes_sdk_protocol_writes_and_other_binary_frames_are_refused():
    # The bytes of sdk/protocol/pipeline-frame.ts's encodePipelineFrame for the same frame.
    frame = encode_pipeline_frame("lse_0123456789abcdef0123456789abcdef", 0x01020304, 7, True, b"hi")
    assert frame.hex() == "53595046010100000123456789abcdef0123456789abcdef04030201070000006869"
    back = decode_pipeline_frame(frame)
    assert (back.lease_id, back.fence, back.seq, back.end, back.payload) == ("lse_0123456789abcdef0123456789abcdef", 0x01020304, 7, True, b"hi")
    for bad, why in [(frame[:31], "at least 32 bytes"), (b"SYPX" + frame[4:], "starts with SYPF"), (frame[:4] + b"\x02" + frame[5:], "version 2"),
                     (frame[:5] + b"\x03" + frame[6:], "no flag but end"), (frame[:6] + b"\x01" + frame[7:], "no reserved bit")]:
        with pytest.raises(PipelineFrameError, match=why):
            decode_pipeline_frame(bad)
    with pytest.raises(PipelineFrameError, match="32 hex digits"):
        encode_pipeline_frame("lse_1", 1, 1, False, b"")


def test_a_rank_lease_is_parsed_and_a_malformed_rank_makes_the_lease_malformed():
    info = parse_lease(rank_lease(L, 1, 3, "demo-ranked-llm"))
    assert info is not None and info.rank is not None
    assert (info.rank.index, info.rank.count, info.rank.pipeline_id, info.rank.model, info.rank.workers) == (1, 3, "pip_run_p", "demo-ranked-llm", ["wkr_1", "wkr_2", "wkr_3"])
    assert parse_lease(lease(1)).rank is None  # type: ignore[union-attr]
    for rank in ({"index": 3, "count": 3}, {"index": 0, "count": 2, "pipeline_id": "p", "model": "m", "workers": [1]}, "rank 0"):
        assert parse_lease({**rank_lease(L, 0, 2, "m"), "rank": rank}) is None
    # The lease id of a rank lease travels in 16 bytes of the frames' header.
    assert parse_lease(rank_lease("lse_1", 0, 2, "m")) is None


# ---- sending ----------------------------------------------------------------------------------


def test_a_rank_sends_numbered_frames_of_its_lease_ends_once_and_its_result_is_not_the_run_s():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            seen: Dict[str, Any] = {}

            async def handler(job: Any) -> Dict[str, Any]:
                r: JobRank = job.rank
                seen["rank"] = (r.index, r.count, r.pipeline_id, r.model, r.workers, r.first, r.last, job.input)
                await r.send(b"a")
                await r.send(bytearray(b"bb"))
                r.send(memoryview(b"ccc"))  # not awaited: it goes all the same, in its turn
                await r.end()
                await r.end()
                for late in (lambda: r.send(b"late"), lambda: next(iter(r.frames()))):
                    try:
                        late()
                    except RuntimeError as e:
                        seen.setdefault("refused", []).append(str(e))
                job.output("only the last rank streams")
                # Neither uploaded nor reported: the run's output is the last rank's.
                return {"files": [Artifact("x.txt", b"x")], "text": "not the run's"}

            w = await connected(gw, handler)
            await gw.send(rank_lease(L, 0, 2, "m", input={"prompt": "p"}, fence=7))
            done = await gw.frame(lambda f: f["type"] in ("complete", "fail"))
            assert done["type"] == "complete" and done["output"] == {"urls": []}
            assert seen["rank"] == (0, 2, "pip_run_p", "m", ["wkr_1", "wkr_2"], True, False, {"prompt": "p"})
            assert "has ended its stream" in seen["refused"][0] and "async for" in seen["refused"][1]
            frames = gw.pipeline_frames()
            assert [(f["lease_id"], f["fence"], f["seq"], f["end"], f["payload"]) for f in frames] == [
                (L, 7, 1, False, b"a"), (L, 7, 2, False, b"bb"), (L, 7, 3, False, b"ccc"), (L, 7, 4, True, b"")]
            assert [f["type"] for f in reports_of(gw, L)] == ["complete"], "no output from a rank that is not the last"
            everything = gw.conns[-1]["frames"]
            assert everything.index(frames[-1]) < everything.index(done), "the stream ends before the report"
            await w.stop(0)

    run(test)


def test_a_sync_handler_reads_and_sends_blocking_an_empty_end_frame_ends_its_frames_and_the_sdk_ends_its_stream():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            def handler(job: Any) -> Dict[str, Any]:
                got = []
                for payload in job.rank.frames():
                    got.append(payload)
                    assert job.rank.send(payload.upper()) is None
                return {"got": [p.decode() for p in got]}

            w = await connected(gw, handler)
            await gw.send(rank_lease(L, 2, 3, "m"))
            for seq, payload, end in [(1, b"x", False), (2, b"y", False), (3, b"", True)]:
                await gw.send_bytes(pipeline_frame(L, 1, seq, payload, end))
            done = await gw.frame(lambda f: f["type"] in ("complete", "fail"))
            assert done["output"] == {"got": ["x", "y"], "urls": []}, "the last rank reports as any lease"
            assert [(f["seq"], f["end"], f["payload"]) for f in gw.pipeline_frames()] == [(1, False, b"X"), (2, False, b"Y"), (3, True, b"")]
            await w.stop(0)

    run(test)


# ---- receiving --------------------------------------------------------------------------------


def test_frames_that_come_while_the_lease_waits_for_a_slot_are_kept_in_order_for_its_handler():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            release = asyncio.Event()

            async def handler(job: Any) -> Optional[Dict[str, Any]]:
                if job.rank is None:
                    await release.wait()
                    return None
                return {"got": [p.decode() async for p in job.rank.frames()]}

            w = await connected(gw, handler, slots=1)
            await gw.send(lease(1, kind=LLM))
            await gw.send(rank_lease(L, 1, 2, "m"))
            for seq, payload in [(1, b"a"), (2, b"bb")]:
                await gw.send_bytes(pipeline_frame(L, 1, seq, payload))
            await gw.send_bytes(pipeline_frame(L, 1, 3, b"ccc", end=True))
            # All three are in before the lease even starts (its slot is taken).
            await until("the three frames", lambda: w.connection.current.rank_buffered == 6)
            assert w.runner.leases[L].phase == "pending"
            release.set()
            done = await gw.frame(lambda f: f["type"] == "complete" and f["lease_id"] == L)
            assert done["output"] == {"got": ["a", "bb", "ccc"], "urls": []}, "an end frame's payload is the last one"
            assert w.connection.current.rank_buffered == 0
            await w.stop(0)

    run(test)


def test_a_frame_out_of_seq_breaks_the_pipeline_and_fails_the_lease_retryable():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            got: List[bytes] = []

            async def handler(job: Any) -> None:
                async for payload in job.rank.frames():
                    got.append(payload)

            w = await connected(gw, handler)
            await gw.send(rank_lease(L, 1, 2, "m"))
            await gw.send_bytes(pipeline_frame(L, 1, 1, b"one"))
            await until("the first frame read", lambda: got == [b"one"])
            await gw.send_bytes(pipeline_frame(L, 1, 3, b"three"))
            failed = await gw.frame(lambda f: f["type"] in ("complete", "fail"))
            assert failed["type"] == "fail" and (failed["error"]["code"], failed["error"]["retryable"]) == ("pipeline_broken", True)
            assert "pipeline frame 3" in failed["error"]["message"] and got == [b"one"]
            await w.stop(0)

    run(test)


def test_frames_for_no_rank_lease_held_and_binary_frames_that_are_not_pipeline_frames_are_ignored():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            log, records = logger("ignored")

            async def handler(job: Any) -> Dict[str, Any]:
                return {"rank": job.rank is not None}

            w = await connected(gw, handler, logger=log)
            await gw.send_bytes(b"not a pipeline frame".ljust(40, b"."))
            await gw.send_bytes(pipeline_frame(rank_lease_id(9), 1, 1, b"x"))
            await gw.send(lease(1, kind=LLM))
            done = await gw.frame(lambda f: f["type"] == "complete")
            assert done["output"] == {"rank": False, "urls": []}
            assert records.said(logging.WARNING, "starts with SYPF") and records.said(logging.WARNING, "not a rank lease this connection holds")
            await w.stop(0)

    run(test)


def test_the_worker_stops_reading_while_a_rank_s_unread_frames_are_over_its_buffer(monkeypatch: Any):
    monkeypatch.setattr(rank_stream, "RANK_BUFFER_BYTES", 8)

    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            release = asyncio.Event()

            async def handler(job: Any) -> Dict[str, Any]:
                if job.rank is None:
                    return {}
                await release.wait()
                return {"got": [len(p) async for p in job.rank.frames()]}

            log, records = logger("buffer")
            w = await connected(gw, handler, slots=2, logger=log)
            await gw.send(rank_lease(L, 1, 2, "m"))
            await gw.send_bytes(pipeline_frame(L, 1, 1, b"0123456789"))
            await gw.send(lease(2, kind=LLM))
            # Said just before the worker parks its reading: from then on nothing more is read ...
            await until("the socket no longer read", lambda: records.said(logging.DEBUG, "not reading the socket while 10 bytes"))
            # ... so the lease frame behind the pipeline frame waits in the socket until the rank reads.
            assert "lse_2" not in w.runner.leases
            release.set()
            await gw.frame(lambda f: f["type"] == "complete" and f["lease_id"] == "lse_2")
            await gw.send_bytes(pipeline_frame(L, 1, 2, b"", end=True))
            done = await gw.frame(lambda f: f["type"] == "complete" and f["lease_id"] == L)
            assert done["output"] == {"got": [10], "urls": []}
            await w.stop(0)

    run(test)


# ---- endings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_a_cancel_because_the_pipeline_ended_stops_the_handler_and_nothing_is_reported(sync: bool):
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            log, records = logger(f"pipeline_ended_{sync}")
            got: List[bytes] = []
            stopped: List[str] = []

            def sync_handler(job: Any) -> None:
                if job.rank is None:
                    return
                try:
                    for payload in job.rank.frames():
                        got.append(payload)
                except JobCancelled as e:
                    stopped.append(f"{type(e).__name__}: {e} {job.cancelled}")
                    raise

            async def async_handler(job: Any) -> None:
                if job.rank is None:
                    return
                try:
                    async for payload in job.rank.frames():
                        got.append(payload)
                except asyncio.CancelledError:
                    stopped.append(f"CancelledError {job.cancelled}")
                    raise

            dropped: List[str] = []
            w = await connected(gw, sync_handler if sync else async_handler, logger=log)
            w.on("dropped", lambda info, reason: dropped.append(reason))
            await gw.send(rank_lease(L, 1, 3, "m"))
            await gw.send_bytes(pipeline_frame(L, 1, 1, b"a"))
            await until("the first frame read", lambda: got == [b"a"])
            await gw.send({"type": "cancel", "lease_id": L, "run_id": "run_p", "reason": "pipeline_ended", "message": "rank 2 was lost"})
            await until("the lease dropped", lambda: dropped)
            assert stopped == ["JobCancelled: pipeline_ended True" if sync else "CancelledError True"]
            assert dropped == ["its pipeline ended: rank 2 was lost"]
            assert records.said(logging.INFO, "ended with its pipeline: rank 2 was lost")
            # A later lease reports; the ended one never did.
            await gw.send(lease(1, kind=LLM))
            await gw.frame(lambda f: f["type"] == "complete" and f["lease_id"] == "lse_1")
            assert reports_of(gw, L) == [] and L not in w.runner.leases
            await w.stop(0)

    run(test)


def test_a_caller_s_cancel_of_a_rank_lease_ends_a_sync_handler_s_frames_and_fails_it_canceled():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            waiting = asyncio.Event()
            loop = asyncio.get_running_loop()

            def handler(job: Any) -> None:
                loop.call_soon_threadsafe(waiting.set)
                for _ in job.rank.frames():
                    pass

            w = await connected(gw, handler)
            await gw.send(rank_lease(L, 0, 2, "m"))
            await waiting.wait()
            await gw.send({"type": "cancel", "lease_id": L, "run_id": "run_p", "reason": "canceled"})
            failed = await gw.frame(lambda f: f["type"] in ("complete", "fail"))
            assert failed["type"] == "fail" and failed["error"]["code"] == "canceled"
            assert gw.pipeline_frames() == [], "a canceled rank does not end its stream: the pipeline is over"
            await w.stop(0)

    run(test)


def test_a_rank_lease_does_not_move_to_another_instance_on_reconnect():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            stopped = asyncio.Event()

            async def handler(job: Any) -> None:
                try:
                    async for _ in job.rank.frames():
                        pass
                except asyncio.CancelledError:
                    stopped.set()
                    raise

            dropped: List[str] = []
            w = await connected(gw, handler)
            w.on("dropped", lambda info, reason: dropped.append(reason))
            await gw.send(rank_lease(L, 1, 2, "m"))
            await until("the lease running", lambda: L in w.runner.leases and w.runner.leases[L].phase == "running")
            await gw.send({"type": "reconnect"})
            again = await gw.frame(lambda f: f["type"] == "register", conn=1)
            assert "resume" not in again
            await stopped.wait()
            await until("the lease dropped", lambda: dropped)
            assert "does not move to another gateway instance" in dropped[0]
            await w.stop(0)

    run(test)
