import { duplicateRedis, type RedisClient } from '../../models/redis-connection.js';
import type { Logger } from 'pino';
import type { ModelStore, RunStore } from '../../models/stores.js';
import type { MiddleRanks } from '../../models/types.js';
import { DEFAULT_MIDDLE_RANKS } from '../../models/types.js';
import { parseQueueName } from '../../queues/queue-names.js';
import type { ErrorFrame } from '../../sdk/protocol/index.js';
import type { BullWorkers } from '../bull-workers.js';
import type { ConnectedWorker } from '../connected-worker.js';
import type { LeaseScheduler } from '../lease-scheduler.js';
import type { ActiveLease, LeaseTable } from '../lease-table.js';
import type { LeaseStore } from '../lease-store.js';
import type { RunDeadlines } from '../run-deadlines.js';
import type { DispatchObserver, PipelineEnd } from '../dispatch-observer.js';
import type { ConcurrencyGate } from '../concurrency-gate.js';
import { FrameRouter } from './frame-router.js';
import { PipelineBus, type PipelineControl } from './pipeline-bus.js';
import { PipelineFormer } from './pipeline-former.js';
import { PipelineRegistry, type PipelineRegistryContext } from './pipeline-registry.js';
import { RankSeats } from './rank-seats.js';

export interface PipelinesOptions {
  redis: RedisClient;
  subscriber: RedisClient;
  prefix: string;
  gatewayId: string;
  runs: RunStore;
  bull: BullWorkers;
  records: LeaseStore;
  table: LeaseTable;
  scheduler: Pick<LeaseScheduler, 'handBack' | 'failExhausted' | 'discard'>;
  deadlines?: Pick<RunDeadlines, 'expireFetched' | 'arm' | 'started'>;
  catalogue?: Pick<ModelStore, 'get'>;
  workers(): Iterable<ConnectedWorker>;
  attached(workerId: string): ConnectedWorker | undefined;
  publicUrl: () => string;
  maxAttempts: number;
  /** The opaque id of a worker in attempt histories. */
  alias: (workerId: string) => string;
  heartbeatMs: number;
  /** RANK_BUFFER_BYTES. @defaultValue 4 MiB */
  bufferBytes?: number;
  assignTimeoutMs?: number;
  /** Hard concurrency limits, checked when a pipeline forms (docs/jobs.md, "Limits and fairness"). */
  gate?: Pick<ConcurrencyGate, 'admit' | 'release'>;
  /** Every partition count jobs were queued under (QUEUE_PARTITIONS). @defaultValue [1] */
  partitions?: () => readonly number[];
  metrics?: DispatchObserver;
  log: Logger;
}

/** How long a model's rank count read from the catalogue is reused before it is read again. */
const CATALOGUE_CACHE_MS = 2_000;

/**
 * Ranked models' pipelines on this instance (docs/ranks.md), the pieces wired together: the
 * rank seats of the workers here (`RankSeats`), forming pipelines (`PipelineFormer`), the
 * pipelines held here and how they end (`PipelineRegistry`), the activation frames between
 * ranks (`FrameRouter`) and the path to the other instances (`PipelineBus`). The dispatcher
 * calls it; lease endings stay with `LeaseSettlement`, which it reaches through `settle`.
 */
