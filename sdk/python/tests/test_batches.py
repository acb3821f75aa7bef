"""Batches against the real gateway (docs/jobs.md, "Batches"): submitted whole, followed over
one stream to done, listed by batch, replayed under one key, canceled together, and refused
whole with each refused job's index."""
from __future__ import annotations

import uuid

import pytest

from conftest import STUCK, Gateway
from switchyard import Batch, Client, IdempotencyConflictError, InsufficientCreditsError, InvalidRequestError, NotFoundError

KIND = "inference:image:generate"


def test_submit_stream_list_and_replay(client: Client) -> None:
    jobs = [{"kind": KIND, "input": {"prompt": f"chair {i}", "width": 64, "height": 64}} for i in range(5)]
    key = f"batch-{uuid.uuid4()}"
    batch = client.submit_batch(jobs, idempotency_key=key)
    assert batch.size == 5 and len(batch.jobs) == 5 and not batch.replayed
    ended = set()
    done = None
    with client.stream_batch(batch.batch_id) as stream:
        for ev in stream:
            if ev.event == "status" and ev.job is not None and ev.job.terminal:
                assert ev.job.batch_id == batch.batch_id
                ended.add(ev.job.run_id)
            if ev.event == "done":
                done = Batch.from_json(ev.data)
    assert done is not None and done.terminal and done.counts["succeeded"] == 5
    assert ended == {j.run_id for j in batch.jobs}
    listed = list(client.jobs(batch_id=batch.batch_id, limit=2))
    assert {j.run_id for j in listed} == ended
    assert client.get_batch(batch.batch_id).counts["succeeded"] == 5
    again = client.submit_batch(jobs, idempotency_key=key)
    assert again.replayed and again.batch_id == batch.batch_id
    with pytest.raises(IdempotencyConflictError):
        client.submit_batch(jobs[:1], idempotency_key=key)


def test_cancel_and_refusals(client: Client, gateway: Gateway) -> None:
    # Jobs of the STUCK tier stay queued: the test workers never take them.
    batch = client.submit_batch([{"kind": KIND, "input": {"prompt": "x"}, "confidentiality": STUCK}] * 3)
    assert client.cancel_batch(batch.batch_id) == {"batch_id": batch.batch_id, "canceled": 3, "cancel_requested": 0, "already_terminal": 0}
    assert client.get_batch(batch.batch_id).counts["canceled"] == 3
    with pytest.raises(InvalidRequestError) as refused:
        client.submit_batch([{"kind": KIND, "input": {"prompt": "ok"}}, {"kind": KIND, "input": {}}])
    assert [e["index"] for e in refused.value.details["errors"]] == [1]
    poor = gateway.client(gateway.poor_key)
    with pytest.raises(InsufficientCreditsError):
        poor.submit_batch([{"kind": KIND, "input": {"prompt": "a"}}])
    with pytest.raises(NotFoundError):
        poor.get_batch(batch.batch_id)
