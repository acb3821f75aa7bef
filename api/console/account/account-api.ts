import { api } from '../lib/gateway.js';

/**
 * The account routes the client library has no methods for (docs/api.md, "Account"), typed as
 * the gateway answers them.
 */

export interface AccountInfo {
  id: string;
  name: string;
  /** What the account can still spend, reservations already taken off. */
  credits: number;
  /** Held by runs in flight. */
  reserved: number;
  created_at?: string;
  budget: { monthly: number; period: string; spent: number } | null;
}

export interface ApiKeyInfo {
  id: string;
  prefix: string;
  name: string | null;
  created_at: string;
  revoked_at: string | null;
}

export interface WorkerTokenInfo {
  id: string;
  worker_token: string;
  trust: string;
  created_at: string;
}

export const getAccount = () => api<AccountInfo>('GET', '/v1/account');
export const listKeys = async () => (await api<{ data: ApiKeyInfo[] }>('GET', '/v1/account/keys')).data;
/** The answer's `key` is the only time the secret is ever shown. */
export const createKey = (name: string) => api<ApiKeyInfo & { key: string }>('POST', '/v1/account/keys', name ? { name } : {});
export const revokeKey = (id: string) => api<ApiKeyInfo>('DELETE', `/v1/account/keys/${encodeURIComponent(id)}`);
export const mintWorkerToken = () => api<WorkerTokenInfo>('POST', '/v1/account/worker-tokens');
