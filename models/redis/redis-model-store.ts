import type { Redis } from 'ioredis';
import type { ModelDescription, ModelStore } from '../stores.js';
import type { ModelRecord } from '../types.js';
import type { RedisKeys } from './keys.js';
import { LuaScript } from './lua-script.js';

/**
 * A model as stored in its kind's hash. The schema is kept as JSON text that no script ever
 * decodes: Redis's cjson cannot tell `[]` from `{}` and rounds numbers to 14 digits, so a
 * schema that went through it would come back changed. The scripts decode and re-encode only
 * this envelope of strings, booleans and nulls.
 */
interface StoredModel extends Omit<ModelRecord, 'input_schema'> {
  input_schema: string | null;
}

/**
 * Optional values travel as `n` (null) or `s<value>`, raw: decoding JSON in a script would
 * fail on text cjson refuses (a lone surrogate escape), while raw bytes it only copies.
 */
const OPT_ARG = `local function opt(v) if v == 'n' then return cjson.null end return string.sub(v, 2) end`;
const opt = (value: string | null): string => (value === null ? 'n' : `s${value}`);

/**
 * Every model of one call in one script, so an advertisement is one round trip and a
 * concurrent declaration lands wholly before or after it: an advertisement never writes over
 * a declared record's description or schema. `updated_at` moves only when what the record
 * says changes, not on every sighting (`last_seen` is for that).
 * KEYS: the set of kinds, then model i's kind hash. ARGV: at, then per model: kind, id, description, schema.
 */
const ADVERTISE = new LuaScript(`
${OPT_ARG}
local at = ARGV[1]
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 4
  local kind, id, description, schema = ARGV[a], ARGV[a + 1], opt(ARGV[a + 2]), opt(ARGV[a + 3])
  local raw = redis.call('HGET', KEYS[i], id)
  local r
  if raw then
    r = cjson.decode(raw)
    r.last_seen = at
    if r.first_seen == cjson.null then r.first_seen = at end
    if not r.declared and (r.description ~= description or r.input_schema ~= schema) then
      r.description = description
      r.input_schema = schema
      r.updated_at = at
    end
  else
    r = { kind = kind, id = id, description = description, input_schema = schema, declared = false, first_seen = at, last_seen = at, created_at = at, updated_at = at }
  end
  redis.call('HSET', KEYS[i], id, cjson.encode(r))
  redis.call('SADD', KEYS[1], kind)
end
return #KEYS - 1
`);

/**
 * KEYS: the set of kinds, the kind's hash. ARGV: at, kind, id, description, schema.
 * Returns {1 if created, the record}.
 */
const DECLARE = new LuaScript(`
${OPT_ARG}
local at, kind, id = ARGV[1], ARGV[2], ARGV[3]
local raw = redis.call('HGET', KEYS[2], id)
local r
if raw then
  r = cjson.decode(raw)
else
  r = { kind = kind, id = id, first_seen = cjson.null, last_seen = cjson.null, created_at = at }
end
r.description = opt(ARGV[4])
r.input_schema = opt(ARGV[5])
r.declared = true
r.updated_at = at
local json = cjson.encode(r)
redis.call('HSET', KEYS[2], id, json)
redis.call('SADD', KEYS[1], kind)
return { raw and 0 or 1, json }
`);

/** Drops the kind from the set with its last model, atomically with a concurrent advertisement. KEYS: the set, the hash. ARGV: id, kind. */
const REMOVE = new LuaScript(`
local n = redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HLEN', KEYS[2]) == 0 then redis.call('SREM', KEYS[1], ARGV[2]) end
return n
`);

function toRecord(json: string): ModelRecord {
  const s = JSON.parse(json) as StoredModel;
  return {
    kind: s.kind,
    id: s.id,
    description: s.description ?? null,
    input_schema: s.input_schema === null || s.input_schema === undefined ? null : (JSON.parse(s.input_schema) as Record<string, unknown>),
    declared: s.declared === true,
    first_seen: s.first_seen ?? null,
    last_seen: s.last_seen ?? null,
    created_at: s.created_at,
    updated_at: s.updated_at,
  };
}

const schemaText = (m: ModelDescription): string | null => (m.input_schema ? JSON.stringify(m.input_schema) : null);
const byId = (a: ModelRecord, b: ModelRecord) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The model catalogue in Redis: one hash per kind (id -> record JSON) and the set of kinds. */
export class RedisModelStore implements ModelStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async advertise(models: ModelDescription[], at: string): Promise<void> {
    if (models.length === 0) return;
    const keys = [this.keys.modelKinds(), ...models.map((m) => this.keys.models(m.kind))];
    const args = [at, ...models.flatMap((m) => [m.kind, m.id, opt(m.description), opt(schemaText(m))])];
    await ADVERTISE.run(this.redis, keys, args);
  }

  async declare(model: ModelDescription, at: string): Promise<{ record: ModelRecord; created: boolean }> {
    const [created, json] = await DECLARE.run<[number, string]>(
      this.redis,
      [this.keys.modelKinds(), this.keys.models(model.kind)],
      [at, model.kind, model.id, opt(model.description), opt(schemaText(model))],
    );
    return { record: toRecord(json), created: created === 1 };
  }

  async get(kind: string, id: string): Promise<ModelRecord | null> {
    const json = await this.redis.hget(this.keys.models(kind), id);
    return json === null ? null : toRecord(json);
  }

  async list(kind?: string): Promise<ModelRecord[]> {
    const kinds = kind === undefined ? (await this.redis.smembers(this.keys.modelKinds())).sort() : [kind];
    if (kinds.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const k of kinds) pipeline.hvals(this.keys.models(k));
    const replies = (await pipeline.exec()) ?? [];
    return replies.flatMap(([err, values]) => {
      if (err) throw err;
      return (values as string[]).map(toRecord).sort(byId);
    });
  }

  async remove(kind: string, id: string): Promise<boolean> {
    return (await REMOVE.run<number>(this.redis, [this.keys.modelKinds(), this.keys.models(kind)], [id, kind])) === 1;
  }
}
