"""A long stream of output deltas against a real gateway (protocol 4): the gateway logs deltas that
arrive together as one batch and answers them with one ack (``count``); the worker counts those
answers, so the final report goes as soon as the last delta is logged, and the text is exact."""
from __future__ import annotations

from typing import Any, Dict

LLM = "inference:llm:text-generate"


def test_a_stream_of_many_deltas_completes_with_its_exact_text(api, make_worker):
    deltas = [f"<{i}>" for i in range(1500)]

    def handler(job: Any) -> Dict[str, Any]:
        for d in deltas:
            job.output(d)
        return {"text": "".join(deltas), "finish_reason": "stop"}

    # Held for the answers to its outputs, the final report would wait this long if the batched
    # acks were miscounted: longer than the test waits for the job.
    w = make_worker({LLM: handler}, report_timeout=120)
    assert w.worker.protocol >= 4
    run = api.submit(LLM, {"prompt": "count"})
    job = api.wait_job(run)
    assert job["status"] == "succeeded", job
    events = api.events(run)
    logged = [e["data"]["delta"] for e in events if e["event"] == "output"]
    assert "".join(logged) == "".join(deltas)
    assert [e[0] for e in w.events if e[0] in ("completed", "dropped")] == ["completed"]
