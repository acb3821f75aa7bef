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
 * How a pipeline ended, as counted by the instance that ended it (docs/ranks.md, "What ends a
 * pipeline"): its last rank `finished`, a rank `failed`, a rank was `lost`, the caller
 * `canceled`, or it was `not_formed` (a rank refused or did not answer its assignment).
 */
export const PIPELINE_ENDS = ['finished', 'failed', 'lost', 'canceled', 'not_formed'] as const;
export type PipelineEnd = (typeof PIPELINE_ENDS)[number];

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
  /** A ranked model's job was leased as a pipeline (formed here). */
  pipelineFormed?(kind: string, tier: Tier): void;
  pipelineEnded?(end: PipelineEnd): void;
  /** Activation bytes sent on to a rank on this instance (`local`) or to another instance. */
  framesForwarded?(path: 'local' | 'instance', bytes: number): void;
}
