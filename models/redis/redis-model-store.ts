import type { RedisClient } from '../redis-connection.js';
import type { ModelDescription, ModelStore, RankConflict } from '../stores.js';
import { DEFAULT_MIDDLE_RANKS, type ModelRecord } from '../types.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

/**
 * A model as stored in its kind's hash. The schema is kept as JSON text that no script ever
 * decodes: RedisClient's cjson cannot tell `[]` from `{}` and rounds numbers to 14 digits, so a
 * schema that went through it would come back changed. The scripts decode and re-encode only
 * this envelope of strings, booleans and nulls.
 */
interface StoredModel extends Omit<ModelRecord, 'input_schema' | 'ranks' | 'middle_ranks'> {
  input_schema: string | null;
  /** Absent (records written before ranks, whole models): whole. */
  ranks?: number | null;
  middle_ranks?: ModelRecord['middle_ranks'];
}

/**
 * Optional values travel to the model scripts as `n` (null) or `s<value>`, raw: decoding JSON in
 * a script would fail on text cjson refuses (a lone surrogate escape), while raw bytes it only copies.
 */
const opt = (value: string | null): string => (value === null ? 'n' : `s${value}`);

function toRecord(json: string): ModelRecord {
  const s = JSON.parse(json) as StoredModel;
  const ranks = typeof s.ranks === 'number' && s.ranks > 0 ? s.ranks : null;
  return {
    kind: s.kind,
    id: s.id,
    description: s.description ?? null,
    input_schema: s.input_schema === null || s.input_schema === undefined ? null : (JSON.parse(s.input_schema) as Record<string, unknown>),
    ranks,
    middle_ranks: ranks === null ? null : (s.middle_ranks ?? DEFAULT_MIDDLE_RANKS),
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
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async advertise(models: ModelDescription[], at: string): Promise<RankConflict | null> {
    if (models.length === 0) return null;
    const keys = [this.keys.modelKinds(), ...models.map((m) => this.keys.models(m.kind))];
    const args = [at, ...models.flatMap((m) => [m.kind, m.id, opt(m.description), opt(schemaText(m)), String(m.ranks ?? 0)])];
    const reply = await redisScripts.run(this.redis, 'advertiseModels', keys, args);
    if (typeof reply === 'number') return null;
    const [, kind, id, catalogue, advertised] = reply;
    return { kind, id, catalogue: catalogue || null, advertised: advertised || null };
  }

  async declare(model: ModelDescription, at: string): Promise<{ record: ModelRecord; created: boolean }> {
    const [created, json] = await redisScripts.run(
      this.redis,
      'declareModel',
      [this.keys.modelKinds(), this.keys.models(model.kind)],
      [at, model.kind, model.id, opt(model.description), opt(schemaText(model)), String(model.ranks ?? 0), opt(model.ranks ? (model.middle_ranks ?? DEFAULT_MIDDLE_RANKS) : null)],
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
    return (await redisScripts.run(this.redis, 'removeModel', [this.keys.modelKinds(), this.keys.models(kind)], [id, kind])) === 1;
  }
}
