"""Running leases: a free slot, the handler, its frames, the uploads, the final report and its answer.

Every frame of a lease is answered in order (an ``ack`` or an ``error`` naming the lease), so the
runner counts them: a frame the gateway could not take (``unavailable``) goes again, and the
final report waits for the answers to the frames before it (docs/worker-protocol.md, "Leases").
Cancels and other endings are in lease_endings.py; a rank lease's frames in rank_stream.py.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .calls import in_daemon_thread, is_async
from .errors import JobCancelled, WorkerError
from .http_retry import Aborted
from .input_files import LeaseInputFiles
from .job import Job
from .lease_endings import LeaseEndings
from .outcome import failure_of, final_frame, split_result, usage_of
from .lease_state import Answer, LeaseState
from .rank_stream import JobRank
from .protocol import DELTA_SEQ_PROTOCOL, USAGE_PROTOCOL, MAX_LOG_LINE, MAX_OUTPUT_DELTA, MAX_PROGRESS_MESSAGE, chunks, cut, parse_lease
from .upload import upload_artifact

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .worker import Worker

#: Frames held per lease while it moves to another instance; beyond, they are dropped.
MAX_HELD_FRAMES = 1_000


class LeaseRunner(LeaseEndings):
    """Runs the leases of a worker (see the module's docstring)."""

    def __init__(self, worker: "Worker") -> None:
        self.worker = worker
        self.log: logging.Logger = worker.log
        self.leases: Dict[str, LeaseState] = {}
        self.pending: List[LeaseState] = []
        #: Handler calls (and their uploads) in flight, including ones of lost connections winding down.
        self.busy = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # -- leases arriving ---------------------------------------------------------------------

    def on_lease(self, conn: "Connection", frame: Dict[str, Any]) -> None:
        info = parse_lease(frame)
        if info is None:
            self.log.error("ignoring a malformed lease frame (lease_id %s)", frame.get("lease_id"))
            return
        lease = LeaseState(info, conn)
        if info.rank is not None:
            # From now on: the frames of the rank before may come before the handler starts.
            lease.rank = JobRank(lease, self.loop, self.log)
        self.leases[info.lease_id] = lease
        conn.leases.add(info.lease_id)
        self.log.debug("lease %s (run %s, %s, attempt %d)", info.lease_id, info.run_id, info.kind, info.attempt)
        self.worker.emit("lease", info)
        self.pending.append(lease)
        self.pump()

    def pump(self) -> None:
        """Starts waiting leases while slots are free (not while stopping: those go back with the socket)."""
        while self.worker.may_start() and self.busy < self.worker.slots and self.pending:
            lease = self.pending.pop(0)
            if lease.phase != "pending" or (lease.conn.closed and not lease.moving):
                continue
            lease.phase = "running"
            self.busy += 1
            asyncio.ensure_future(self._run(lease))

    # -- running -----------------------------------------------------------------------------

    async def _run(self, lease: LeaseState) -> None:
        info = lease.info
        files = lease.files = LeaseInputFiles(info.files, info.upload_token, self.worker.input_files)
        try:
            lease.task = asyncio.ensure_future(self._execute(lease, files))
            try:
                outcome = await lease.task
            except asyncio.CancelledError:
                outcome = {"type": "fail", "error": failure_of(lease.cause, None)}
            except BaseException as err:  # the handler's code: anything may come out of it
                outcome = {"type": "fail", "error": failure_of(lease.cause, err)}
        finally:
            if lease.rank is not None:
                lease.rank.close(JobCancelled(lease.cause or "the handler has returned: the lease's frames are over"))
            await files.dispose()
            self.busy -= 1
        if not lease.cause:
            # Told before the failure is reported, so the gateway does not hand the retry straight back.
            if outcome["type"] == "complete":
                self.worker.backend_watch.succeeded()
            elif outcome["error"]["code"] == "upstream_unavailable":
                self.worker.backend_watch.unavailable(outcome["error"]["message"])
        self._flush_progress(lease, send=False)
        await self._report(lease, outcome)
        self.pump()
        self.worker.settled()

    async def _execute(self, lease: LeaseState, files: LeaseInputFiles) -> Dict[str, Any]:
        info = lease.info
        handler = self.worker.handler_for(info.kind)
        if handler is None:
            raise WorkerError(f"this worker has no handler for {info.kind}", "unsupported_kind", True)
        job = Job(self, lease, files, self.loop)
        if is_async(handler):
            result = await handler(job)
        else:
            lease.in_thread = True
            try:
                # Not cancellable: the thread runs on, so its slot stays taken until it returns.
                result = await asyncio.shield(in_daemon_thread(handler, (job,), f"switchyard-{info.lease_id}"))
            finally:
                lease.in_thread = False
            if inspect.isawaitable(result):
                result = await result
        if lease.cause:
            raise Aborted("aborted")
        rank = lease.rank
        if rank is not None:
            # Its stream ends (if the handler did not end it) before its report goes out.
            await rank.end()
            if not rank.last:
                if result is not None:
                    self.log.warning("lease %s: rank %d of %d returned a result; only the last rank's output counts, so it is ignored", info.lease_id, rank.index, rank.count)
                return {"type": "complete", "output": {"urls": []}}
        artifacts, extra = split_result(result)
        urls: List[str] = []
        for artifact in artifacts:
            uploaded = await self.loop.run_in_executor(None, upload_artifact, info.upload_url, info.upload_token, artifact, self.worker.upload, lease.cancel_event)
            urls.append(uploaded.url)
        if lease.cause:
            raise Aborted("aborted")
        usage = usage_of(info.kind, artifacts, extra)
        return {"type": "complete", "output": {**extra, "urls": urls}, **({"usage": usage} if usage else {})}

    # -- frames while running ----------------------------------------------------------------

    def progress(self, lease: LeaseState, fraction: Any, message: Optional[str] = None) -> None:
        if lease.phase != "running" or lease.cause:
            return
        try:
            p = float(fraction)
        except (TypeError, ValueError):
            return
        if p != p:  # NaN
            return
        pending: Dict[str, Any] = {"progress": min(1.0, max(0.0, p))}
        if isinstance(message, str):
            pending["message"] = cut(message, MAX_PROGRESS_MESSAGE)
        lease.pending_progress = pending
        if lease.progress_timer is not None:
            return
        wait = lease.last_progress_at + self.worker.progress_interval - time.monotonic()
        if wait <= 0:
            self._flush_progress(lease, send=True)
        else:
            lease.progress_timer = self.loop.call_later(wait, self._flush_progress, lease, True)

    def _flush_progress(self, lease: LeaseState, send: bool) -> None:
        if lease.progress_timer is not None:
            lease.progress_timer.cancel()
            lease.progress_timer = None
        p, lease.pending_progress = lease.pending_progress, None
        if not send or p is None or lease.phase != "running" or lease.cause:
            return
        lease.last_progress_at = time.monotonic()
        self.send_lease(lease, {"type": "progress", **p})

    def log_line(self, lease: LeaseState, line: str) -> None:
        if lease.phase == "running" and not lease.cause:
            self.send_lease(lease, {"type": "log", "line": cut(line, MAX_LOG_LINE)})

    def output(self, lease: LeaseState, delta: str) -> None:
        if lease.phase != "running" or lease.cause:
            return
        if lease.rank is not None and not lease.rank.last:
            if not lease.warned_output:
                lease.warned_output = True
                self.log.warning("lease %s: streamed output is the last rank's; rank %d's is not sent", lease.info.lease_id, lease.rank.index)
            return
        for part in chunks(delta, MAX_OUTPUT_DELTA):
            lease.output_seq += 1
            self.send_lease(lease, {"type": "output", "delta": part, "seq": lease.output_seq})

    def send_lease(self, lease: LeaseState, frame: Dict[str, Any]) -> bool:
        """Sends a lease frame, or holds it while the lease moves to another instance."""
        if lease.moving:
            if len(lease.held) < MAX_HELD_FRAMES:
                lease.held.append(frame)
            else:
                self.log.warning("too many frames held while moving; dropping a %s frame", frame.get("type"))
            return True
        if lease.conn.closed:
            return False
        wire = frame
        if frame["type"] == "output" and lease.conn.protocol < DELTA_SEQ_PROTOCOL:
            # An instance older than protocol 4 refuses a field it does not know.
            wire = {k: v for k, v in frame.items() if k != "seq"}
        elif frame["type"] == "complete" and lease.conn.protocol < USAGE_PROTOCOL:
            # Nor one older than protocol 7 a usage report.
            wire = {k: v for k, v in frame.items() if k != "usage"}
        if not lease.conn.send({**wire, "lease_id": lease.info.lease_id, "fence": lease.info.fence}):
            return False
        lease.sent += 1
        lease.unanswered.append(frame)
        return True

    # -- the final report --------------------------------------------------------------------

    async def _report(self, lease: LeaseState, outcome: Dict[str, Any]) -> None:
        info = lease.info
        if lease.cause == "canceled":
            outcome = {"type": "fail", "error": failure_of("canceled", None)}
        if lease.cause == "pipeline_ended":
            # Said at info when the cancel came; the gateway ended the lease, so nothing to report.
            self.drop(lease, f"its pipeline ended: {lease.pipeline_ended}", logging.DEBUG)
            return
        if lease.cause in ("disconnected", "stale") or (lease.conn.closed and not lease.moving):
            reason = lease.lost_in_move or ("the gateway said the lease is stale" if lease.cause == "stale" else "the connection was lost")
            self.drop(lease, reason)
            return
        frame = final_frame(info.lease_id, info.fence, outcome)
        lease.phase = "reporting"
        answered: "asyncio.Future[Answer]" = self.loop.create_future()

        def on_answer(answer: Answer) -> None:
            if lease.final_timer is not None:
                lease.final_timer.cancel()
            lease.on_final_answer = None
            if not answered.done():
                answered.set_result(answer)

        lease.on_final_answer = on_answer
        lease.final = frame
        self.send_final(lease)
        answer = await answered
        lease.phase = "done"
        self._forget(lease)
        if answer["ok"]:
            if frame["type"] == "complete":
                self.log.info("completed %s (run %s, %s)", info.lease_id, info.run_id, info.kind)
                self.worker.emit("completed", info, frame["output"])
            else:
                err = frame["error"]
                level = logging.INFO if err["code"] == "canceled" else logging.WARNING
                self.log.log(level, "failed %s (run %s): %s %s", info.lease_id, info.run_id, err["code"], err["message"])
                self.worker.emit("failed", info, err)
        else:
            self.log.warning("the gateway did not take the %s of %s: %s %s", frame["type"], info.lease_id, answer.get("code"), answer.get("message"))
            self.worker.emit("dropped", info, f"{frame['type']} not acknowledged: {answer.get('code')}: {answer.get('message')}")

    def send_final(self, lease: LeaseState) -> None:
        """Sends the final report once the lease's earlier frames are answered (and it is not moving)."""
        if lease.moving:
            return
        if lease.final_timer is not None:
            lease.final_timer.cancel()
        if lease.unanswered or lease.resend:
            lease.final_held = True
            # An earlier answer that never comes holds it no longer than this.
            lease.final_timer = self.loop.call_later(self.worker.report_timeout, self._send_held_final, lease, True)
            return
        self._send_held_final(lease, True)

    def _send_held_final(self, lease: LeaseState, now: bool) -> None:
        if lease.moving or (not now and (lease.unanswered or lease.resend)):
            return
        if lease.final_timer is not None:
            lease.final_timer.cancel()
        lease.final_held = False
        frame = lease.final
        assert frame is not None
        if not self.send_lease(lease, frame):
            if lease.on_final_answer:
                lease.on_final_answer({"ok": False, "code": "disconnected", "message": "the connection was lost"})
            return
        lease.final_index = lease.sent
        lease.final_type = frame["type"]
        timeout = self.worker.report_timeout

        def no_answer() -> None:
            if lease.on_final_answer:
                lease.on_final_answer({"ok": False, "code": "no_answer", "message": f"no answer from the gateway in {timeout} s"})

        lease.final_timer = self.loop.call_later(timeout, no_answer)

    def on_answer(self, lease_id: Any, answer: Answer, count: int = 1) -> None:
        """An ack or an error naming a lease. Answers come in the order the frames were sent.

        ``count``: one ack of protocol 4 answers that many output frames of the lease, in order
        (never more than are waiting for an answer).
        """
        lease = self.leases.get(lease_id) if isinstance(lease_id, str) else None
        if lease is None:
            return
        for _ in range(max(1, min(count, len(lease.unanswered)))):
            if self.leases.get(lease.info.lease_id) is not lease:
                return
            self._answer(lease, answer)

    def _answer(self, lease: LeaseState, answer: Answer) -> None:
        lease.answered += 1
        frame = lease.unanswered.popleft() if lease.unanswered else None
        if lease.conn.moving:
            self.loop.call_soon(self.worker.mover.close_when_answered, lease.conn)
        if not answer["ok"] and answer.get("code") == "unavailable" and frame is not None:
            self._send_again_later(lease, frame)
            return
        lease.outage_retries = 0
        if lease.final_held and not lease.moving:
            self._send_held_final(lease, False)
        if not answer["ok"] and answer.get("code") == "stale_lease" and lease.phase != "reporting":
            self.log.warning("the gateway says lease %s is stale; dropping its work", lease.info.lease_id)
            self.abort(lease, "stale")
            if lease.phase == "pending":
                self.drop(lease, "the gateway said the lease is stale")
            return
        if lease.final_index is None:
            return
        # The answer to the final report is the last one; an ack naming it is enough even if an
        # earlier answer went missing (an `internal` error carries no lease id).
        if lease.answered >= lease.final_index or (answer["ok"] and answer.get("of") == lease.final_type):
            if lease.on_final_answer:
                lease.on_final_answer(answer)

    def _send_again_later(self, lease: LeaseState, frame: Dict[str, Any]) -> None:
        """The gateway could not reach its datastore for this frame: send it again after a growing pause."""
        final = frame is lease.final
        if (final or lease.final_held) and lease.final_timer is not None:
            lease.final_timer.cancel()
        if final:
            lease.final_index = None
        lease.resend.append(frame)
        if lease.resend_timer is not None:
            return
        delay = min(0.1 * 2 ** lease.outage_retries, 2.0)
        lease.outage_retries += 1
        self.log.warning("the gateway cannot reach its datastore; sending the %s frame of %s again in %.1f s", frame.get("type"), lease.info.lease_id, delay)
        conn = lease.conn

        def again() -> None:
            lease.resend_timer = None
            frames, lease.resend = lease.resend, []
            if self.leases.get(lease.info.lease_id) is not lease or lease.conn is not conn:
                return
            for f in frames:
                if f is not lease.final:
                    self.send_lease(lease, f)
            if lease.final_held or any(f is lease.final for f in frames):
                self.send_final(lease)

        lease.resend_timer = self.loop.call_later(delay, again)
        conn.timers.append(lease.resend_timer)
