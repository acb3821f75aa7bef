import { NotFoundError } from '../../../models/errors.js';
import { accountView, apiKeyView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { AccountService } from '../../services/accounts/account-service.js';
import type { ApiKeyAuthenticator } from '../../services/auth/api-key-authenticator.js';

export interface AccountRoutesOptions {
  accounts: AccountService;
  /** The account's API keys: minted, listed and revoked where keys are checked. */
  keys: ApiKeyAuthenticator;
}

/** The calling account: its balance, API keys and worker tokens. */
export function accountRoutes({ accounts, keys }: AccountRoutesOptions): RouteSpec[] {
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
        ctx.body = accountView(await accounts.get(ctx.state.principal!.accountId));
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
        const { record, key } = await keys.createKey(ctx.state.principal!.accountId, name ?? null);
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
        ctx.body = { data: (await keys.listKeys(ctx.state.principal!.accountId)).map(apiKeyView) };
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
        const record = await keys.revokeKey(ctx.state.principal!.accountId, ctx.params.key_id);
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
        const { record, token } = await accounts.issueWorkerToken(ctx.state.principal!.accountId);
        ctx.status = 201;
        ctx.body = { id: record.id, worker_token: token, trust: record.trust, created_at: record.created_at };
      },
    },
  ];
}
