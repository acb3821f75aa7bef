import { randomBytes, randomUUID } from 'node:crypto';
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { hashSecret } from '../../models/credentials.js';
import { TIERS, type Tier } from '../../models/kinds.js';
import type { RunStore } from '../../models/stores.js';
import { inputFileHashes, type MiddleRanks, type RunRecord } from '../../models/types.js';
import { maxAttemptsOf, type QueuedJobData } from '../../queues/job-queues.js';
import { parseQueueName, partitionNames, queueName, unpartitioned } from '../../queues/queue-names.js';
import { inputDigest } from '../../sdk/attestation/index.js';
import { leaseUploadUrl, type LeaseFrame } from '../../sdk/protocol/index.js';
import type { BullWorkers } from '../bull-workers.js';
import type { ConcurrencyGate } from '../concurrency-gate.js';
import type { DispatchObserver } from '../dispatch-observer.js';
import { attestedAt, offersLeases, TIER_RANK, type ConnectedWorker } from '../connected-worker.js';
import type { LeaseScheduler } from '../lease-scheduler.js';
import type { LeaseTable } from '../lease-table.js';
import type { RunDeadlines } from '../run-deadlines.js';
import { mayHoldRank } from '../rank-placement.js';
import type { PipelineBus, PipelineControl } from './pipeline-bus.js';
import type { PipelineRegistry } from './pipeline-registry.js';
import type { Pipeline, PipelineSpec } from './pipeline.js';
import type { RankSeat, RankSeats } from './rank-seats.js';
import { RankWaits } from './rank-waits.js';
import { leaseInputFiles } from '../lease-input-files.js';

export interface PipelineFormerOptions {
  seats: Pick<RankSeats, 'list' | 'claim' | 'release'>;
  bull: Pick<BullWorkers, 'holding' | 'fetch'>;
  runs: RunStore;
  table: Pick<LeaseTable, 'attachRank'>;
  registry: PipelineRegistry;
  bus: Pick<PipelineBus, 'control'>;
  /** Puts back a job whose pipeline did not form (attempt not counted), fails one past its last attempt, drops a stray. */
  scheduler: Pick<LeaseScheduler, 'handBack' | 'failExhausted' | 'discard'>;
  /** Expires a job fetched past its `ttl_s`, arms each rank lease's `timeout_s`. */
  deadlines?: Pick<RunDeadlines, 'expireFetched' | 'arm' | 'started'>;
  /** A model's rank count and placement policy (the catalogue's), or null for a model served whole. */
  catalogue(kind: string, model: string): Promise<{ ranks: number | null; middle_ranks: MiddleRanks } | null>;
  attached(workerId: string): ConnectedWorker | undefined;
  gatewayId: string;
  publicUrl: () => string;
  maxAttempts: number;
  /** The opaque id of a worker in attempt histories. */
  alias: (workerId: string) => string;
  /** How long the forming instance waits for the other instances to take their ranks. @defaultValue 5000 */
  assignTimeoutMs?: number;
  /** Hard concurrency limits: a job past one is parked instead of formed (docs/jobs.md, "Limits and fairness"). */
  gate?: Pick<ConcurrencyGate, 'admit' | 'release'>;
  /** Every partition count jobs were queued under (QUEUE_PARTITIONS): each partition of a model's queue is looked at. @defaultValue [1] */
  partitions?: () => readonly number[];
  metrics?: DispatchObserver;
  log: Logger;
}

/** Tiers, strongest first: a worker's own tier is served before weaker ones, as whole jobs are. */
const BY_STRENGTH = [...TIERS].sort((a, b) => TIER_RANK[b] - TIER_RANK[a]);

/**
 * Leases a ranked model's queued jobs as pipelines (docs/ranks.md, "Gang leasing"): it reads the
 * model's rank seats, picks one worker per rank that the placement rule lets hold it for the
 * job's tier, claims all their seats at once (or none), and only then fetches a job. Every rank
 * lease is made under the job's one fence; ranks on other instances are assigned through their
 * instance, which answers within `assignTimeoutMs`, or the pipeline is dropped and its job goes
 * back to the head of its queue, its attempt not counted: a partial pipeline never holds slots
 * longer than that. Forming for one model never waits on another model's queue or workers.
 */
export class PipelineFormer {
  /** Models being formed for here, and whether to go round again. */
  private readonly forming = new Map<string, boolean>();
  private readonly answers = new Map<string, (answer: { ok: boolean; why?: string }) => void>();
  /** Why each ranked queue's jobs wait, as last seen here. */
  readonly waits = new RankWaits();

