import type { Redis } from 'ioredis';
import { newOperatorId } from '../ids.js';
import type { OperatorStore, WorkerTokenStore } from '../stores.js';
import type { Operator, OperatorTrust, WorkerTokenRecord } from '../types.js';
import type { RedisKeys } from './keys.js';

export class RedisOperatorStore implements OperatorStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async create(input: { name: string; trust: OperatorTrust }): Promise<Operator> {
    const op: Operator = { id: newOperatorId(), name: input.name, trust: input.trust, created_at: new Date().toISOString() };
    await this.redis.hset(this.keys.operator(op.id), { ...op });
    return op;
  }

  async get(id: string): Promise<Operator | null> {
    const h = await this.redis.hgetall(this.keys.operator(id));
    return h.id ? { id: h.id, name: h.name, trust: h.trust as OperatorTrust, created_at: h.created_at } : null;
  }

  async setTrust(id: string, trust: OperatorTrust): Promise<Operator | null> {
    // HSET only if the operator exists: a trust change must not create a half record.
    const done = await this.redis.eval(
      "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end redis.call('HSET', KEYS[1], 'trust', ARGV[1]) return 1",
      1,
      this.keys.operator(id),
      trust,
    );
    return done ? this.get(id) : null;
  }
}

export class RedisWorkerTokenStore implements WorkerTokenStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async insert(record: WorkerTokenRecord, lookupId: string): Promise<void> {
    await this.redis
      .multi()
      .set(this.keys.workerToken(lookupId), JSON.stringify(record))
      .set(this.keys.workerTokenById(record.id), lookupId)
      .exec();
  }

  async findByLookupId(lookupId: string): Promise<WorkerTokenRecord | null> {
    const raw = await this.redis.get(this.keys.workerToken(lookupId));
    return raw ? (JSON.parse(raw) as WorkerTokenRecord) : null;
  }

  async revoke(id: string): Promise<WorkerTokenRecord | null> {
    const lookupId = await this.redis.get(this.keys.workerTokenById(id));
    if (!lookupId) return null;
    const record = await this.findByLookupId(lookupId);
    if (!record) return null;
    if (!record.revoked_at) {
      record.revoked_at = new Date().toISOString();
      await this.redis.set(this.keys.workerToken(lookupId), JSON.stringify(record));
    }
    return record;
  }
}
