import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { Ctx, RequestState } from './context.js';
import { authenticateAccount, authenticateAccountGatedLater, authenticateAdmin } from './middleware/authenticate.js';
import { errorHandler } from './middleware/error-handler.js';
import { jsonBody } from './middleware/json-body.js';
import { requestId } from './middleware/request-id.js';
import { accessLog } from './middleware/access-log.js';
import { httpMetrics } from './middleware/http-metrics.js'; // metrics
import { errorStyleOf, koaPath, type RouteMiddleware, type RouteSpec } from './route-spec.js';
import type { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import type { RequestGate } from '../services/auth/request-gate.js';
import type { GatewayMetrics } from '../services/metrics/gateway-metrics.js';
import type { Config } from '../main/config.js';
import { assertValid } from '../../models/validation.js';

export const VERSION = '0.1.0';

// Plain functions returning next(), not async ones: every layer of every request would
// otherwise allocate a promise of its own for nothing (the submit benchmark's hot path).
function validated(spec: RouteSpec): RouteMiddleware | null {
  const { query, body } = spec;
  if (!query && !body) return null;
  return (ctx, next) => {
    if (query) assertValid(query, { ...ctx.query }, 'query string');
    if (body) assertValid(body, ctx.state.body, 'request body');
    return next();
  };
}

export interface AppOptions {
  /** Every route, in the order they are mounted (api/composition/routes.ts lists them). */
  routes: RouteSpec[];
  config: Pick<Config, 'trustProxy' | 'adminToken' | 'jsonBodyLimitBytes' | 'jsonMaxDepth'>;
  /** Authentication of account routes: the key, then its request gate. */
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  metrics: GatewayMetrics;
}

/** The Koa application: request ids, one error renderer, then the routes of every area. */
export function createApp(opts: AppOptions, log: Logger): Koa<RequestState> {
  const { routes, config: c } = opts;
  const app = new Koa<RequestState>({ proxy: c.trustProxy });
  // Errors are rendered by errorHandler; Koa's own handler would only log them twice.
  app.silent = true;

  const router = new Router<RequestState>();
  const account = authenticateAccount(opts.auth, opts.gate);
  const accountGatedLater = authenticateAccountGatedLater(opts.auth, opts.gate);
  const admin = authenticateAdmin(c.adminToken);
  const body = jsonBody({ limitBytes: c.jsonBodyLimitBytes, maxDepth: c.jsonMaxDepth });
  for (const spec of routes) {
    const chain: RouteMiddleware[] = [];
    if (spec.prepare) chain.push((ctx, next) => spec.prepare!(ctx as Ctx).then(next));
    if (spec.auth === 'account') chain.push(spec.gateInHandler ? accountGatedLater : account);
    if (spec.auth === 'admin') chain.push(admin);
    if (!spec.raw && (spec.body || spec.method !== 'get')) chain.push(body); // raw: the handler streams ctx.req
    const check = validated(spec);
    if (check) chain.push(check);
    router[spec.method](koaPath(spec.path), ...(chain as never[]), (ctx: Ctx) => spec.handler(ctx));
  }

  app.use(requestId());
  app.use(accessLog(log)); // logs: one line per request (docs/operations.md, "Logs")
  app.use(httpMetrics(opts.metrics)); // metrics: outside errorHandler, so it sees the status sent
  app.use(errorHandler(log, errorStyleOf(routes)));
  app.use((ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Cache-Control', 'no-store');
    return next();
  });
  app.use(router.routes() as never);
  app.use(router.allowedMethods() as never);
  return app;
}
