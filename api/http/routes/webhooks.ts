import { NotFoundError } from '../../../models/errors.js';
import { RUN_ID_PATTERN } from '../../../models/ids.js';
import type { WebhookSecret } from '../../../models/types.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { JobService } from '../../services/jobs/job-service.js';
import type { WebhookService } from '../../services/webhooks/webhook-service.js';

/** A route of the account area that answers the account's signing secret. */
function secretRoute(method: 'get' | 'post', path: string, operationId: string, summary: string, secret: (accountId: string) => Promise<WebhookSecret>): RouteSpec {
  return {
    method,
    path,
    operationId,
    summary,
    tag: 'account',
    auth: 'account',
    responses: { 200: { description: 'The signing secret', schema: S.webhookSecret } },
    async handler(ctx) {
      ctx.body = await secret(ctx.state.principal!.accountId);
    },
  };
}

export interface WebhookRoutesOptions {
  /** Whose runs the caller may see. */
  jobs: JobService;
  webhooks: WebhookService;
}

/** Webhook deliveries of a job, and the account's signing secret (docs/webhooks.md). */
export function webhookRoutes({ jobs, webhooks }: WebhookRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/jobs/{run_id}/webhooks',
      operationId: 'listJobWebhookAttempts',
      summary: "Delivery attempts of a job's webhook, oldest first",
      tag: 'jobs',
      auth: 'account',
      responses: { 200: { description: 'Attempts', schema: S.webhookAttemptList }, 404: { description: 'No such run for this account' } },
      async handler(ctx) {
        const runId = ctx.params.run_id;
        if (!RUN_ID_PATTERN.test(runId)) throw new NotFoundError('run');
        await jobs.get(ctx.state.principal!.accountId, runId);
        ctx.body = { data: await webhooks.attemptsOf(runId) };
      },
    },
    secretRoute('get', '/v1/account/webhook-secret', 'getWebhookSecret', 'The secret that signs webhooks (created on first read)', (id) => webhooks.secret(id)),
    secretRoute('post', '/v1/account/webhook-secret/rotate', 'rotateWebhookSecret', 'Replace the webhook signing secret; later attempts are signed with the new one', (id) =>
      webhooks.rotateSecret(id),
    ),
  ];
}
