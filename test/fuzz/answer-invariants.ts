import { ERROR_STATUS } from '../../models/errors.js';
import type { Operation } from './operation-requests.js';
import type { RawAnswer } from './raw-http.js';

/**
 * What is wrong with one answer, or null. The per-request invariants of docs/reliability.md
 * ("Fuzzing"): no 5xx (a 503 `unavailable` only where the operation documents one, for a
 * dependency the fuzz world leaves out on purpose: no llm worker is connected), and every error
 * in its route's documented shape: the envelope `{error: {code, message}}` with a code of
 * models/errors.ts whose status is the answer's, or OpenAI's `{error: {message, type, param, code}}`
 * on the OpenAI routes.
 */
export function answerViolation(o: Operation, method: string, res: RawAnswer): string | null {
  if (res.status >= 500) {
    const declared = res.status === 503 && o.op.responses?.['503'] && parseError(res)?.code === 'unavailable';
    if (!declared) return `${res.status} answer: ${res.body.toString('utf8').slice(0, 500)}`;
  }
  if (res.status < 400 || method === 'HEAD') return null;
  const type = String(res.headers['content-type'] ?? '');
  if (!/^application\/json\b/.test(type)) return `${res.status} answer with content-type ${JSON.stringify(type)}, not the JSON error: ${res.body.toString('utf8').slice(0, 200)}`;
  const error = parseError(res);
  if (!error) return `${res.status} answer is not {error: {...}}: ${res.body.toString('utf8').slice(0, 300)}`;
  if (typeof error.message !== 'string' || !error.message) return `${res.status} error without a message: ${res.body.toString('utf8').slice(0, 300)}`;
  if (o.openAiErrors) {
    if (typeof error.type !== 'string' || !('param' in error) || !('code' in error)) return `${res.status} error is not OpenAI's shape (message, type, param, code): ${res.body.toString('utf8').slice(0, 300)}`;
    return null;
  }
  if (typeof error.code !== 'string' || !Object.hasOwn(ERROR_STATUS, error.code)) return `${res.status} error code ${JSON.stringify(error.code)} is not in ERROR_STATUS`;
  const expected = ERROR_STATUS[error.code as keyof typeof ERROR_STATUS];
  if (expected !== res.status) return `error code ${error.code} answered with ${res.status}, ERROR_STATUS says ${expected}`;
  return null;
}

function parseError(res: RawAnswer): Record<string, any> | null {
  try {
    const body = JSON.parse(res.body.toString('utf8'));
    return body && typeof body.error === 'object' && body.error !== null ? body.error : null;
  } catch {
    return null;
  }
}