  /** The job data of pipelines formed here under a concurrency limit, by pipeline id: their run's slots are freed when they end. */
  private readonly admitted = new Map<string, QueuedJobData>();

  constructor(private readonly opts: PipelineFormerOptions) {}

  /** A pipeline ended here, however (finished, failed, lost, not formed): the slots its run was admitted to here are freed. */
  ended(pipeline: Pipeline): void {
    const data = this.admitted.get(pipeline.id);
    if (!data) return;
    this.admitted.delete(pipeline.id);
    void this.opts.gate?.release(data, pipeline.token);
  }

  /** A job of the model was queued, or a seat of it freed: form pipelines while jobs and seats allow. */
  wake(kind: string, model: string): void {
    const key = `${kind}\n${model}`;
    if (this.forming.has(key)) {
      this.forming.set(key, true);
      return;
    }
    this.forming.set(key, false);
    void (async () => {
      try {
        do {
          this.forming.set(key, false);
          for (let tries = 0; tries < 64 && (await this.formOne(kind, model)); tries++);
        } while (this.forming.get(key));
      } catch (err) {
        this.opts.log.warn({ err, kind, model }, 'forming a pipeline failed; the safety sweep tries again');
      } finally {
        this.forming.delete(key);
      }
    })();
  }

  /** Answers to this instance's assignments. */
  control(message: PipelineControl): void {
    if (message.op !== 'assigned') return;
    this.answers.get(`${message.pipeline_id}/${message.rank}`)?.({ ok: message.ok, why: message.why });
  }

  /** Forms one pipeline if a job waits and seats allow; true when it formed one (go on). */
  private async formOne(kind: string, model: string): Promise<boolean> {
    const entry = await this.opts.catalogue(kind, model);
    const count = entry?.ranks;
    if (!count) return false;
    const queues = BY_STRENGTH.flatMap((t) => partitionNames(queueName(kind, t, model), this.opts.partitions?.() ?? [1]));
    const holding = await this.opts.bull.holding(queues);
    if (!holding.some(Boolean)) return false;
    const now = Date.now();
    const seats = (await this.opts.seats.list(kind, model)).filter((s) => s.count === count && s.expiresAt > now && s.free > 0);
    for (let i = 0; i < queues.length; i++) {
      if (!holding[i]) continue;
      const jobTier = parseQueueName(queues[i])!.tier;
      const chosen: RankSeat[] = [];
      const missing: number[] = [];
      for (let rank = 0; rank < count; rank++) {
        const seat = this.pick(seats, { jobTier, rank, count, middleRanks: entry.middle_ranks });
        if (seat) chosen.push(seat);
        else missing.push(rank);
      }
      this.waits.set(unpartitioned(queues[i]), missing, count);
      if (missing.length) continue;
      const ids = chosen.map((s) => s.workerId);
      if (!(await this.opts.seats.claim(kind, model, ids))) return true; // a seat went meanwhile: look again
      const token = randomUUID();
      const job = await this.opts.bull.fetch(queues[i], token);
      if (!job) {
        await this.opts.seats.release(kind, model, ids);
        continue;
      }
      await this.form({ kind, model, count, queue: queues[i], jobTier, job, token, seats: chosen });
      return true;
    }
    return false;
  }

  /** The seat to hold this rank: one allowed by the placement rule, this instance's first (no hop between instances), then the freest. */
  private pick(seats: RankSeat[], need: { jobTier: Tier; rank: number; count: number; middleRanks: MiddleRanks }): RankSeat | undefined {
    let best: RankSeat | undefined;
    for (const s of seats) {
      if (s.rank !== need.rank || !mayHoldRank(s.tiers, need)) continue;
      const local = s.gatewayId === this.opts.gatewayId;
      const bestLocal = best?.gatewayId === this.opts.gatewayId;
      if (!best || (local && !bestLocal) || (local === bestLocal && s.free > best.free)) best = s;
    }
    return best;
  }

