"""The wire contract (docs/worker-protocol.md): versions, limits, the socket URL, lease frames.

Mirrors sdk/protocol/ of the TypeScript sources; test/python-protocol-drift.test.ts fails when
a constant here differs from (or lacks) the one exported there.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence
from urllib.parse import urljoin, urlsplit, urlunsplit

PROTOCOL_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
#: The first version with ``reconnect`` and ``resume``: leases survive a move to another instance.
HANDOVER_PROTOCOL = 2
#: The first version with ``models`` in ``register`` and the ``models`` frame.
MODELS_PROTOCOL = 3
#: The first version whose ``ack`` may answer several ``output`` frames of a lease at once (``count``).
BATCH_ACK_PROTOCOL = 4
#: The first version whose ``output`` frames carry a per-lease ``seq`` the gateway dedupes by.
DELTA_SEQ_PROTOCOL = 4
#: The first version with ``identity`` in ``register`` and the ``backend`` frame.
IDENTITY_PROTOCOL = 5
BACKEND_STATE_PROTOCOL = 5
#: The first version whose models may carry ``rank`` (``{"index", "count"}``): one pipeline stage of a model.
RANKS_PROTOCOL = 6
#: The first version whose ``complete`` may carry ``usage`` (tokens, seconds, images): what a per-unit price charges.
USAGE_PROTOCOL = 7
#: The close code (and ``error`` code) of a connection retired because its identity registered again.
SUPERSEDED_CLOSE = 4409
SUPERSEDED_CODE = "superseded"

WORKER_PATH = "/v1/workers/connect"
MAX_FRAME_BYTES = 1024 * 1024
#: Protocol 6: the binary frames that carry a pipeline's activations between ranks (pipeline_frame.py).
PIPELINE_FRAME_MAGIC = "SYPF"
PIPELINE_FRAME_VERSION = 1
PIPELINE_HEADER_BYTES = 32
#: The largest payload of one pipeline frame: MAX_FRAME_BYTES - PIPELINE_HEADER_BYTES.
MAX_PIPELINE_PAYLOAD = 1_048_544
#: Limits in UTF-16 code units, as the gateway counts them.
MAX_LOG_LINE = 10_000
MAX_OUTPUT_DELTA = 100_000
MAX_PROGRESS_MESSAGE = 1_000
MAX_ERROR_MESSAGE = 2_000
MAX_HEARTBEAT_LEASES = 64
MAX_WORKER_MODELS = 256
MODEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
#: A model's ``input_schema``, in bytes of JSON.
MAX_MODEL_SCHEMA_BYTES = 64 * 1024
MAX_MODEL_DESCRIPTION = 1_000
#: ``register.identity``: letters, digits and ``._:-``, starting with a letter or digit, 1-128 long.
WORKER_IDENTITY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_BACKEND_MESSAGE = 1_000
#: The most ranks (pipeline stages) a model may be split into.
MAX_RANKS = 64
TIERS = ("open", "trusted", "private")


def worker_socket_url(gateway: str) -> str:
    """The gateway's WebSocket URL for a base URL: http -> ws, https -> wss, plus the worker path."""
    parts = urlsplit(gateway)
    schemes = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
    if parts.scheme not in schemes or not parts.netloc:
        raise ValueError(f"the gateway URL must be http(s):// (or ws(s)://), not {gateway!r}")
    path = parts.path
    if not path.endswith(WORKER_PATH):
        path = path.rstrip("/") + WORKER_PATH
    return urlunsplit((schemes[parts.scheme], parts.netloc, path, "", ""))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, max_units: int) -> str:
    """``text`` cut to at most ``max_units`` UTF-16 units, never splitting a character."""
    if len(text) <= max_units // 2 or utf16_len(text) <= max_units:
        return text
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > max_units:
            return text[:i]
    return text


def chunks(text: str, max_units: int) -> List[str]:
    out: List[str] = []
    rest = text
    while utf16_len(rest) > max_units:
        part = cut(rest, max_units)
        out.append(part)
        rest = rest[len(part):]
    if rest or not out:
        out.append(rest)
    return out


