import type { ClientSession, Collection, MongoClient } from 'mongodb';
import type { CreateToolResult, SampledSecret, StoredTool, ToolStore } from '../stores.js';
import { isDuplicateKey } from './mongo-errors.js';

/** A tool as stored: the tool id is the `_id`; `{account_id, name}` has a unique index. */
export type ToolDoc = Omit<StoredTool, 'id'> & { _id: string };

/** How many tools an account has; every create and delete writes it, which serializes them per account. */
export interface ToolCountDoc {
  _id: string;
  count?: number;
  /** Only on the key check document. */
  sealed?: string;
}

/** The key check lives in `tool_counts` under an `_id` no account id can take. */
const KEY_CHECK_ID = '$key-check';

/** Thrown inside the create transaction to roll it back when the account is at its limit. */
class LimitReached extends Error {}

const toTool = (d: ToolDoc): StoredTool => ({
  id: d._id,
  account_id: d.account_id,
  name: d.name,
  description: d.description,
  kind: d.kind,
  method: d.method,
  url: d.url,
  inputSchema: d.inputSchema,
  auth: d.auth ? { type: d.auth.type } : null,
  created_at: d.created_at,
  secrets: { ...d.secrets },
});

/**
 * Name uniqueness is the unique index's job; the per-account limit is a counter written in the
 * same transaction as the insert, so two concurrent creates conflict on it and one of them is
 * retried by the driver with the other's count (a count-then-insert alone would let both in).
 */
export class MongoToolStore implements ToolStore {
  constructor(
    private readonly client: MongoClient,
    private readonly tools: Collection<ToolDoc>,
    private readonly counts: Collection<ToolCountDoc>,
  ) {}

  private inTransaction<T>(fn: (session: ClientSession) => Promise<T>): Promise<T> {
    return this.client.withSession((session) => session.withTransaction(fn));
  }

  async create(tool: StoredTool, maxPerAccount: number): Promise<CreateToolResult> {
    const { id, ...fields } = tool;
    // The counter exists before the transaction, so inside it a duplicate key can only be the name.
    await this.counts.updateOne({ _id: tool.account_id }, { $setOnInsert: { count: 0 } }, { upsert: true }).catch((err: unknown) => {
      if (!isDuplicateKey(err)) throw err; // a concurrent first create made it
    });
    try {
      await this.inTransaction(async (session) => {
        const counted = await this.counts.findOneAndUpdate({ _id: tool.account_id, count: { $lt: maxPerAccount } }, { $inc: { count: 1 } }, { session });
        if (!counted) throw new LimitReached();
        await this.tools.insertOne({ ...fields, _id: id }, { session });
      });
      return 'created';
    } catch (err) {
      if (err instanceof LimitReached) return 'limit_reached';
      if (isDuplicateKey(err)) return 'name_conflict';
      throw err;
    }
  }

  async get(accountId: string, id: string): Promise<StoredTool | null> {
    const doc = await this.tools.findOne({ _id: id, account_id: accountId });
    return doc ? toTool(doc) : null;
  }

  async list(accountId: string): Promise<StoredTool[]> {
    // Ids are ULIDs, so _id order is creation order.
    return (await this.tools.find({ account_id: accountId }).sort({ _id: 1 }).toArray()).map(toTool);
  }

  async claimKeyCheck(sealed: string): Promise<string> {
    const doc = await this.counts
      .findOneAndUpdate({ _id: KEY_CHECK_ID }, { $setOnInsert: { sealed } }, { upsert: true, returnDocument: 'after' })
      .catch(async (err: unknown) => {
        if (!isDuplicateKey(err)) throw err; // a concurrent first claim made it
        return this.counts.findOne({ _id: KEY_CHECK_ID });
      });
    return doc?.sealed ?? sealed;
  }

  async keyCheck(): Promise<string | null> {
    return (await this.counts.findOne({ _id: KEY_CHECK_ID }))?.sealed ?? null;
  }

  async sampleSecret(): Promise<SampledSecret | null> {
    const doc = await this.tools.findOne({ $or: [{ 'secrets.bearer_token': { $exists: true } }, { 'secrets.signing_secret': { $exists: true } }] });
    if (!doc) return null;
    const role = doc.secrets.bearer_token ? 'bearer_token' : 'signing_secret';
    return { toolId: doc._id, role, sealed: doc.secrets[role]! };
  }

  async delete(accountId: string, id: string): Promise<StoredTool | null> {
    const doc = await this.inTransaction(async (session) => {
      const removed = await this.tools.findOneAndDelete({ _id: id, account_id: accountId }, { session });
      if (removed) await this.counts.updateOne({ _id: accountId }, { $inc: { count: -1 } }, { session });
      return removed;
    });
    return doc ? toTool(doc) : null;
  }
}
