import type { Duplex } from 'node:stream';
import { ApiError, toApiError } from '../../models/errors.js';
import { rawErrorAnswer } from '../http/middleware/error-handler.js';

/**
 * Errors on the three sockets, mapped as HTTP maps them (`toApiError`): the same failure gets
 * the same code on every transport (a datastore outage is `unavailable`, never `internal`).
 */

/** Ends a refused WebSocket upgrade with the HTTP error envelope and the status of the error's code. */
export function refuseUpgrade(socket: Duplex, err: ApiError): void {
  socket.end(rawErrorAnswer(err));
}

export interface ErrorFrame {
  type: 'error';
  code: string;
  message: string;
  details?: Record<string, unknown>;
  [extra: string]: unknown;
}

/** The `error` frame for anything thrown while handling a message; `extra` names what it answers (an id, a lease). */
export function errorFrame(err: unknown, extra: Record<string, unknown> = {}): ErrorFrame {
  const e = toApiError(err);
  return { type: 'error', ...extra, code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) };
}

/** True for what the log must show: an error that is not one of the contract's answers. */
export function isUnexpected(err: unknown): boolean {
  return toApiError(err).code === 'internal';
}
