"""What the client returns: the job object and its parts as dataclasses (each keeps the JSON
it was read from as ``raw``), and the other answers as TypedDicts of the JSON itself."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from typing import Literal, TypedDict

__all__ = [
    "Status", "TERMINAL_STATUSES", "Job", "JobOutput", "OutputFile", "JobError", "JobPage", "Event",
    "File", "FilePage", "FileQuota", "Capabilities", "KindCapability", "Capacity",
]

Status = Literal["queued", "running", "succeeded", "failed", "canceled"]
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "canceled"})


@dataclass
class OutputFile:
    """One artifact of a succeeded run: ``output.files[i]`` (docs/api.md, "The job object")."""

    url: str
    name: str
    content_type: Optional[str] = None
    size: Optional[int] = None
    sha256: Optional[str] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "OutputFile":
        return cls(url=d.get("url", ""), name=d.get("name", ""), content_type=d.get("content_type"),
                   size=d.get("size"), sha256=d.get("sha256"))


@dataclass
class JobOutput:
    """A succeeded run's output: ``urls``, ``files``, and ``fields``, every field of the output
    as sent (an llm run's ``text``, an image's ``width``...)."""

    urls: List[str]
    files: List[OutputFile]
    fields: Dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


@dataclass
class JobError:
    """A failed or canceled run's ``{code, message, retryable}``. Run error codes are not API
    error codes."""

    code: str
    message: str
    retryable: bool = False
    #: The attempt it happened on (0: the job never started); None from an older gateway.
    attempt: Optional[int] = None


@dataclass
class Job:
    """The job object (``GET /v1/jobs/{run_id}``), or a submission's 202 answer.

    ``terminal`` is the gateway's flag, or derived from ``status`` for the 202 of a submission,
    which has none; ``raw`` is the JSON as received (a dict).
    """

    run_id: str
    kind: str
    status: str
    terminal: bool
    raw: Dict[str, Any] = field(repr=False)
    confidentiality: Optional[str] = None
    job_class: Optional[str] = None
    priority: Optional[int] = None
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    progress: Optional[float] = None
    attempts: Optional[int] = None
    #: Deadlines (docs/jobs.md): seconds it may wait to start and each attempt may run, when it
    #: expires unstarted, and while running when the attempt times out; None: none.
    ttl_s: Optional[int] = None
    timeout_s: Optional[int] = None
    expires_at: Optional[str] = None
    timeout_at: Optional[str] = None
    #: Attempts (docs/jobs.md): leases it may use, whether a timeout is retried, and every
    #: attempt, oldest first (dicts: attempt, worker, tier, started_at, ended_at, error).
    max_attempts: Optional[int] = None
    retry_on_timeout: Optional[bool] = None
    attempt_history: List[Dict[str, Any]] = field(default_factory=list)
    queue_position: Optional[int] = None
    waiting_reason: Optional[str] = None
    #: With ``waiting_reason`` ``no_worker_for_rank``: the ranks of its ranked model no worker
    #: could hold now, 0-based, ascending (docs/ranks.md); None otherwise.
    waiting_ranks: Optional[List[int]] = None
    output: Optional[JobOutput] = None
    error: Optional[JobError] = None
    attestation: Optional[Dict[str, Any]] = None
    warnings: List[Dict[str, Any]] = field(default_factory=list)
    #: The batch it was submitted in (``Client.submit_batch``); None: submitted alone.
    batch_id: Optional[str] = None
    #: ``{"reserved": n, "charged": n or None}``: credits held at submission and taken when it
    #: ended (docs/jobs.md, "Cost"); ``usage``: what the worker reported it used, or None.
    cost: Optional[Dict[str, Any]] = None
    usage: Optional[Dict[str, Any]] = None
    #: Only from ``Client.get(run_id, include=["input"])``: the input as the gateway stored it,
    #: file fields as the references the run used (docs/api.md); None otherwise.
    input: Optional[Dict[str, Any]] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Job":
        if not isinstance(d, dict) or not isinstance(d.get("run_id"), str):
            raise ValueError("not a job object")
        status = d.get("status", "")
        terminal = d["terminal"] if isinstance(d.get("terminal"), bool) else status in TERMINAL_STATUSES
        out = d.get("output")
        output = None
        if isinstance(out, dict):
            output = JobOutput(urls=list(out.get("urls") or []),
                               files=[OutputFile.from_json(f) for f in out.get("files") or [] if isinstance(f, dict)],
                               fields=dict(out))
        err = d.get("error")
        error = JobError(code=err.get("code", ""), message=err.get("message", ""), retryable=bool(err.get("retryable")), attempt=err.get("attempt")) if isinstance(err, dict) else None
        return cls(run_id=d["run_id"], kind=d.get("kind", ""), status=status, terminal=terminal, raw=d,
                   confidentiality=d.get("confidentiality"), job_class=d.get("class"), priority=d.get("priority"),
                   created_at=d.get("created_at"), started_at=d.get("started_at"), finished_at=d.get("finished_at"),
                   progress=d.get("progress"), attempts=d.get("attempts"), queue_position=d.get("queue_position"),
                   ttl_s=d.get("ttl_s"), timeout_s=d.get("timeout_s"), expires_at=d.get("expires_at"), timeout_at=d.get("timeout_at"),
                   waiting_reason=d.get("waiting_reason"), max_attempts=d.get("max_attempts"), retry_on_timeout=d.get("retry_on_timeout"),
                   attempt_history=list(d.get("attempt_history") or []),
                   waiting_ranks=list(d["waiting_ranks"]) if isinstance(d.get("waiting_ranks"), list) else None,
                   output=output, error=error,
                   attestation=d.get("attestation"), warnings=list(d.get("warnings") or []), batch_id=d.get("batch_id"),
                   cost=d.get("cost") if isinstance(d.get("cost"), dict) else None,
                   usage=d.get("usage") if isinstance(d.get("usage"), dict) else None,
                   input=d.get("input") if isinstance(d.get("input"), dict) else None)


@dataclass
class JobPage:
    """One page of ``GET /v1/jobs``; ``next_cursor`` is None on the last page."""

    data: List[Job]
    next_cursor: Optional[str]


@dataclass
class Event:
    """One event of a run's stream: ``id`` (1, 2, 3... per run), ``event`` (``status``,
    ``progress``, ``log``, ``output`` or ``done``) and ``data``, the JSON as sent.
    ``job`` is the job object of ``status`` and ``done`` events, None for the others."""

    id: int
    event: str
    data: Any
    job: Optional[Job] = None

    @property
    def progress(self) -> Optional[float]:
        """A ``progress`` event's fraction (0 to 1)."""
        return self.data.get("progress") if self.event == "progress" and isinstance(self.data, dict) else None

    @property
    def message(self) -> Optional[str]:
        """A ``progress`` event's message, or a ``log`` event's line."""
        if not isinstance(self.data, dict):
            return None
        return self.data.get("message") if self.event == "progress" else self.data.get("line") if self.event == "log" else None

    @property
    def delta(self) -> Optional[str]:
        """An ``output`` event's streamed text."""
        return self.data.get("delta") if self.event == "output" and isinstance(self.data, dict) else None


