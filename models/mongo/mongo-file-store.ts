import type { Collection } from 'mongodb';
import type { CreateFileResult, FileRecord, FileStore } from '../stores.js';
import { isDuplicateKey } from './mongo-errors.js';

/** A file as stored: the file id is the `_id`. */
export type FileDoc = Omit<FileRecord, 'id'> & { _id: string };

/** The bytes an account's files hold: `_id` is the account id. */
export interface FileUsageDoc {
  _id: string;
  bytes: number;
}

const toFile = ({ _id, ...rest }: FileDoc): FileRecord => ({ id: _id, ...rest });

/**
 * The quota is a counter per account, raised with a conditional `$inc` before the record is
 * inserted (so two concurrent uploads cannot both pass it) and lowered if the insert fails.
 */
export class MongoFileStore implements FileStore {
  constructor(
    private readonly files: Collection<FileDoc>,
    private readonly usage: Collection<FileUsageDoc>,
  ) {}

  async create(file: FileRecord, quotaBytes: number): Promise<CreateFileResult> {
    const reserved = await this.reserve(file.account_id, file.size, quotaBytes);
    if (!reserved.ok) return { created: false, usedBytes: reserved.used };
    try {
      const { id, ...rest } = file;
      await this.files.insertOne({ _id: id, ...rest });
    } catch (err) {
      await this.usage.updateOne({ _id: file.account_id }, { $inc: { bytes: -file.size } });
      throw err;
    }
    return { created: true, usedBytes: reserved.used };
  }

  private async reserve(accountId: string, size: number, quota: number): Promise<{ ok: boolean; used: number }> {
    if (size > quota) return { ok: false, used: await this.usedBytes(accountId) };
    const raised = await this.usage.findOneAndUpdate({ _id: accountId, bytes: { $lte: quota - size } }, { $inc: { bytes: size } }, { returnDocument: 'after' });
    if (raised) return { ok: true, used: raised.bytes };
    try {
      // No counter yet (the account's first file), or the quota is reached: only the first inserts.
      await this.usage.insertOne({ _id: accountId, bytes: size });
      return { ok: true, used: size };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      return { ok: false, used: await this.usedBytes(accountId) };
    }
  }

  async get(accountId: string, id: string): Promise<FileRecord | null> {
    const doc = await this.files.findOne({ _id: id, account_id: accountId, expires_at: { $gt: new Date().toISOString() } });
    return doc ? toFile(doc) : null;
  }

  async list(accountId: string, opts: { limit: number; after?: string }): Promise<FileRecord[]> {
    const filter = { account_id: accountId, expires_at: { $gt: new Date().toISOString() }, ...(opts.after ? { _id: { $lt: opts.after } } : {}) };
    return (await this.files.find(filter).sort({ _id: -1 }).limit(opts.limit).toArray()).map(toFile);
  }

  async delete(accountId: string, id: string): Promise<FileRecord | null> {
    const doc = await this.files.findOneAndDelete({ _id: id, account_id: accountId });
    if (!doc) return null;
    await this.usage.updateOne({ _id: accountId }, { $inc: { bytes: -doc.size } });
    return toFile(doc);
  }

  async usedBytes(accountId: string): Promise<number> {
    return (await this.usage.findOne({ _id: accountId }))?.bytes ?? 0;
  }

  async expired(now: Date, limit: number): Promise<FileRecord[]> {
    return (await this.files.find({ expires_at: { $lte: now.toISOString() } }).sort({ expires_at: 1 }).limit(limit).toArray()).map(toFile);
  }
}
