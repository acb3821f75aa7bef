import type { ApiError } from '../../../models/errors.js';

/**
 * OpenAI's error `type` for an HTTP status. Clients branch on it (and the SDKs on the status),
 * so it follows OpenAI's own vocabulary; `code` stays the gateway's error code.
 */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

/** A JSON pointer (`/messages/0/role`) in OpenAI's param notation (`messages[0].role`). */
function paramOfPointer(pointer: string): string | null {
  const segments = pointer.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (segments.length === 0 || segments[0] === '') return null;
  return segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

/**
 * The request field at fault: `details.param` when the thrower named it, else the first
 * schema error's path (what `assertValid` puts in `details.errors`), else null.
 */
export function paramOf(err: ApiError): string | null {
  const details = err.details ?? {};
  if (typeof details.param === 'string') return details.param;
  const first = Array.isArray(details.errors) ? (details.errors[0] as { path?: unknown } | undefined) : undefined;
  return typeof first?.path === 'string' ? paramOfPointer(first.path) : null;
}

/**
 * OpenAI's error envelope `{error: {message, type, param, code}}`. It keeps the error envelope
 * fields (`code`, `message`, `details`), so it is also a valid envelope of docs/api.md.
 */
export function openAiErrorBody(err: ApiError): { error: Record<string, unknown> } {
  const error: Record<string, unknown> = { message: err.message, type: openAiErrorType(err.status), param: paramOf(err), code: err.code };
  if (err.details) error.details = err.details;
  return { error };
}
