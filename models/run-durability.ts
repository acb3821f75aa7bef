import type { ReplicaWaiter } from './replica-waiter.js';
import type { RunStore } from './stores.js';
import { isTerminal } from './types.js';

/**
 * REDIS_WAIT_REPLICAS for the writes of runs: what "still there" means for each step that
 * waits, in one place. `ReplicaWaiter` waits; short of the replicas it asks whether the write
 * survived, and this is the answer: an accepted run exists, an accepted batch exists, a settled
 * run is terminal (a failover that took the settle brings it back queued or running).
 */
export class RunDurability {
  /**
   * `probeOf`: the replica-wait probe in the slot of a run's (or batch's) writes
   * (`RedisKeys.replicaWaitProbeOf`: on a cluster its account group's, where its create and
   * settle ran), so the wait covers the primary that took them.
   */
  constructor(
    private readonly waiter: Pick<ReplicaWaiter, 'after' | 'queueWrites'>,
    private readonly runs: Pick<RunStore, 'get' | 'getBatch'>,
    private readonly probeOf: (id: string) => string,
  ) {}

  /** A run's accept (its create) is on the replicas, or still in the store. */
  accepted(runId: string): Promise<void> {
    return this.waiter.after('accept', async () => (await this.runs.get(runId)) !== null, this.probeOf(runId));
  }

  /** A batch's accept (its runs' creates) is on the replicas, or the batch still in the store. */
  batchAccepted(batchId: string): Promise<void> {
    return this.waiter.after('accept', async () => (await this.runs.getBatch(batchId)) !== null, this.probeOf(batchId));
  }

  /** A run's settle (its terminal transition) is on the replicas, or the run still terminal. */
  settled(runId: string): Promise<void> {
    return this.waiter.after('settle', async () => isTerminal((await this.runs.get(runId))?.status ?? 'queued'), this.probeOf(runId));
  }

  /** Whether a queue's writes (a job's add) reached the replicas (`ReplicaWaiter.queueWrites`). */
  queueWrites(queue: string): Promise<boolean> {
    return this.waiter.queueWrites(queue);
  }
}
