"""Every kind of the catalogue, each with its own handler (sync and async), against a real gateway."""
from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Dict

from conftest import data_uri, download, glb, png, wav

from switchyard_worker import Artifact, Job

PNG, GLB, WAV = png(), glb(), wav()


def described(job: Job, field: str) -> Dict[str, Any]:
    """What an output says about the input file it was made from."""
    f = job.input_file(field)
    assert not hasattr(f, "__await__"), "a sync handler gets the file itself"
    with open(f.path, "rb") as fh:  # type: ignore[union-attr]
        assert hashlib.sha256(fh.read()).hexdigest() == f.sha256  # type: ignore[union-attr]
    return {"field": field, "sha256": f.sha256, "size": f.size, "content_type": f.content_type}  # type: ignore[union-attr]


def image_generate(job: Job) -> Dict[str, Any]:
    job.progress(0.5, "half way")
    return {"files": [Artifact("image.png", png(16, 3), "image/png")], "width": 16, "height": 16}


async def image_to_mesh(job: Job) -> Dict[str, Any]:
    f = await job.input_file("image")  # type: ignore[misc]
    info = {"field": "image", "sha256": f.sha256, "size": f.size, "content_type": f.content_type, "width": 8, "height": 8, "mean_rgb": [1, 2, 3]}
    return {"files": [Artifact("mesh.glb", GLB, "model/gltf-binary")], "input": info}


def text_to_mesh(job: Job) -> Dict[str, Any]:
    path = job.path("mesh.glb")
    with open(path, "wb") as fh:
        fh.write(GLB)
    return {"files": [path]}


async def video_generate(job: Job) -> Dict[str, Any]:
    await asyncio.sleep(0)
    return {"files": [Artifact("video.avi", b"RIFF\x00\x00\x00\x00AVI LIST", "video/x-msvideo")], "width": 8, "height": 8, "fps": 4, "frames": 1}


def texture_generate(job: Job) -> Dict[str, Any]:
    info = described(job, "mesh")
    files = [Artifact(n, png(4, i + 1), "image/png") for i, n in enumerate(["albedo.png", "normal.png", "roughness.png"])]
    return {"files": files + [Artifact("textured.glb", GLB)], "resolution": 4, "input": info}


def rig(job: Job) -> Dict[str, Any]:
    return {"files": [Artifact("rig.glb", GLB, "model/gltf-binary")], "joints": 2, "vertices": 3, "triangles": 1, "input": described(job, "mesh")}


async def llm(job: Job) -> Dict[str, Any]:
    words = ["Lighthouses ", "guide ", "ships."]
    for w in words:
        job.output(w)
    text = "".join(words)
    return {"files": [Artifact("completion.txt", text.encode(), "text/plain; charset=utf-8")], "text": text, "finish_reason": "stop",
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}, "model": "python-test"}


def music(job: Job) -> Dict[str, Any]:
    return {"files": [Artifact("music.wav", WAV, "audio/wav")], "duration_s": 0.125}


def sfx(job: Job) -> Dict[str, Any]:
    return {"files": [Artifact("sfx.wav", WAV)], "duration_s": 0.125}


def tts(job: Job) -> Dict[str, Any]:
    info = described(job, "reference_audio")
    return {"files": [Artifact("speech.wav", WAV, "audio/wav")], "engine": "python-test", "reference_audio": {**info, "duration_s": 0.125}}


async def transcribe(job: Job) -> Dict[str, Any]:
    f = await job.input_file("audio")  # type: ignore[misc]
    info = {"field": "audio", "sha256": f.sha256, "size": f.size, "content_type": f.content_type}
    return {"files": [Artifact("transcript.txt", b"hello", "text/plain")], "text": "hello", "language": "en", "duration_s": 0.125, "recognizer": None, "input": info}


CASES: Dict[str, Any] = {
    "inference:image:generate": (image_generate, {"prompt": "a lighthouse"}, ["image.png"], {"width": 16, "height": 16}),
    "inference:3d:image-to-mesh": (image_to_mesh, {"image": data_uri("image/png", PNG)}, ["mesh.glb"], {}),
    "inference:3d:text-to-mesh": (text_to_mesh, {"prompt": "a chair"}, ["mesh.glb"], {}),
    "inference:video:generate": (video_generate, {"prompt": "waves"}, ["video.avi"], {"fps": 4, "frames": 1}),
    "inference:texture:generate": (texture_generate, {"mesh": data_uri("model/gltf-binary", GLB)}, ["albedo.png", "normal.png", "roughness.png", "textured.glb"], {"resolution": 4}),
    "inference:rig": (rig, {"mesh": data_uri("model/gltf-binary", GLB)}, ["rig.glb"], {"joints": 2}),
    "inference:llm:text-generate": (llm, {"prompt": "say something"}, ["completion.txt"], {"text": "Lighthouses guide ships.", "finish_reason": "stop"}),
    "inference:audio:music-generate": (music, {"prompt": "a waltz"}, ["music.wav"], {"duration_s": 0.125}),
    "inference:audio:sfx-generate": (sfx, {"prompt": "a door"}, ["sfx.wav"], {"duration_s": 0.125}),
    "inference:audio:text-to-speech": (tts, {"text": "hello", "reference_audio": data_uri("audio/wav", WAV)}, ["speech.wav"], {"engine": "python-test"}),
    "inference:audio:transcribe": (transcribe, {"audio": data_uri("audio/wav", WAV)}, ["transcript.txt"], {"text": "hello", "language": "en"}),
}
FILE_FIELDS = {"inference:3d:image-to-mesh": "image", "inference:texture:generate": "mesh", "inference:rig": "mesh",
               "inference:audio:text-to-speech": "reference_audio", "inference:audio:transcribe": "audio"}


def test_every_kind_runs_on_its_handler(api, make_worker):
    make_worker({kind: case[0] for kind, case in CASES.items()}, slots=4)
    runs = {kind: api.submit(kind, case[1]) for kind, case in CASES.items()}
    for kind, run_id in runs.items():
        _, input, names, fields = CASES[kind]
        job = api.wait_job(run_id)
        assert job["status"] == "succeeded", (kind, job)
        assert job["attempts"] == 1
        output = job["output"]
        assert [f["name"] for f in output["files"]] == names, kind
        assert len(output["urls"]) == len(names)
        for key, value in fields.items():
            assert output[key] == value, (kind, key, output)
        for f in output["files"]:
            data = download(f["url"])
            assert hashlib.sha256(data).hexdigest() == f["sha256"], (kind, f)
            assert len(data) == f["size"]
        if kind in FILE_FIELDS:
            info = output["input"] if "input" in output else output["reference_audio"]
            sent = {"image": PNG, "mesh": GLB, "audio": WAV, "reference_audio": WAV}[FILE_FIELDS[kind]]
            assert info["sha256"] == hashlib.sha256(sent).hexdigest(), (kind, "the handler read the bytes the caller sent")
            assert info["size"] == len(sent)
    # The llm's deltas were streamed as output events before it finished.
    events = api.events(runs["inference:llm:text-generate"])
    deltas = [e["data"].get("delta") for e in events if e["event"] == "output"]
    assert "".join(d for d in deltas if d) == "Lighthouses guide ships.", events
    assert download(api.job(runs["inference:image:generate"])["output"]["urls"][0]).startswith(b"\x89PNG")
