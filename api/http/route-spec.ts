import type { Middleware } from 'koa';
import type { Ctx, RequestState } from './context.js';

export type Auth = 'account' | 'admin' | 'none';

/** Shape of error bodies: the error envelope of docs/api.md, or OpenAI's (`{error: {message, type, param, code}}`). */
export type ErrorStyle = 'contract' | 'openai';

export interface ResponseSpec {
  description: string;
  schema?: object;
  headers?: Record<string, string>;
  /** Media type of a non-JSON success body (e.g. `*\/*` for artifact bytes), or `'none'` for no body (304). */
  mediaType?: string;
}

/**
 * A route and everything the OpenAPI document says about it. The router mounts these and
 * the OpenAPI builder reads them, so a documented schema is the schema that validates.
 */
export interface RouteSpec {
  /** `options`: CORS preflights of the routes browsers call cross-origin (bots). `put`: a create-or-replace at a name the caller chose. */
  method: 'get' | 'post' | 'put' | 'delete' | 'options';
  /** OpenAPI-style path, e.g. `/v1/jobs/{run_id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  auth: Auth;
  /**
   * With `auth: 'account'`: the handler runs the key's request gate (revocation, rate limit)
   * itself, through `ctx.state.gate`, so a submission can run it inside its create's script.
   * Whatever the handler does, a request is gated exactly once, and a request that fails
   * before the handler gated it is gated then, its refusal answered before the failure.
   */
  gateInHandler?: boolean;
  /** JSON Schema of the body; routes with one parse JSON. */
  body?: object;
  /**
   * The body schema the document publishes, when it says more than `body`, which validates:
   * `POST /v1/jobs` publishes one schema per kind, while the server checks the envelope first
   * and the kind's input after, to answer `unknown_kind` and the like.
   */
  publishedBody?: object;
  /** The handler reads the request body itself as a stream (artifact uploads): no JSON body parser. */
  raw?: boolean;
  /** OpenAPI security requirements, when `auth` does not say it (e.g. a lease upload token). */
  security?: Array<Record<string, string[]>>;
  /** JSON Schema of the query string (values are strings). */
  query?: object;
  /** Request headers worth documenting. */
  headers?: Array<{ name: string; description: string; schema: object }>;
  responses: Record<number, ResponseSpec>;
  /** @defaultValue 'contract'. Applies to every error on the path, auth and unknown methods included. */
  errorStyle?: ErrorStyle;
  /**
   * Runs first, before authentication, the body reader and validation, so what it sets holds
   * for their errors too (CORS headers a browser needs to read a 400).
   */
  prepare?: (ctx: Ctx) => Promise<void>;
  handler: (ctx: Ctx) => Promise<void>;
}

/** Koa path (`:param`) of an OpenAPI path (`{param}`). */
export const koaPath = (path: string): string => path.replace(/\{([a-z_]+)\}/g, ':$1');

export type RouteMiddleware = Middleware<RequestState>;

/**
 * The error style of a request path: that of the route whose path it is or lies under (so
 * `/v1/models/x/y` and a wrong method on a route answer in their route's style).
 */
export function errorStyleOf(routes: RouteSpec[]): (path: string) => ErrorStyle {
  const styled = routes
    .filter((r) => r.errorStyle && r.errorStyle !== 'contract')
    .map((r) => ({ style: r.errorStyle!, pattern: new RegExp(`^${r.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[a-z_]+\}/g, '[^/]+')}(/.*)?$`) }));
  return (path) => styled.find((s) => s.pattern.test(path))?.style ?? 'contract';
}
