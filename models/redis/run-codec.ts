import type { RunRecord } from '../types.js';

/**
 * A run is a Redis hash whose every value is JSON text, so types survive the round trip and
 * the Lua scripts can cjson.decode the few fields they look at.
 */
export function encodeRun(run: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(run)) if (v !== undefined) out[k] = JSON.stringify(v);
  return out;
}

const DEFAULTS: Partial<RunRecord> = {
  webhook: null,
  idempotency_key: null,
  started_at: null,
  finished_at: null,
  progress: null,
  attempts: 0,
  output: null,
  error: null,
  attestation: null,
  cancel_requested_at: null,
};

export function decodeRun(hash: Record<string, string>): RunRecord | null {
  if (!hash || !hash.run_id) return null;
  const run: Record<string, unknown> = { ...DEFAULTS };
  for (const [k, v] of Object.entries(hash)) {
    if (k === 'unconfirmed') continue;
    run[k] = JSON.parse(v);
  }
  return run as unknown as RunRecord;
}

/** HGETALL replies flattened by a Lua script: [k1, v1, k2, v2, ...]. */
export function pairsToHash(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}
