import type { RedisClient } from '../redis-connection.js';
import type { CreateFileResult, FileRecord, FileStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

const live = (f: FileRecord | null, now = Date.now()): f is FileRecord => f !== null && Date.parse(f.expires_at) > now;

export class RedisFileStore implements FileStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(file: FileRecord, quotaBytes: number): Promise<CreateFileResult> {
    const [created, used] = await redisScripts.run(
      this.redis,
      'createFile',
      [this.keys.accountFileBytes(file.account_id), this.keys.file(file.id), this.keys.accountFiles(file.account_id), this.keys.filesByExpiry()],
      [file.size, quotaBytes, JSON.stringify(file), file.id, Date.parse(file.expires_at)],
    );
    return { created: created === 1, usedBytes: Number(used) };
  }

  async get(accountId: string, id: string): Promise<FileRecord | null> {
    const file = parse(await this.redis.get(this.keys.file(id)));
    return live(file) && file.account_id === accountId ? file : null;
  }

  async list(accountId: string, opts: { limit: number; after?: string }): Promise<FileRecord[]> {
    // Expired files wait in the index for the sweep: read on past them so a page is full while files remain.
    const out: FileRecord[] = [];
    let after = opts.after;
    while (out.length < opts.limit) {
      const ids = await this.redis.zrevrangebylex(this.keys.accountFiles(accountId), after ? `(${after}` : '+', '-', 'LIMIT', 0, opts.limit);
      if (ids.length === 0) break;
      const docs = await this.redis.mget(ids.map((id) => this.keys.file(id)));
      const now = Date.now();
      for (const f of docs.map(parse)) if (live(f, now) && f.account_id === accountId && out.length < opts.limit) out.push(f);
      if (ids.length < opts.limit) break;
      after = ids[ids.length - 1];
    }
    return out;
  }

  async delete(accountId: string, id: string): Promise<FileRecord | null> {
    const doc = await redisScripts.run(
      this.redis,
      'deleteFile',
      [this.keys.file(id), this.keys.accountFiles(accountId), this.keys.filesByExpiry(), this.keys.accountFileBytes(accountId)],
      [accountId, id],
    );
    return parse(doc);
  }

  async usedBytes(accountId: string): Promise<number> {
    return Number((await this.redis.get(this.keys.accountFileBytes(accountId))) ?? 0);
  }

  async expired(now: Date, limit: number): Promise<FileRecord[]> {
    const ids = await this.redis.zrangebyscore(this.keys.filesByExpiry(), '-inf', now.getTime(), 'LIMIT', 0, limit);
    if (ids.length === 0) return [];
    const docs = (await this.redis.mget(ids.map((id) => this.keys.file(id)))).map(parse);
    // An index entry without its record (a crash between writes cannot leave one, but a manual delete can) is dropped.
    const orphans = ids.filter((_, i) => docs[i] === null);
    if (orphans.length) await this.redis.zrem(this.keys.filesByExpiry(), ...orphans);
    return docs.filter((f): f is FileRecord => f !== null);
  }
}

function parse(doc: string | null | undefined): FileRecord | null {
  return doc ? (JSON.parse(doc) as FileRecord) : null;
}
