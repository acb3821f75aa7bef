import type { RunDurability } from '../../../models/run-durability.js';
import type { Logger } from 'pino';
import { MAX_BATCH_JOBS, type BatchCounts, type BatchRecord, type BatchSummary } from '../../../models/batch-types.js';
import { AlreadyTerminalError, ApiError, BudgetExceededError, NotFoundError, UnauthorizedError } from '../../../models/errors.js';
import { reservation, type KindPrice, type UnitRate } from '../../../models/pricing.js';
import { newBatchId, newRunId } from '../../../models/ids.js';
import { fileFields, findKind, KIND_NAMES } from '../../../models/kinds.js';
import type { IdempotencyStore, RunStore } from '../../../models/stores.js';
import { isTerminal, RUN_STATUSES, type NewRun, type RunRecord } from '../../../models/types.js';
import { compile, fieldErrors } from '../../../models/validation.js';
import type { EnqueueConfirmer } from '../../../queues/enqueue-confirmer.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { runsOnReplicas } from '../../../queues/queue-durability.js';
import { submitJobBody } from '../../contract/schemas.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { SsrfGuard } from '../outbound/ssrf-guard.js';
import { fingerprint } from './canonical-json.js';
import { runDeadlines, type KindDeadlines } from './job-deadlines.js';
import { runAttempts, type AttemptLimits } from './job-attempts.js';
import { CLAIM_ROUNDS, CLASS_PRIORITY, IDEMPOTENCY_TTL_MS, type JobService, type SubmitJobBody } from './job-service.js';
import type { ModelGate } from './model-gate.js';

export interface SubmitBatchBody {
  jobs: SubmitJobBody[];
}

/** One refused item of a batch, as `details.errors` lists it. */
export interface BatchItemError {
  index: number;
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export interface BatchSubmission {
  batch: BatchRecord;
  /** The batch's runs, in the order of its `jobs`. */
  runs: RunRecord[];
  replayed: boolean;
}


export interface BatchCancel {
  /** Queued runs canceled at once (their credits returned). */
  canceled: number;
  /** Running runs whose workers were told to stop; each ends `canceled` when its worker stops. */
  cancel_requested: number;
  /** Runs that had ended already. */
  already_terminal: number;
}

export interface BatchServiceOptions {
  runs: RunStore;
  idempotency: IdempotencyStore;
  queues: Pick<JobQueues, 'addMany' | 'queueOf'>;
  confirmer: EnqueueConfirmer;
  /** Each kind's price (PRICES): fixed, or per unit (models/pricing.ts). */
  prices: Record<string, KindPrice>;
  deadlines: Record<string, KindDeadlines>;
  /** JOB_MAX_ATTEMPTS and JOB_MAX_ATTEMPTS_LIMIT, as single jobs get them; absent: 3 and 10. */
  attempts?: AttemptLimits;
  models: Pick<ModelGate, 'check'>;
  outbound?: Pick<SsrfGuard, 'checkUrl'>;
  dispatch?: { announce(queue: string): Promise<void> };
  metrics?: Pick<GatewayMetrics, 'runSubmitted'>;
  /** Cancels each run of a batch as `POST /v1/jobs/{id}/cancel` would. */
  jobs: Pick<JobService, 'cancel'>;
  log: Logger;
  /** REDIS_WAIT_REPLICAS: a batch is answered accepted once its writes are on the replicas. */
  replicas?: Pick<RunDurability, 'batchAccepted' | 'queueWrites'>;
}

/** Cancels sent at once by a batch cancel: enough to overlap round trips, few enough not to crowd other requests. */
const CANCEL_CONCURRENCY = 64;

const validateItem = compile(submitJobBody);

/**
 * Batches of jobs (docs/jobs.md, "Batches"): every job checked as `POST /v1/jobs` checks it, then
 * the batch and all of its runs created with their total price reserved in one atomic step (all
 * or nothing), then queued in bulk. A crash between the create and the queue write leaves the
 * runs unconfirmed, which the `EnqueueReconciler` queues, as for single jobs.
 */
export class BatchService {
  constructor(private readonly opts: BatchServiceOptions) {}

