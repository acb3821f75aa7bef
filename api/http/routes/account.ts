import { NotFoundError } from '../../../models/errors.js';
import { accountView, apiKeyView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { Services } from '../services.js';
import { issueWorkerToken } from '../../services/fleet/worker-tokens.js';

export function accountRoutes(s: Services): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/account',
      operationId: 'getAccount',
      summary: 'The calling account and its balance',
      tag: 'account',
      auth: 'account',
      responses: { 200: { description: 'The account', schema: S.account } },
      async handler(ctx) {
        const account = await s.stores.accounts.get(ctx.state.principal!.accountId);
        if (!account) throw new NotFoundError('account');
        ctx.body = accountView(account);
      },
    },
    {
      method: 'post',
      path: '/v1/account/keys',
      operationId: 'createApiKey',
      summary: 'Create an API key (shown once)',
      tag: 'account',
      auth: 'account',
      body: S.createKeyBody,
      responses: { 201: { description: 'The new key; `key` is shown only now', schema: S.createdKey } },
      async handler(ctx) {
        const { name } = ctx.state.body as { name?: string };
        const { record, key } = await s.auth.createKey(ctx.state.principal!.accountId, name ?? null);
        ctx.status = 201;
        ctx.body = { ...apiKeyView(record), key };
      },
    },
    {
      method: 'get',
      path: '/v1/account/keys',
      operationId: 'listApiKeys',
      summary: "The account's API keys (never the secrets)",
      tag: 'account',
      auth: 'account',
      responses: { 200: { description: 'Keys, oldest first', schema: S.keyList } },
      async handler(ctx) {
        ctx.body = { data: (await s.stores.apiKeys.list(ctx.state.principal!.accountId)).map(apiKeyView) };
      },
    },
    {
      method: 'delete',
      path: '/v1/account/keys/{key_id}',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key, at once on every gateway instance',
      tag: 'account',
      auth: 'account',
      responses: { 200: { description: 'The revoked key', schema: S.apiKey }, 404: { description: 'No such key for this account' } },
      async handler(ctx) {
        const record = await s.auth.revokeKey(ctx.state.principal!.accountId, ctx.params.key_id);
        if (!record) throw new NotFoundError('API key');
        ctx.body = apiKeyView(record);
      },
    },
    {
      method: 'post',
      path: '/v1/account/worker-tokens',
      operationId: 'createWorkerToken',
      summary: 'Mint an open-trust worker token for this account',
      tag: 'account',
      auth: 'account',
      responses: { 201: { description: 'The token; shown only now', schema: S.workerTokenCreated } },
      async handler(ctx) {
        const { record, token } = await issueWorkerToken(s.stores.workerTokens, { type: 'account', id: ctx.state.principal!.accountId }, 'open');
        ctx.status = 201;
        ctx.body = { id: record.id, worker_token: token, trust: record.trust, created_at: record.created_at };
      },
    },
  ];
}
