import type { Tier } from '../models/kinds.js';
import type { AttestationSession } from './worker-attestation.js';
import type { GatewayFrame } from '../sdk/protocol/index.js';
import type { WorkerInfo } from './worker-info.js';


/** What the gateway needs of a worker's connection: frames out, and the close. The transport renders them. */
export interface WorkerLink {
  send(frame: GatewayFrame): void;
  close(code: number, reason: string): void;
  /** A binary pipeline frame; `written` is called once it is out of the process (or failed). */
  sendBinary?(data: Buffer, written: (err?: Error) => void): void;
  /** Stops, and starts again, reading the worker's frames: back-pressure on a rank that sends too fast. */
  pause?(): void;
  resume?(): void;
}

/** A worker connected to this gateway process, whatever carries its frames. */
export interface ConnectedWorker {
  info: WorkerInfo;
  /**
   * Queues it may take leases from, by tier in preference order (its own first, then weaker
   * ones), each listing per kind the default queue and its models' queues (`tierQueues`).
   */
  queues: string[][];
  /**
   * Per tier, for each queue of `queues` the indexes of its queue's partitions there (the same
   * array for each of them; QUEUE_PARTITIONS), which are adjacent: one turn of the walk picks the
   * partition whose head is most urgent.
   */
  partitionsOf?: number[][][];
  /** Every queue of `queues`, for the announcement of a queue to find the workers it may wake. */
  served?: Set<string>;
  /** A model's `max_concurrency`, by each queue of that model: leases it may hold from the model at once. */
  modelLimits?: Map<string, number>;
  send(frame: GatewayFrame): void;
  close(code: number, reason: string): void;
  /** The transport's binary path and read pausing, for rank leases (`WorkerLink`). */
  link?: WorkerLink;
  /** What holds its socket paused: the receiving rank leases its frames wait on. */
  pausedBy?: Set<string>;
  /** Lease ids it holds. */
  leases: Set<string>;
  /** Final reports (`complete`, `fail`) of its being handled, until their answer is ready. */
  settling?: number;
  /** Which queue the next fill tries first within a tier, so kinds and models take turns. */
  cursor: number;
  /** A fill is running; `refill` asks it to go round once more. */
  filling: boolean;
  refill: boolean;
  /** No new leases (drain requested, or going away). */
  draining: boolean;
  /** The worker protocol version agreed at registration. @defaultValue 1 */
  protocol?: number;
  /** Told to reconnect elsewhere: its leases are handed over when it leaves, not requeued. */
  handover?: boolean;
  /** Private workers: the connection's attestation; private work only while its evidence is valid. */
  attestation?: AttestationSession;
  /**
   * Protocol 5: the worker's identity, scoped to its token's owner (`workerIdentityKey`): another
   * connection registering under it retires this one, on any instance.
   */
  identity?: string;
  /**
   * Queues it does not fetch from until the time given (ms): an attempt of one of their jobs just
   * failed on it and another worker may take the retry first (docs/architecture.md, "Retries").
   */
  cooldowns?: Map<string, number>;
  /**
   * Tiers it takes work from, strongest first, parallel to `queues`. Default: its tier and every
   * weaker one; a private worker's lower tiers are those its token's trust allows.
   */
  tiers?: Tier[];
}

/** Whether the worker is offered leases at all: not leaving, and its backend answers. */
export const offersLeases = (worker: ConnectedWorker): boolean => !worker.draining && !worker.info.backend_down;

/** Whether the worker is cooling off `queue` at `now` (a retry of that queue's job failed on it). */
export function coolingOff(worker: ConnectedWorker, queue: string, now = Date.now()): boolean {
  const until = worker.cooldowns?.get(queue);
  if (until === undefined) return false;
  if (until > now) return true;
  worker.cooldowns!.delete(queue);
  return false;
}

/**
 * The key a worker identity is known by in the fleet: its token's owner and the name it gave,
 * so one operator's worker can never retire another's by naming itself the same.
 */
export const workerIdentityKey = (owner: { type: string; id: string }, identity: string): string => `${owner.type}:${owner.id}:${identity}`;

/** Whether the worker may be given a private run at `at`: its evidence is valid then (not merely was). */
export const attestedAt = (worker: ConnectedWorker, at = Date.now()): boolean => worker.attestation?.validAt(at) ?? false;

export const TIER_RANK: Record<Tier, number> = { open: 0, trusted: 1, private: 2 };