@dataclass
class InputFileRef:
    """An entry of a lease's ``files``: the gateway's staged copy of an input file."""

    url: str
    size: int
    content_type: str
    sha256: str


@dataclass
class LeaseRank:
    """Protocol 6: which stage of which pipeline a rank lease is (docs/ranks.md)."""

    #: 0 to ``count - 1``: rank 0 is given the job's input, rank ``count - 1`` makes its output.
    index: int
    count: int
    #: The pipeline's id (``pip_...``), shared by every rank lease of one attempt of the job.
    pipeline_id: str
    #: The model the pipeline runs.
    model: str
    #: The worker id holding each rank, by index.
    workers: List[str]


@dataclass
class LeaseInfo:
    """A lease as the gateway sent it."""

    lease_id: str
    fence: int
    run_id: str
    kind: str
    tier: str
    attempt: int
    input: Dict[str, Any]
    upload_url: str
    upload_token: str
    files: Dict[str, InputFileRef] = field(default_factory=dict)
    #: Protocol 6: set for one rank of a pipeline (only rank 0 is given the input), None for a whole lease.
    rank: Optional[LeaseRank] = None


_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_lease(frame: Mapping[str, Any]) -> Optional[LeaseInfo]:
    """The lease of a ``lease`` frame, or None when a field the worker needs is missing."""
    lease_id, fence, run_id, kind = frame.get("lease_id"), frame.get("fence"), frame.get("run_id"), frame.get("kind")
    upload_url, upload_token = frame.get("upload_url"), frame.get("upload_token")
    if not all(isinstance(v, str) for v in (lease_id, run_id, kind, upload_url, upload_token)):
        return None
    if not isinstance(fence, int) or isinstance(fence, bool):
        return None
    attempt = frame.get("attempt")
    data = frame.get("input")
    rank = None
    if frame.get("rank") is not None:
        # A rank lease's id travels in the pipeline frames' headers as 16 bytes: lse_ and 32 hex digits.
        rank = _parse_rank(frame["rank"])
        if rank is None or not _PIPELINE_LEASE_ID.match(lease_id):  # type: ignore[arg-type]
            return None
    return LeaseInfo(
        lease_id=lease_id,  # type: ignore[arg-type]
        fence=fence,
        run_id=run_id,  # type: ignore[arg-type]
        kind=kind,  # type: ignore[arg-type]
        tier=str(frame.get("tier") or "open"),
        attempt=attempt if isinstance(attempt, int) else fence,
        input=data if isinstance(data, dict) else {},
        upload_url=upload_url,  # type: ignore[arg-type]
        upload_token=upload_token,  # type: ignore[arg-type]
        files=_parse_files(frame.get("files"), upload_url),  # type: ignore[arg-type]
        rank=rank,
    )


_PIPELINE_LEASE_ID = re.compile(r"^lse_[0-9a-f]{32}$")


def _parse_rank(value: Any) -> Optional[LeaseRank]:
    if not isinstance(value, dict):
        return None
    index, count, pipeline_id, model, workers = (value.get(k) for k in ("index", "count", "pipeline_id", "model", "workers"))
    if not _is_int(index) or not _is_int(count) or not 0 <= index < count:
        return None
    if not isinstance(pipeline_id, str) or not isinstance(model, str):
        return None
    if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers):
        return None
    return LeaseRank(index, count, pipeline_id, model, list(workers))


