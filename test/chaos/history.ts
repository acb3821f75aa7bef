/**
 * The recorded history of one chaos run: what the clients sent and were answered, what each
 * SSE follower saw, what the faults were and when, and the system's state once at rest. The
 * invariant checker (invariants.ts) reads nothing else.
 */

/** One HTTP attempt of a submission (a careful client retries with the same Idempotency-Key). */
export interface SubmitAttempt {
  key: string;
  front: number;
  at: number;
  /** HTTP status, or 0 for a network error (reset, refused, timeout). */
  status: number;
  runId?: string;
  error?: string;
}

/** One frame a follower received. */
export interface SeenEvent {
  id: number;
  event: string;
  /** Which connection (0 = first) it came on. */
  connection: number;
}

export interface FollowerRecord {
  runId: string;
  events: SeenEvent[];
  /** Connections opened after the first, each with Last-Event-ID. */
  resumes: number;
  sawDone: boolean;
}

/** A fault the scenario injected: 5xx inside [from, to] are declared, not violations. */
export interface OutageWindow {
  what: string;
  from: number;
  to: number;
}

/** A run as it stands at rest (GET /v1/jobs/{id}) plus its whole event log (Last-Event-ID: 0). */
export interface FinalRun {
  runId: string;
  status: string;
  /** error.code of a failed or canceled run. */
  errorCode: string | null;
  terminal: boolean;
  charged: number | null;
  reserved: number;
  attemptHistory: Array<{ attempt: number; worker: string; ended_at: string | null; error: { code: string } | null }>;
  /** The event log, as (id, event, status-of-a-status-event). */
  log: Array<{ id: number; event: string; status?: string; terminal?: boolean }>;
  /** When the harness first saw it terminal (ms since epoch); null if never. */
  terminalSeenAt: number | null;
}

export interface ChaosHistory {
  scenario: string;
  startedAt: number;
  submits: SubmitAttempt[];
  /** run_id of every 202 (or idempotent replay), with when it was first answered. */
  accepted: Map<string, number>;
  /** The run ids each Idempotency-Key was answered with. */
  runsByKey: Map<string, Set<string>>;
  followers: FollowerRecord[];
  outages: OutageWindow[];
  /** When the last fault ended (recovery is measured from here). */
  faultEndedAt: number;
  account: { id: string; startCredits: number; credits: number; reserved: number };
  /** Every run the account has (the listing), not only the ones a client saw accepted. */
  final: Map<string, FinalRun>;
  /** Submissions still without a definite answer when the load stopped. */
  unanswered: number;
}
