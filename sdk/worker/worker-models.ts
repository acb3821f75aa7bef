import { MAX_MODEL_DESCRIPTION, MAX_MODEL_SCHEMA_BYTES, MAX_RANKS, MAX_WORKER_MODELS, MODEL_ID_PATTERN, type WorkerModel, type WorkerModels } from '../protocol/index.js';
import { isRecord } from './is-record.js';

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);

/**
 * Checks a worker's model list (the `models` option, `setModels`) against the protocol's limits
 * and returns a copy the caller can no longer change: a mistake throws here, naming the model,
 * rather than coming back as a refused register or `models` frame. The gateway checks the rest
 * (that an input schema compiles and extends its kind's). The copy is frozen, so what
 * `worker.models` hands out is what the worker will send.
 *
 * @param kinds the worker's kinds; `['all']` admits any kind name
 */
export function checkWorkerModels(models: unknown, kinds: readonly string[], slots: number): WorkerModels {
  if (!isRecord(models)) throw new TypeError('models must be an object: kind -> [{id, description?, input_schema?, max_concurrency?, rank?}]');
  const anyKind = kinds.includes('all');
  const out: WorkerModels = {};
  let total = 0;
  for (const [kind, list] of Object.entries(models)) {
    if (!anyKind && !kinds.includes(kind)) throw new TypeError(`models lists the kind ${kind}, which is not among the worker's kinds (${kinds.join(', ')})`);
    if (!Array.isArray(list)) throw new TypeError(`models of ${kind} must be a list`);
    total += list.length;
    if (total > MAX_WORKER_MODELS) throw new RangeError(`a worker may list at most ${MAX_WORKER_MODELS} models over all its kinds`);
    const seen = new Set<string>();
    out[kind] = list.map((m: unknown) => {
      const model = checkModel(m, kind, slots);
      if (seen.has(model.id)) throw new TypeError(`the model ${model.id} is listed twice for ${kind}`);
      seen.add(model.id);
      return model;
    });
  }
  return deepFreeze(out);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function checkModel(m: unknown, kind: string, slots: number): WorkerModel {
  if (!isRecord(m) || typeof m.id !== 'string') throw new TypeError(`each model of ${kind} must be {id, description?, input_schema?, max_concurrency?, rank?}`);
  const { id, description, input_schema, max_concurrency, rank, ...unknown } = m;
  const extra = Object.keys(unknown);
  if (extra.length) throw new TypeError(`the model ${JSON.stringify(id)} (${kind}) has fields the protocol does not know: ${extra.join(', ')}`);
  if (!MODEL_ID.test(id)) throw new TypeError(`${JSON.stringify(id)} (${kind}) is not a model id: 1-200 of letters, digits and ._:/@+-, starting with a letter or digit`);
  const model: WorkerModel = { id };
  if (description !== undefined) {
    if (typeof description !== 'string' || description.length > MAX_MODEL_DESCRIPTION) throw new TypeError(`the description of ${id} must be a string of at most ${MAX_MODEL_DESCRIPTION} characters`);
    model.description = description;
  }
  if (input_schema !== undefined) {
    if (!isRecord(input_schema)) throw new TypeError(`the input_schema of ${id} must be a JSON Schema object`);
    let json: string;
    try {
      json = JSON.stringify(input_schema);
    } catch (err) {
      throw new TypeError(`the input_schema of ${id} is not JSON: ${(err as Error).message}`);
    }
    if (Buffer.byteLength(json) > MAX_MODEL_SCHEMA_BYTES) throw new RangeError(`the input_schema of ${id} is over ${MAX_MODEL_SCHEMA_BYTES} bytes of JSON`);
    model.input_schema = JSON.parse(json) as Record<string, unknown>;
  }
  if (max_concurrency !== undefined) {
    if (!Number.isInteger(max_concurrency) || (max_concurrency as number) < 1 || (max_concurrency as number) > slots) {
      throw new RangeError(`max_concurrency of ${id} must be a whole number from 1 to the worker's slots (${slots})`);
    }
    model.max_concurrency = max_concurrency as number;
  }
  if (rank !== undefined) model.rank = checkRank(rank, id);
  return model;
}

/** Protocol 6: `{index, count}`, rank `index` (0-based) of a model served in `count` pipeline stages. */
function checkRank(rank: unknown, id: string): { index: number; count: number } {
  const { index, count, ...unknown } = isRecord(rank) ? rank : {};
  if (!isRecord(rank) || Object.keys(unknown).length > 0) throw new TypeError(`the rank of ${id} must be {index, count}`);
  if (!Number.isInteger(count) || (count as number) < 2 || (count as number) > MAX_RANKS) throw new RangeError(`the rank count of ${id} must be a whole number from 2 to ${MAX_RANKS}`);
  if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= (count as number)) throw new RangeError(`the rank index of ${id} must be a whole number from 0 to ${(count as number) - 1}`);
  return { index: index as number, count: count as number };
}
