"""A scripted gateway for frame-level tests: a websockets server in the test's own event loop that
records what the worker sends and answers only what the test tells it to."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Dict, List, Optional

import websockets

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

    def outputs(self, conn: int = -1) -> List[Dict[str, Any]]:
        return [f for f in self.conns[conn]["frames"] if f["type"] == "output"]

    def types(self, conn: int = -1) -> List[str]:
        return [f["type"] for f in self.conns[conn]["frames"] if f["type"] != "heartbeat"]


def lease(n: int = 1, **over: Any) -> Dict[str, Any]:
    return {"type": "lease", "lease_id": f"lse_{n}", "fence": 1, "run_id": f"run_{n}", "kind": IMAGE, "tier": "open", "attempt": 1,
            "input": {"prompt": "p"}, "upload_url": "http://127.0.0.1:9/v1/leases/x/artifacts", "upload_token": f"tok{n}", **over}


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))
