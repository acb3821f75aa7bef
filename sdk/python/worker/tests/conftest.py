"""Fixtures of the SDK's tests: a real gateway (its URL, a worker token and an API key come from
the environment), its REST API over urllib, and workers running in background threads.

Run by test/python-worker-sdk.test.ts, which starts two gateways behind a load balancer and
serves SWITCHYARD_TEST_CONTROL (kill, restart, SIGTERM of an instance). By hand::

    SWITCHYARD_GATEWAY=http://127.0.0.1:8080 SWITCHYARD_WORKER_TOKEN=swt_... SWITCHYARD_API_KEY=sy_... \\
      python3 -m pytest sdk/python/worker/tests -q
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import sys
import threading
import time
import urllib.error
import urllib.request
import wave
import io
import zlib
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from switchyard_worker import ReconnectOptions, Worker  # noqa: E402

GATEWAY = os.environ.get("SWITCHYARD_GATEWAY", "")
TOKEN = os.environ.get("SWITCHYARD_WORKER_TOKEN", "")
API_KEY = os.environ.get("SWITCHYARD_API_KEY", "")
CONTROL = os.environ.get("SWITCHYARD_TEST_CONTROL", "")
DEADLINE = 30.0


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    if not (GATEWAY and TOKEN and API_KEY):
        skip = pytest.mark.skip(reason="needs a gateway: set SWITCHYARD_GATEWAY, SWITCHYARD_WORKER_TOKEN and SWITCHYARD_API_KEY (test/python-worker-sdk.test.ts does)")
        for item in items:
            if {"api", "make_worker", "control"} & set(item.fixturenames):
                item.add_marker(skip)
    elif not CONTROL:
        skip = pytest.mark.skip(reason="needs SWITCHYARD_TEST_CONTROL (test/python-worker-sdk.test.ts serves it)")
        for item in items:
            if "control" in item.fixturenames:
                item.add_marker(skip)


# ---- HTTP -------------------------------------------------------------------------------------


def http(method: str, url: str, body: Any = None, key: Optional[str] = None, timeout: float = 30) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    if key:
        req.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            text = res.read()
            return json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {url}: {e.code} {e.read()[:500]!r}") from None


def wait_for(what: str, check: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    """Polls ``check`` until it returns something truthy; fails after ``timeout`` (a deadline, not a timing)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.025)


