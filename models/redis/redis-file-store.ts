import type { Redis } from 'ioredis';
import type { CreateFileResult, FileRecord, FileStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { LuaScript } from './lua-script.js';

/**
 * Checks the quota and writes the record, its indexes and the account's byte count in one
 * script, so concurrent uploads of one account can never pass its quota together.
 * KEYS: byte count, record, account index, expiry index. ARGV: size, quota, doc, id, expiry ms.
 */
const CREATE = new LuaScript(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local size = tonumber(ARGV[1])
if used + size > tonumber(ARGV[2]) then return {0, used} end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[4])
return {1, redis.call('INCRBY', KEYS[1], size)}
`);

/**
 * Removes the owner's file and gives its bytes back; false when the record is not the account's.
 * KEYS: record, account index, expiry index, byte count. ARGV: account id, file id.
 */
const DELETE = new LuaScript(`
local doc = redis.call('GET', KEYS[1])
if not doc then return false end
local file = cjson.decode(doc)
if file.account_id ~= ARGV[1] then return false end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
local left = redis.call('DECRBY', KEYS[4], file.size)
if left <= 0 then redis.call('DEL', KEYS[4]) end
return doc
`);

const live = (f: FileRecord | null, now = Date.now()): f is FileRecord => f !== null && Date.parse(f.expires_at) > now;

export class RedisFileStore implements FileStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async create(file: FileRecord, quotaBytes: number): Promise<CreateFileResult> {
    const [created, used] = await CREATE.run<[number, number]>(
      this.redis,
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
    const doc = await DELETE.run<string | null>(
      this.redis,
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
