"""The demo ranked models served by Python workers, one rank each (switchyard_worker.ranked_demo),
their pipeline frames relayed by a scripted gateway as the gateway relays them: the text and the
PNG are the bytes of the model run whole."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List

from scripted_gateway import IMAGE, LLM, PipelineRelay, ScriptedGateway, UploadServer, rank_lease, rank_lease_id, run

from switchyard_worker import Worker
from switchyard_worker.ranked_demo import main, ranked_demo_worker, serve_ranked_demo
from switchyard_worker.ranked_image import image_whole
from switchyard_worker.ranked_llm import generate_whole


async def rank_workers(gw: ScriptedGateway, model: str, count: int) -> List[Worker]:
    """One worker per rank, connected in rank order: connection i is rank i's."""
    workers = []
    for i in range(count):
        w = ranked_demo_worker(model, i, count, gateway=gw.url, token="swt_t")
        start = asyncio.ensure_future(w.start())
        reg = await gw.register(protocol=6, conn=i)
        await start
        assert reg["models"] == {IMAGE if model == "demo-ranked-image" else LLM: [{"id": model, "rank": {"index": i, "count": count}}]}
        workers.append(w)
    return workers


async def run_pipeline(gw: ScriptedGateway, count: int, model: str, kind: str, input: Dict[str, Any], first_id: int, upload_url: str = "http://127.0.0.1:9/x") -> List[Dict[str, Any]]:
    """Leases one pipeline (rank i to connection i) and returns each rank's final report."""
    ids = [rank_lease_id(first_id + i) for i in range(count)]
    relay = gw.relay = PipelineRelay(gw, [(i, ids[i]) for i in range(count)])
    for i in range(count):
        await gw.send(rank_lease(ids[i], i, count, model, kind, input, upload_url, run=f"run_{first_id}"), conn=i)
    reports = [await gw.frame(lambda f, id=ids[i]: f["type"] in ("complete", "fail") and f["lease_id"] == id, conn=i) for i in range(count)]
    assert relay.errors == []
    for i in range(count):
        ends = [f for f in gw.pipeline_frames(i) if f["lease_id"] == ids[i] and f["end"]]
        assert len(ends) == 1, f"rank {i} ends its stream once"
    return reports


def test_three_python_ranks_of_demo_ranked_llm_write_the_text_of_the_model_run_whole():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            workers = await rank_workers(gw, "demo-ranked-llm", 3)
            for n, (prompt, max_tokens) in enumerate([("hello world", 12), ("in cat", 40)]):
                whole = generate_whole(prompt, max_tokens)
                reports = await run_pipeline(gw, 3, "demo-ranked-llm", LLM, {"prompt": prompt, "max_tokens": max_tokens}, 100 * (n + 1))
                assert [r["type"] for r in reports] == ["complete"] * 3
                assert reports[0]["output"] == {"urls": []} and reports[1]["output"] == {"urls": []}
                assert reports[2]["output"] == {"text": whole.text, "finish_reason": whole.finish, "model": "demo-ranked-llm", "urls": []}
                deltas = [f["delta"] for f in gw.outputs(2) if f["lease_id"] == reports[2]["lease_id"]]
                assert "".join(deltas) == whole.text and len(deltas) == len([t for t in whole.tokens if t != 0])
                assert gw.outputs(0) == [] and gw.outputs(1) == []
            assert whole.finish == "stop" and generate_whole("hello world", 12).finish == "length", "both endings are covered"
            for w in workers:
                await w.stop(0)

    run(test)


def test_two_python_ranks_of_demo_ranked_image_upload_the_png_of_the_model_run_whole():
    async def test() -> None:
        uploads = UploadServer()
        try:
            async with ScriptedGateway(auto_ack=True) as gw:
                workers = await rank_workers(gw, "demo-ranked-image", 2)
                prompt = "a lighthouse at dusk"
                reports = await run_pipeline(gw, 2, "demo-ranked-image", IMAGE, {"prompt": prompt}, 300, uploads.url)
                assert reports[0]["output"] == {"urls": []}
                out = reports[1]["output"]
                assert (out["width"], out["height"], len(out["urls"])) == (64, 64, 1)
                assert uploads.files[(f"tok_{reports[1]['lease_id']}", "image.png")] == image_whole(prompt)
                assert [token for token, _ in uploads.files] == [f"tok_{reports[1]['lease_id']}"], "rank 0 uploads nothing"
                for w in workers:
                    await w.stop(0)
        finally:
            uploads.close()

    run(test)


def test_the_demo_handler_serves_a_whole_job_naming_the_model_and_refuses_other_models():
    async def test() -> None:
        async with ScriptedGateway(auto_ack=True) as gw:
            w = Worker(gw.url, "swt_t", handlers={LLM: serve_ranked_demo})
            start = asyncio.ensure_future(w.start())
            await gw.register(protocol=6)
            await start
            whole = lambda n, input: {"type": "lease", "lease_id": f"lse_{n}", "fence": 1, "run_id": f"run_{n}", "kind": LLM, "tier": "open",
                                      "attempt": 1, "input": input, "upload_url": "http://127.0.0.1:9/x", "upload_token": "t"}
            # The prompt of a chat: the messages' text (the OpenAI surface sends those).
            await gw.send(whole(1, {"model": "demo-ranked-llm", "messages": [{"role": "user", "content": "in cat"}], "max_tokens": 5.4}))
            done = await gw.frame(lambda f: f["type"] == "complete")
            expected = generate_whole("in cat", 5)
            assert done["output"] == {"text": expected.text, "finish_reason": "length", "model": "demo-ranked-llm", "urls": []}
            await gw.send(whole(2, {"model": "llama3"}))
            failed = await gw.frame(lambda f: f["type"] == "fail")
            assert (failed["error"]["code"], failed["error"]["retryable"]) == ("unsupported_model", False)
            await w.stop(0)

    run(test)


def test_the_command_line_refuses_a_rank_the_model_does_not_have(capsys: Any):
    for argv, said in [(["--rank", "1/3", "--model", "demo-ranked-image"], "demo-ranked-image is served in 2 ranks, not 3"),
                       (["--rank", "3/3"], "rank 3 is not one of 0..2"), (["--rank", "one"], "--rank is INDEX/COUNT")]:
        try:
            main(["--gateway", "http://127.0.0.1:9", "--token", "swt_t", *argv])
        except SystemExit as exit:
            assert exit.code == 2
        assert said in capsys.readouterr().err
