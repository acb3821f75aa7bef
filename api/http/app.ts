import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { Ctx, RequestState } from './context.js';
import { authenticateAccount, authenticateAccountGatedLater, authenticateAdmin } from './middleware/authenticate.js';
import { errorHandler } from './middleware/error-handler.js';
import { jsonBody } from './middleware/json-body.js';
import { requestId } from './middleware/request-id.js';
import { accessLog } from './middleware/access-log.js';
import { buildOpenApi } from './openapi.js';
import { errorStyleOf, koaPath, type RouteMiddleware, type RouteSpec } from './route-spec.js';
import { accountRoutes } from './routes/account.js';
import { adminRoutes } from './routes/admin.js';
import { artifactRoutes } from './routes/artifacts.js'; // artifacts
import { fileRoutes } from './routes/files.js';
import { botRoutes } from './routes/bots.js'; // bots
import { botPageRoutes } from './routes/bot-pages.js'; // bot pages
import { eventRoutes } from './routes/events.js';
import { fleetRoutes } from './routes/fleet.js';
import { jobRoutes } from './routes/jobs.js';
import { metaRoutes } from './routes/meta.js';
import { metricsRoutes } from './routes/metrics.js'; // metrics
import { attestationRoutes } from './routes/attestation.js'; // private tier
import { httpMetrics } from './middleware/http-metrics.js'; // metrics
import { openaiRoutes } from './routes/openai.js'; // OpenAI
import { webhookRoutes } from './routes/webhooks.js';
import { toolRoutes } from './routes/tools.js'; // tools
import type { Services } from './services.js';
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

/** The Koa application: request ids, one error renderer, then the routes of every area. */
/** Every route the application mounts, in order; the OpenAPI document is built from this very list. */
export function routeSpecs(s: Services): RouteSpec[] {
  const routes: RouteSpec[] = [...jobRoutes(s), ...eventRoutes(s), ...accountRoutes(s), ...adminRoutes(s), ...fleetRoutes(s)];
  routes.push(...artifactRoutes(s)); // artifacts: uploads stream their raw body (spec.raw)
  routes.push(...fileRoutes(s)); // files: uploads stream too
  routes.push(...webhookRoutes(s));
  routes.push(...botRoutes(s)); // bots
  routes.push(...botPageRoutes(s)); // bot pages: chatUrl's HTML and /embed.js (docs/bots-embed.md)
  routes.push(...openaiRoutes(s)); // OpenAI: errors in OpenAI's shape (errorStyle)
  routes.push(...toolRoutes(s)); // tools
  routes.push(...metricsRoutes(s)); // metrics: GET /metrics, outside /v1 (docs/api.md, "Operators' surfaces")
  routes.push(...attestationRoutes(s)); // private tier: workers' current evidence, for audits
  let openapi: unknown;
  routes.push(...metaRoutes(s, () => (openapi ??= buildOpenApi(routes, s.publicUrl(), VERSION))));
  return routes;
}

export function createApp(s: Services, log: Logger): Koa<RequestState> {
  const app = new Koa<RequestState>({ proxy: s.config.trustProxy });
  // Errors are rendered by errorHandler; Koa's own handler would only log them twice.
  app.silent = true;

  const routes = routeSpecs(s);
  const router = new Router<RequestState>();
  const account = authenticateAccount(s.auth, s.gate);
  const accountGatedLater = authenticateAccountGatedLater(s.auth, s.gate);
  const admin = authenticateAdmin(s.config.adminToken);
  const body = jsonBody({ limitBytes: s.config.jsonBodyLimitBytes, maxDepth: s.config.jsonMaxDepth });
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
  app.use(httpMetrics(s.metrics)); // metrics: outside errorHandler, so it sees the status sent
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