@dataclass
class File:
    """A file of the account (``POST /v1/files``, docs/files.md)."""

    id: str
    url: str
    filename: Optional[str]
    content_type: str
    size: int
    sha256: str
    created_at: str
    expires_at: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "File":
        if not isinstance(d, dict) or not isinstance(d.get("id"), str):
            raise ValueError("not a file object")
        return cls(id=d["id"], url=d.get("url", ""), filename=d.get("filename"), content_type=d.get("content_type", ""),
                   size=d.get("size", 0), sha256=d.get("sha256", ""), created_at=d.get("created_at", ""),
                   expires_at=d.get("expires_at"), raw=d)


@dataclass
class FileQuota:
    """The account's file storage: ``used_bytes`` that all of its files hold now (not only one
    page's), of ``quota_bytes`` (the gateway's ``FILE_QUOTA_BYTES``)."""

    used_bytes: int
    quota_bytes: int

    @classmethod
    def from_json(cls, d: Any) -> Optional["FileQuota"]:
        if not isinstance(d, dict):
            return None
        return cls(used_bytes=d.get("used_bytes", 0), quota_bytes=d.get("quota_bytes", 0))


@dataclass
class FilePage:
    """One page of ``GET /v1/files``; ``next_cursor`` is None on the last page. ``quota`` is
    None from a gateway that does not send it."""

    data: List[File]
    next_cursor: Optional[str]
    quota: Optional[FileQuota] = None


class WorkersByTier(TypedDict):
    open: int
    trusted: int
    private: int


class OutputArtifact(TypedDict):
    name: str
    content_type: str
    description: str
    always: bool


class KindCapability(TypedDict, total=False):
    """One kind of ``GET /v1/capabilities``."""

    kind: str
    rollout: str
    description: str
    workers: int
    workers_by_tier: WorkersByTier
    input_schema: Dict[str, Any]
    output_artifacts: List[OutputArtifact]
    output_schema: Dict[str, Any]
    models: List[Dict[str, Any]]


class Capabilities(TypedDict):
    """``GET /v1/capabilities``: every kind, its schemas, outputs and live workers."""

    kinds: List[KindCapability]


class Capacity(TypedDict, total=False):
    """``GET /v1/network/capacity``: live fleet capacity (no key needed)."""

    workers: Dict[str, Any]
    slots: Dict[str, int]
    jobs: Dict[str, int]
    by_kind: List[Dict[str, Any]]
    updated_at: str
