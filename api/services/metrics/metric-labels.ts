import { KIND_NAMES } from '../../../models/kinds.js';
import type { WebhookOutcome } from '../../../sdk/client/types.js';

/**
 * The label values metrics may carry. Every one is a fixed set, so no request, id or error
 * message can grow a series: Prometheus keeps one time series per distinct label set.
 */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
/** The route label of requests that matched no route (404s, 405s, stray paths). */
export const UNMATCHED_ROUTE = 'unmatched';
export const QUEUE_STATES = ['waiting', 'prioritized', 'delayed', 'active'] as const;
/** `unavailable`: the idle slots of a worker whose backend does not answer (protocol 5 `backend`). */
export const SLOT_STATES = ['busy', 'free', 'unavailable'] as const;
export const SOCKET_SURFACES = ['caller', 'worker', 'bot'] as const;
export type SocketSurface = (typeof SOCKET_SURFACES)[number];
export const WEBHOOK_OUTCOMES = ['delivered', 'retrying', 'gave_up', 'failed'] as const satisfies readonly WebhookOutcome[];
export const TOOL_OUTCOMES = ['ok', 'failed'] as const;
export const TERMINAL_LABELS = ['succeeded', 'failed', 'canceled'] as const;

/** Any other method (Node parses dozens, WebDAV's included) shares one value. */
export function methodLabel(method: string): string {
  return (HTTP_METHODS as readonly string[]).includes(method) ? method : 'other';
}

export function statusClass(status: number): string {
  const n = Math.floor(status / 100);
  return n >= 1 && n <= 5 ? `${n}xx` : '5xx';
}

const KIND_SET = new Set(KIND_NAMES);

/** Kinds are checked at submission; this only keeps a stray value out of the labels. */
export function kindLabel(kind: string): string {
  return KIND_SET.has(kind) ? kind : 'other';
}

/** Queueing and running times of GPU work: from a fraction of a second to an hour. */
export const JOB_SECONDS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];
/** Fetch to lease frame: one store round trip or two, so sub-millisecond to about a second. */
export const DISPATCH_SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** HTTP answers, up to the 60 s a `Prefer: wait` may hold one. */
export const HTTP_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
