"""Refusals are final: start() raises WorkerRefusedError with the gateway's reason, and the worker does not retry."""
from __future__ import annotations

import pytest

from conftest import GATEWAY

from switchyard_worker import Worker, WorkerRefusedError
from switchyard_worker.protocol import check_models

IMAGE = "inference:image:generate"


def _refused(make_worker, **options) -> WorkerRefusedError:
    w = make_worker({IMAGE: lambda job: None}, start=False, **options)
    with pytest.raises(WorkerRefusedError) as e:
        w.start()
    assert w.worker.state == "stopped"
    with pytest.raises(WorkerRefusedError):
        w.call(w.worker.wait())
    return e.value


def test_a_bad_token_an_unknown_kind_and_a_tier_above_the_token_are_refused_for_good(make_worker):
    bad = make_worker({IMAGE: lambda job: None}, start=False)
    bad.worker.token = "swt_notarealtoken"
    with pytest.raises(WorkerRefusedError) as e:
        bad.start()
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    unknown = make_worker({"inference:does-not-exist": lambda job: None}, start=False)
    with pytest.raises(WorkerRefusedError) as e:
        unknown.start()
    assert e.value.code == "bad_frame" and "kinds" in str(e.value)
    err = _refused(make_worker, tier="trusted")
    assert (err.status, err.code) == (4403, "forbidden")
    assert "trust is open" in str(err)


def test_options_are_checked_up_front():
    with pytest.raises(ValueError, match="private"):
        Worker(GATEWAY or "http://127.0.0.1:1", "swt_x", tier="private")
    with pytest.raises(ValueError, match="slots"):
        Worker("http://127.0.0.1:1", "swt_x", slots=0)
    with pytest.raises(ValueError, match="http"):
        Worker("ftp://gw", "swt_x")
    with pytest.raises(ValueError, match="no handler for inference:rig"):
        Worker("http://127.0.0.1:1", "swt_x", handlers={IMAGE: lambda job: None}, kinds=[IMAGE, "inference:rig"])._resolve_kinds()
    with pytest.raises(ValueError, match="not a model id"):
        check_models({IMAGE: ["/models/7B.gguf"]}, [IMAGE], 1)
    with pytest.raises(ValueError, match="not among the worker's kinds"):
        check_models({"inference:rig": ["a"]}, [IMAGE], 1)
    with pytest.raises(ValueError, match="over 65536 bytes of JSON"):
        check_models({IMAGE: [{"id": "a", "input_schema": {"description": "x" * 70_000}}]}, [IMAGE], 1)
    assert check_models({IMAGE: [{"id": "a", "rank": {"index": 1, "count": 3}}]}, [IMAGE], 1) == {IMAGE: [{"id": "a", "rank": {"index": 1, "count": 3}}]}
    with pytest.raises(ValueError, match="rank index of a must be a whole number from 0 to 2"):
        check_models({IMAGE: [{"id": "a", "rank": {"index": 3, "count": 3}}]}, [IMAGE], 1)
    with pytest.raises(ValueError, match="rank count of a must be a whole number from 2 to 64"):
        check_models({IMAGE: [{"id": "a", "rank": {"index": 0, "count": 1}}]}, [IMAGE], 1)
    with pytest.raises(ValueError, match="must be {index, count}"):
        check_models({IMAGE: [{"id": "a", "rank": {"index": 0, "count": 2, "of": 1}}]}, [IMAGE], 1)
    with pytest.raises(TypeError, match="probe"):
        Worker("http://127.0.0.1:1", "swt_x", probe="http://127.0.0.1:8188")  # type: ignore[arg-type]
