import { VERSION } from '../http/app.js';
import { buildOpenApi } from '../http/openapi.js';
import type { RouteSpec } from '../http/route-spec.js';
import { accountRoutes } from '../http/routes/account.js';
import { limitsRoutes } from '../http/routes/limits.js';
import { adminRoutes } from '../http/routes/admin.js';
import { artifactRoutes } from '../http/routes/artifacts.js';
import { attestationRoutes } from '../http/routes/attestation.js';
import { batchRoutes } from '../http/routes/batches.js';
import { botPageRoutes } from '../http/routes/bot-pages.js';
import { consoleRoutes } from '../http/routes/console.js';
import { botRoutes } from '../http/routes/bots.js';
import { eventRoutes } from '../http/routes/events.js';
import { fileRoutes } from '../http/routes/files.js';
import { fleetRoutes } from '../http/routes/fleet.js';
import { jobRoutes } from '../http/routes/jobs.js';
import { metaRoutes } from '../http/routes/meta.js';
import { metricsRoutes } from '../http/routes/metrics.js';
import { openaiRoutes } from '../http/routes/openai.js';
import { toolRoutes } from '../http/routes/tools.js';
import { webhookRoutes } from '../http/routes/webhooks.js';
import type { Services } from './services.js';

/**
 * Every route the application mounts, in order, each module given only the services it calls
 * (as a Fastify plugin is registered with its own options): a route module declares what it
 * needs and cannot reach a store or a part it was not handed. The OpenAPI document is built
 * from this very list.
 */
export function routeSpecs(s: Services): RouteSpec[] {
  const routes: RouteSpec[] = [
    ...jobRoutes({ jobs: s.jobs, follower: s.follower, shutdown: s.shutdown }),
    ...eventRoutes({ jobs: s.jobs, sse: s.sse }),
    ...batchRoutes({ batches: s.batches, follower: s.batchFollower, sse: s.sse }),
    ...accountRoutes({ accounts: s.accounts, keys: s.auth }),
    ...adminRoutes({ accounts: s.accounts, operators: s.operators, models: s.models }),
    ...limitsRoutes({ limits: s.limits }),
    ...fleetRoutes({ fleet: s.fleet }),
    ...artifactRoutes({ artifacts: s.artifactService }), // uploads stream their raw body (spec.raw)
    ...fileRoutes({ files: s.files }), // uploads stream too
    ...webhookRoutes({ jobs: s.jobs, webhooks: s.webhooks }),
    ...botRoutes({ bots: s.bots, botTurns: s.botTurns }),
    ...botPageRoutes({ bots: s.bots, publicUrl: s.publicUrl }), // chatUrl's HTML and /embed.js (docs/bots-embed.md)
    ...consoleRoutes({ signIn: s.consoleSignIn, enabled: s.config.console.enabled, publicUrl: s.publicUrl }), // the web console at / (docs/console.md)
    ...openaiRoutes({ openai: s.openai }), // errors in OpenAI's shape (errorStyle)
    ...toolRoutes({ tools: s.tools }),
    ...metricsRoutes({ metrics: s.metrics, token: s.config.metricsToken }), // GET /metrics, outside /v1 (docs/api.md, "Operators' surfaces")
    ...attestationRoutes({ attestation: s.attestation }), // private tier: workers' current evidence, for audits
  ];
  let openapi: unknown;
  routes.push(...metaRoutes({ ready: s.ready, openapi: () => (openapi ??= buildOpenApi(routes, s.publicUrl(), VERSION)) }));
  return routes;
}
