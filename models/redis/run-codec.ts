import { NEW_RUN_DEFAULTS, type RunPatch, type RunRecord, type RunStatus } from '../types.js';
import type { PriorRunFields } from '../stores.js';

/**
 * A run is a Redis hash laid out for its Lua scripts, which never decode JSON:
 * - `doc`: JSON of what never changes after creation (input, kind, class, ...);
 * - plain scalars the scripts read or write: status, settlement, account_id, price, priority,
 *   attempts, fence, worker_id, charged (written at settlement), and kind (also in `doc`: transitionRun reads it to move the run
 *   between the status-and-kind indexes; a run made before that has it only in `doc`);
 * - each other mutable field (output, error, progress, timestamps, usage) as JSON text, present
 *   once set, and `rate` (the per-unit price, written at creation and read by transitionRun).
 */
const SCALARS = new Set(['status', 'settlement', 'account_id', 'price', 'priority', 'attempts', 'fence', 'worker_id', 'kind', 'charged']);
const NUMBERS = new Set(['price', 'priority', 'attempts', 'fence', 'charged']);

export type ImmutableRunFields = Pick<
  RunRecord,
  'run_id' | 'account_id' | 'kind' | 'confidentiality' | 'class' | 'price' | 'input' | 'webhook' | 'idempotency_key' | 'created_at'
> &
  // Absent: NEW_RUN_DEFAULTS' value.
  Partial<Pick<RunRecord, 'webhook_events_filter' | 'input_files' | 'warnings' | 'ttl_s' | 'timeout_s' | 'expires_at' | 'batch_id' | 'max_attempts' | 'retry_on_timeout'>>;

/** A patch as flat HSET arguments: [field, value, field, value, ...]. */
export function encodePatch(patch: RunPatch): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) continue;
    // A null scalar (worker_id cleared) is stored as '' and read back as null.
    out.push(k, SCALARS.has(k) ? (v === null ? '' : String(v)) : JSON.stringify(v));
  }
  return out;
}

/**
 * The job view's immutable fields as a JSON fragment (no braces), stored at creation as `vw`:
 * transitionRun builds a status event's job view from it and the record's other fields as
 * stored, without decoding `doc` (which holds the input, up to megabytes).
 */
export function viewFragment(doc: Pick<ImmutableRunFields, 'run_id' | 'kind' | 'confidentiality' | 'class' | 'created_at' | 'ttl_s' | 'timeout_s' | 'expires_at' | 'batch_id' | 'max_attempts' | 'retry_on_timeout'>): string {
  const { run_id, kind, confidentiality, created_at } = doc;
  const attempts = { max_attempts: doc.max_attempts ?? null, retry_on_timeout: doc.retry_on_timeout ?? false };
  const view = { run_id, kind, confidentiality, class: doc.class, created_at, ttl_s: doc.ttl_s ?? null, timeout_s: doc.timeout_s ?? null, expires_at: doc.expires_at ?? null, batch_id: doc.batch_id ?? null, ...attempts };
  return JSON.stringify(view).slice(1, -1);
}

/** Hash fields that are no part of the record: the view fragment (`viewFragment`). */
const NOT_RECORD = new Set(['doc', 'vw']);

export function decodeRun(hash: Record<string, string>): RunRecord | null {
  if (!hash || !hash.doc) return null;
  // Object.assign and a for-in, not spreads and Object.entries: V8 took ~14 us per chat run's
  // record with the spreads (~2 us this way), and every lease and settlement decodes one or two.
  const run: Record<string, unknown> = Object.assign({}, NEW_RUN_DEFAULTS, JSON.parse(hash.doc));
  for (const k in hash) {
    if (NOT_RECORD.has(k)) continue;
    const v = hash[k];
    run[k] = NUMBERS.has(k) ? Number(v) : SCALARS.has(k) ? (v === '' ? null : v) : JSON.parse(v);
  }
  return run as unknown as RunRecord;
}

/** HGETALL replies flattened by a Lua script: [k1, v1, k2, v2, ...]. */
export function pairsToHash(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

/**
 * The fields the transitionRun script (models/redis/scripts/transition-run.ts) reports as they
 * were before it wrote (`returnPrior`), in its reply's order.
 */
export const PRIOR_FIELDS = ['status', 'worker_id', 'attempts', 'fence', 'started_at', 'progress'] as const;

/** transitionRun's prior fields ('' for absent), decoded as `decodeRun` would (absent: the new-run default). */
export function decodePrior(values: string[]): PriorRunFields {
  const [status, workerId, attempts, fence, startedAt, progress] = values;
  return {
    status: status as RunStatus,
    worker_id: workerId === '' ? null : workerId,
    attempts: attempts === '' ? NEW_RUN_DEFAULTS.attempts : Number(attempts),
    fence: fence === '' ? NEW_RUN_DEFAULTS.fence : Number(fence),
    started_at: startedAt === '' ? null : (JSON.parse(startedAt) as string | null),
    progress: progress === '' ? null : (JSON.parse(progress) as number | null),
  };
}
