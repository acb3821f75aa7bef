import { SwitchyardApiError } from './errors.js';
import { TERMINAL_STATUSES, type JobResult, type JobStatus, type JsonObject } from './types.js';

/**
 * A job answer as a JobResult: its fields, `terminal` (the gateway's own flag, or derived from
 * the status where the answer has none, as the 202 of a submission), and `raw`, the body as is.
 */
export function toJobResult(body: unknown): JobResult {
  if (!body || typeof body !== 'object' || typeof (body as JsonObject).run_id !== 'string') {
    throw new SwitchyardApiError({ status: 200, code: 'invalid_response', message: 'expected a job object with a run_id', body });
  }
  const raw = body as JsonObject;
  const terminal = typeof raw.terminal === 'boolean' ? raw.terminal : TERMINAL_STATUSES.includes(raw.status as JobStatus);
  return { ...(raw as unknown as JobResult), terminal, raw };
}