  private async form(f: { kind: string; model: string; count: number; queue: string; jobTier: Tier; job: Job<QueuedJobData>; token: string; seats: RankSeat[] }): Promise<void> {
    const { job, token, queue } = f;
    const workerIds = f.seats.map((s) => s.workerId);
    const attempt = job.attemptsStarted;
    if (attempt > maxAttemptsOf(job.data, this.opts.maxAttempts)) {
      await this.opts.seats.release(f.kind, f.model, workerIds);
      await this.opts.scheduler.failExhausted(job, token);
      return;
    }
    if (await this.opts.deadlines?.expireFetched(job, token)) {
      await this.opts.seats.release(f.kind, f.model, workerIds);
      return;
    }
    // Past a limit of its account, key or kind: parked (out of the wait list), its seats freed for the next job.
    if (this.opts.gate && !(await this.opts.gate.admit(queue, job, token))) {
      await this.opts.seats.release(f.kind, f.model, workerIds);
      return;
    }
    const timeoutAt = job.data.timeout ? Date.now() + job.data.timeout * 1000 : undefined;
    const started = await this.opts.runs.transition(
      { run_id: job.data.run_id, account_id: job.data.account_id },
      {
        from: ['queued', 'running'],
        to: 'running',
        // The last rank makes the output (and signs a private run's receipt): it is the run's worker.
        set: { attempts: attempt, fence: attempt, worker_id: workerIds[f.count - 1], progress: null, timeout_at: timeoutAt === undefined ? null : new Date(timeoutAt).toISOString() },
        setIfAbsent: { started_at: new Date().toISOString() },
        attempt: { attempt, worker: this.opts.alias(workerIds[f.count - 1]), tier: f.seats[f.count - 1].tiers[0] ?? null, started_at: new Date().toISOString(), ended_at: null, error: null },
        returnPrior: true,
        awaitListeners: false,
      },
    );
    if (!started.ok) {
      await this.opts.seats.release(f.kind, f.model, workerIds);
      await this.opts.gate?.release(job.data, token);
      await this.opts.scheduler.discard(job, token, 'the run is no longer queued');
      return;
    }
    const { run, prior } = started;
    if (prior.fence === 0) this.opts.deadlines?.started(queue, job);
    const pipeline: Pipeline = {
      id: `pip_${randomBytes(12).toString('hex')}`,
      fence: attempt,
      runId: run.run_id,
      accountId: run.account_id,
      kind: f.kind,
      tier: f.jobTier,
      model: f.model,
      count: f.count,
      queue,
      jobId: job.id!,
      token,
      members: f.seats.map((s, rank) => ({ rank, gatewayId: s.gatewayId, workerId: s.workerId, leaseId: `lse_${randomBytes(16).toString('hex')}` })),
      ...(timeoutAt !== undefined && { timeoutAt }),
    };
    this.opts.registry.hold(pipeline);
    if (this.opts.gate) this.admitted.set(pipeline.id, job.data);
    const frames = await this.leaseFrames(pipeline, run);
    const answers = await Promise.all(pipeline.members.map((m, rank) => this.assign(pipeline, rank, frames[rank], job)));
    const refused = answers.find((a) => !a.ok);
    if (refused) {
      this.opts.log.info({ runId: run.run_id, pipelineId: pipeline.id, why: refused.why }, 'pipeline not formed; its job goes back to its queue');
      this.opts.registry.end(pipeline, `the pipeline was not formed: ${refused.why}`, true, 'not_formed');
      await this.opts.seats.release(f.kind, f.model, workerIds.filter((_, i) => !answers[i].ok));
      await this.opts.scheduler.handBack(queue, job, token, { run, prior, fence: attempt }, new Error(refused.why));
      return;
    }
    // Every rank is held everywhere: now each gets its lease frame, so no frame can reach an instance before its receiver.
    this.opts.registry.start(pipeline);
    for (const gw of new Set(pipeline.members.map((m) => m.gatewayId))) if (gw !== this.opts.gatewayId) this.opts.bus.control(gw, { op: 'start', pipeline_id: pipeline.id });
    this.opts.metrics?.pipelineFormed?.(f.kind, f.jobTier);
    this.opts.log.debug({ runId: run.run_id, pipelineId: pipeline.id, workers: workerIds, attempt }, 'pipeline formed');
    if (run.cancel_requested_at) this.opts.registry.cancelLocal(run.run_id);
  }

