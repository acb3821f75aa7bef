"""Models (protocol 3): the ones listed at register and by set_models() route jobs naming them to the worker; ranks (protocol 6)."""
from __future__ import annotations

import uuid

import pytest

from conftest import GATEWAY, API_KEY, http, wait_for

from switchyard_worker import Job, WorkerRefusedError

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


def test_a_worker_serving_one_rank_of_a_model_shows_per_rank_and_another_count_is_refused_for_good(make_worker):
    model = f"py-ranked-{uuid.uuid4().hex[:8]}"
    make_worker({LLM: lambda job: None}, models={LLM: [{"id": model, "rank": {"index": 1, "count": 3}}]})
    listed = next(m for m in http("GET", f"{GATEWAY}/v1/models", key=API_KEY)["data"] if m["id"] == model)
    assert listed["ranks"] == 3, listed
    assert [r["workers"]["open"] for r in listed["ranks_available"]] == [0, 1, 0], listed
    assert listed["pipelines"] == {"open": 0, "trusted": 0, "private": 0}, listed

    wrong = make_worker({LLM: lambda job: None}, start=False, models={LLM: [{"id": model, "rank": {"index": 0, "count": 4}}]})
    with pytest.raises(WorkerRefusedError) as e:
        wrong.start()
    assert (e.value.status, e.value.code) == (4400, "rank_mismatch"), e.value
    assert "3 ranks in the catalogue" in str(e.value) and "rank 0 of 4" in str(e.value)
