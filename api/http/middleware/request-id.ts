import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { RequestState } from '../context.js';

// Echo a caller's id only when it is a plain token: it lands in logs and headers.
const SAFE_ID = /^[A-Za-z0-9._:\-]{1,128}$/;

/** Gives every request an id, echoing the caller's `X-Request-Id` when it is a safe token. */
export function requestId(): Middleware<RequestState> {
  return (ctx, next) => {
    const given = ctx.get('X-Request-Id');
    ctx.state.requestId = SAFE_ID.test(given) ? given : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    return next();
  };
}
