import { SwitchyardApiError, SwitchyardClient } from '../../../sdk/client/index.js';
import { clearSession, getSession, setSession, type Session } from './session.js';

/**
 * The gateway, as the page talks to it: the client library for what it covers, `api()` for the
 * rest, both same-origin with the session's key. A 401 ends the session (a revoked key, a
 * wiped store) and sends the page to sign in again.
 */

/** The gateway's base URL as this page reaches it: its origin and <base> path. */
export const gatewayBase = new URL(document.baseURI).href.replace(/\/+$/, '');

/** PUBLIC_URL as the gateway announces it: links it hands out (artifact URLs) begin with it, and machines elsewhere reach it by. */
export const publicUrl = (document.querySelector('meta[name="switchyard-public-url"]')?.getAttribute('content') ?? gatewayBase).replace(/\/+$/, '');

/**
 * A URL the gateway handed out, made to point at the origin this page came from: the page may
 * be opened as localhost while PUBLIC_URL says 127.0.0.1, and the CSP lets the page load only
 * from its own origin. URLs of other hosts are returned as they are.
 */
export function localUrl(url: string): string {
  if (url.startsWith(publicUrl)) return `${gatewayBase}${url.slice(publicUrl.length)}`;
  return url;
}

let onSignedOut: () => void = () => {};
/** What the app does when the session ends (set once by the app). */
export function whenSignedOut(fn: () => void): void {
  onSignedOut = fn;
}

function unauthorized(): void {
  clearSession();
  onSignedOut();
}

/** fetch with the session's key, ending the session on a 401. */
export const authedFetch: typeof fetch = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  const s = getSession();
  if (s && !headers.has('authorization')) headers.set('authorization', `Bearer ${s.apiKey}`);
  const res = await fetch(input, { ...init, headers });
  if (res.status === 401 && s) unauthorized();
  return res;
};

let cached: { key: string; client: SwitchyardClient } | null = null;
/** The client library for the session's key. */
export function client(): SwitchyardClient {
  const s = getSession();
  const key = s?.apiKey ?? '';
  if (!cached || cached.key !== key) cached = { key, client: new SwitchyardClient({ baseUrl: gatewayBase, apiKey: key || undefined, fetch: authedFetch }) };
  return cached.client;
}

/** An error the gateway answered, in its envelope's terms. */
export class GatewayError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly details?: Record<string, unknown>) {
    super(message);
  }
}

/** A message fit to show for any error the page met. */
export function errorMessage(err: unknown): string {
  if (err instanceof GatewayError || err instanceof SwitchyardApiError) return `${err.message} (${err.code})`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** A JSON call of the API (a path from /v1), answered with its body or thrown as a GatewayError. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await authedFetch(`${gatewayBase}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) {
    const e = (parsed as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)?.error;
    throw new GatewayError(res.status, e?.code ?? 'error', e?.message ?? `${res.status} ${res.statusText}`, e?.details);
  }
  return parsed as T;
}

/** Trades a sign-in link's code for a session. */
export async function redeemSignInCode(code: string): Promise<Session> {
  const s = await api<{ api_key: string; key_id: string; account_id: string }>('POST', '/v1/console/sign-in', { code });
  const session = { apiKey: s.api_key, keyId: s.key_id, accountId: s.account_id };
  setSession(session);
  return session;
}

/** Checks a pasted key (GET /v1/account) and keeps it. */
export async function signInWithKey(apiKey: string): Promise<Session> {
  const res = await fetch(`${gatewayBase}/v1/account`, { headers: { authorization: `Bearer ${apiKey}` } });
  if (!res.ok) throw new GatewayError(res.status, 'unauthorized', res.status === 401 ? 'That API key is not valid (unknown or revoked).' : `The gateway answered ${res.status}.`);
  const account = (await res.json()) as { id: string };
  const session = { apiKey, accountId: account.id };
  setSession(session);
  return session;
}

/** Signs out: a key the sign-in link minted is revoked, a pasted one only forgotten. */
export async function signOut(): Promise<void> {
  const s = getSession();
  if (s?.keyId) await api('DELETE', `/v1/account/keys/${encodeURIComponent(s.keyId)}`).catch(() => undefined);
  clearSession();
  onSignedOut();
}
