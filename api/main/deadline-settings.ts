import { KIND_NAMES, findKind } from '../../models/kinds.js';
import { BUILT_IN_DEADLINES, type KindDeadlines } from '../services/jobs/job-deadlines.js';

const FIELDS = ['ttl_s', 'max_ttl_s', 'timeout_s', 'max_timeout_s'] as const;

/**
 * `JOB_DEADLINES`: per kind (or `*`, every kind), any of `ttl_s`, `max_ttl_s`, `timeout_s`,
 * `max_timeout_s` in seconds, over the built-in defaults; a default of 0 means none. A kind's
 * entry wins over `*`, which wins over the built-in values.
 */
export function readDeadlines(text: string | undefined, ctx: { problem(message: string): void }): Record<string, KindDeadlines> {
  const out: Record<string, KindDeadlines> = Object.fromEntries(KIND_NAMES.map((k) => [k, { ...BUILT_IN_DEADLINES }]));
  if (text === undefined) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    ctx.problem('JOB_DEADLINES must be a JSON object such as {"*": {"timeout_s": 600}, "inference:video:generate": {"timeout_s": 7200}}');
    return out;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    ctx.problem('JOB_DEADLINES must be a JSON object of kind (or "*") -> deadlines');
    return out;
  }
  const entries = Object.entries(parsed as Record<string, unknown>).sort(([a], [b]) => (a === '*' ? -1 : b === '*' ? 1 : 0));
  for (const [kind, value] of entries) {
    if (kind !== '*' && !findKind(kind)) {
      ctx.problem(`JOB_DEADLINES names an unknown kind ${JSON.stringify(kind)}`);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      ctx.problem(`JOB_DEADLINES[${kind}] must be an object of ${FIELDS.join(', ')}`);
      continue;
    }
    for (const [field, v] of Object.entries(value)) {
      if (!(FIELDS as readonly string[]).includes(field)) ctx.problem(`JOB_DEADLINES[${kind}] has no field ${JSON.stringify(field)}: ${FIELDS.join(', ')}`);
      else if (!Number.isSafeInteger(v) || (v as number) < 0) ctx.problem(`JOB_DEADLINES[${kind}].${field} must be a whole number of seconds >= 0`);
      else {
        const seconds = v as number;
        for (const k of kind === '*' ? KIND_NAMES : [kind]) {
          const d = out[k] as unknown as Record<string, number | null>;
          // A default of 0: no deadline; a maximum of 0 would refuse every request, so it is at least 1.
          d[field] = field.startsWith('max_') ? Math.max(1, seconds) : seconds === 0 ? null : seconds;
        }
      }
    }
  }
  for (const [kind, d] of Object.entries(out)) {
    if (d.ttl_s !== null && d.ttl_s > d.max_ttl_s) ctx.problem(`JOB_DEADLINES: ${kind}'s ttl_s ${d.ttl_s} is above its max_ttl_s ${d.max_ttl_s}`);
    if (d.timeout_s !== null && d.timeout_s > d.max_timeout_s) ctx.problem(`JOB_DEADLINES: ${kind}'s timeout_s ${d.timeout_s} is above its max_timeout_s ${d.max_timeout_s}`);
  }
  return out;
}
