import { mintSecret } from '../../../models/credentials.js';
import type { WorkerTokenStore } from '../../../models/stores.js';
import type { OperatorTrust, WorkerTokenRecord } from '../../../models/types.js';

/** Mints a worker token (shown once; only its hash is kept) for an operator or an account. */
export async function issueWorkerToken(
  store: WorkerTokenStore,
  owner: WorkerTokenRecord['owner'],
  trust: OperatorTrust,
): Promise<{ record: WorkerTokenRecord; token: string }> {
  const minted = mintSecret('swt');
  const record: WorkerTokenRecord = {
    id: `wtok_${minted.lookupId}`,
    owner,
    trust,
    prefix: minted.prefix,
    hash: minted.hash,
    created_at: new Date().toISOString(),
    revoked_at: null,
  };
  await store.insert(record, minted.lookupId);
  return { record, token: minted.secret };
}
