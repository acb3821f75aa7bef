"""The ending half of ``LeaseRunner`` (a mixin, split out of lease.py for its size): cancels,
lost connections, aborted handlers, and leases dropped without a report."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Dict

from .errors import JobCancelled
from .outcome import failure_of

if TYPE_CHECKING:  # pragma: no cover
    from .lease import LeaseRunner
    from .lease_state import LeaseState


class LeaseEndings:
    """Mixed into LeaseRunner: each method's ``self`` is the runner."""

    def on_cancel(self: "LeaseRunner", frame: Dict[str, Any]) -> None:
        lease_id = frame.get("lease_id")
        lease = self.leases.get(lease_id) if isinstance(lease_id, str) else None
        if lease is None:
            return
        if frame.get("reason") in ("pipeline_ended", "timed_out"):
            # The gateway has ended the lease already (its pipeline, or its attempt's timeout_s): nothing to report.
            message = frame.get("message")
            text = message if isinstance(message, str) and message else "no reason given"
            self.end_with_pipeline(lease, text if frame.get("reason") == "pipeline_ended" else f"the attempt timed out: {text}")
            return
        self.log.info("lease %s (run %s) canceled by the caller", lease.info.lease_id, lease.info.run_id)
        if lease.phase == "pending":
            lease.cause = "canceled"
            lease.phase = "running"
            if lease in self.pending:
                self.pending.remove(lease)

            async def report() -> None:
                await self._report(lease, {"type": "fail", "error": failure_of("canceled", None)})
                self.worker.settled()

            asyncio.ensure_future(report())
            return
        if lease.phase == "running":
            self.abort(lease, "canceled")

    def end_with_pipeline(self: "LeaseRunner", lease: "LeaseState", message: str) -> None:
        """Protocol 6: the gateway ended the lease's pipeline (a rank lost or failed, or the last
        rank finished). The lease is over there already: the handler stops, nothing is reported."""
        self.log.info("lease %s (run %s, rank %s) ended with its pipeline: %s", lease.info.lease_id, lease.info.run_id,
                      f"{lease.rank.index} of {lease.rank.count}" if lease.rank else "-", message)
        lease.pipeline_ended = message
        if lease.phase == "pending":
            lease.cause = "pipeline_ended"
            self.drop(lease, f"its pipeline ended: {message}", logging.DEBUG)
            self.worker.settled()
        elif lease.phase == "running":
            self.abort(lease, "pipeline_ended")
        # Reporting: the gateway refuses the report as stale, and that answer ends the lease.

    def lost_with_connection(self: "LeaseRunner", lease: "LeaseState") -> None:
        """Its socket closed and it is not moving: the handler stops, and nothing more is reported."""
        self.abort(lease, "disconnected")
        if lease.phase == "pending":
            self.drop(lease, "the connection closed before it started")
        elif lease.phase == "reporting" and lease.on_final_answer:
            lease.on_final_answer({"ok": False, "code": "disconnected", "message": "the connection closed before the gateway answered"})

    def abort(self: "LeaseRunner", lease: "LeaseState", cause: str) -> None:
        """Stops a running handler: an asyncio cancellation (async handlers) and the job's cancel flag."""
        if lease.phase in ("done", "reporting"):
            return
        if lease.cause is None:
            lease.cause = cause
        lease.cancel_event.set()
        if lease.rank is not None:
            # A handler waiting for a frame, or about to send one, hears it there too.
            lease.rank.close(JobCancelled(lease.cause))
        if lease.files is not None:
            lease.files.ended.set()
        if lease.task is not None and not lease.in_thread and not lease.task.done():
            lease.task.cancel()
        if lease.progress_timer is not None:
            lease.progress_timer.cancel()
            lease.progress_timer = None
        lease.pending_progress = None

    def drop(self: "LeaseRunner", lease: "LeaseState", reason: str, level: int = logging.WARNING) -> None:
        if lease.phase == "done":
            return
        lease.phase = "done"
        if lease in self.pending:
            self.pending.remove(lease)
        self._forget(lease)
        self.log.log(level, "lease %s (run %s) dropped: %s", lease.info.lease_id, lease.info.run_id, reason)
        self.worker.emit("dropped", lease.info, reason)

    def _forget(self: "LeaseRunner", lease: "LeaseState") -> None:
        if lease.progress_timer is not None:
            lease.progress_timer.cancel()
        if lease.rank is not None:
            lease.rank.close(JobCancelled("the lease is over"))
        self.leases.pop(lease.info.lease_id, None)
        lease.conn.leases.discard(lease.info.lease_id)