export class Pipelines {
  readonly seats: RankSeats;
  readonly registry: PipelineRegistry;
  readonly router: FrameRouter;
  readonly former: PipelineFormer;
  private readonly bus: PipelineBus;
  private readonly entries = new Map<string, { at: number; entry: Promise<{ ranks: number | null; middle_ranks: MiddleRanks } | null> }>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly opts: PipelinesOptions,
    settle: PipelineRegistryContext,
  ) {
    const { log, gatewayId } = opts;
    this.bus = new PipelineBus({ redis: opts.redis, subscriber: () => duplicateRedis(opts.subscriber), prefix: opts.prefix, gatewayId, log });
    this.seats = new RankSeats({
      redis: opts.redis,
      prefix: opts.prefix,
      gatewayId,
      ttlMs: Math.max(3 * opts.heartbeatMs, 3_000),
      leasesOf: (w, kind, model) => opts.table.leasesOf(w, kind, model),
      attached: opts.attached,
      roomFor: (kind, model) => this.former.wake(kind, model),
      log,
    });
    this.router = new FrameRouter({ table: opts.table, bus: this.bus, gatewayId, metrics: opts.metrics, bufferBytes: opts.bufferBytes ?? 4 * 1024 * 1024, broken: (lease, why, fromHere) => void (fromHere ? settle.lose(lease, why) : this.registry.lost(lease.rank!.pipeline, why)), log });
    this.registry = new PipelineRegistry(settle, { table: opts.table, records: opts.records, bus: this.bus, router: this.router, gatewayId, ended: (p) => this.former.ended(p), metrics: opts.metrics, log });
    this.former = new PipelineFormer({
      seats: this.seats,
      bull: opts.bull,
      runs: opts.runs,
      table: opts.table,
      registry: this.registry,
      bus: this.bus,
      scheduler: opts.scheduler,
      deadlines: opts.deadlines,
      catalogue: (kind, model) => this.entry(kind, model),
      attached: opts.attached,
      gatewayId,
      publicUrl: opts.publicUrl,
      maxAttempts: opts.maxAttempts,
      alias: opts.alias,
      assignTimeoutMs: opts.assignTimeoutMs,
      gate: opts.gate,
      partitions: opts.partitions,
      metrics: opts.metrics,
      log,
    });
  }

  async start(): Promise<void> {
    await this.bus.start({
      frame: (data, from) => this.router.fromInstance(data, from),
      ack: (leaseId, bytes) => this.router.acked(leaseId, bytes),
      control: (message, from) => this.control(message, from),
    });
    this.timer = setInterval(() => void this.tick(), this.opts.heartbeatMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.bus.stop();
  }

  /** A worker's seats may have changed (joined, left, a lease taken or ended, backend, models). */
  changed(worker: ConnectedWorker): void {
    this.seats.changed(worker);
  }

  /** A binary frame from a worker: forwarded, or the error to answer it with. */
  frame(worker: ConnectedWorker, data: Buffer): ErrorFrame | null {
    return this.router.fromWorker(worker, data);
  }

  /** Jobs were queued on `queue`: if it is a model's queue that workers here serve ranks of, form pipelines. */
  wake(queue: string): void {
    const at = parseQueueName(queue);
    if (at?.model && this.seats.servedHere(at.kind, at.model)) this.former.wake(at.kind, at.model);
  }

  /** The safety sweep: every ranked model served here is looked at. */
  wakeAll(): void {
    const seen = new Set<string>();
    for (const w of this.opts.workers()) {
      for (const [kind, models] of Object.entries(w.info.models)) {
        for (const m of models) {
          if (!m.rank || seen.has(`${kind}\n${m.id}`)) continue;
          seen.add(`${kind}\n${m.id}`);
          this.former.wake(kind, m.id);
        }
      }
    }
  }

  cancelLocal(runId: string): void {
    this.registry.cancelLocal(runId);
  }

  /** A rank before the last reported `complete`. */
  rankDone(lease: ActiveLease): void {
    this.registry.done(lease);
  }

  /** A rank lease ended its run's attempt (the last rank finished, a rank failed or was lost): the pipeline ends everywhere. */
  ended(lease: ActiveLease, why: string, end: PipelineEnd): void {
    this.registry.end(lease.rank!.pipeline, why, true, end);
  }

  private async tick(): Promise<void> {
    try {
      await this.seats.refresh(this.opts.workers());
      await this.registry.tick(this.opts.workers());
    } catch (err) {
      this.opts.log.warn({ err }, 'the pipelines sweep failed; the next one tries again');
    }
  }

  private control(message: PipelineControl, from: string): void {
    if (message.op === 'assign') {
      const { queue, jobId } = message.pipeline;
      void this.former.assigned(message, from, () => this.opts.bull.job(queue, jobId));
    } else if (message.op === 'assigned') this.former.control(message);
    else this.registry.control(message);
  }

  private entry(kind: string, model: string): Promise<{ ranks: number | null; middle_ranks: MiddleRanks } | null> {
    const key = `${kind}\n${model}`;
    const cached = this.entries.get(key);
    if (cached && Date.now() - cached.at < CATALOGUE_CACHE_MS) return cached.entry;
    const entry = (this.opts.catalogue?.get(kind, model) ?? Promise.resolve(null)).then((r) => (r ? { ranks: r.ranks ?? null, middle_ranks: r.middle_ranks ?? DEFAULT_MIDDLE_RANKS } : null));
    this.entries.set(key, { at: Date.now(), entry });
    entry.catch(() => this.entries.delete(key));
    return entry;
  }
}
