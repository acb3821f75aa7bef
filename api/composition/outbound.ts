import { WebhookQueue } from '../../queues/webhook-queue.js';
import { SsrfGuard } from '../services/outbound/ssrf-guard.js';
import type { ToolSecretKey } from '../services/tools/tool-secret-key.js';
import { ToolService } from '../services/tools/tool-service.js';
import { WebhookAttemptLog } from '../services/webhooks/attempt-log.js';
import { WebhookService } from '../services/webhooks/webhook-service.js';
import type { Core } from './core.js';

/** Every call to a URL an account gave: webhooks and custom tools, all through one SSRF guard. */
export interface Outbound {
  guard: SsrfGuard;
  /** Deliveries queued when a run starts or ends; every instance's webhook worker sends them (docs/webhooks.md). */
  webhookQueue: WebhookQueue;
  webhooks: WebhookService;
  /** Custom tools, secrets sealed with the tool secret key (docs/tools.md). */
  tools: ToolService;
}

export function buildOutbound(core: Core, toolKey: ToolSecretKey): Outbound {
  const { config: c, log } = core;
  const guard = new SsrfGuard(c.outbound);
  const webhookQueue = new WebhookQueue({ connection: core.queueConnection, prefixOf: core.keys.queuePrefixOf, retryDelaysMs: c.webhooks.retryDelaysMs });
  const webhooks = new WebhookService({
    queue: webhookQueue,
    attempts: new WebhookAttemptLog({ redis: core.redis, keys: core.keys, ttlSeconds: c.runRetentionSeconds }),
    accounts: core.stores.accounts,
    outbound: guard,
    log,
    metrics: core.metrics,
    runs: core.runs,
    eventLog: core.eventLog,
  });
  core.runs.onStatusChange(webhooks.statusChanged);
  core.events.onReported(webhooks.reported);
  const tools = new ToolService({ store: core.stores.tools, outbound: guard, secretKey: toolKey.key, metrics: core.metrics });
  return { guard, webhookQueue, webhooks, tools };
}
