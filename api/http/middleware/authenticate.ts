import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import { ApiError, UnauthorizedError } from '../../../models/errors.js';
import type { ApiKeyAuthenticator, Principal } from '../../services/auth/api-key-authenticator.js';
import { waitSeconds, type GateVerdict, type RequestGate } from '../../services/auth/request-gate.js';
import { bearerToken, presentedKey } from '../../services/auth/bearer.js';
import type { RequestState } from '../context.js';

/** Requires a valid account key, then applies the key's gate (revocation + rate limit). */
export function authenticateAccount(auth: ApiKeyAuthenticator, gate: RequestGate): Middleware<RequestState> {
  return async (ctx, next) => {
    const principal = await identify(auth, ctx);
    admitted(ctx, gate, await gate.admit(principal));
    ctx.state.principal = principal;
    await next();
  };
}

/**
 * `authenticateAccount` for routes whose handler runs the gate (`gateInHandler`): the key is
 * identified here, the gate is left in `ctx.state.gate`. If the request fails before the
 * handler ran the gate (a bad body, an invalid input), the gate runs then: it counts against
 * the limit like any request, and a revoked or limited key gets that answer, not the failure's.
 */
export function authenticateAccountGatedLater(auth: ApiKeyAuthenticator, gate: RequestGate): Middleware<RequestState> {
  return async (ctx, next) => {
    const principal = await identify(auth, ctx);
    let ran = false;
    const once = () => {
      if (ran) throw new Error('the request gate ran twice');
      ran = true;
    };
    ctx.state.principal = principal;
    ctx.state.gate = {
      check: gate.check(principal),
      admit: async () => {
        once();
        admitted(ctx, gate, await gate.admit(principal));
      },
      settle: (verdict) => {
        once();
        admitted(ctx, gate, verdict);
      },
    };
    try {
      await next();
    } catch (err) {
      if (!ran) {
        ran = true;
        admitted(ctx, gate, await gate.admit(principal));
      }
      throw err;
    }
    // A handler that answered without gating would let a revoked key through: refuse to.
    if (!ran) throw new Error(`${ctx.method} ${ctx.path} answered without running the request gate`);
  };
}

async function identify(auth: ApiKeyAuthenticator, ctx: Parameters<Middleware<RequestState>>[0]): Promise<Principal> {
  const secret = presentedKey(ctx.headers);
  if (!secret) throw new UnauthorizedError('an API key is required: send Authorization: Bearer <key> or X-Service-Key: <key>');
  return auth.identify(secret);
}

/** Throws the gate's refusal, or sets the rate-limit headers of an admitted request. */
function admitted(ctx: { set(field: string, value: string): void }, gate: RequestGate, verdict: GateVerdict): void {
  if (verdict.outcome === 'revoked') throw new UnauthorizedError('the API key has been revoked');
  if (verdict.outcome === 'limited') {
    const seconds = waitSeconds(verdict.retryAfterMs);
    throw new ApiError('rate_limited', `too many requests for this API key; retry in ${seconds} s`, {
      headers: { 'Retry-After': String(seconds), ...gate.fields(verdict) },
      details: { retry_after_ms: verdict.retryAfterMs },
    });
  }
  for (const [field, value] of Object.entries(gate.fields(verdict))) ctx.set(field, value);
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
