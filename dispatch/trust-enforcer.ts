import { pubsub } from '../models/redis-pubsub.js';
import { RedisKeys } from '../models/redis/keys.js';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { OperatorStore } from '../models/stores.js';
import type { OperatorTrust } from '../models/types.js';
import { TIERS } from '../models/kinds.js';
import { queueName, unpartitioned } from '../queues/queue-names.js';
import { TIER_RANK, type ConnectedWorker } from './connected-worker.js';
import type { Dispatcher } from './dispatcher.js';

export interface TrustEnforcerOptions {
  /** Command connection, to publish on. */
  redis: RedisClient;
  /** The process's shared subscriber connection (the dispatcher's and the event hub's). */
  subscriber: RedisClient;
  prefix: string;
  operators: OperatorStore;
  dispatcher: Dispatcher;
  log: Logger;
}

/** Close code and error frame code a worker gets when its operator's trust no longer covers its tier. */
export const TRUST_REVOKED_CLOSE = 4403;
export const TRUST_REVOKED_CODE = 'trust_revoked';

/**
 * Whether the worker takes work of a tier that vetting grants and `trust` no longer covers.
 * Private work rests on the worker's attestation, not on vetting, so it is not what is taken
 * back; but a private worker of a vetted operator also serves trusted work, and that is.
 * Read from the queues it was given at attach, so it holds however its tiers were chosen.
 */
export function revokedBy(worker: ConnectedWorker, trust: OperatorTrust): boolean {
  const served = new Set(worker.queues.flat().map(unpartitioned));
  return TIERS.some((t) => t !== 'private' && TIER_RANK[t] > TIER_RANK[trust] && worker.info.kinds.some((k) => served.has(queueName(k, t))));
}

/**
 * Makes an operator's trust change bite at once on every gateway instance. A new socket reads
 * the trust at connect, but one already registered keeps its tier, so the admin API announces
 * each change on `<prefix>:chan:operators` and every instance closes its own workers of that
 * operator that serve a tier its trust no longer covers (`revokedBy`). Their leases are lost through the ordinary
 * detach path (requeued, attempt + 1). The message carries only the operator id: each instance
 * reads the trust from the store, so changes that cross in flight still end on the stored one.
 */
export class TrustEnforcer {
  readonly channel: string;

  constructor(private readonly opts: TrustEnforcerOptions) {
    this.channel = new RedisKeys(opts.prefix).operatorsChannel();
  }

  async start(): Promise<void> {
    const { subscriber } = this.opts;
    await pubsub.subscribe(subscriber, [this.channel]);
    pubsub.onMessage(subscriber, (channel, operatorId) => {
      if (channel === this.channel) void this.enforce(operatorId);
    });
    // Announcements made while the subscriber was reconnecting are lost: check every local operator again.
    pubsub.onResubscribed(subscriber, () => {
      const operators = new Set(this.opts.dispatcher.localWorkers().filter((w) => w.owner.type === 'operator').map((w) => w.owner.id));
      for (const id of operators) void this.enforce(id);
    });
  }

  /** Tells every instance (this one included) that `operatorId`'s trust changed. */
  async announce(operatorId: string): Promise<void> {
    await pubsub.publish(this.opts.redis, this.channel, operatorId);
  }

  /**
   * Closes this instance's workers of the operator that its stored trust no longer covers.
   * Also called right after a worker attaches: a socket authenticated just before a demotion
   * and registered just after this instance handled the announcement is caught there.
   */
  async enforce(operatorId: string): Promise<void> {
    // Open workers serve only open work, which no trust change takes away.
    const workers = this.opts.dispatcher.workersOf({ type: 'operator', id: operatorId }).filter((w) => w.info.tier !== 'open');
    if (workers.length === 0) return;
    try {
      // An operator that is gone counts as open: nothing vouches for its machines any more.
      const trust = (await this.opts.operators.get(operatorId))?.trust ?? 'open';
      await Promise.all(workers.filter((w) => revokedBy(w, trust)).map((w) => this.disconnect(w, trust)));
    } catch (err) {
      this.opts.log.warn({ err, operatorId }, 'could not apply a trust change; it applies when its workers reconnect');
    }
  }

  private async disconnect(worker: ConnectedWorker, trust: OperatorTrust): Promise<void> {
    this.opts.log.info({ workerId: worker.info.worker_id, tier: worker.info.tier, trust, leases: worker.leases.size }, 'worker trust revoked');
    worker.send({ type: 'error', code: TRUST_REVOKED_CODE, message: `the operator's trust is now ${trust}: this ${worker.info.tier} worker may no longer take work above ${trust}; connect again with a tier that trust allows` });
    // Detached here rather than on the socket's close event, which waits for the worker's close handshake.
    await this.opts.dispatcher.detach(worker, TRUST_REVOKED_CLOSE, 'trust revoked', 'disconnect');
  }
}
