import type { AttemptRecord, AttemptWrite } from './types.js';

/**
 * A run's attempt history with `write` merged in, as every store does it (the Redis script in
 * models/redis/scripts/transition-run.ts mirrors this): the entry of the same attempt gets the
 * fields written (or is removed by `drop`), else the entry is added. A new attempt's start also
 * ends any earlier entry still open: its lease was lost with its gateway (the stalled checker
 * requeued the job), which nobody else reported.
 */
export function mergeAttempt(history: readonly AttemptRecord[], write: AttemptWrite): AttemptRecord[] {
  const { drop, ...fields } = write;
  const starting = write.started_at != null && write.ended_at == null;
  const out: AttemptRecord[] = [];
  let placed = false;
  for (const e of history) {
    if (e.attempt === write.attempt) {
      placed = true;
      if (!drop) out.push({ ...e, ...fields });
    } else if (starting && e.attempt < write.attempt && e.ended_at === null) {
      out.push({ ...e, ended_at: write.started_at ?? null, error: { ...LOST_WITH_GATEWAY, attempt: e.attempt } });
    } else out.push(e);
  }
  if (!placed && !drop) out.push({ worker: null, tier: null, started_at: null, ended_at: null, error: null, ...fields });
  return out;
}

export const LOST_WITH_GATEWAY = { code: 'worker_lost', message: 'the lease was lost with its gateway', retryable: true } as const;
