"""A scripted gateway for frame-level tests: a websockets server in the test's own event loop that
records what the worker sends and answers only what the test tells it to (or acks every report,
``auto_ack``). For rank leases (protocol 6) it relays pipeline frames between ranks as the gateway
does (``PipelineRelay``), and ``UploadServer`` takes artifact uploads."""
from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

import websockets

IMAGE = "inference:image:generate"
LLM = "inference:llm:text-generate"
#: The pipeline frame header, written here independently of the SDK's codec (sdk/protocol/pipeline-frame.ts).
PIPELINE_HEADER = struct.Struct("<4sBBH16sII")


class ScriptedGateway:
    """Accepts worker sockets; each connection's frames land in ``conns[i]``; the test answers by hand."""

    def __init__(self, auto_ack: bool = False) -> None:
        self.conns: List[Dict[str, Any]] = []
        self.arrived = asyncio.Condition()
        #: Answer every lease report (progress, log, output, complete, fail) with an ack.
        self.auto_ack = auto_ack
        #: Relays binary frames between ranks when set; else they are only recorded.
        self.relay: Optional["PipelineRelay"] = None

    async def __aenter__(self) -> "ScriptedGateway":
        async def handler(ws: Any, *_: Any) -> None:
            conn = {"ws": ws, "frames": [], "auth": None}
            req = getattr(ws, "request", None)
            headers = req.headers if req is not None else ws.request_headers
            conn["auth"] = headers.get("Authorization")
            self.conns.append(conn)
            try:
                async for raw in ws:
                    if isinstance(raw, bytes):
                        # Recorded among the JSON frames, so tests see the order they came in.
                        conn["frames"].append(pipeline_frame_of(raw))
                        if self.relay is not None:
                            await self.relay.forward(conn, raw)
                    else:
                        frame = json.loads(raw)
                        conn["frames"].append(frame)
                        if self.auto_ack and frame.get("type") in ("progress", "log", "output", "complete", "fail"):
                            await ws.send(json.dumps({"type": "ack", "lease_id": frame.get("lease_id"), "of": frame["type"]}))
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

    async def send_bytes(self, data: bytes, conn: int = -1) -> None:
        await self.conns[conn]["ws"].send(data)

    async def register(self, protocol: int = 2, conn: int = -1, **extra: Any) -> Dict[str, Any]:
        reg = await self.frame(lambda f: f["type"] == "register", conn)
        await self.send({"type": "registered", "worker_id": f"wkr_{len(self.conns)}", "protocol": protocol, "heartbeat_ms": 100, "lease_ttl_ms": 3000, **extra}, conn)
        return reg

    def outputs(self, conn: int = -1) -> List[Dict[str, Any]]:
        return [f for f in self.conns[conn]["frames"] if f["type"] == "output"]

    def types(self, conn: int = -1) -> List[str]:
        return [f["type"] for f in self.conns[conn]["frames"] if f["type"] != "heartbeat"]


    def pipeline_frames(self, conn: int = -1) -> List[Dict[str, Any]]:
        return [f for f in self.conns[conn]["frames"] if f["type"] == "pipeline"]


def pipeline_frame_of(raw: bytes) -> Dict[str, Any]:
    """A binary frame as the tests look at it: its header's fields and payload."""
    magic, version, flags, reserved, lease, fence, seq = PIPELINE_HEADER.unpack_from(raw)
    assert (magic, version, flags & ~1, reserved) == (b"SYPF", 1, 0, 0), f"not a pipeline frame: {raw[:32].hex()}"
    return {"type": "pipeline", "lease_id": f"lse_{lease.hex()}", "fence": fence, "seq": seq, "end": bool(flags & 1), "payload": raw[32:]}


def pipeline_frame(lease_id: str, fence: int, seq: int, payload: bytes = b"", end: bool = False) -> bytes:
    return PIPELINE_HEADER.pack(b"SYPF", 1, 1 if end else 0, 0, bytes.fromhex(lease_id[4:]), fence, seq) + payload


