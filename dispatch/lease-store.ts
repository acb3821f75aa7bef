import { RedisKeys } from '../models/redis/keys.js';
import type { RedisClient } from '../models/redis-connection.js';
import { hashSecret, sameHash } from '../models/credentials.js';
import { redisScripts } from '../models/redis/redis-scripts.js';

/** A lease as every gateway instance can see it (uploads may reach another instance than the worker's socket). */
export interface LeaseRecord {
  lease_id: string;
  run_id: string;
  account_id: string;
  worker_id: string;
  kind: string;
  tier: string;
  /** Grows with every lease of the same run; reports naming an older fence are refused. */
  fence: number;
  /** sha256 of the lease's upload token; the token itself is only ever in the lease frame. */
  upload_hash: string;
  /** The gateway instance holding the worker's socket. */
  gateway_id: string;
  /**
   * What another instance needs to adopt the lease when its worker moves there at a graceful
   * shutdown (docs/worker-protocol.md, "Moving to another instance"): the BullMQ queue and job,
   * and the lock token this gateway minted. Never sent to a worker. Absent from records made by
   * gateways older than protocol 2: those leases cannot move.
   */
  queue?: string;
  job_id?: string;
  lock_token?: string;
  /** The worker token's owner: only a worker of the same owner may resume the lease. */
  owner?: string;
}

/**
 * Live leases in Redis, each expiring with its lease TTL unless its worker's heartbeats
 * extend it. Always in Redis, whichever store keeps the runs: leases are transient.
 */
export class LeaseStore {
  private readonly keys: RedisKeys;

  /** `redis`: an auto-pipelined connection (`touch` sends its commands in one turn). */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = new RedisKeys(prefix);
  }

  private key(leaseId: string): string {
    return this.keys.lease(leaseId);
  }

  async put(lease: LeaseRecord, ttlMs: number): Promise<void> {
    await this.redis.set(this.key(lease.lease_id), JSON.stringify(lease), 'PX', ttlMs);
  }

  async get(leaseId: string): Promise<LeaseRecord | null> {
    if (!/^lse_[A-Za-z0-9]{1,64}$/.test(leaseId)) return null;
    const raw = await this.redis.get(this.key(leaseId));
    return raw ? (JSON.parse(raw) as LeaseRecord) : null;
  }

  /**
   * Extends the leases that still exist; returns how many did. Sent in one turn on the
   * auto-pipelined connection, one round trip (per node: on a cluster each lease has a slot of
   * its own, and an explicit pipeline goes to one node only).
   */
  async touch(leaseIds: string[], ttlMs: number): Promise<number> {
    const extended = await Promise.all(leaseIds.map((id) => this.redis.pexpire(this.key(id), ttlMs)));
    return extended.filter((v) => v === 1).length;
  }

  /**
   * Moves a lease to a new worker and gateway, if it is still held by `fromWorker`: a
   * compare-and-set, so of two instances offered the same lease only one adopts it.
   */
  async adopt(leaseId: string, fromWorker: string, to: { worker_id: string; gateway_id: string }, ttlMs: number): Promise<boolean> {
    const moved = await redisScripts.run(this.redis, 'adoptLease', [this.key(leaseId)], [fromWorker, to.worker_id, to.gateway_id, ttlMs]);
    return moved === 1;
  }

  async delete(leaseId: string): Promise<void> {
    await this.redis.del(this.key(leaseId));
  }

  /** The live lease whose upload token this is, or null (constant-time comparison). */
  async verifyUpload(leaseId: string, token: string): Promise<LeaseRecord | null> {
    const lease = await this.get(leaseId);
    return lease && sameHash(hashSecret(token), lease.upload_hash) ? lease : null;
  }
}
