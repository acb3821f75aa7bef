import { pubsub } from '../models/redis-pubsub.js';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import { SUPERSEDED_CLOSE, SUPERSEDED_CODE } from '../sdk/protocol/index.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { FleetCounters } from './fleet-counters.js';

export interface WorkerIdentitiesOptions {
  /** Command connection, to publish on. */
  redis: RedisClient;
  /** The channel every instance hears registrations on. */
  channel: string;
  gatewayId: string;
  fleet: Pick<FleetCounters, 'retireElsewhere'>;
  /** The workers attached to this instance now under this identity (looked up, not scanned: every registration anywhere asks every instance). */
  withIdentity: (identity: string) => Iterable<ConnectedWorker>;
  /** Detaches a worker (its leases lost, or handed over if it was moving). */
  detach: (worker: ConnectedWorker, code: number, reason: string) => Promise<void>;
  log: Logger;
}

/**
 * One connection per worker identity (protocol 5), across every instance. A worker whose
 * socket or gateway died registers again before its old connection is noticed gone (three
 * missed heartbeats), or before a dead instance's counts expire: the new registration retires
 * the old one at once. On this instance the old connection is closed (4409 `superseded`);
 * other instances are told on `<prefix>:chan:workers` and close theirs; a dead instance's
 * entry is marked retired in its counts, which readers then leave out.
 *
 * Only an older connection is retired: two live processes sharing an identity (a configuration
 * mistake) do not close each other in turn, the older one is told why and the SDK stops it.
 */
export class WorkerIdentities {
  constructor(private readonly opts: WorkerIdentitiesOptions) {}

  /** Retires every other connection under the worker's identity; resolves once no instance counts one. */
  async claim(worker: ConnectedWorker): Promise<void> {
    const identity = worker.identity;
    if (!identity) return;
    await this.retireLocal(identity, worker.info.worker_id, 'the same worker registered again on this connection\'s instance');
    await this.opts.fleet.retireElsewhere(identity);
    await pubsub.publish(this.opts.redis, this.opts.channel, `${identity} ${worker.info.worker_id} ${this.opts.gatewayId}`);
  }

  /** Another instance's announcement: its registration retires an older connection here. */
  heard(message: string): void {
    const [identity, workerId, from] = message.split(' ');
    if (!identity || !workerId || from === this.opts.gatewayId) return;
    void this.retireLocal(identity, workerId, 'the same worker registered again on another gateway instance').catch((err: unknown) =>
      this.opts.log.warn({ err, identity }, 'could not retire a superseded worker connection; it goes when its heartbeats stop'),
    );
  }

  private async retireLocal(identity: string, newer: string, why: string): Promise<void> {
    // Worker ids are `wkr_<ULID>`: a later registration sorts after an earlier one.
    const older = [...this.opts.withIdentity(identity)].filter((w) => w.info.worker_id < newer);
    for (const w of older) {
      this.opts.log.info({ workerId: w.info.worker_id, supersededBy: newer, leases: w.leases.size }, 'worker connection superseded');
      w.send({ type: 'error', code: SUPERSEDED_CODE, message: `${why} (as ${newer}): this connection is retired; a worker seeing this on its current connection shares its identity with another process` });
      await this.opts.detach(w, SUPERSEDED_CLOSE, 'superseded');
    }
  }
}
