"""Protocol 5 ``backend``: a lease failing ``upstream_unavailable`` tells the gateway the backend is
down (before the failure), the worker takes no lease until ``probe`` answers, then says so."""
from __future__ import annotations

import asyncio
import logging
import threading
from types import SimpleNamespace
from typing import Any, Dict, List

from conftest import download, wait_for
from scripted_gateway import IMAGE, ScriptedGateway, lease, run

from switchyard_worker import Artifact, BackendOptions, Worker, WorkerError
from switchyard_worker.backend_watch import BackendWatch

QUICK = BackendOptions(first_delay=0.05, max_delay=0.2, probe_timeout=5)


def test_a_dead_backend_takes_the_worker_out_until_the_probe_answers_and_the_retry_then_succeeds(api, make_worker):
    attempts: List[int] = []
    probes: List[str] = []
    backend_up = threading.Event()

    def handler(job: Any) -> Dict[str, Any]:
        attempts.append(job.attempt)
        if job.attempt == 1:
            raise WorkerError("ComfyUI at 127.0.0.1:8188 refused the connection", code="upstream_unavailable", retryable=True)
        return {"files": [Artifact("image.png", b"back up")]}

    def probe() -> None:
        if not backend_up.is_set():
            probes.append("refused")
            raise ConnectionRefusedError("127.0.0.1:8188")
        probes.append("answered")

    w = make_worker({IMAGE: handler}, probe=probe, backend=QUICK)
    run_id = api.submit(IMAGE, {"prompt": "backend down"})
    # Past the retry's backoff the run waits for a worker whose backend answers: this one is counted, not offered it.
    job = api.wait_job(run_id, lambda j: j.get("waiting_reason") == "backend_unavailable")
    assert job["status"] == "queued" and job["attempts"] == 1, job
    assert api.capabilities(IMAGE)["workers_unavailable"] == 1
    wait_for("two failed probes", lambda: len(probes) >= 2)
    assert attempts == [1], "not retried on this worker while its backend is down"
    backend_up.set()
    job = api.wait_job(run_id)
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    assert download(job["output"]["urls"][0]) == b"back up"
    assert attempts == [1, 2]
    assert probes[-1] == "answered" and probes.count("refused") >= 2
    assert [e[1] for e in w.named("backend")] == [
        {"available": False, "message": "ComfyUI at 127.0.0.1:8188 refused the connection"},
        {"available": True},
    ]
    assert api.capabilities(IMAGE)["workers_unavailable"] == 0


def _failing(message: str) -> Any:
    async def handler(job: Any) -> None:
        raise WorkerError(message, code="upstream_unavailable", retryable=True)

    return handler


def test_the_backend_frame_goes_before_the_fail_again_on_a_new_connection_and_available_once_the_probe_answers():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            answers = asyncio.Event()

            async def probe() -> None:
                if not answers.is_set():
                    raise ConnectionError("no answer")

            w = Worker(gw.url, "swt_t", handlers={IMAGE: _failing("x" * 1500)}, probe=probe, backend=QUICK)
            start = asyncio.ensure_future(w.start())
            await gw.register(protocol=5)
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "fail")
            assert gw.types() == ["register", "backend", "fail"]
            down = gw.conns[0]["frames"][1]
            assert down == {"type": "backend", "available": False, "message": "x" * 1000}
            # A new connection starts available: the worker says again that it is not.
            await gw.conns[0]["ws"].close(1011, "gone")
            await gw.register(protocol=5, conn=1)
            assert (await gw.frame(lambda f: f["type"] == "backend", conn=1)) == down
            answers.set()
            assert (await gw.frame(lambda f: f["type"] == "backend" and f["available"], conn=1)) == {"type": "backend", "available": True}
            await w.stop(0)

    run(test)


def test_an_instance_older_than_5_is_not_told_and_without_a_probe_the_worker_is_available_after_the_wait():
    async def test() -> None:
        async with ScriptedGateway() as gw:
            states: List[Dict[str, Any]] = []
            w = Worker(gw.url, "swt_t", handlers={IMAGE: _failing("down")}, backend=QUICK)
            w.on("backend", states.append)
            start = asyncio.ensure_future(w.start())
            await gw.register(protocol=4)
            await start
            await gw.send(lease(1))
            await gw.frame(lambda f: f["type"] == "fail")
            while len(states) < 2:
                await asyncio.sleep(0.01)
            assert states == [{"available": False, "message": "down"}, {"available": True}]
            assert gw.types() == ["register", "fail"], "a gateway of protocol 4 refuses the frame"
            await w.stop(0)

    run(test)


def test_each_outage_before_a_lease_succeeds_waits_longer_at_first_and_a_success_starts_the_waits_over():
    async def test() -> None:
        sent: List[Dict[str, Any]] = []
        conn = SimpleNamespace(registered=True, closed=False, protocol=5, send=sent.append)
        worker = SimpleNamespace(connection=SimpleNamespace(current=conn), log=logging.getLogger("test"), emit=lambda *a: None)
        # No probe: the backend counts as answering again once the wait is over.
        watch = BackendWatch(worker, None, BackendOptions(first_delay=0.01, max_delay=1))  # type: ignore[arg-type]
        firsts = []
        for _ in range(3):
            watch.unavailable("down")
            firsts.append(watch.down["delay"])  # type: ignore[index]
            while not watch.available:
                await asyncio.sleep(0.005)
        assert firsts == [0.01, 0.02, 0.04]
        assert sent[-1] == {"type": "backend", "available": True}
        watch.succeeded()
        watch.unavailable("down")
        assert watch.down["delay"] == 0.01  # type: ignore[index]
        watch.stop()

    run(test)
