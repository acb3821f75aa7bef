import type { Logger } from 'pino';
import type { ConnectedWorker } from '../connected-worker.js';
import type { DispatchObserver, PipelineEnd } from '../dispatch-observer.js';
import type { ActiveLease, LeaseTable } from '../lease-table.js';
import type { LeaseStore } from '../lease-store.js';
import type { FrameRouter } from './frame-router.js';
import type { PipelineBus, PipelineControl } from './pipeline-bus.js';
import type { Pipeline } from './pipeline.js';

/** What the registry needs done to a lease, by the settlement that owns lease endings. */
export interface PipelineRegistryContext {
  /** Ends a rank lease of a pipeline that ended: its slot freed, its record deleted; the run is not touched. */
  drop(lease: ActiveLease): Promise<void>;
  /**
   * Ends the run's attempt through this rank lease held here (requeue, attempt + 1), telling its
   * worker nothing: the caller has told it `pipeline_ended` (it is not the rank that was lost).
   */
  lose(lease: ActiveLease, why: string): Promise<void>;
  /** Extends a worker's leases (its socket is paused by back-pressure, so its heartbeats wait unread). */
  heartbeat(worker: ConnectedWorker): Promise<void>;
}

export interface PipelineRegistryOptions {
  table: Pick<LeaseTable, 'get'>;
  records: Pick<LeaseStore, 'get'>;
  bus: Pick<PipelineBus, 'control'>;
  router: Pick<FrameRouter, 'forget' | 'endStream' | 'start'>;
  gatewayId: string;
  /** A pipeline ended here: what was taken for it here when it formed (its run's concurrency slots) is given back. */
  ended?(pipeline: Pipeline): void;
  metrics?: DispatchObserver;
  log: Logger;
}

/**
 * The pipelines this instance holds a rank of (docs/ranks.md): how they end as one, on every
 * instance holding one of their ranks. Whatever ends a pipeline here (its last rank finished, a
 * rank failed or was lost, the caller canceled) drops its other rank leases held here, with a
 * `cancel` (`pipeline_ended`) to their workers, and tells the other instances to do the same.
 * The run itself is settled once, by whoever ended it, through the lease that ended it: the
 * run record's fence makes any second settlement a no-op.
 */
export class PipelineRegistry {
  private readonly held = new Map<string, Pipeline>();

  constructor(
    private readonly ctx: PipelineRegistryContext,
    private readonly opts: PipelineRegistryOptions,
  ) {}

  hold(pipeline: Pipeline): void {
    this.held.set(pipeline.id, pipeline);
  }

  get(id: string): Pipeline | undefined {
    return this.held.get(id);
  }

  get size(): number {
    return this.held.size;
  }

  /** The rank leases of the pipeline held here now. */
  localLeases(pipeline: Pipeline): ActiveLease[] {
    return pipeline.members.flatMap((m) => {
      const lease = m.gatewayId === this.opts.gatewayId ? this.opts.table.get(m.leaseId) : undefined;
      return lease?.rank?.pipeline === pipeline ? [lease] : [];
    });
  }

  /**
   * Ends the pipeline here: every rank lease held here that is not already ending is told
   * `cancel` (`pipeline_ended`) and dropped; with `notify`, the other instances holding its ranks
   * do the same. Ending twice is nothing.
   */
  end(pipeline: Pipeline, why: string, notify = true, end: PipelineEnd = 'lost'): void {
    if (pipeline.ended) return;
    pipeline.ended = why;
    // Counted where it ended, not again where the news of it arrives.
    if (notify) this.opts.metrics?.pipelineEnded?.(end);
    this.held.delete(pipeline.id);
    this.opts.router.forget(pipeline);
    for (const lease of this.localLeases(pipeline)) {
      if (lease.closing) continue;
      lease.closing = true;
      // A rank never started was never told of its lease: nothing to cancel.
      if (lease.rank!.started) lease.worker.send({ type: 'cancel', lease_id: lease.id, run_id: lease.runId, reason: 'pipeline_ended', message: why });
      void this.ctx.drop(lease).catch((err: unknown) => this.opts.log.warn({ err, leaseId: lease.id }, 'could not drop a rank lease of an ended pipeline'));
    }
    this.opts.log.info({ runId: pipeline.runId, pipelineId: pipeline.id, why }, 'pipeline ended');
    if (notify) for (const gw of this.remoteInstances(pipeline)) this.opts.bus.control(gw, { op: 'end', pipeline_id: pipeline.id, why });
    // Last: the workers and the other instances are told first, whatever giving back does.
    this.opts.ended?.(pipeline);
  }