  async submit(accountId: string, body: SubmitBatchBody, idempotencyKey?: string, keyId?: string, round = 1): Promise<BatchSubmission> {
    const items = body.jobs;
    if (items.length > MAX_BATCH_JOBS) {
      throw new ApiError('invalid_request', `a batch holds at most ${MAX_BATCH_JOBS} jobs; this one has ${items.length}`, { details: { max: MAX_BATCH_JOBS, count: items.length } });
    }
    const createdAt = new Date().toISOString();
    const checked = await Promise.all(items.map((item, index) => this.check(accountId, item, index, createdAt, keyId)));
    const errors = checked.filter((c): c is BatchItemError => 'index' in c);
    if (errors.length > 0) {
      const first = errors[0];
      throw new ApiError('invalid_request', `${errors.length} of the batch's ${items.length} jobs are invalid (the first, at index ${first.index}: ${first.message}); nothing was created`, {
        details: { errors },
      });
    }

    let batchId = newBatchId(accountId);
    let claimed = false;
    const print = fingerprint(body);
    if (idempotencyKey !== undefined) {
      const claim = await this.opts.idempotency.claim(accountId, idempotencyKey, print, batchId, IDEMPOTENCY_TTL_MS);
      if (claim.fingerprint !== print) {
        throw new ApiError('idempotency_conflict', 'this Idempotency-Key was used with a different request body', { details: { batch_id: claim.runId } });
      }
      batchId = claim.runId;
      claimed = claim.claimed;
      if (!claimed) {
        const existing = await this.opts.runs.getBatch(batchId);
        if (existing?.account_id === accountId) return this.accepted({ batch: existing, runs: await this.runsOf(existing), replayed: true });
      }
    }
    const runs = checked as NewRun[];
    const price = runs.reduce((sum, r) => sum + r.price, 0);
    const batch: BatchRecord = { batch_id: batchId, account_id: accountId, created_at: createdAt, run_ids: runs.map((r) => r.run_id), price, idempotency_key: idempotencyKey ?? null };
    const result = await this.opts.runs.createBatch(batch, runs);
    if (result.outcome === 'claim_lost') {
      // As a single job's (job-service.ts): the claimer failed and released the key under this
      // retry; nothing was made, and starting over finds or makes the one batch of the key.
      if (round >= CLAIM_ROUNDS) throw new ApiError('idempotency_conflict', 'requests with this Idempotency-Key kept failing while this one ran; nothing was created: send it again');
      return this.submit(accountId, body, idempotencyKey, keyId, round + 1);
    }
    if (result.outcome === 'insufficient_credits' || result.outcome === 'no_account' || result.outcome === 'budget_exceeded') {
      if (claimed && idempotencyKey !== undefined) await this.opts.idempotency.release(accountId, idempotencyKey, batchId);
      if (result.outcome === 'no_account') throw new UnauthorizedError('the account of this API key no longer exists');
      if (result.outcome === 'budget_exceeded') throw BudgetExceededError.of(result, createdAt, price);
      throw new ApiError('insufficient_credits', `this batch costs ${price} credits; the account has ${result.available}; nothing was created`, { details: { needed: price, available: result.available } });
    }
    if (result.outcome === 'exists') {
      if (result.batch.account_id !== accountId) throw new ApiError('internal', 'batch id collision');
      return this.accepted({ batch: result.batch, runs: await this.runsOf(result.batch), replayed: true });
    }
    for (const run of result.runs) this.opts.metrics?.runSubmitted(run);
    await this.enqueue(result.runs);
    return this.accepted({ batch: result.batch, runs: result.runs, replayed: false });
  }

  /** The answer, once the batch's writes are on the replicas (a replay too: its first answer may not have waited). */
  private async accepted(submission: BatchSubmission): Promise<BatchSubmission> {
    await this.opts.replicas?.batchAccepted(submission.batch.batch_id);
    return submission;
  }

  /**
   * One job of a batch checked as a single submission is (its envelope, kind, input, deadlines,
   * webhook URL and model), turned into the run it will be; or why not. File fields are refused:
   * a batch stages nothing (docs/jobs.md, "Batches").
   */
  private async check(accountId: string, item: SubmitJobBody, index: number, createdAt: string, keyId?: string): Promise<NewRun | BatchItemError> {
    const refuse = (err: unknown): BatchItemError => {
      if (!(err instanceof ApiError)) throw err;
      return { index, code: err.code, message: err.message, ...(err.details && { details: err.details }) };
    };
    if (!validateItem(item)) {
      const fields = fieldErrors(validateItem.errors);
      return { index, code: 'invalid_request', message: `job is invalid: ${fields[0]?.path ?? '/'} ${fields[0]?.message ?? ''}`.trim(), details: { errors: fields } };
    }
    const spec = findKind(item.kind);
    if (!spec) return { index, code: 'unknown_kind', message: `unknown kind ${JSON.stringify(item.kind)}`, details: { kinds: KIND_NAMES } };
    const validateInput = compile(spec.inputSchema);
    if (!validateInput(item.input)) {
      const fields = fieldErrors(validateInput.errors, '/input');
      return { index, code: 'invalid_request', message: `input for ${item.kind} is invalid: ${fields[0]?.path} ${fields[0]?.message}`, details: { errors: fields } };
    }
    const files = Object.keys(fileFields(spec)).filter((field) => item.input[field] !== undefined);
    if (files.length > 0) {
      return {
        index,
        code: 'invalid_request',
        message: `file inputs are not taken in a batch (${files.map((f) => `/input/${f}`).join(', ')}); submit such a job alone with POST /v1/jobs`,
        details: { path: `/input/${files[0]}` },
      };
    }
    try {
      const deadlines = runDeadlines(item, item.kind, this.opts.deadlines[item.kind], createdAt);
      const attempts = runAttempts(item, this.opts.attempts ?? { default: 3, limit: 10 });
      if (item.webhook !== undefined) await this.checkWebhook(item.webhook);
      const warnings = await this.opts.models.check(spec, item.input);
      const jobClass = item.class ?? 'standard';
      return {
        run_id: newRunId(accountId),
        account_id: accountId,
        kind: item.kind,
        confidentiality: item.confidentiality ?? 'open',
        class: jobClass,
        priorityBase: CLASS_PRIORITY[jobClass],
        // Each run reserves the most it can cost, as a single submission does (docs/jobs.md, "Cost").
        price: reservation(item.kind, this.opts.prices[item.kind], item.input),
        ...(typeof this.opts.prices[item.kind] === 'object' && { rate: this.opts.prices[item.kind] as UnitRate }),
        input: item.input,
        warnings,
        webhook: item.webhook ?? null,
        ...(item.webhook !== undefined && { webhook_events_filter: item.webhook_events_filter ?? ['completed'] }),
        idempotency_key: null,
        created_at: createdAt,
        ...deadlines,
        ...attempts,
        // The key's concurrency limit counts each run (dispatch/concurrency-gate.ts).
        ...(keyId && { api_key_id: keyId }),
      };
    } catch (err) {
      return refuse(err);
    }
  }

