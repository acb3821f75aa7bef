"""Jobs against the real gateway: every kind submitted and waited for, idempotent replay,
pagination, cancel, capabilities and capacity, and wait's own timeout."""
from __future__ import annotations

import re
import urllib.request
import uuid
from typing import Any, Callable, Dict, List

import pytest

from conftest import MISSING_RUN, STUCK, Gateway, answer, png_of
from switchyard import (AlreadyTerminalError, Client, IdempotencyConflictError, InvalidRequestError, Job, NotFoundError,
                        TimeoutError, UnauthorizedError)

RUN_ID = re.compile(r"^run_[0-9A-Z]{26}$")


def test_submit_each_kind_and_wait(client: Client) -> None:
    """Every kind of the catalogue, each by one of the three ways to wait (Prefer: wait,
    polling, events), its artifacts those the capabilities promise. File inputs come from an
    upload and from the artifacts of earlier runs, as jobs chain."""
    caps = client.capabilities()
    promised: Dict[str, List[str]] = {}
    for k in caps["kinds"]:
        assert k["workers"] >= 1, k
        promised[k["kind"]] = [a["name"] for a in k["output_artifacts"] if a["always"]]
    image = client.files.upload(png_of(1), filename="seed.png", content_type="image/png")
    done: Dict[str, Job] = {}

    def url_of(kind: str, name: str) -> str:
        job = done[kind]
        assert job.output is not None
        return next(f.url for f in job.output.files if f.name == name)

    steps: List[Any] = [
        ("inference:image:generate", lambda: {"prompt": "a lighthouse", "width": 64, "height": 64}),
        ("inference:3d:image-to-mesh", lambda: {"image": image.id}),
        ("inference:3d:text-to-mesh", lambda: {"prompt": "a chair"}),
        ("inference:texture:generate", lambda: {"mesh": url_of("inference:3d:text-to-mesh", "mesh.glb"), "prompt": "bark", "resolution": 64}),
        ("inference:rig", lambda: {"mesh": url_of("inference:3d:text-to-mesh", "mesh.glb")}),
        ("inference:video:generate", lambda: {"prompt": "a ball", "fps": 4, "duration_s": 0.5}),
        ("inference:llm:text-generate", lambda: {"prompt": "Tell me about trains", "max_tokens": 16}),
        ("inference:audio:music-generate", lambda: {"prompt": "calm piano", "duration_s": 0.5}),
        ("inference:audio:sfx-generate", lambda: {"prompt": "laser", "duration_s": 0.3}),
        ("inference:audio:text-to-speech", lambda: {"text": "hello there"}),
        ("inference:audio:transcribe", lambda: {"audio": url_of("inference:audio:text-to-speech", "speech.wav")}),
    ]
    for i, (kind, make_input) in enumerate(steps):
        if i % 3 == 0:
            job = client.submit(kind, make_input(), wait=30)
        elif i % 3 == 1:
            job = client.wait(client.submit(kind, make_input()).run_id, interval=0.05, timeout=30)
        else:
            job = client.wait(client.submit(kind, make_input()).run_id, events=True, timeout=30)
        assert job.terminal and job.status == "succeeded", (kind, job.raw)
        assert job.output is not None and job.output.urls and len(job.output.files) == len(job.output.urls), job.raw
        for f, url in zip(job.output.files, job.output.urls):
            assert f.url == url and f.sha256 and f.size, (kind, f)
        names = {f.name for f in job.output.files}
        for name in promised[kind]:
            assert name in names, (kind, names)
        done[kind] = job
    assert set(done) == set(promised), "every kind of the catalogue ran"
    assert isinstance(done["inference:llm:text-generate"].output.fields["text"], str)  # type: ignore[union-attr]
    assert done["inference:image:generate"].output["width"] == 64  # type: ignore[index]

    # The artifact URLs serve the files.
    with urllib.request.urlopen(done["inference:image:generate"].output.urls[0]) as res:  # type: ignore[union-attr]
        assert res.status == 200 and res.headers["Content-Type"] == "image/png"

    # get answers the same job, terminal flag and raw JSON included.
    again = client.get(done["inference:rig"].run_id)
    assert again.terminal and again.raw == done["inference:rig"].raw


def test_get_with_include_input(client: Client, cancel_later: Callable[[str], None]) -> None:
    sent = {"prompt": "a cat", "width": 96, "height": 64, "style": {"palette": ["teal", "amber"], "on": False}}
    run = client.submit("inference:image:generate", sent)
    cancel_later(run.run_id)
    assert client.get(run.run_id, include=["input"]).input == sent
    plain = client.get(run.run_id)
    assert plain.input is None and "input" not in plain.raw
    with pytest.raises(InvalidRequestError) as bad:
        client.get(run.run_id, include=["inputs"])
    assert bad.value.details and bad.value.details.get("path") == "/include"


