"""A worker killed mid-job, a gateway killed and restarted, a gateway draining its workers or
handing their leases over to another instance, and the worker's own graceful stop."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

from conftest import GATEWAY, TOKEN, download, wait_for

from switchyard_worker import Artifact, Job

IMAGE = "inference:image:generate"
HERE = os.path.dirname(__file__)


def test_a_worker_killed_mid_job_loses_its_lease_and_the_run_is_retried_elsewhere(api, make_worker, control):
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_worker.py")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "SWITCHYARD_GATEWAY": GATEWAY, "SWITCHYARD_WORKER_TOKEN": TOKEN})
    try:
        lines = iter(proc.stdout.readline, "")  # type: ignore[union-attr]
        run = api.submit(IMAGE, {"prompt": "survive a crash"})
        line = next(l for l in lines if l.startswith("running") or not l)
        assert line.strip() == f"running {run}", line
        api.wait_job(run, lambda j: j["status"] == "running" and j.get("progress") == 0.25)
        proc.kill()  # SIGKILL: no close frame, no fail report
        proc.wait(10)
        assert proc.returncode == -9
        make_worker({IMAGE: lambda job: {"files": [Artifact("image.png", f"attempt {job.attempt}".encode())]}})
        job = api.wait_job(run)
        assert job["status"] == "succeeded", job
        assert job["attempts"] == 2
        assert download(job["output"]["urls"][0]) == b"attempt 2"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_after_a_gateway_restart_the_worker_reconnects_and_the_lost_run_runs_again(api, make_worker, control):
    first = threading.Event()
    cancelled = []

    async def handler(job: Job):
        if job.attempt == 1:
            first.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(job.run_id)
                raise
        return {"files": [Artifact("image.png", b"after the restart")]}

    w = make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "restart"})
    assert first.wait(30)
    control("POST", "/gateway/a/kill")  # kill -9 of the only gateway behind the balancer
    wait_for("the handler to be cancelled with the lost connection", lambda: cancelled == [run])
    wait_for("the worker to notice", lambda: w.named("disconnected"))
    assert all(e[1]["reconnect_in"] is not None for e in w.named("disconnected")), "it plans to reconnect"
    control("POST", "/gateway/a/start")
    control("POST", "/lb", {"targets": ["a"]})
    wait_for("a second registration", lambda: len(w.named("registered")) >= 2)
    ids = [e[1]["worker_id"] for e in w.named("registered")]
    assert ids[0] != ids[-1]
    # The lease's lock lapses (LEASE_TTL_MS) and the run goes back to its queue.
    job = api.wait_job(run, timeout=60)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 2
    assert [e[2] for e in w.named("dropped")] == ["the connection was lost"]
    assert download(job["output"]["urls"][0]) == b"after the restart"


def test_a_protocol_1_worker_told_to_drain_finishes_its_job_then_moves_to_another_instance(api, make_worker, control):
    release = threading.Event()
    started = threading.Event()

    def handler(job: Job):
        started.set()
        release.wait(60)
        return {"files": [Artifact("image.png", b"finished while draining")]}

    w = make_worker({IMAGE: handler}, protocols=[1])
    run = api.submit(IMAGE, {"prompt": "drain"})
    assert started.wait(30)
    control("POST", "/lb", {"targets": ["a", "b"]})
    control("POST", "/gateway/a/term")  # SIGTERM: A drains protocol 1 workers (SHUTDOWN_DRAIN_MS)
    wait_for("the drain frame", lambda: w.named("drain"))
    other = api.submit(IMAGE, {"prompt": "after the drain"})
    release.set()
    job = api.wait_job(run)
    assert job["status"] == "succeeded" and job["attempts"] == 1, job
    assert control("POST", "/gateway/a/wait-exit") == {"code": 0, "signal": None}, "A exits once its worker is done"
    wait_for("a registration on B", lambda: len(w.named("registered")) >= 2)
    # Drained, the worker closes the socket itself and comes back at once; a stopping gateway
    # also closes it (1012) as soon as the worker's leases are done, so either may come first.
    first = w.named("disconnected")[0][1]
    assert first["reconnect_in"] == 0 or first["code"] == 1012, first
    assert w.named("registered")[-1][1]["protocol"] == 1
    assert api.wait_job(other)["status"] == "succeeded"
    assert w.named("dropped") == []


def test_a_worker_told_to_reconnect_takes_its_running_lease_to_another_instance(api, make_worker, control):
    release = threading.Event()
    started = threading.Event()

    def handler(job: Job):
        started.set()
        job.progress(0.3)
        release.wait(60)
        job.log("finishing on the other instance")
        job.progress(0.9)
        return {"files": [Artifact("image.png", b"moved")], "moved": True}

    w = make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "handover"})
    assert started.wait(30)
    api.wait_job(run, lambda j: j.get("progress") == 0.3)
    control("POST", "/lb", {"targets": ["a", "b"]})
    control("POST", "/gateway/a/term")  # SIGTERM: A tells protocol 2 workers to reconnect
    wait_for("a registration on B", lambda: len(w.named("registered")) >= 2)
    release.set()
    job = api.wait_job(run)
    assert job["status"] == "succeeded", job
    assert job["attempts"] == 1, "handed over, not requeued"
    assert job["output"]["moved"] is True
    assert download(job["output"]["urls"][0]) == b"moved"
    assert [l["runId"] for l in control.logged("b", "lease adopted")] == [run]
    assert w.named("dropped") == []
    assert control("POST", "/gateway/a/wait-exit") == {"code": 0, "signal": None}


def test_stop_is_graceful_the_running_job_finishes_and_a_waiting_one_goes_back_to_the_queue(api, make_worker):
    release = threading.Event()
    started = threading.Event()

    ran = []

    def handler(job: Job):
        ran.append(job.input["prompt"])
        started.set()
        release.wait(60)
        return {"files": [Artifact("image.png", job.input["prompt"].encode())]}

    w = make_worker({IMAGE: handler}, slots=1)
    run = api.submit(IMAGE, {"prompt": "finish me"})
    assert started.wait(30)
    stopping = w.stop_async(timeout=None)
    later = api.submit(IMAGE, {"prompt": "not on this worker"})
    release.set()
    stopping.result(30)
    assert w.worker.state == "stopped"
    job = api.job(run)
    assert job["status"] == "succeeded" and job["attempts"] == 1, job
    # Leased to the stopping worker or not, it was never started there and waits in its queue.
    api.wait_job(later, lambda j: j["status"] == "queued")
    assert ran == ["finish me"]
    make_worker({IMAGE: handler})
    assert api.wait_job(later)["status"] == "succeeded"
    assert ran == ["finish me", "not on this worker"]


def test_stop_with_a_timeout_cancels_the_running_job_which_goes_back_to_the_queue(api, make_worker):
    started = threading.Event()
    seen = []

    async def handler(job: Job):
        if job.attempt == 1:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
        return {"files": [Artifact("image.png", b"second attempt")]}

    w = make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "stop me"})
    assert started.wait(30)
    w.stop(timeout=0.1)
    assert seen == ["cancelled"]
    assert w.worker.state == "stopped"
    make_worker({IMAGE: handler})
    job = api.wait_job(run)
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    assert download(job["output"]["urls"][0]) == b"second attempt"
