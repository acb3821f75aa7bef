"""Batches of jobs (``POST /v1/jobs/batch``, docs/jobs.md "Batches"): all accepted or none."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from .types import Job

__all__ = ["Batch", "BatchSubmitted"]


@dataclass
class BatchSubmitted:
    """The 202 of a batch: every job accepted, in the order sent. ``replayed`` is True when an
    earlier request with the same Idempotency-Key made the batch."""

    batch_id: str
    created_at: str
    size: int
    #: Credits reserved for all of its jobs.
    price: int
    jobs: List[Job]
    replayed: bool
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any], replayed: bool) -> "BatchSubmitted":
        return cls(batch_id=d["batch_id"], created_at=d.get("created_at", ""), size=d.get("size", 0), price=d.get("price", 0),
                   jobs=[Job.from_json(j) for j in d.get("jobs", [])], replayed=replayed, raw=d)


@dataclass
class Batch:
    """``GET /v1/batches/{batch_id}``, and the data of a batch stream's ``done``: its jobs by
    status now (``counts``) and whether every one has ended (``terminal``)."""

    batch_id: str
    created_at: str
    size: int
    price: int
    counts: Dict[str, int]
    terminal: bool
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Batch":
        return cls(batch_id=d["batch_id"], created_at=d.get("created_at", ""), size=d.get("size", 0), price=d.get("price", 0),
                   counts=dict(d.get("counts") or {}), terminal=bool(d.get("terminal")), raw=d)
