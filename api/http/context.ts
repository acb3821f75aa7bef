import type { RouterContext } from '@koa/router';
import type { Principal } from '../services/auth/api-key-authenticator.js';

/** What the middleware chain learns about a request, available to every handler. */
export interface RequestState {
  requestId: string;
  /** Set by `authenticateAccount`. */
  principal?: Principal;
  /** The parsed JSON body (set by `jsonBody`), validated by the route before its handler runs. */
  body?: unknown;
}

export type Ctx = RouterContext<RequestState>;
