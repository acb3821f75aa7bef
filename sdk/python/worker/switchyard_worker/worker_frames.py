"""The frame half of ``Worker`` (a mixin, split out of worker.py for its size): the register it
sends, and how the gateway's frames reach the worker's pieces (runner, mover, backend watch)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from .protocol import IDENTITY_PROTOCOL, MODELS_PROTOCOL, SUPERSEDED_CODE
from .rank_stream import route_pipeline_frame

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .worker import Worker


class WorkerFrames:
    """Mixed into Worker: each method's ``self`` is the Worker."""

    def register_frame(self: "Worker") -> Dict[str, Any]:
        frame: Dict[str, Any] = {
            "type": "register",
            "protocol": self.protocols,
            "kinds": self.kinds,
            "tier": self.tier,
            "slots": self.slots,
            "hardware": self.hardware,
            "software": self.software,
        }
        if self.models is not None and MODELS_PROTOCOL in self.protocols:
            frame["models"] = self.models
        resume = self.mover.resume_claims()
        if resume:
            frame["resume"] = resume
        if IDENTITY_PROTOCOL in self.protocols and not self._identity_refused:
            frame["identity"] = self.identity
        return frame

    def on_identity_refused(self: "Worker") -> None:
        """An instance older than protocol 5 refused the register's ``identity``: the next register leaves it out."""
        self._identity_refused = True
        self.log.info("the gateway instance predates worker identities (protocol 5): registering without one")

    def on_frame(self: "Worker", conn: Connection, frame: Dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "registered":
            self._on_registered(conn, frame)
        elif kind == "lease":
            self.runner.on_lease(conn, frame)
        elif kind == "cancel":
            self.runner.on_cancel(frame)
        elif kind == "reconnect":
            self.mover.on_reconnect(conn)
        elif kind == "drain":
            conn.draining = True
            self.log.info("the gateway asked to drain: finishing current leases, then reconnecting")
            self.emit("drain")
            self.check_idle()
        elif kind == "ack":
            # Protocol 4: one ack for a batch of logged outputs stands for that many answers, in order.
            count = frame.get("count")
            many = isinstance(count, int) and not isinstance(count, bool) and count > 1
            self.runner.on_answer(frame.get("lease_id"), {"ok": True, "of": str(frame.get("of"))}, count if many else 1)
        elif kind == "error":
            self._on_error(conn, frame)
        elif kind == "models_accepted":
            self.log.debug("the gateway took the new model list")
        else:
            self.log.debug("ignoring a %s frame", kind)

    def on_pipeline_frame(self: "Worker", conn: Connection, data: bytes) -> None:
        """A binary frame: protocol 6's pipeline frames, for the rank lease they name."""
        route_pipeline_frame(self.runner, conn, data)

    def _on_registered(self: "Worker", conn: Connection, frame: Dict[str, Any]) -> None:
        if conn.registered:
            return
        hb = frame.get("heartbeat_ms")
        ttl = frame.get("lease_ttl_ms")
        heartbeat = hb / 1000 if isinstance(hb, (int, float)) and hb > 0 else 5.0
        self.connection.registered(conn, heartbeat)
        self.worker_id = str(frame.get("worker_id"))
        self.protocol = int(frame.get("protocol") or 1)
        conn.protocol = self.protocol
        self.mover.registered(ttl / 1000 if isinstance(ttl, (int, float)) else 30.0)
        self.log.info("registered as %s (protocol %d; %s; tier %s; %d slot(s))", self.worker_id, self.protocol, ", ".join(self.kinds), self.tier, self.slots)
        if self.mover.size > 0:
            self.mover.settle(conn, frame)
        self.backend_watch.registered()
        self.emit("registered", {"worker_id": self.worker_id, "protocol": self.protocol, "heartbeat_ms": hb, "lease_ttl_ms": ttl})
        if self._started is not None and not self._started.done():
            self._started.set_result(None)
        if self.state == "stopping":
            self.check_idle()

    def _on_error(self: "Worker", conn: Connection, frame: Dict[str, Any]) -> None:
        error = {"code": str(frame.get("code") or "unknown"), "message": str(frame.get("message") or "")}
        lease_id = frame.get("lease_id")
        if isinstance(lease_id, str):
            error["lease_id"] = lease_id
        self.emit("gateway_error", error)
        if not conn.registered or error["code"] == SUPERSEDED_CODE:
            # Superseded: another live process registered with this identity, and the gateway closes
            # this connection (4409) for good.
            self.connection.refused(conn, {"code": error["code"], "message": error["message"]})
        elif isinstance(lease_id, str):
            self.runner.on_answer(lease_id, {"ok": False, "code": error["code"], "message": error["message"]})
        else:
            self.log.warning("error frame from the gateway: %s %s", error["code"], error["message"])

    def on_socket_closed(self: "Worker", conn: Connection) -> None:
        """A socket closed: a lease moving with it waits for the next one; the others are lost."""
        for lease_id in list(conn.leases):
            lease = self.runner.leases.get(lease_id)
            if lease is None:
                continue
            # A rank lease does not move (its frames would be lost between instances): it is lost.
            if conn.moving and lease.phase != "done" and lease.rank is None:
                self.mover.hold_for_move(lease)
            else:
                self.runner.lost_with_connection(lease)
