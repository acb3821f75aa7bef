import { NotFoundError, ApiError } from '../../../models/errors.js';
import { accountView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { Services } from '../services.js';
import { operatorRoutes } from './admin-operators.js';
import { modelRoutes } from './admin-models.js';

const ACCOUNT_ID = /^acct_[0-9A-HJKMNP-TV-Z]{26}$/;

export function adminRoutes(s: Services): RouteSpec[] {
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
        const account = await s.stores.accounts.create({ name, credits: credits ?? 0 });
        const { key } = await s.auth.createKey(account.id, 'initial');
        ctx.status = 201;
        ctx.body = { account: accountView(account), api_key: key };
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
        const id = ctx.params.account_id;
        if (!ACCOUNT_ID.test(id)) throw new NotFoundError('account');
        const { delta } = ctx.state.body as { delta: number };
        const account = await s.stores.accounts.adjustCredits(id, delta);
        if (!account) throw new ApiError('conflict', 'the balance would go below zero', { details: { delta } });
        ctx.body = { account: accountView(account) };
      },
    },
    ...operatorRoutes(s),
    ...modelRoutes(s),
  ];
}