class Api:
    """The gateway's REST API as a caller uses it (an account's API key)."""

    def __init__(self) -> None:
        self.submitted: List[str] = []

    def submit(self, kind: str, input: Dict[str, Any]) -> str:
        res = http("POST", f"{GATEWAY}/v1/jobs", {"kind": kind, "input": input}, API_KEY)
        self.submitted.append(res["run_id"])
        return res["run_id"]

    def job(self, run_id: str) -> Dict[str, Any]:
        return http("GET", f"{GATEWAY}/v1/jobs/{run_id}", key=API_KEY)

    def wait_job(self, run_id: str, pred: Callable[[Dict[str, Any]], bool] = lambda j: j["terminal"], timeout: float = DEADLINE) -> Dict[str, Any]:
        seen: Dict[str, Any] = {}

        def check() -> Any:
            seen["job"] = self.job(run_id)
            return seen["job"] if pred(seen["job"]) else None

        try:
            return wait_for(f"job {run_id}", check, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; the job was {json.dumps(seen.get('job'))[:2000]}") from None

    def capabilities(self, kind: str) -> Dict[str, Any]:
        """The kind's entry of ``/v1/capabilities``: its live workers, ``workers_unavailable``..."""
        kinds = http("GET", f"{GATEWAY}/v1/capabilities", key=API_KEY)["kinds"]
        return next(k for k in kinds if k["kind"] == kind)

    def capacity(self) -> Dict[str, Any]:
        return http("GET", f"{GATEWAY}/v1/network/capacity")

    def cancel(self, run_id: str) -> Dict[str, Any]:
        return http("POST", f"{GATEWAY}/v1/jobs/{run_id}/cancel", {}, API_KEY)

    def events(self, run_id: str) -> List[Dict[str, Any]]:
        """The run's whole event log (SSE, ``?after=0``), for a terminal run."""
        req = urllib.request.Request(f"{GATEWAY}/v1/jobs/{run_id}/events?after=0", headers={"authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(req, timeout=30) as res:
            text = res.read().decode()
        out = []
        for block in text.split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "event" in fields and "data" in fields:
                out.append({"event": fields["event"], "data": json.loads(fields["data"])})
        return out


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as res:
        return res.read()


@pytest.fixture
def api() -> Iterator[Api]:
    a = Api()
    yield a
    # A test leaves no run behind for the next one's workers.
    for run_id in a.submitted:
        try:
            if not a.job(run_id)["terminal"]:
                a.cancel(run_id)
        except AssertionError:
            pass


class Control:
    """The load balancer and gateway processes of test/python-worker-sdk.test.ts."""

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        return http(method, f"{CONTROL}{path}", body if body is not None else ({} if method == "POST" else None), timeout=120)

    def logged(self, gateway: str, msg: str) -> List[Dict[str, Any]]:
        return self("GET", f"/gateway/{gateway}/logged?msg={urllib.request.quote(msg)}")


@pytest.fixture
def control() -> Iterator[Control]:
    c = Control()
    c("POST", "/reset")
    yield c
    c("POST", "/reset")


# ---- workers in background threads ------------------------------------------------------------


class RunningWorker:
    """A Worker on an event loop of its own thread, as a test drives it."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.events: List[tuple] = []
        for event in ("registered", "completed", "failed", "dropped", "disconnected", "drain", "refused", "backend", "stopped"):
            worker.on(event, lambda *args, _e=event: self.events.append((_e, *args)))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = DEADLINE) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> "RunningWorker":
        self.call(self.worker.start())
        return self

    def stop_async(self, timeout: Optional[float] = 0) -> "Any":
        return asyncio.run_coroutine_threadsafe(self.worker.stop(timeout), self.loop)

    def stop(self, timeout: Optional[float] = 0) -> None:
        self.stop_async(timeout).result(DEADLINE)

    def named(self, event: str) -> List[tuple]:
        return [e for e in self.events if e[0] == event]

    def close(self) -> None:
        try:
            self.stop(0)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def make_worker() -> Iterator[Callable[..., RunningWorker]]:
    made: List[RunningWorker] = []

    def make(handlers: Dict[str, Any], start: bool = True, **options: Any) -> RunningWorker:
        options.setdefault("reconnect", ReconnectOptions(initial_delay=0.05, max_delay=0.5))
        w = RunningWorker(Worker(GATEWAY, TOKEN, handlers=handlers, **options))
        made.append(w)
        return w.start() if start else w

    yield make
    for w in made:
        w.close()


# ---- sample files -----------------------------------------------------------------------------


def png(side: int = 8, seed: int = 1) -> bytes:
    """A real PNG of side x side RGB pixels."""
    rows = b"".join(b"\x00" + bytes(((x + y) * seed * 7 + c * 50) % 256 for x in range(side) for c in range(3)) for y in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def wav(samples: int = 2000, rate: int = 16000) -> bytes:
    """A short mono 16-bit WAV (a ramp)."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", (i * 37) % 20000 - 10000) for i in range(samples)))
    return buf.getvalue()


def glb() -> bytes:
    """A glTF binary holding one triangle."""
    positions = struct.pack("<9f", 0, 0, 0, 1, 0, 0, 0, 1, 0)
    doc = {
        "asset": {"version": "2.0"},
        "buffers": [{"byteLength": len(positions)}],
        "bufferViews": [{"buffer": 0, "byteLength": len(positions)}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3", "min": [0, 0, 0], "max": [1, 1, 0]}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
        "nodes": [{"mesh": 0}],
        "scenes": [{"nodes": [0]}],
        "scene": 0,
    }
    js = json.dumps(doc, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 4)
    body = struct.pack("<I4s", len(js), b"JSON") + js + struct.pack("<I4s", len(positions), b"BIN\x00") + positions
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def data_uri(content_type: str, data: bytes) -> str:
    return f"data:{content_type};base64,{base64.b64encode(data).decode()}"
