import type { RedisClient } from '../redis-connection.js';
import { newOperatorId } from '../ids.js';
import type { OperatorStore, WorkerTokenStore } from '../stores.js';
import type { Operator, OperatorTrust, WorkerTokenRecord } from '../types.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

const toOperator = (h: Record<string, string>): Operator | null =>
  h.id ? { id: h.id, name: h.name, trust: h.trust as OperatorTrust, created_at: h.created_at } : null;

export class RedisOperatorStore implements OperatorStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(input: { name: string; trust: OperatorTrust }): Promise<Operator> {
    const op: Operator = { id: newOperatorId(), name: input.name, trust: input.trust, created_at: new Date().toISOString() };
    await this.redis.multi().hset(this.keys.operator(op.id), { ...op }).zadd(this.keys.operators(), 0, op.id).exec();
    return op;
  }

  async get(id: string): Promise<Operator | null> {
    return toOperator(await this.redis.hgetall(this.keys.operator(id)));
  }

  async list(): Promise<Operator[]> {
    const ids = await this.redis.zrange(this.keys.operators(), '-', '+', 'BYLEX');
    if (ids.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hgetall(this.keys.operator(id));
    const rows = (await pipe.exec()) ?? [];
    return rows
      .map(([err, h]) => {
        if (err) throw err;
        return toOperator(h as Record<string, string>);
      })
      .filter((o): o is Operator => o !== null);
  }

  async setTrust(id: string, trust: OperatorTrust): Promise<Operator | null> {
    const done = await redisScripts.run(this.redis, 'setOperatorTrust', [this.keys.operator(id)], [trust]);
    return done ? this.get(id) : null;
  }
}

export class RedisWorkerTokenStore implements WorkerTokenStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

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
