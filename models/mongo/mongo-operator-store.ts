import type { Collection } from 'mongodb';
import { newOperatorId } from '../ids.js';
import type { OperatorStore, WorkerTokenStore } from '../stores.js';
import type { Operator, OperatorTrust, WorkerTokenRecord } from '../types.js';

/** An operator as stored: the operator id is the `_id`. */
export type OperatorDoc = Omit<Operator, 'id'> & { _id: string };

/** A worker token as stored: `_id` is the lookup id; `id` has a unique index of its own. */
export type WorkerTokenDoc = WorkerTokenRecord & { _id: string };

const toOperator = (d: OperatorDoc): Operator => ({ id: d._id, name: d.name, trust: d.trust, created_at: d.created_at });

/** Copies the record's own fields, so `_id` never leaks. */
const toWorkerToken = (d: WorkerTokenRecord): WorkerTokenRecord => ({
  id: d.id,
  owner: { type: d.owner.type, id: d.owner.id },
  trust: d.trust,
  prefix: d.prefix,
  hash: d.hash,
  created_at: d.created_at,
  revoked_at: d.revoked_at ?? null,
});

export class MongoOperatorStore implements OperatorStore {
  constructor(private readonly operators: Collection<OperatorDoc>) {}

  async create(input: { name: string; trust: OperatorTrust }): Promise<Operator> {
    const doc: OperatorDoc = { _id: newOperatorId(), name: input.name, trust: input.trust, created_at: new Date().toISOString() };
    await this.operators.insertOne(doc);
    return toOperator(doc);
  }

  async get(id: string): Promise<Operator | null> {
    const doc = await this.operators.findOne({ _id: id });
    return doc ? toOperator(doc) : null;
  }

  async setTrust(id: string, trust: OperatorTrust): Promise<Operator | null> {
    // No upsert: a trust change must not create a half record.
    const doc = await this.operators.findOneAndUpdate({ _id: id }, { $set: { trust } }, { returnDocument: 'after' });
    return doc ? toOperator(doc) : null;
  }

  async list(): Promise<Operator[]> {
    // Ids are ULIDs: sorting by _id is creation order.
    return (await this.operators.find().sort({ _id: 1 }).toArray()).map(toOperator);
  }
}

export class MongoWorkerTokenStore implements WorkerTokenStore {
  constructor(private readonly tokens: Collection<WorkerTokenDoc>) {}

  async insert(record: WorkerTokenRecord, lookupId: string): Promise<void> {
    await this.tokens.insertOne({ ...toWorkerToken(record), _id: lookupId });
  }

  async findByLookupId(lookupId: string): Promise<WorkerTokenRecord | null> {
    const doc = await this.tokens.findOne({ _id: lookupId });
    return doc ? toWorkerToken(doc) : null;
  }

  async revoke(id: string): Promise<WorkerTokenRecord | null> {
    // A pipeline update keeps the first revocation time in one atomic step.
    const doc = await this.tokens.findOneAndUpdate(
      { id },
      [{ $set: { revoked_at: { $ifNull: ['$revoked_at', { $literal: new Date().toISOString() }] } } }],
      { returnDocument: 'after' },
    );
    return doc ? toWorkerToken(doc) : null;
  }
}
