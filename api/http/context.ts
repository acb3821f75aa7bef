import type { RouterContext } from '@koa/router';
import type { Principal } from '../services/auth/api-key-authenticator.js';
import type { SubmitGate } from '../services/jobs/job-service.js';

/** What the middleware chain learns about a request, available to every handler. */
export interface RequestState {
  requestId: string;
  /** Set by `authenticateAccount`. */
  principal?: Principal;
  /** Set by `authenticateAccount` on routes with `gateInHandler`: the gate the handler must run. */
  gate?: SubmitGate;
  /** The parsed JSON body (set by `jsonBody`), validated by the route before its handler runs. */
  body?: unknown;
}

export type Ctx = RouterContext<RequestState>;
