import type { Tier } from '../models/kinds.js';

/**
 * Why a lease was lost, as a small fixed set (metric label values must stay bounded):
 * `disconnect` the worker's socket closed, `heartbeat` it went silent or its lock lapsed,
 * `gateway_lost` the gateway holding it died (found when the stalled checker's requeue is
 * leased again), `shutdown` this gateway stopped before the worker finished.
 */
export const LEASE_LOSS_REASONS = ['disconnect', 'heartbeat', 'gateway_lost', 'shutdown'] as const;
export type LeaseLossReason = (typeof LEASE_LOSS_REASONS)[number];

/**
 * What the dispatcher reports about its own work (metrics). Optional: dispatch works the same
 * without one, and it keeps dispatch free of the API's metric types.
 */
export interface DispatchObserver {
  /** A job fetched from its queue went out to a worker as a lease frame `seconds` after the fetch. */
  leaseSent(kind: string, tier: Tier, seconds: number): void;
  leaseLost(reason: LeaseLossReason): void;
  /** A run went back to its queue (a lost lease or a retryable failure) to run again. */
  requeued(kind: string, tier: Tier): void;
}