  private async checkWebhook(url: string): Promise<void> {
    try {
      await this.opts.outbound?.checkUrl(url);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      throw new ApiError(err.code, `webhook: ${err.message}`, { details: { path: '/webhook' }, cause: err });
    }
  }

  /** The queue writes of every run in bulk, then their confirmations; a failure leaves them to the reconciler. */
  private async enqueue(runs: RunRecord[]): Promise<void> {
    try {
      await this.opts.queues.addMany(runs);
      const replicas = this.opts.replicas;
      const written = await runsOnReplicas(runs, (run) => this.opts.queues.queueOf(run), replicas && ((q) => replicas.queueWrites(q)));
      for (const run of runs) if (written.has(run.run_id)) this.opts.confirmer.confirm(run.run_id);
    } catch (err) {
      this.opts.log.warn({ err, count: runs.length }, 'the queue write of a batch failed; the enqueue reconciler will retry it');
      return;
    }
    // Best effort, once per queue: a missed announcement only waits for the dispatchers' sweep.
    for (const queue of new Set(runs.map((run) => this.opts.queues.queueOf(run)))) {
      this.opts.dispatch?.announce(queue).catch((err) => this.opts.log.warn({ err }, 'could not announce a queued job'));
    }
  }

  /** The runs of a batch still kept, in its order. */
  private async runsOf(batch: BatchRecord): Promise<RunRecord[]> {
    const runs = await Promise.all(batch.run_ids.map((id) => this.opts.runs.get(id)));
    return runs.filter((r): r is RunRecord => r !== null);
  }

  /** The account's batch, or 404 (another account's batch is as good as missing). */
  async get(accountId: string, batchId: string): Promise<BatchRecord> {
    const batch = await this.opts.runs.getBatch(batchId);
    if (!batch || batch.account_id !== accountId) throw new NotFoundError('batch');
    return batch;
  }

  async summary(accountId: string, batchId: string): Promise<BatchSummary> {
    return summarize(await this.get(accountId, batchId), this.opts.runs);
  }

  /** Cancels every run of the batch that has not ended, as the single cancel does each. */
  async cancel(accountId: string, batchId: string): Promise<BatchCancel> {
    const batch = await this.get(accountId, batchId);
    const members = await this.opts.runs.batchMembers(batch);
    const out: BatchCancel = { canceled: 0, cancel_requested: 0, already_terminal: 0 };
    const open = members.filter((m) => !isTerminal(m.status));
    out.already_terminal = members.length - open.length;
    for (let i = 0; i < open.length; i += CANCEL_CONCURRENCY) {
      await Promise.all(
        open.slice(i, i + CANCEL_CONCURRENCY).map(async ({ run_id }) => {
          try {
            const run = await this.opts.jobs.cancel(accountId, run_id);
            if (run.status === 'canceled') out.canceled++;
            else out.cancel_requested++;
          } catch (err) {
            if (err instanceof AlreadyTerminalError) out.already_terminal++;
            else if (!(err instanceof NotFoundError)) throw err;
          }
        }),
      );
    }
    return out;
  }
}

/** A batch's counts by status, read from its runs' records. */
export async function summarize(batch: BatchRecord, runs: Pick<RunStore, 'batchMembers'>): Promise<BatchSummary> {
  const counts = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as BatchCounts;
  const members = await runs.batchMembers(batch);
  for (const m of members) counts[m.status]++;
  return { batch, counts, terminal: members.every((m) => isTerminal(m.status)) };
}
