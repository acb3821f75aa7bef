"""One lease the worker holds, shared by the runner (which runs and reports it) and the mover
(which carries it to another gateway instance), so its frame bookkeeping survives a change of socket."""
from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional

from .input_files import LeaseInputFiles
from .protocol import LeaseInfo

if TYPE_CHECKING:  # pragma: no cover
    from .connection import Connection
    from .rank_stream import JobRank

Answer = Dict[str, Any]  # {"ok": True, "of": type} or {"ok": False, "code", "message"}


class LeaseState:
    """One lease, from its lease frame to the gateway's answer to its final report."""

    def __init__(self, info: LeaseInfo, conn: "Connection") -> None:
        self.info = info
        self.conn = conn
        #: canceled | stale | disconnected | stopping, once aborted.
        self.cause: Optional[str] = None
        self.phase = "pending"  # pending | running | reporting | done
        self.cancel_event = threading.Event()
        self.task: Optional["asyncio.Task[Any]"] = None
        #: True while a sync handler runs in its thread: cancelling the task would not stop it.
        self.in_thread = False
        self.files: Optional[LeaseInputFiles] = None
        self.sent = 0
        self.answered = 0
        #: The frames sent on this connection and not answered yet, oldest first (answers come in order).
        self.unanswered: Deque[Dict[str, Any]] = deque()
        #: The number of the lease's last output frame (each keeps its ``seq`` however often it is sent).
        self.output_seq = 0
        #: Output frames sent on a socket that closed before answering them, numbered on both ends:
        #: maybe logged, maybe not, they go again first on the socket the lease moves to if it
        #: numbers them too (the gateway drops the ones it logged). Acked frames are never among them.
        self.unacked: List[Dict[str, Any]] = []
        self.outage_retries = 0
        self.resend: List[Dict[str, Any]] = []
        self.resend_timer: Optional[asyncio.TimerHandle] = None
        self.final_index: Optional[int] = None
        self.final_type: Optional[str] = None
        self.on_final_answer: Optional[Callable[[Answer], None]] = None
        self.last_progress_at = 0.0
        self.pending_progress: Optional[Dict[str, Any]] = None
        self.progress_timer: Optional[asyncio.TimerHandle] = None
        self.moving = conn.moving
        self.held: List[Dict[str, Any]] = []
        self.final: Optional[Dict[str, Any]] = None
        self.final_timer: Optional[asyncio.TimerHandle] = None
        self.final_held = False
        self.lost_in_move: Optional[str] = None
        #: Protocol 6, a rank lease: its pipeline frames and what the handler sees of them.
        self.rank: Optional["JobRank"] = None
        #: The message of the ``cancel`` (reason ``pipeline_ended``) that ended it.
        self.pipeline_ended: Optional[str] = None
        #: A rank other than the last streamed output (dropped): said once.
        self.warned_output = False
