"""Models (protocol 3): the ones listed at register and by set_models() route jobs naming them to the worker."""
from __future__ import annotations

import uuid

from conftest import GATEWAY, API_KEY, http, wait_for

from switchyard_worker import Job

LLM = "inference:llm:text-generate"


def test_jobs_naming_a_model_the_worker_lists_reach_it_and_set_models_adds_one_without_reconnecting(api, make_worker):
    first, second = f"py-{uuid.uuid4().hex[:8]}", f"py-{uuid.uuid4().hex[:8]}"
    served = []

    def handler(job: Job):
        served.append(job.input.get("model"))
        return {"text": "ok", "finish_reason": "stop", "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, "model": job.input.get("model")}

    w = make_worker({LLM: handler}, models={LLM: [{"id": first, "description": "a test model", "max_concurrency": 1}]})
    listed = http("GET", f"{GATEWAY}/v1/models", key=API_KEY)
    assert first in [m["id"] for m in listed["data"]], listed
    job = api.wait_job(api.submit(LLM, {"prompt": "hi", "model": first}))
    assert job["status"] == "succeeded" and job["output"]["model"] == first, job

    w.loop.call_soon_threadsafe(w.worker.set_models, {LLM: [first, second]})
    wait_for("the second model in the catalogue", lambda: second in [m["id"] for m in http("GET", f"{GATEWAY}/v1/models", key=API_KEY)["data"]])
    job = api.wait_job(api.submit(LLM, {"prompt": "hi", "model": second}))
    assert job["status"] == "succeeded", job
    assert served == [first, second]
    assert len(w.named("registered")) == 1, "no reconnect for a new model list"
