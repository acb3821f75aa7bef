"""Frame-level behaviour against a scripted gateway (a websockets server in this process): what
the worker sends, in which order, and what it does with answers a real gateway gives rarely
(``unavailable``, ``stale_lease``, a protocol 1 instance refusing ``resume``)."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Dict, List, Optional

import websockets

from switchyard_worker import Worker

IMAGE = "inference:image:generate"


class ScriptedGateway:
    """Accepts worker sockets; each connection's frames land in ``conns[i]``; the test answers by hand."""

    def __init__(self) -> None:
        self.conns: List[Dict[str, Any]] = []
        self.arrived = asyncio.Condition()

    async def __aenter__(self) -> "ScriptedGateway":
        async def handler(ws: Any, *_: Any) -> None:
            conn = {"ws": ws, "frames": [], "auth": None}
            req = getattr(ws, "request", None)
            headers = req.headers if req is not None else ws.request_headers
            conn["auth"] = headers.get("Authorization")
            self.conns.append(conn)
            try:
                async for raw in ws:
                    conn["frames"].append(json.loads(raw))
                    async with self.arrived:
                        self.arrived.notify_all()
            except websockets.exceptions.ConnectionClosed:
                pass
            async with self.arrived:
                self.arrived.notify_all()

        self.server = await websockets.serve(handler, "127.0.0.1", 0)
        port = next(iter(self.server.sockets)).getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def frame(self, match: Callable[[Dict[str, Any]], bool], conn: int = -1, after: int = 0, timeout: float = 10) -> Dict[str, Any]:
        """The first frame of connection ``conn`` (from index ``after``) that matches."""

        def find() -> Optional[Dict[str, Any]]:
            if conn >= len(self.conns) or not self.conns:
                return None
            return next((f for f in self.conns[conn]["frames"][after:] if match(f)), None)

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: find() is not None), timeout)
        return find()  # type: ignore[return-value]

    async def send(self, frame: Dict[str, Any], conn: int = -1) -> None:
        await self.conns[conn]["ws"].send(json.dumps(frame))

    async def register(self, protocol: int = 2, conn: int = -1, **extra: Any) -> Dict[str, Any]:
        reg = await self.frame(lambda f: f["type"] == "register", conn)
        await self.send({"type": "registered", "worker_id": f"wkr_{len(self.conns)}", "protocol": protocol, "heartbeat_ms": 100, "lease_ttl_ms": 3000, **extra}, conn)
        return reg

    def types(self, conn: int = -1) -> List[str]:
        return [f["type"] for f in self.conns[conn]["frames"] if f["type"] != "heartbeat"]


def lease(n: int = 1, **over: Any) -> Dict[str, Any]:
    return {"type": "lease", "lease_id": f"lse_{n}", "fence": 1, "run_id": f"run_{n}", "kind": IMAGE, "tier": "open", "attempt": 1,
            "input": {"prompt": "p"}, "upload_url": "http://127.0.0.1:9/v1/leases/x/artifacts", "upload_token": f"tok{n}", **over}


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


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
            assert reg["protocol"] == [1, 2, 3] and reg["kinds"] == [IMAGE] and reg["tier"] == "open" and reg["slots"] == 2
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


def test_on_reconnect_the_running_lease_is_claimed_and_a_protocol_1_instance_refusing_the_claim_gets_a_plain_register():
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
            # ... a protocol 1 instance refuses the claim as a bad register: register again without it.
            await gw.send({"type": "error", "code": "bad_frame", "message": "resume is not allowed"}, conn=1)
            await gw.conns[1]["ws"].close(4400, "bad register")
            plain = await gw.frame(lambda f: f["type"] == "register", conn=2)
            assert "resume" not in plain
            await gw.register(protocol=1, conn=2)
            while not dropped:
                await asyncio.sleep(0.01)
            assert "lost in the move" in dropped[0]
            release.set()
            await w.stop(0)
            assert w.state == "stopped"

    run(test)