def _parse_files(value: Any, base: str) -> Dict[str, InputFileRef]:
    """Well-formed entries with an http(s) URL only: the upload token goes nowhere else."""
    files: Dict[str, InputFileRef] = {}
    if not isinstance(value, dict):
        return files
    for name, entry in value.items():
        if not isinstance(entry, dict):
            continue
        url, size, ctype, sha = entry.get("url"), entry.get("size"), entry.get("content_type"), entry.get("sha256")
        if not isinstance(url, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            continue
        if not isinstance(sha, str) or not _SHA256.match(sha):
            continue
        resolved = urljoin(base, url)
        if urlsplit(resolved).scheme not in ("http", "https"):
            continue
        files[name] = InputFileRef(resolved, size, ctype if isinstance(ctype, str) else "application/octet-stream", sha.lower())
    return files


def check_models(models: Any, kinds: Sequence[str], slots: int) -> Dict[str, List[Dict[str, Any]]]:
    """Checks a model list against the protocol's limits; returns a copy. Raises ValueError."""
    if not isinstance(models, dict):
        raise ValueError("models must be a dict: kind -> [{id, description?, input_schema?, max_concurrency?, rank?}]")
    any_kind = "all" in kinds
    out: Dict[str, List[Dict[str, Any]]] = {}
    total = 0
    for kind, items in models.items():
        if not any_kind and kind not in kinds:
            raise ValueError(f"models lists the kind {kind}, which is not among the worker's kinds ({', '.join(kinds)})")
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"models of {kind} must be a list")
        total += len(items)
        if total > MAX_WORKER_MODELS:
            raise ValueError(f"a worker may list at most {MAX_WORKER_MODELS} models over all its kinds")
        seen = set()
        checked = []
        for m in items:
            if isinstance(m, str):
                m = {"id": m}
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                raise ValueError(f"each model of {kind} must be {{id, description?, input_schema?, max_concurrency?, rank?}} or an id")
            unknown = set(m) - {"id", "description", "input_schema", "max_concurrency", "rank"}
            if unknown:
                raise ValueError(f"the model {m['id']!r} ({kind}) has fields the protocol does not know: {', '.join(sorted(unknown))}")
            if not MODEL_ID_PATTERN.match(m["id"]):
                raise ValueError(f"{m['id']!r} ({kind}) is not a model id: 1-200 of letters, digits and ._:/@+-, starting with a letter or digit")
            if m["id"] in seen:
                raise ValueError(f"the model {m['id']} is listed twice for {kind}")
            seen.add(m["id"])
            desc = m.get("description")
            if desc is not None and (not isinstance(desc, str) or utf16_len(desc) > MAX_MODEL_DESCRIPTION):
                raise ValueError(f"the description of {m['id']} must be a string of at most {MAX_MODEL_DESCRIPTION} characters")
            schema = m.get("input_schema")
            if schema is not None and not isinstance(schema, dict):
                raise ValueError(f"the input_schema of {m['id']} must be a JSON Schema object")
            if schema is not None and len(json.dumps(schema, separators=(",", ":")).encode()) > MAX_MODEL_SCHEMA_BYTES:
                raise ValueError(f"the input_schema of {m['id']} is over {MAX_MODEL_SCHEMA_BYTES} bytes of JSON")
            mc = m.get("max_concurrency")
            if mc is not None and (not isinstance(mc, int) or isinstance(mc, bool) or mc < 1 or mc > slots):
                raise ValueError(f"max_concurrency of {m['id']} must be a whole number from 1 to the worker's slots ({slots})")
            if m.get("rank") is not None:
                m = {**m, "rank": _check_rank(m["rank"], m["id"])}
            checked.append({k: v for k, v in m.items() if v is not None})
        out[kind] = checked
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_rank(rank: Any, model_id: str) -> Dict[str, int]:
    """Protocol 6: ``{"index", "count"}``, rank ``index`` (0-based) of a model served in ``count`` stages."""
    if not isinstance(rank, dict) or set(rank) != {"index", "count"}:
        raise ValueError(f"the rank of {model_id} must be {{index, count}}")
    index, count = rank["index"], rank["count"]
    if not _is_int(count) or count < 2 or count > MAX_RANKS:
        raise ValueError(f"the rank count of {model_id} must be a whole number from 2 to {MAX_RANKS}")
    if not _is_int(index) or index < 0 or index >= count:
        raise ValueError(f"the rank index of {model_id} must be a whole number from 0 to {count - 1}")
    return {"index": index, "count": count}
