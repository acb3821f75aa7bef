import type { Config } from '../config.js';
import type { Stores } from '../../models/stores.js';
import type { ApiKeyAuthenticator } from '../auth/api-key-authenticator.js';
import type { RequestGate } from '../auth/request-gate.js';
import type { JobService } from './job-service.js';

/** What route handlers may use. Built once per gateway by `Gateway`. */
export interface Services {
  config: Config;
  stores: Stores;
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  jobs: JobService;
  /** Checks every backing service; throws when one is unreachable. */
  ready(): Promise<void>;
}
