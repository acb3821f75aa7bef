"""Python stages of the demo ranked models for test/ranked-model-python.test.ts, over stdin/stdout.

One JSON request a line, one JSON answer a line (frames in base64), so a mocha test can put
Python ranks between TypeScript ranks of one pipeline. Requests:

  {"op": "forward", "stage": KEY, "model": "llm"|"image", "rank": R, "ranks": N, "frame": B64}
      -> {"frame": B64} or {"error": MESSAGE}; a KEY keeps its stage (rank 0 of the llm has state)
  {"op": "whole", "model": "llm", "prompt": TEXT, "max_tokens": M} -> {"tokens": [...], "text": ..., "finish": ...}
  {"op": "whole", "model": "image", "prompt": TEXT} -> {"png": B64}
  {"op": "tokenize", "prompt": TEXT} -> {"ids": [...]}
"""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python", "worker"))

from switchyard_worker.ranked_frames import RankedFrameError  # noqa: E402
from switchyard_worker.ranked_image import RankedImageStage, image_whole  # noqa: E402
from switchyard_worker.ranked_llm import RankedLlmStage, generate_whole  # noqa: E402
from switchyard_worker.ranked_vocab import tokenize  # noqa: E402

stages = {}


def answer(req):
    op = req["op"]
    if op == "forward":
        stage = stages.get(req["stage"])
        if stage is None:
            stage = RankedLlmStage(req["rank"], req["ranks"]) if req["model"] == "llm" else RankedImageStage(req["rank"])
            stages[req["stage"]] = stage
        try:
            return {"frame": base64.b64encode(stage.forward(base64.b64decode(req["frame"]))).decode()}
        except RankedFrameError as e:
            return {"error": str(e)}
    if op == "whole" and req["model"] == "llm":
        g = generate_whole(req["prompt"], req["max_tokens"])
        return {"tokens": g.tokens, "text": g.text, "finish": g.finish}
    if op == "whole":
        return {"png": base64.b64encode(image_whole(req["prompt"])).decode()}
    if op == "tokenize":
        return {"ids": tokenize(req["prompt"])}
    raise ValueError(f"unknown op {op}")


for line in sys.stdin:
    sys.stdout.write(json.dumps(answer(json.loads(line))) + "\n")
    sys.stdout.flush()