class PipelineRelay:
    """The gateway's relay (docs/worker-protocol.md, "Ranks"): a frame of rank i goes to rank i + 1,
    the last rank's back to rank 0, its header rewritten with the receiver's lease id and the
    receiver's own seq. ``ranks``: (connection index, lease id) of each rank, rank 0 first."""

    def __init__(self, gw: ScriptedGateway, ranks: List[Tuple[int, str]], fence: int = 1) -> None:
        self.gw = gw
        self.ranks = ranks
        self.fence = fence
        self.sent = [0] * len(ranks)
        self.received = [0] * len(ranks)
        #: What a real gateway would refuse or call a broken pipeline: the tests expect none.
        self.errors: List[str] = []

    async def forward(self, conn: Dict[str, Any], raw: bytes) -> None:
        frame = pipeline_frame_of(raw)
        sender = next((i for i, (c, lease_id) in enumerate(self.ranks) if lease_id == frame["lease_id"] and self.gw.conns[c] is conn), None)
        if sender is None or frame["fence"] != self.fence:
            self.errors.append(f"a frame of lease {frame['lease_id']} (fence {frame['fence']}) that is no rank of this pipeline")
            return
        self.sent[sender] += 1
        if frame["seq"] != self.sent[sender]:
            self.errors.append(f"rank {sender} sent seq {frame['seq']} after {self.sent[sender] - 1}")
        to = (sender + 1) % len(self.ranks)
        c, lease_id = self.ranks[to]
        # A rank whose lease ended (it reported) is sent nothing more.
        if any(f["type"] in ("complete", "fail") and f.get("lease_id") == lease_id for f in self.gw.conns[c]["frames"]):
            return
        self.received[to] += 1
        await self.gw.conns[c]["ws"].send(pipeline_frame(lease_id, self.fence, self.received[to], frame["payload"], frame["end"]))


def rank_lease(lease_id: str, index: int, count: int, model: str, kind: str = LLM, input: Optional[Dict[str, Any]] = None,
               upload_url: str = "http://127.0.0.1:9/v1/leases/x/artifacts", fence: int = 1, run: str = "run_p") -> Dict[str, Any]:
    """The lease frame of rank ``index`` of ``count``: only rank 0 is given the input."""
    return {"type": "lease", "lease_id": lease_id, "fence": fence, "run_id": run, "kind": kind, "tier": "open", "attempt": 1,
            "input": (input or {}) if index == 0 else {}, "upload_url": upload_url, "upload_token": f"tok_{lease_id}",
            "rank": {"index": index, "count": count, "pipeline_id": f"pip_{run}", "model": model, "workers": [f"wkr_{i + 1}" for i in range(count)]}}


def rank_lease_id(n: int) -> str:
    """A lease id a pipeline frame can carry: lse_ and 32 hex digits."""
    return f"lse_{n:032x}"


class UploadServer:
    """The gateway's artifact upload endpoint: keeps each upload's bytes by lease token and name."""

    def __init__(self) -> None:
        self.files: Dict[Tuple[str, str], bytes] = {}
        files = self.files

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["content-length"]))
                name = parse_qs(urlsplit(self.path).query)["name"][0]
                token = self.headers["authorization"].split(" ", 1)[1]
                files[(token, name)] = body
                port = self.server.server_address[1]
                answer = {"url": f"http://127.0.0.1:{port}/artifacts/{token}/{name}", "sha256": hashlib.sha256(body).hexdigest(),
                          "size": len(body), "content_type": self.headers["content-type"]}
                data = json.dumps(answer).encode()
                self.send_response(201)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/leases/x/artifacts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def lease(n: int = 1, **over: Any) -> Dict[str, Any]:
    return {"type": "lease", "lease_id": f"lse_{n}", "fence": 1, "run_id": f"run_{n}", "kind": IMAGE, "tier": "open", "attempt": 1,
            "input": {"prompt": "p"}, "upload_url": "http://127.0.0.1:9/v1/leases/x/artifacts", "upload_token": f"tok{n}", **over}


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


async def until(what: str, check: Callable[[], Any], timeout: float = 10) -> Any:
    """Waits for ``check()`` to hold (a condition the test cannot be told of); fails after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return check()
