import { AttestationService } from '../../dispatch/attestation/attestation-service.js';
import { Dispatcher } from '../../dispatch/dispatcher.js';
import { LeaseStore } from '../../dispatch/lease-store.js';
import { PrivateRegistrations } from '../../dispatch/private-registration.js';
import { ReceiptChecker } from '../../dispatch/receipt-check.js';
import { TrustEnforcer } from '../../dispatch/trust-enforcer.js';
import type { ArtifactStore } from '../../models/artifact-store.js';
import { WorkerSocketServer } from '../sockets/worker-socket-server.js';
import type { Core } from './core.js';

/** The remote workers' side: leases, dispatch, private-tier evidence, operator trust, and their socket. */
export interface Fleet {
  leases: LeaseStore;
  dispatcher: Dispatcher;
  /** Private workers' evidence, checked at registration and refreshed (docs/confidentiality.md). */
  attestation: AttestationService;
  /** Operator trust changes reach the workers registered on every instance. */
  trust: TrustEnforcer;
  workerServer: WorkerSocketServer;
}

export function buildFleet(core: Core, artifacts: ArtifactStore, workerAliasKey?: Buffer): Fleet {
  const { config: c, log } = core;
  const leases = new LeaseStore(core.redis, c.redisPrefix);
  const dispatcher = new Dispatcher({
    redis: core.redis,
    subscriber: core.subscriber,
    bullConnection: core.bullConnection,
    prefix: c.redisPrefix,
    queuePrefixOf: core.keys.queuePrefixOf,
    partitions: core.partitions,
    runs: core.runs,
    // A dead instance's workers leave the counts within one heartbeat interval (at least a second).
    fleetTtlMs: Math.max(c.heartbeatMs, 1000),
    leases,
    log,
    publicUrl: core.publicUrl.get,
    maxAttempts: c.jobMaxAttempts,
    workerAliasKey,
    retryBackoffMs: c.retryBackoffMs,
    retryBackoffMaxMs: c.retryBackoffMaxMs,
    artifacts,
    gatewayId: core.gatewayId,
    leaseTtlMs: c.leaseTtlMs,
    heartbeatMs: c.heartbeatMs,
    rankBufferBytes: c.rankBufferBytes,
    events: core.events,
    metrics: core.metrics,
    replicas: core.replicas,
    // Private runs end with a receipt over the artifacts they uploaded.
    catalogue: core.stores.models,
    receipts: new ReceiptChecker({ artifacts, publicUrl: core.publicUrl.get }),
    limits: { accounts: core.stores.accounts, apiKeys: core.stores.apiKeys, accountMaxRunning: c.accountMaxRunning, keyMaxRunning: c.keyMaxRunning },
  });
  const attestation = new AttestationService({ redis: core.redis, prefix: c.redisPrefix, config: c.attestation });
  const privateWorkers = new PrivateRegistrations({ service: attestation, dispatcher, log, refreshBeforeMs: c.attestation.refreshBeforeMs, nonceTtlMs: c.attestation.nonceTtlMs });
  const trust = new TrustEnforcer({ redis: core.redis, subscriber: core.subscriber, prefix: c.redisPrefix, operators: core.stores.operators, dispatcher, log });
  const workerServer = new WorkerSocketServer({
    dispatcher,
    workerTokens: core.stores.workerTokens,
    operators: core.stores.operators,
    gatewayId: core.gatewayId,
    log,
    trust,
    attestation: privateWorkers,
  });
  return { leases, dispatcher, attestation, trust, workerServer };
}
