"""Leases moving from a stopping gateway instance to another one (protocol 2, "Moving to another instance").

On ``reconnect`` the old socket closes once its frames are answered; the leases wait, their
handlers still running and their frames held, to be claimed (``resume``) in the next
``register``; the new instance's ``registered`` says which it took back.
"""
from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set

from .protocol import DELTA_SEQ_PROTOCOL

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .lease import LeaseRunner
    from .lease_state import LeaseState
    from .worker import Worker

#: On ``reconnect``, how long the old socket stays open for answers to frames already sent.
MOVE_ANSWER_WAIT = 5.0


class LeaseMover:
    def __init__(self, worker: "Worker", runner: "LeaseRunner") -> None:
        self.worker = worker
        self.runner = runner
        self.moving: Set["LeaseState"] = set()
        self._tries = 0
        self._deadline: Optional[asyncio.TimerHandle] = None
        #: Past the lease TTL the old instance's lock has lapsed: nobody could take the lease back.
        self.lease_ttl = 30.0

    @property
    def size(self) -> int:
        return len(self.moving)

    def resume_claims(self) -> List[Dict[str, Any]]:
        """The ``resume`` claims of the next register, proven by the upload token only the lease frame carried."""
        return [{"lease_id": l.info.lease_id, "fence": l.info.fence, "upload_token": l.info.upload_token} for l in self.moving]

    def next_delay(self) -> float:
        """While leases are moving, retries are quick: they must be claimed before their TTL runs out."""
        cap = 0.0 if self._tries == 0 else min(1.0, 0.1 * 2 ** (self._tries - 1))
        self._tries += 1
        return cap / 2 + random.random() * cap / 2

    def registered(self, lease_ttl: float) -> None:
        self.lease_ttl = lease_ttl
        self._tries = 0

    def on_reconnect(self, conn: "Connection") -> None:
        """The instance is stopping: close once the frames sent are answered, then register again with ``resume``."""
        if conn.moving or conn.closed:
            return
        conn.moving = True
        for lease_id in list(conn.leases):
            lease = self.runner.leases.get(lease_id)
            if lease is not None and lease.rank is not None:
                self._lose_rank(lease)
            elif lease is not None and lease.phase != "done":
                lease.moving = True
        self.worker.log.info("the gateway asked to reconnect: moving %d lease(s) to another instance", len(conn.leases))
        # Answers that never come (an `internal` error carries no lease id) do not hold the move up.
        conn.timers.append(asyncio.get_running_loop().call_later(MOVE_ANSWER_WAIT, self._close_for_move, conn))
        self.close_when_answered(conn)

    def _lose_rank(self, lease: "LeaseState") -> None:
        """Protocol 6: a rank lease does not move to another instance; its pipeline runs again there.
        One reporting already waits for its answer on this socket."""
        if lease.phase in ("reporting", "done"):
            return
        lease.lost_in_move = "a rank lease does not move to another gateway instance (its pipeline runs again)"
        self.worker.log.warning("lease %s (run %s) lost: %s", lease.info.lease_id, lease.info.run_id, lease.lost_in_move)
        if lease.phase == "pending":
            self.runner.drop(lease, lease.lost_in_move)
        else:
            self.runner.abort(lease, "stale")

    def close_when_answered(self, conn: "Connection") -> None:
        if not conn.moving or conn.closed:
            return
        for lease_id in conn.leases:
            lease = self.runner.leases.get(lease_id)
            if lease is not None and lease.answered < lease.sent:
                return
        self._close_for_move(conn)

    def _close_for_move(self, conn: "Connection") -> None:
        if conn.closed:
            return
        conn.reconnect_now = True
        conn.close(1000, "moving to another instance")

    def hold_for_move(self, lease: "LeaseState") -> None:
        """The socket of a moving lease closed: it waits, still running, to be claimed on the next one."""
        lease.moving = True
        # A final report sent but not answered goes out again on the new socket. If the old
        # instance did handle it, the run has ended and the new one does not take the lease back.
        if lease.phase == "reporting" and lease.final_index is not None:
            if lease.final_timer is not None:
                lease.final_timer.cancel()
            lease.final_index = None
        if lease.conn.protocol >= DELTA_SEQ_PROTOCOL:
            lease.unacked.extend(f for f in lease.unanswered if f["type"] == "output")
        lease.sent = 0
        lease.answered = 0
        lease.unanswered.clear()
        self.moving.add(lease)
        if self._deadline is None:
            self._deadline = asyncio.get_running_loop().call_later(self.lease_ttl, self.lose_moves, f"not taken back within the lease TTL ({self.lease_ttl:g} s)")

    def settle(self, conn: "Connection", frame: Dict[str, Any]) -> None:
        """Applies the new instance's answer to the claims: resumed leases carry on, the others are lost."""
        resumed = set(frame.get("resumed") or [])
        self._clear_deadline()
        moves, self.moving = list(self.moving), set()
        lost = 0
        for lease in moves:
            lease.moving = False
            if lease.info.lease_id not in resumed:
                lost += 1
                self._lose(lease, "the gateway did not take the lease back")
                continue
            lease.conn = conn
            conn.leases.add(lease.info.lease_id)
            # Un-acked outputs first, as first sent; unnumbered here they could be logged twice, so
            # an instance older than protocol 4 does not get them (the text may miss them, as before).
            unacked, lease.unacked = lease.unacked, []
            if conn.protocol >= DELTA_SEQ_PROTOCOL:
                for f in unacked:
                    self.runner.send_lease(lease, f)
            held, lease.held = lease.held, []
            for f in held:
                self.runner.send_lease(lease, f)
            if lease.phase == "reporting" and lease.final is not None and lease.final_index is None:
                self.runner.send_final(lease)
        self.worker.log.info("leases moved to another gateway instance: %d resumed, %d lost", len(moves) - lost, lost)

    def lose_moves(self, reason: str) -> None:
        self._clear_deadline()
        moves, self.moving = list(self.moving), set()
        for lease in moves:
            lease.moving = False
            self._lose(lease, reason)
        self.worker.check_stopped()

    def _clear_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _lose(self, lease: "LeaseState", reason: str) -> None:
        """A lease that did not survive the move: its handler is aborted and nothing more is reported."""
        lease.held = []
        lease.unacked = []
        lease.lost_in_move = f"lost in the move to another gateway instance: {reason}"
        self.worker.log.warning("lease %s (run %s) lost in the move: %s", lease.info.lease_id, lease.info.run_id, reason)
        if lease.phase == "pending":
            self.runner.drop(lease, lease.lost_in_move)
        elif lease.phase == "reporting":
            if lease.on_final_answer:
                lease.on_final_answer({"ok": False, "code": "stale_lease", "message": lease.lost_in_move})
        else:
            self.runner.abort(lease, "stale")