  /**
   * Each rank's lease frame; only rank 0's carries the input and its files. For a private run
   * every rank's carries the input's hash (and its files' hashes): the last rank, which signs the
   * receipt, never sees the input, so it signs the hash the gateway gives it, which the caller
   * checks against the input they sent.
   */
  private async leaseFrames(p: Pipeline, run: RunRecord): Promise<Array<{ frame: LeaseFrame; uploadHash: string }>> {
    const fileHashes = inputFileHashes(run);
    const inputSha256 = run.confidentiality === 'private' ? await inputDigest(run.input, fileHashes) : undefined;
    const signed = inputSha256 ? { input_sha256: inputSha256, ...(Object.keys(fileHashes).length > 0 && { input_files: fileHashes }) } : {};
    const workers = p.members.map((m) => m.workerId);
    return p.members.map((m) => {
      const uploadToken = randomBytes(32).toString('base64url');
      const first = m.rank === 0;
      const frame: LeaseFrame = {
        type: 'lease',
        lease_id: m.leaseId,
        fence: p.fence,
        run_id: p.runId,
        kind: p.kind,
        tier: p.tier,
        attempt: p.fence,
        input: first ? run.input : {},
        ...signed,
        upload_token: uploadToken,
        upload_url: leaseUploadUrl(this.opts.publicUrl(), m.leaseId),
        ...(first && Object.keys(run.input_files ?? {}).length > 0 && { files: leaseInputFiles(this.opts.publicUrl(), run, m.leaseId) }),
        rank: { index: m.rank, count: p.count, pipeline_id: p.id, model: p.model, workers },
      };
      return { frame, uploadHash: hashSecret(uploadToken) };
    });
  }

  /** Gives one rank to its worker: here directly, elsewhere through its instance (bounded wait). */
  private async assign(p: Pipeline, rank: number, lease: { frame: LeaseFrame; uploadHash: string }, job: Job<QueuedJobData>): Promise<{ ok: boolean; why?: string }> {
    const m = p.members[rank];
    if (m.gatewayId === this.opts.gatewayId) return this.take(p, rank, lease.frame, lease.uploadHash, job);
    const key = `${p.id}/${rank}`;
    const answer = new Promise<{ ok: boolean; why?: string }>((resolve) => {
      const timer = setTimeout(() => resolve({ ok: false, why: `rank ${rank}'s gateway instance did not answer` }), this.opts.assignTimeoutMs ?? 5_000);
      this.answers.set(key, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
    });
    const { ended: _, ...spec } = p;
    this.opts.bus.control(m.gatewayId, { op: 'assign', pipeline: spec, rank, frame: lease.frame, upload_hash: lease.uploadHash });
    const a = await answer;
    this.answers.delete(key);
    return a;
  }

  /**
   * Holds a rank lease for a worker attached here, its lease frame kept until the pipeline starts
   * (every rank held, on every instance): for a pipeline formed here, or assigned by the instance
   * that formed it (`assigned`).
   */
  async take(p: Pipeline, rank: number, frame: LeaseFrame, uploadHash: string, job: Job<QueuedJobData>): Promise<{ ok: boolean; why?: string }> {
    if (p.ended) return { ok: false, why: 'the pipeline ended' };
    const worker = this.opts.attached(p.members[rank].workerId);
    if (!worker || !offersLeases(worker)) return { ok: false, why: `rank ${rank}'s worker left` };
    if (worker.leases.size >= worker.info.slots) return { ok: false, why: `rank ${rank}'s worker has no free slot` };
    if (p.tier === 'private' && !attestedAt(worker)) return { ok: false, why: `rank ${rank}'s worker has no valid evidence` };
    const lease = await this.opts.table.attachRank({ worker, pipeline: p, index: rank, job, uploadHash, frame });
    if (p.timeoutAt !== undefined) this.opts.deadlines?.arm(lease, p.timeoutAt);
    // A `start` lost on its way (or its former gone) must not leave the rank held forever.
    setTimeout(() => {
      if (!lease.rank!.started && !lease.closing && !p.ended) void this.opts.registry.lost(p, 'the pipeline was formed but never started');
    }, 2 * (this.opts.assignTimeoutMs ?? 5_000)).unref();
    return { ok: true };
  }

  /** An assignment from the instance that formed a pipeline: held here (with the job read from its queue), then answered. */
  async assigned(message: Extract<PipelineControl, { op: 'assign' }>, from: string, job: () => Promise<Job<QueuedJobData> | undefined>): Promise<void> {
    // Held at once, before any await: the assignments of two ranks held here share one pipeline.
    let p = this.opts.registry.get(message.pipeline.id);
    if (!p) this.opts.registry.hold((p = { ...message.pipeline }));
    let answer: { ok: boolean; why?: string };
    try {
      const j = await job();
      answer = j ? await this.take(p, message.rank, message.frame, message.upload_hash, j) : { ok: false, why: 'the job is gone' };
    } catch (err) {
      this.opts.log.warn({ err, pipelineId: p.id }, 'could not take an assigned rank');
      answer = { ok: false, why: 'the instance could not take it' };
    }
    // Refused: the forming instance ends the pipeline everywhere, this copy with it.
    this.opts.bus.control(from, { op: 'assigned', pipeline_id: p.id, rank: message.rank, ok: answer.ok, ...(answer.why ? { why: answer.why } : {}) });
  }
}

export type { PipelineSpec };
