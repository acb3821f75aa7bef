import type { RouteSpec } from '../route-spec.js';
import * as L from '../../contract/limit-schemas.js';
import type { LimitsService } from '../../services/accounts/limits-service.js';

export interface LimitsRoutesOptions {
  limits: LimitsService;
}

type ByKind = Record<string, number | null>;

/**
 * Concurrency limits and fair-share weights (docs/jobs.md, "Limits and fairness"): the admin's
 * on any account and key, an account's on its own keys and kinds. A PUT changes the fields it
 * names and keeps the others; each answers with the account's limits in force.
 */
export function limitsRoutes({ limits }: LimitsRoutesOptions): RouteSpec[] {
  const answer = { description: "The account's limits in force", schema: L.accountLimits };
  return [
    {
      method: 'get',
      path: '/v1/account/limits',
      operationId: 'getAccountLimits',
      summary: "The calling account's concurrency limits, its keys' and its weight",
      tag: 'account',
      auth: 'account',
      responses: { 200: answer },
      async handler(ctx) {
        ctx.body = await limits.get(ctx.state.principal!.accountId);
      },
    },
    {
      method: 'put',
      path: '/v1/account/limits',
      operationId: 'setAccountLimits',
      summary: "Set the calling account's limits per kind (none above its max_running)",
      tag: 'account',
      auth: 'account',
      body: L.accountLimitsBody,
      responses: { 200: answer },
      async handler(ctx) {
        ctx.body = await limits.setByAccount(ctx.state.principal!.accountId, ctx.state.body as { max_running_by_kind: ByKind });
      },
    },
    {
      method: 'put',
      path: '/v1/account/keys/{key_id}/limits',
      operationId: 'setApiKeyLimits',
      summary: "Set one of the calling account's keys' max_running (not above the account's)",
      tag: 'account',
      auth: 'account',
      body: L.keyLimitsBody,
      responses: { 200: answer, 404: { description: 'No such key for this account' } },
      async handler(ctx) {
        const { max_running } = ctx.state.body as { max_running: number | null };
        ctx.body = await limits.setKey(ctx.state.principal!.accountId, ctx.params.key_id, max_running, true);
      },
    },
    {
      method: 'get',
      path: '/v1/admin/accounts/{account_id}/limits',
      operationId: 'adminGetAccountLimits',
      summary: "An account's concurrency limits, its keys' and its weight",
      tag: 'admin',
      auth: 'admin',
      responses: { 200: answer, 404: { description: 'No such account' } },
      async handler(ctx) {
        ctx.body = await limits.get(ctx.params.account_id);
      },
    },
    {
      method: 'put',
      path: '/v1/admin/accounts/{account_id}/limits',
      operationId: 'adminSetAccountLimits',
      summary: "Set an account's max_running, its limits per kind and its fair-share weight",
      tag: 'admin',
      auth: 'admin',
      body: L.adminAccountLimitsBody,
      responses: { 200: answer, 404: { description: 'No such account' } },
      async handler(ctx) {
        ctx.body = await limits.setByAdmin(ctx.params.account_id, ctx.state.body as { max_running?: number | null; max_running_by_kind?: ByKind; weight?: number });
      },
    },
    {
      method: 'put',
      path: '/v1/admin/accounts/{account_id}/keys/{key_id}/limits',
      operationId: 'adminSetApiKeyLimits',
      summary: "Set an API key's max_running",
      tag: 'admin',
      auth: 'admin',
      body: L.keyLimitsBody,
      responses: { 200: answer, 404: { description: 'No such account or key' } },
      async handler(ctx) {
        const { max_running } = ctx.state.body as { max_running: number | null };
        ctx.body = await limits.setKey(ctx.params.account_id, ctx.params.key_id, max_running, false);
      },
    },
  ];
}
