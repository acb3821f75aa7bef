import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import { ApiError, UnauthorizedError } from '../../../models/errors.js';
import type { ApiKeyAuthenticator } from '../../services/auth/api-key-authenticator.js';
import type { RequestGate } from '../../services/auth/request-gate.js';
import { bearerToken, presentedKey } from '../../services/auth/bearer.js';
import type { RequestState } from '../context.js';

/** Requires a valid account key, then applies the key's gate (revocation + rate limit). */
export function authenticateAccount(auth: ApiKeyAuthenticator, gate: RequestGate): Middleware<RequestState> {
  return async (ctx, next) => {
    const secret = presentedKey(ctx.headers);
    if (!secret) throw new UnauthorizedError('an API key is required: send Authorization: Bearer <key> or X-Service-Key: <key>');
    const principal = await auth.identify(secret);
    const verdict = await gate.admit(principal.lookupId);
    if (verdict.outcome === 'revoked') throw new UnauthorizedError('the API key has been revoked');
    if (verdict.outcome === 'limited') {
      const seconds = Math.max(1, Math.ceil(verdict.retryAfterMs / 1000));
      throw new ApiError('rate_limited', `too many requests for this API key; retry in ${seconds} s`, {
        headers: { 'Retry-After': String(seconds), 'RateLimit-Limit': String(gate.limit), 'RateLimit-Remaining': '0' },
        details: { retry_after_ms: verdict.retryAfterMs },
      });
    }
    if (verdict.remaining >= 0) {
      ctx.set('RateLimit-Limit', String(gate.limit));
      ctx.set('RateLimit-Remaining', String(verdict.remaining));
    }
    ctx.state.principal = principal;
    await next();
  };
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Guards the operator API with ADMIN_TOKEN, as a bearer or as basic auth with user `admin`
 * (for browsers). Without ADMIN_TOKEN the operator API is off and every call is refused.
 */
export function authenticateAdmin(adminToken: string | undefined): Middleware<RequestState> {
  const expected = adminToken ? digest(adminToken) : null;
  return async (ctx, next) => {
    if (!expected) throw new UnauthorizedError('the admin API is disabled: set ADMIN_TOKEN to enable it');
    const header = ctx.get('Authorization');
    let presented = bearerToken(header);
    const basic = /^Basic[ ]+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (basic) {
      const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon > 0 && decoded.slice(0, colon) === 'admin') presented = decoded.slice(colon + 1);
    }
    if (presented === null || !timingSafeEqual(digest(presented), expected)) {
      throw new UnauthorizedError('a valid admin token is required');
    }
    await next();
  };
}
