import type { Tier } from '../../models/kinds.js';
import type { LeaseFrame } from '../../sdk/protocol/index.js';

/** One rank of a pipeline: the worker holding it, on which instance, under which lease. */
export interface PipelineMember {
  rank: number;
  gatewayId: string;
  workerId: string;
  leaseId: string;
  /** Its worker reported `complete` (a rank before the last): its absence is no loss. */
  done?: boolean;
  /** Sweeps in a row that found its lease record gone (another instance's rank). */
  missed?: number;
}

/**
 * A ranked model's job leased as one pipeline (docs/ranks.md): one lease per rank, made together
 * under one fence, the job's BullMQ lock shared by every rank's instance. Each instance holding a
 * rank keeps its own copy, as the instance that formed it sent it.
 */
export interface Pipeline {
  id: string;
  /** The job's attempt: every rank lease's fence. */
  fence: number;
  runId: string;
  accountId: string;
  kind: string;
  tier: Tier;
  model: string;
  count: number;
  /** The job's BullMQ queue, id and the lock token its leases share. */
  queue: string;
  jobId: string;
  token: string;
  members: PipelineMember[];
  /** When the attempt times out (ms, the job's `timeout_s`); absent: never. */
  timeoutAt?: number;
  /** Why it ended here, once it did: no frame goes through it any more. */
  ended?: string;
}

/** What a pipeline is sent as between instances (its members' state is each instance's own). */
export type PipelineSpec = Omit<Pipeline, 'ended'>;

/** A rank lease's place in its pipeline, on the `ActiveLease` that holds it. */
export interface RankLeaseState {
  pipeline: Pipeline;
  index: number;
  /** The last `seq` its worker sent (frames must come 1, 2, 3...). */
  sentSeq: number;
  /** The last `seq` the gateway gave a frame it sent the worker. */
  receivedSeq: number;
  /** Its worker sent its `end` frame (or the gateway ended its stream for it). */
  streamEnded: boolean;
  /**
   * Its lease frame went to its worker. Every rank lease of a pipeline is held (on every
   * instance) before any is started, so no frame ever reaches an instance that does not know its
   * receiver; one that reaches a rank not started yet waits in `queued` until it is.
   */
  started: boolean;
  leaseFrame: LeaseFrame;
  queued?: Array<{ data: Buffer; written: () => void }>;
}

/** The rank a rank sends to: the next, and the last back to rank 0. */
export const nextRank = (index: number, count: number): number => (index + 1) % count;
