"""What a handler's result or error becomes on the wire, checked and cut to the protocol's limits."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from .errors import UploadError, WorkerError
from .protocol import MAX_ERROR_MESSAGE, cut
from .types import Artifact

#: The gateway's frame limit is 1 MiB; a report stays under it with room for the envelope.
MAX_REPORT_BYTES = 1_000_000


def bad_result(message: str) -> WorkerError:
    return WorkerError(message, "bad_result", False)


def _artifact(item: Any) -> Artifact:
    if isinstance(item, Artifact):
        return item
    if isinstance(item, (str, os.PathLike)):
        return Artifact(path=item)
    if isinstance(item, dict):
        try:
            return Artifact(name=item.get("name"), data=item.get("data"), path=item.get("path"), content_type=item.get("content_type"))
        except (ValueError, TypeError) as e:
            raise bad_result(f"bad artifact {item.get('name')!r}: {e}") from e
    raise bad_result(f"an artifact must be an Artifact, a path or a dict {{name, data|path, content_type?}}, not {type(item).__name__}")


def split_result(result: Any) -> Tuple[List[Artifact], Dict[str, Any]]:
    """A handler's return value as (artifacts, extra output fields).

    None: nothing; a dict: its ``files`` (or ``artifacts``) are the artifacts, every other key an
    output field (``text``, ``width``...); a list: artifacts only; an Artifact or a path: one.
    """
    if result is None:
        return [], {}
    if isinstance(result, dict):
        extra = {k: v for k, v in result.items() if k not in ("files", "artifacts", "urls")}
        if not all(isinstance(k, str) for k in extra):
            raise bad_result("the output's keys must be strings")
        items = result.get("files", result.get("artifacts")) or []
        if not isinstance(items, (list, tuple)):
            items = [items]
        return [_artifact(i) for i in items], extra
    if isinstance(result, (list, tuple)):
        return [_artifact(i) for i in result], {}
    if isinstance(result, (Artifact, str, os.PathLike)):
        return [_artifact(result)], {}
    raise bad_result(f"a handler returns a dict (files and output fields), a list of files, a file or None, not {type(result).__name__}")


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1_000_000_000


def _seconds(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and 0 <= v <= 1_000_000_000


def usage_of(kind: str, artifacts: List[Artifact], extra: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """What the job used, from the kind's documented output fields (the ``complete`` frame's ``usage``).

    Tokens: ``usage.prompt_tokens`` / ``completion_tokens`` (or ``input_tokens`` / ``output_tokens``);
    seconds: ``duration_s``, else ``frames / fps``; images: the image files of an image-generating
    kind. None when nothing is known: the run is then charged its whole reservation.
    """
    usage: Dict[str, Any] = {}
    u = extra.get("usage")
    if isinstance(u, dict):
        tokens_in = u.get("prompt_tokens", u.get("input_tokens"))
        tokens_out = u.get("completion_tokens", u.get("output_tokens"))
        if _count(tokens_in):
            usage["input_tokens"] = tokens_in
        if _count(tokens_out):
            usage["output_tokens"] = tokens_out
    if _seconds(extra.get("duration_s")):
        usage["seconds"] = extra["duration_s"]
    elif _count(extra.get("frames")) and _count(extra.get("fps")) and extra["fps"] > 0:
        usage["seconds"] = extra["frames"] / extra["fps"]
    if kind == "inference:image:generate":
        usage["images"] = sum(1 for a in artifacts if (a.content_type or "").startswith("image/") or (a.content_type is None and str(a.name or a.path or "").lower().endswith((".png", ".jpg", ".jpeg", ".webp"))))
    return usage or None


def _error_code(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    code = re.sub(r"^[^a-z]+", "", re.sub(r"[^a-z0-9_]+", "_", value.lower()))[:64]
    return code or None


def failure_of(cause: Optional[str], err: Optional[BaseException]) -> Dict[str, Any]:
    """The ``fail`` error for a lease that ended by ``cause`` (if aborted) or by ``err``."""
    if cause == "canceled":
        return {"code": "canceled", "message": "canceled by the caller", "retryable": False}
    if cause == "stopping":
        return {"code": "worker_stopping", "message": "the worker stopped before finishing", "retryable": True}
    if isinstance(err, UploadError):
        return {"code": "upload_failed", "message": cut(str(err), MAX_ERROR_MESSAGE), "retryable": err.retryable}
    code = _error_code(getattr(err, "code", None)) or "engine_error"
    retryable = getattr(err, "retryable", True)
    message = str(err) if err is not None and str(err) else (type(err).__name__ if err is not None else "failed")
    if not isinstance(err, WorkerError) and code == "engine_error" and err is not None:
        message = f"{type(err).__name__}: {message}"
    return {"code": code, "message": cut(message, MAX_ERROR_MESSAGE), "retryable": retryable if isinstance(retryable, bool) else True}


def final_frame(lease_id: str, fence: int, outcome: Dict[str, Any]) -> Dict[str, Any]:
    """The final report of an outcome; an output the gateway could not take fails, saying why."""
    if outcome["type"] == "complete":
        try:
            text = json.dumps({**outcome, "lease_id": lease_id, "fence": fence}, allow_nan=False)
        except (TypeError, ValueError) as e:
            return {"type": "fail", "error": {"code": "bad_output", "message": cut(f"the output is not JSON: {e}", MAX_ERROR_MESSAGE), "retryable": False}}
        if len(text.encode("utf-8")) > MAX_REPORT_BYTES:
            return {"type": "fail", "error": {"code": "output_too_large", "message": f"the output is over {MAX_REPORT_BYTES} bytes of JSON; return large results as files", "retryable": False}}
    return outcome
