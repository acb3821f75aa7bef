import { accountView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import { adminBudgetBody } from '../../contract/cost-schemas.js';
import type { AccountService } from '../../services/accounts/account-service.js';
import { operatorRoutes, type OperatorRoutesOptions } from './admin-operators.js';
import { modelRoutes, type ModelRoutesOptions } from './admin-models.js';

export interface AdminRoutesOptions extends OperatorRoutesOptions, ModelRoutesOptions {
  accounts: AccountService;
}

/** The operators' API behind ADMIN_TOKEN: accounts and credits, worker operators, the model catalogue. */
export function adminRoutes(opts: AdminRoutesOptions): RouteSpec[] {
  const { accounts } = opts;
  return [
    {
      method: 'post',
      path: '/v1/admin/accounts',
      operationId: 'adminCreateAccount',
      summary: 'Create an account and its first API key',
      tag: 'admin',
      auth: 'admin',
      body: S.adminCreateAccountBody,
      responses: { 201: { description: 'The account and its API key (shown once)', schema: S.adminAccountCreated } },
      async handler(ctx) {
        const { name, credits } = ctx.state.body as { name: string; credits?: number };
        const { account, apiKey } = await accounts.open({ name, credits: credits ?? 0 });
        ctx.status = 201;
        ctx.body = { account: accountView(account), api_key: apiKey };
      },
    },
    {
      method: 'post',
      path: '/v1/admin/accounts/{account_id}/credits',
      operationId: 'adminAdjustCredits',
      summary: "Add to (or take from) an account's credits",
      tag: 'admin',
      auth: 'admin',
      body: S.adminCreditsBody,
      responses: {
        200: { description: 'The account after the change', schema: S.adminCreditsResult },
        404: { description: 'No such account' },
        409: { description: 'The balance would go below zero' },
      },
      async handler(ctx) {
        const { delta } = ctx.state.body as { delta: number };
        ctx.body = { account: accountView(await accounts.adjustCredits(ctx.params.account_id, delta)) };
      },
    },
    {
      method: 'put',
      path: '/v1/admin/accounts/{account_id}/budget',
      operationId: 'adminSetBudget',
      summary: "Set an account's monthly budget (null removes it)",
      tag: 'admin',
      auth: 'admin',
      body: adminBudgetBody,
      responses: { 200: { description: 'The account after the change', schema: S.adminCreditsResult }, 404: { description: 'No such account' } },
      async handler(ctx) {
        const { budget } = ctx.state.body as { budget: number | null };
        ctx.body = { account: accountView(await accounts.setBudget(ctx.params.account_id, budget)) };
      },
    },
    ...operatorRoutes(opts),
    ...modelRoutes(opts),
  ];
}
