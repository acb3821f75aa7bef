"""Handler errors, cancellation (asyncio and the flag of sync handlers), progress and logs."""
from __future__ import annotations

import asyncio
import threading

from conftest import wait_for

from switchyard_worker import Artifact, Job, WorkerError

IMAGE = "inference:image:generate"


def test_a_retryable_error_is_retried_and_a_final_one_fails_the_job(api, make_worker):
    attempts = []

    def handler(job: Job):
        attempts.append((job.input["prompt"], job.attempt))
        if job.input["prompt"] == "flaky" and job.attempt == 1:
            raise WorkerError("CUDA out of memory", "gpu_oom", retryable=True)
        if job.input["prompt"] == "refused":
            raise WorkerError("the prompt is not allowed", "bad_prompt", retryable=False)
        if job.input["prompt"] == "crash":
            raise KeyError("width")
        return {"files": [Artifact("image.png", b"ok")]}

    make_worker({IMAGE: handler}, slots=2)
    flaky, refused = api.submit(IMAGE, {"prompt": "flaky"}), api.submit(IMAGE, {"prompt": "refused"})
    ok = api.wait_job(flaky)
    assert ok["status"] == "succeeded" and ok["attempts"] == 2, ok
    bad = api.wait_job(refused)
    assert bad["status"] == "failed" and bad["attempts"] == 1, bad
    # A code of the worker's own is recorded as engine_error, its own beside it (docs/jobs.md, "Error codes").
    assert bad["error"] == {"code": "engine_error", "reported_code": "bad_prompt", "message": "the prompt is not allowed", "retryable": False, "attempt": 1}
    crash = api.wait_job(api.submit(IMAGE, {"prompt": "crash"}))
    assert crash["status"] == "failed" and crash["attempts"] == 3, "any other exception is retryable, until the attempts run out"
    assert crash["error"]["code"] == "engine_error" and "KeyError" in crash["error"]["message"]


def test_progress_and_log_lines_reach_the_caller_while_the_job_runs(api, make_worker):
    release = threading.Event()

    def handler(job: Job):
        job.log("loading the model")
        job.progress(0.5, "half way")
        release.wait(30)
        return None

    make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "slow"})
    running = api.wait_job(run, lambda j: j["status"] == "running" and j.get("progress") == 0.5)
    assert running["terminal"] is False
    release.set()
    job = api.wait_job(run)
    assert job["status"] == "succeeded" and job["output"]["urls"] == [], job
    events = api.events(run)
    assert any(e["event"] == "log" and "loading the model" in str(e["data"]) for e in events), events


def test_cancel_reaches_an_async_handler_as_a_cancellation(api, make_worker):
    started = threading.Event()
    seen = []

    async def handler(job: Job):
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    w = make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "forever"})
    assert started.wait(30)
    api.cancel(run)
    job = api.wait_job(run)
    assert job["status"] == "canceled", job
    wait_for("the handler to see the cancellation", lambda: seen == ["cancelled"])
    wait_for("the worker's fail canceled to be acknowledged", lambda: [e[2]["code"] for e in w.named("failed")] == ["canceled"])


def test_cancel_sets_the_flag_a_sync_handler_polls(api, make_worker):
    started = threading.Event()
    seen = []

    def handler(job: Job):
        started.set()
        assert job.cancel_event.wait(30), "the flag was never set"
        seen.append(job.cancelled)
        job.raise_if_cancelled()

    w = make_worker({IMAGE: handler})
    run = api.submit(IMAGE, {"prompt": "polling"})
    assert started.wait(30)
    api.cancel(run)
    assert api.wait_job(run)["status"] == "canceled"
    wait_for("the fail canceled", lambda: [e[2]["code"] for e in w.named("failed")] == ["canceled"])
    assert seen == [True]
    # The slot is free again: the next job runs.
    started.clear()
    ok = api.submit(IMAGE, {"prompt": "next"})
    assert started.wait(30)
    api.cancel(ok)