def test_submit_accepted_and_wait_not_in_time(client: Client, cancel_later: Callable[[str], None]) -> None:
    accepted = client.submit("inference:image:generate", {"prompt": "a cat"}, job_class="interactive")
    assert RUN_ID.match(accepted.run_id) and accepted.status == "queued" and not accepted.terminal
    assert accepted.job_class == "interactive" and 1 <= (accepted.priority or 0) <= 600000
    assert "terminal" not in accepted.raw and accepted.raw["run_id"] == accepted.run_id, "raw is the 202 as sent"

    queued = client.submit("inference:image:generate", {"prompt": "never leased"}, confidentiality=STUCK, wait=1)
    cancel_later(queued.run_id)
    assert not queued.terminal and queued.status == "queued"
    with pytest.raises(ValueError):
        client.submit("inference:image:generate", {"prompt": "x"}, wait=1.5)  # type: ignore[arg-type]


def test_idempotent_replay(client: Client, cancel_later: Callable[[str], None]) -> None:
    key = f"py-idem-{uuid.uuid4()}"
    body = {"prompt": "a door creaks"}
    first = client.submit("inference:audio:sfx-generate", body, confidentiality=STUCK, idempotency_key=key)
    cancel_later(first.run_id)
    replay = client.submit("inference:audio:sfx-generate", dict(body), confidentiality=STUCK, idempotency_key=key)
    assert replay.run_id == first.run_id, "the replay made a second run"
    other = client.submit("inference:audio:sfx-generate", body, confidentiality=STUCK)
    cancel_later(other.run_id)
    assert other.run_id != first.run_id, "without the key, a new run"
    with pytest.raises(IdempotencyConflictError) as e:
        client.submit("inference:audio:sfx-generate", {"prompt": "another body"}, confidentiality=STUCK, idempotency_key=key)
    assert e.value.status == 409 and e.value.details["run_id"] == first.run_id


def test_list_pagination(client: Client, cancel_later: Callable[[str], None]) -> None:
    """More than two pages, walked by the iterator and by hand; newest first, nothing twice."""
    # This kind and tier are used by no other test, so the filter selects only these runs.
    kind = "inference:audio:music-generate"
    submitted = []
    for i in range(5):
        job = client.submit(kind, {"prompt": f"page {i}"}, confidentiality=STUCK)
        cancel_later(job.run_id)
        submitted.append(job.run_id)
    want = list(reversed(submitted))

    it = client.jobs(kind=kind, status="queued", limit=2)
    got, positions = [], []
    for job in it:
        assert job.kind == kind and job.status == "queued" and not job.terminal, job.raw
        got.append(job.run_id)
        positions.append(job.queue_position)
    assert got == want
    # Listed queued jobs carry their place in the queue, which only they are in: the newest last.
    assert positions == [5, 4, 3, 2, 1]
    assert it.pages == 3 and it.cursor is None

    by_hand, pages, cursor = [], 0, None
    while True:
        page = client.list(kind=kind, status="queued", limit=2, cursor=cursor)
        pages += 1
        by_hand += [j.run_id for j in page.data]
        if page.next_cursor is None:
            break
        assert len(page.data) == 2
        cursor = page.next_cursor
    assert pages == 3 and by_hand == want

    with pytest.raises(InvalidRequestError):
        client.list(cursor="not-a-cursor")


def test_cancel(client: Client) -> None:
    run = client.submit("inference:image:generate", {"prompt": "canceled"}, confidentiality=STUCK)
    canceled = client.cancel(run.run_id)
    assert canceled.status == "canceled" and canceled.terminal and canceled.error is not None and canceled.error.code == "canceled"
    with pytest.raises(AlreadyTerminalError) as e:
        client.cancel(run.run_id)
    err = e.value
    assert err.status == 409 and err.code == "already_terminal" and err.details["status"] == "canceled"
    assert err.request_id and err.message
    assert err.json["error"]["code"] == "already_terminal" and err.json["error"]["message"] == err.message
    with pytest.raises(NotFoundError):
        client.cancel(MISSING_RUN)


def test_capabilities_and_capacity(gateway: Gateway, client: Client) -> None:
    caps = client.capabilities()
    image = next(k for k in caps["kinds"] if k["kind"] == "inference:image:generate")
    assert image["workers"] >= 1 and image["workers_by_tier"]["open"] == image["workers"] and image["input_schema"]["type"] == "object"
    anonymous = Client(gateway.url, "")
    capacity = anonymous.capacity()
    assert capacity["workers"]["total"] >= 1 and capacity["updated_at"]
    assert any(k["kind"] == "inference:image:generate" and k["workers"] >= 1 for k in capacity["by_kind"])
    with pytest.raises(UnauthorizedError):
        anonymous.capabilities()


