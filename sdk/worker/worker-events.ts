import type { ErrorFrame, FailureReport, LeaseInfo, RegisteredInfo } from '../protocol/index.js';

export interface DisconnectInfo {
  code: number;
  reason: string;
  /** When the next try starts; null when the worker does not reconnect (stopping, refused). */
  reconnectInMs: number | null;
}

/** An `error` frame from the gateway, as the `gateway-error` event passes it on. */
export type GatewayErrorFrame = Pick<ErrorFrame, 'code' | 'message' | 'lease_id'>;

export interface SwitchyardWorkerEvents {
  registered: [info: RegisteredInfo];
  lease: [lease: LeaseInfo];
  /** The gateway acknowledged the `complete` of this lease. */
  completed: [lease: LeaseInfo, output: Record<string, unknown>];
  /** The gateway acknowledged the `fail` of this lease (including cancels: code `canceled`). */
  failed: [lease: LeaseInfo, error: FailureReport];
  /** The lease ended without an acknowledged report: lost with its connection, stale, or its report refused. */
  dropped: [lease: LeaseInfo, reason: string];
  disconnected: [info: DisconnectInfo];
  /** The gateway refused this worker for good (bad token, tier not allowed, bad register); the worker has stopped. */
  refused: [error: WorkerRefusedError];
  /** The backend stopped answering (no leases taken) or answers again (`backend` option). */
  backend: [state: { available: boolean; message?: string }];
  /** An `error` frame from the gateway. */
  'gateway-error': [frame: GatewayErrorFrame];
  stopped: [];
}

/**
 * How the pieces of the worker raise its events: every event is emitted by the
 * `SwitchyardWorker` itself, whichever piece noticed it.
 */
export type EmitWorkerEvent = <E extends keyof SwitchyardWorkerEvents>(event: E, ...args: SwitchyardWorkerEvents[E]) => void;

/** The gateway will not take this worker: retrying would not help. */
export class WorkerRefusedError extends Error {
  override readonly name = 'WorkerRefusedError';
  constructor(
    message: string,
    /** The gateway's error code (`unauthorized`, `forbidden`, `bad_frame`, `superseded`...). */
    readonly code: string,
    /** The WebSocket close code (4400, 4401, 4403, 4409) or the HTTP status of a refused upgrade (401). */
    readonly status: number,
  ) {
    super(message);
  }
}
