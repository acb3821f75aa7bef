"""Input files fetched through the gateway, and artifacts uploaded (streamed from disk or from memory)."""
from __future__ import annotations

import hashlib
import os
import threading

from conftest import data_uri, download, glb, png

from switchyard_worker import Artifact, InputFileError, Job

MESH = "inference:3d:image-to-mesh"
IMAGE = "inference:image:generate"


def test_an_input_file_is_fetched_once_checked_and_deleted_when_the_lease_ends(api, make_worker):
    sent = png(32, 5)
    seen = {}

    def handler(job: Job):
        first = job.input_file("image")
        again = job.input_file("image")
        seen["path"] = first.path
        assert again == first, "a second call gets the same fetch"
        with open(first.path, "rb") as fh:
            data = fh.read()
        assert first.path.endswith(".png")
        # Echo the bytes back: the caller downloads exactly what it sent.
        return {"files": [Artifact("mesh.glb", data, "model/gltf-binary")], "input": {"field": "image", "sha256": first.sha256, "size": first.size, "content_type": first.content_type}}

    make_worker({MESH: handler})
    job = api.wait_job(api.submit(MESH, {"image": data_uri("image/png", sent)}))
    assert job["status"] == "succeeded", job
    assert download(job["output"]["urls"][0]) == sent
    assert job["output"]["input"] == {"field": "image", "sha256": hashlib.sha256(sent).hexdigest(), "size": len(sent), "content_type": "image/png"}
    assert not os.path.exists(seen["path"]), "the lease's files are deleted once it ends"


def test_a_field_without_a_file_fails_the_job_as_bad_input_not_retried(api, make_worker):
    calls = []

    async def handler(job: Job):
        calls.append(job.attempt)
        await job.input_file("mesh")  # the lease has no such file

    make_worker({MESH: handler})
    job = api.wait_job(api.submit(MESH, {"image": data_uri("image/png", png())}))
    assert job["status"] == "failed", job
    # The SDK's bad_input is recorded by the list's name, invalid_input (docs/jobs.md, "Error codes").
    assert job["error"]["code"] == "invalid_input" and job["error"]["reported_code"] == "bad_input"
    assert job["error"]["retryable"] is False
    assert "no file for input field 'mesh'" in job["error"]["message"]
    assert calls == [1], "a bad input is not retried"


def test_an_input_file_error_caught_by_the_handler_is_an_exception_with_code_and_flag(api, make_worker):
    caught = {}

    def handler(job: Job):
        try:
            job.input_file("audio")
        except InputFileError as e:
            caught.update(code=e.code, retryable=e.retryable)
        return {"files": [Artifact("mesh.glb", glb())]}

    make_worker({MESH: handler})
    assert api.wait_job(api.submit(MESH, {"image": data_uri("image/png", png())}))["status"] == "succeeded"
    assert caught == {"code": "bad_input", "retryable": False}


def test_artifacts_stream_from_disk_and_memory_and_the_gateway_stores_the_same_bytes(api, make_worker):
    big = os.urandom(3 * 1024 * 1024 + 17)
    small = b"small artifact"
    where = {}

    def handler(job: Job):
        path = job.path("big.bin")
        with open(path, "wb") as fh:
            fh.write(big)
        where["tmpdir"] = job.tmpdir
        return {"files": [path, Artifact("small.txt", small)], "seed": 7}

    make_worker({IMAGE: handler})
    job = api.wait_job(api.submit(IMAGE, {"prompt": "big"}), timeout=60)
    assert job["status"] == "succeeded", job
    files = job["output"]["files"]
    assert [f["name"] for f in files] == ["big.bin", "small.txt"]
    assert files[0]["sha256"] == hashlib.sha256(big).hexdigest() and files[0]["size"] == len(big)
    assert files[1]["content_type"].startswith("text/plain")
    assert download(job["output"]["urls"][0]) == big
    assert download(job["output"]["urls"][1]) == small
    assert job["output"]["seed"] == 7
    assert not os.path.exists(where["tmpdir"]), "job.tmpdir is deleted after the uploads"


def test_a_missing_file_to_upload_fails_the_job_not_retryable(api, make_worker):
    make_worker({IMAGE: lambda job: {"files": ["/nonexistent/image.png"]}})
    job = api.wait_job(api.submit(IMAGE, {"prompt": "nothing"}))
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "upload_failed"
    assert job["error"]["retryable"] is False