@pytest.mark.parametrize("events", [False, True])
def test_wait_timeout(client: Client, cancel_later: Callable[[str], None], events: bool) -> None:
    """Wait past its own timeout: a TimeoutError naming the run and its last state; the run
    is untouched."""
    run = client.submit("inference:image:generate", {"prompt": "waits forever"}, confidentiality=STUCK)
    cancel_later(run.run_id)
    with pytest.raises(TimeoutError) as e:
        client.wait(run.run_id, interval=0.02, timeout=0.3, events=events)
    err = e.value
    assert err.run_id == run.run_id and err.timeout == 0.3 and err.last_job is not None and err.last_job.status == "queued"
    assert run.run_id in str(err)
    assert client.get(run.run_id).status == "queued"


def test_wait_polls_through_transient_errors(scripted: Any) -> None:
    """Wait polls through what is worth another try (a 503, a 429) and stops at the terminal
    job; a refusal that is not (a 404) ends it at once."""
    answers = [
        (503, b'{"error":{"code":"unavailable","message":"restarting"}}'),
        (429, b'{"error":{"code":"rate_limited","message":"slow down"}}'),
        (200, b'{"run_id":"run_x","status":"running","terminal":false}'),
        (200, b'{"run_id":"run_x","status":"succeeded","terminal":true,"output":{"urls":["u"],"files":[]}}'),
        (404, b'{"error":{"code":"not_found","message":"run not found"}}'),
    ]
    calls: List[int] = []

    def handle(h: Any) -> None:
        calls.append(1)
        answer(h, *answers[len(calls) - 1])

    srv = scripted(handle)
    c = Client(srv.url, "k")
    job = c.wait("run_x", interval=0.001)
    assert job.status == "succeeded" and job.terminal and job.output is not None and job.output.urls == ["u"]
    assert len(srv.requests) == 4
    with pytest.raises(NotFoundError):
        c.wait("run_x", interval=0.001)
    assert len(srv.requests) == 5
    assert all(r.headers["Authorization"] == "Bearer k" for r in srv.requests)


def test_job_waiting_ranks() -> None:
    """A queued job of a ranked model names the ranks it waits for (docs/ranks.md); other jobs carry None."""
    job = Job.from_json({"run_id": "run_01JHB3Q4ZK8M2N5P7R9S1T3V5W", "status": "queued",
                         "waiting_reason": "no_worker_for_rank", "waiting_ranks": [0, 2]})
    assert (job.waiting_reason, job.waiting_ranks) == ("no_worker_for_rank", [0, 2])
    job = Job.from_json({"run_id": "run_01JHB3Q4ZK8M2N5P7R9S1T3V5W", "status": "queued", "waiting_reason": None, "waiting_ranks": None})
    assert (job.waiting_reason, job.waiting_ranks) == (None, None)


def test_attempts_and_error_codes(client: Client) -> None:
    """A job's attempts (docs/jobs.md, "Attempts") as submitted and shown, and the run error codes:
    a canceled job's code is one of RUN_ERROR_CODES, with the attempt it happened on."""
    from switchyard import RUN_ERROR_CODES
    run = client.submit("inference:image:generate", {"prompt": "attempts"}, confidentiality=STUCK, max_attempts=2, retry_on_timeout=True)
    job = client.get(run.run_id)
    assert (job.max_attempts, job.retry_on_timeout, job.attempt_history) == (2, True, [])
    canceled = client.cancel(run.run_id)
    assert canceled.error is not None and canceled.error.code in RUN_ERROR_CODES and canceled.error.attempt == 0
    assert RUN_ERROR_CODES["worker_lost"] is True and RUN_ERROR_CODES["invalid_input"] is False
    with pytest.raises(InvalidRequestError) as e:
        client.submit("inference:image:generate", {"prompt": "x"}, max_attempts=100)
    assert e.value.details["path"] == "/max_attempts" and e.value.details["max"] < 100


def test_job_cost_and_usage() -> None:
    """A job carries what it reserved and was charged, and what its worker reported using (docs/jobs.md, "Cost")."""
    job = Job.from_json({"run_id": "run_01JHB3Q4ZK8M2N5P7R9S1T3V5W", "status": "succeeded", "terminal": True,
                         "cost": {"reserved": 53, "charged": 5}, "usage": {"input_tokens": 7, "output_tokens": 3}})
    assert job.cost == {"reserved": 53, "charged": 5}
    assert job.usage == {"input_tokens": 7, "output_tokens": 3}
    queued = Job.from_json({"run_id": "run_01JHB3Q4ZK8M2N5P7R9S1T3V5W", "status": "queued", "cost": {"reserved": 4, "charged": None}, "usage": None})
    assert (queued.cost, queued.usage) == ({"reserved": 4, "charged": None}, None)