  /** A rank before the last finished: its stream ends (if it had not ended it) and no one counts it lost. */
  done(lease: ActiveLease): void {
    const { pipeline, index } = lease.rank!;
    this.opts.router.endStream(lease);
    pipeline.members[index].done = true;
    for (const gw of this.remoteInstances(pipeline)) this.opts.bus.control(gw, { op: 'done', pipeline_id: pipeline.id, rank: index });
  }

  /** A caller's cancel: every rank held here is told; their `fail` (`canceled`) ends the run and the pipeline. */
  cancelLocal(runId: string): void {
    for (const p of this.held.values()) {
      if (p.runId !== runId) continue;
      for (const lease of this.localLeases(p)) if (!lease.closing && lease.rank!.started) lease.worker.send({ type: 'cancel', lease_id: lease.id, run_id: runId, reason: 'canceled' });
    }
  }

  /** Every rank of the pipeline is held: its ranks held here get their lease frames. */
  start(pipeline: Pipeline): void {
    for (const lease of this.localLeases(pipeline)) if (!lease.closing) this.opts.router.start(lease);
  }

  /** `start`, `done` and `end` from the other instances (assignments are the former's). */
  control(message: PipelineControl): void {
    if (message.op !== 'done' && message.op !== 'end' && message.op !== 'start') return;
    const pipeline = this.held.get(message.pipeline_id);
    if (!pipeline) return;
    if (message.op === 'end') return this.end(pipeline, message.why, false);
    if (message.op === 'start') return this.start(pipeline);
    const member = pipeline.members[message.rank];
    if (member) member.done = true;
  }

  /**
   * Run every heartbeat: a pipeline whose rank on another instance is gone (its lease record
   * lapsed: that instance died, or lost it without telling) ends here, its attempt settled once;
   * a worker paused by back-pressure has its leases extended for it.
   */
  async tick(workers: Iterable<ConnectedWorker>): Promise<void> {
    for (const w of workers) if (w.pausedBy?.size) await this.ctx.heartbeat(w).catch(() => {});
    for (const pipeline of [...this.held.values()]) {
      const remote = pipeline.members.filter((m) => m.gatewayId !== this.opts.gatewayId && !m.done);
      for (const m of remote) {
        const record = await this.opts.records.get(m.leaseId).catch(() => undefined);
        // Unknown (Redis failing): not a loss. There: alive.
        if (record === undefined || (record && record.fence === pipeline.fence)) {
          if (record) m.missed = 0;
          continue;
        }
        // Gone at two ticks running: a `done` published just before its record was deleted has
        // had a tick to arrive, so a rank that finished is not taken for lost.
        if ((m.missed = (m.missed ?? 0) + 1) < 2) continue;
        if (pipeline.ended || m.done) break;
        await this.lost(pipeline, `rank ${m.rank} was lost with its gateway instance`);
        break;
      }
    }
  }

  /**
   * A rank elsewhere is gone, or a frame from elsewhere never came: the attempt ends here, through
   * a rank lease held here (each instance holding one would do it; the run's fence lets only the
   * first count), and every rank held here is told `pipeline_ended`.
   */
  async lost(pipeline: Pipeline, why: string): Promise<void> {
    const mine = this.localLeases(pipeline).find((l) => !l.closing);
    if (!mine) return this.end(pipeline, why);
    if (mine.rank!.started) mine.worker.send({ type: 'cancel', lease_id: mine.id, run_id: mine.runId, reason: 'pipeline_ended', message: why });
    await this.ctx.lose(mine, why);
  }

  private remoteInstances(pipeline: Pipeline): Set<string> {
    return new Set(pipeline.members.map((m) => m.gatewayId).filter((g) => g !== this.opts.gatewayId));
  }
}
