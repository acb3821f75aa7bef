import type { InputFiles } from '../files/input-files.js';
import type { Logger } from 'pino';
import { AlreadyTerminalError, BudgetExceededError, InsufficientCreditsError, NotFoundError, ApiError, UnauthorizedError } from '../../../models/errors.js';
import { newRunId } from '../../../models/ids.js';
import { reservation, type KindPrice } from '../../../models/pricing.js';
import type { CreateRunResult, RunStore, IdempotencyStore } from '../../../models/stores.js';
import { isTerminal, type GateCheck, type GateVerdict, type NewRun, type RunRecord, type RunStatus, type WebhookEvent } from '../../../models/types.js';
import type { CreateAndEnqueue } from '../../../queues/create-and-enqueue.js';
import type { EnqueueConfirmer } from '../../../queues/enqueue-confirmer.js';
import type { RunDurability } from '../../../models/run-durability.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { routedModel } from '../../../queues/queue-names.js';
import { fileFields, findKind, KINDS, KIND_NAMES, type JobClass, type KindSpec, type Tier } from '../../../models/kinds.js';
import type { SsrfGuard } from '../outbound/ssrf-guard.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import { assertValid, compile } from '../../../models/validation.js';
import { fingerprint } from './canonical-json.js';
import { runDeadlines, type KindDeadlines } from './job-deadlines.js';
import { runAttempts, type AttemptLimits } from './job-attempts.js';
import { CLASS_PRIORITY } from '../../../models/fair-share.js';
import type { ModelGate } from './model-gate.js';
import { QueueStateReader, type QueueState } from './queue-state-reader.js';

export type { QueueState };
import type { FleetCounters } from '../../../dispatch/fleet-counters.js';

export interface SubmitJobBody {
  kind: string;
  input: Record<string, unknown>;
  confidentiality?: Tier;
  class?: JobClass;
  webhook?: string;
  /** @defaultValue ['completed'] */
  webhook_events_filter?: WebhookEvent[];
  /** Seconds the job may wait to start, at most its kind's `max_ttl_s` (docs/jobs.md, "Deadlines"). */
  ttl_s?: number;
  /** Seconds an attempt may run, at most its kind's `max_timeout_s`. */
  timeout_s?: number;
  /** Leases the job may use, at most JOB_MAX_ATTEMPTS_LIMIT (docs/jobs.md, "Attempts"). */
  max_attempts?: number;
  /** Retry a timed-out attempt while attempts remain. @defaultValue false */
  retry_on_timeout?: boolean;
}

/** No model to look up and no file to stage: nothing between validation and the create touches a store. */
function isPlain(spec: KindSpec, input: Record<string, unknown>): boolean {
  if (routedModel(input) !== null) return false;
  let fields = FILE_FIELDS.get(spec);
  if (!fields) FILE_FIELDS.set(spec, (fields = Object.keys(fileFields(spec))));
  return fields.every((field) => input[field] === undefined);
}
const FILE_FIELDS = new WeakMap<KindSpec, string[]>();

/** The refusal of a submission whose caller hung up before its run was made; no one reads it but the logs. */
const callerGone = (cause?: unknown) => new ApiError('invalid_request', 'the caller closed the connection before the run was created; nothing was created', { cause });

/** Priority band of each class (models/fair-share.ts): the store adds the job's fair-share rank inside it. */
export { CLASS_PRIORITY };

/** Idempotency keys are honoured for 24 hours (docs/api.md "Jobs"). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** How many times a keyed submission starts over after its claim was released under it (each needs another request to fail meanwhile). */
export const CLAIM_ROUNDS = 3;

export interface JobServiceOptions {
  runs: RunStore;
  idempotency: IdempotencyStore;
  queues: JobQueues;
  confirmer: EnqueueConfirmer;
  /**
   * Creates a run and adds its job in one Redis round trip; absent when the runs are not in the
   * Redis the queues are in (MongoDB), where the job is added once the create has answered.
   */
  intake?: Pick<CreateAndEnqueue, 'submit' | 'worthPipelining'>;
  /** Each kind's price (PRICES): fixed, or per unit (models/pricing.ts). */
  prices: Record<string, KindPrice>;
  /** Each kind's deadline defaults and maxima (JOB_DEADLINES). */
  deadlines: Record<string, KindDeadlines>;
  /** JOB_MAX_ATTEMPTS and JOB_MAX_ATTEMPTS_LIMIT; absent: 3 and 10. */
  attempts?: AttemptLimits;
  log: Logger;
  /** Wakes dispatchers on every instance; absent in processes that only accept jobs. */
  dispatch?: { announce(queue: string): Promise<void>; requestCancel(runId: string): Promise<void>; gate?: { parked(runIds: string[]): Promise<boolean[]> } };
  /** Checks webhook URLs at submission (invalid_url, url_blocked). */
  outbound?: Pick<SsrfGuard, 'checkUrl'>;
  /** Counts new runs and the credits they reserve. */
  metrics?: Pick<GatewayMetrics, 'runSubmitted'>;
  /** Stages the files of an input before its run is created, and deletes them when no run is (docs/files.md). */
  inputFiles: Pick<InputFiles, 'stage' | 'discard'>;
  /** Checks the model a job names against the catalogue, and its input against the model's schema; reads ranked models' entries. */
  models: Pick<ModelGate, 'check' | 'ranked'>;
  /** The fleet as it is now, to say why a queued run waits. */
  fleet?: Pick<FleetCounters, 'read'>;
  /** REDIS_WAIT_REPLICAS: a run is answered accepted (or canceled) once its writes are on the replicas. */
  replicas?: RunDurability;
}

/**
 * The request gate of the key a submission came with (revocation, rate limit), left to the
 * submission so a plain one can run it in the same Redis script as its create. Exactly one of
 * `admit` or `settle` is called, before anything is written.
 */
export interface SubmitGate {
  check: GateCheck;
  /** Runs the gate on its own; throws its refusal. */
  admit(): Promise<void>;
  /** Takes the verdict the gated create returned; throws its refusal. */
  settle(verdict: GateVerdict): void;
}

export interface Submission {
  run: RunRecord;
  /** True when an earlier request with the same Idempotency-Key created the run. */
  replayed: boolean;
}

/**
 * Accepting, reading and cancelling runs. A run is recorded (with its credits reserved)
 * before it is queued; the `EnqueueReconciler` finishes the queue write if this process
 * dies in between (docs/architecture.md).
 */
export class JobService {
  /** For routes that log about runs (the same logger as the service's). */
  get log(): Logger {
    return this.opts.log;
  }

  /** The clock submissions are stamped by, which sets the month a budget is judged in; replaceable (tests move it a month on). */
  clock: () => number = Date.now;

  private readonly queueStateReader: QueueStateReader;

  constructor(private readonly opts: JobServiceOptions) {
    this.queueStateReader = new QueueStateReader(opts);
    // Compile every input schema now: a broken one stops the boot, not a caller's request.
    for (const spec of KINDS) compile(spec.inputSchema);
  }

  /**
   * Accepts a job: checks it, stages its input files, records the run (reserving its credits)
   * and queues it. `signal` says the caller has gone (its connection closed): an https input
   * being fetched is cut, and a submission whose caller left before its run was recorded makes
   * nothing: no run, no reservation, no file, and its Idempotency-Key stays free.
   */
  async submit(accountId: string, body: SubmitJobBody, idempotencyKey?: string, gate?: SubmitGate, signal?: AbortSignal, keyId?: string, round = 1): Promise<Submission> {
    const spec = findKind(body.kind);
    if (!spec) {
      throw new ApiError('unknown_kind', `unknown kind ${JSON.stringify(body.kind)}`, { details: { kinds: KIND_NAMES } });
    }
    assertValid(spec.inputSchema, body.input, `input for ${body.kind}`, '/input');
    // Checked before anything is staged or claimed: a refused deadline leaves nothing behind.
    const createdAt = new Date(this.clock()).toISOString();
    const deadlines = runDeadlines(body, body.kind, this.opts.deadlines[body.kind], createdAt);
    const attempts = runAttempts(body, this.opts.attempts ?? { default: 3, limit: 10 });
    // A submission with nothing to do between its checks and its create (no claim, no URL to
    // check, no model to look up, no file to stage) has its gate run inside the create's own
    // script; any other is gated first, as every other route is, before any of that work.
    const fused = gate && this.opts.runs.createGated && idempotencyKey === undefined && body.webhook === undefined && isPlain(spec, body.input) ? gate : undefined;
    if (gate && !fused) await gate.admit();
    if (body.webhook !== undefined) await this.checkWebhook(body.webhook);

    let runId = newRunId(accountId);
    let claimed = false;
    if (idempotencyKey !== undefined) {
      const claim = await this.opts.idempotency.claim(accountId, idempotencyKey, fingerprint(body), runId, IDEMPOTENCY_TTL_MS);
      if (claim.fingerprint !== fingerprint(body)) {
        throw new ApiError('idempotency_conflict', 'this Idempotency-Key was used with a different request body', {
          details: { run_id: claim.runId },
        });
      }
      runId = claim.runId;
      claimed = claim.claimed;
      // A replay answers with the run the first request made, without staging its files again.
      if (!claimed) {
        const existing = await this.opts.runs.get(runId);
        if (existing?.account_id === accountId) return { run: existing, replayed: true };
      }
    }
    // The model is checked before any file is staged: a refused model leaves nothing behind.
    const release = async () => {
      if (claimed && idempotencyKey !== undefined) await this.opts.idempotency.release(accountId, idempotencyKey, runId);
    };
    const [warnings, staged] = await (async () => {
      const found = await this.opts.models.check(spec, body.input);
      return [found, await this.opts.inputFiles.stage(accountId, spec, body.input, signal)] as const;
    })().catch(async (err: unknown) => {
      await release();
      throw signal?.aborted ? callerGone(err) : err;
    });
    // The caller left while the files were staged (the last fetch may have ended as it did).
    if (signal?.aborted) {
      await this.opts.inputFiles.discard(accountId, staged);
      await release();
      throw callerGone();
    }

    const tier = body.confidentiality ?? 'open';
    const kindPrice = this.opts.prices[body.kind];
    const jobClass = body.class ?? 'standard';
    // With a replayed key, the create below finds the run the first request made (or makes it,
    // if that request died between its claim and its create): one run either way.
    const newRun: NewRun = {
      run_id: runId,
      account_id: accountId,
      kind: body.kind,
      confidentiality: tier,
      class: jobClass,
      priorityBase: CLASS_PRIORITY[jobClass],
      // The most the job can cost, held until it ends (docs/jobs.md, "Cost"); a per-unit price goes with it.
      price: reservation(body.kind, kindPrice, staged.input),
      ...(typeof kindPrice === 'object' && { rate: kindPrice }),
      input: staged.input,
      input_files: staged.files,
      warnings,
      webhook: body.webhook ?? null,
      ...(body.webhook !== undefined && { webhook_events_filter: body.webhook_events_filter ?? ['completed'] }),
      idempotency_key: idempotencyKey ?? null,
      created_at: createdAt,
      ...deadlines,
      ...attempts,
      // The key's concurrency limit counts the run (dispatch/concurrency-gate.ts).
      ...(keyId ? { api_key_id: keyId } : gate ? { api_key_id: `key_${gate.check.lookupId}` } : {}),
    };
    const { result, queued } = await this.create(newRun, fused);
    if (result.outcome === 'claim_lost') {
      // This request read the key's claim, and the request that made it failed and released it
      // before this create: nothing was made. Starting over from the claim finds the run another
      // retry made meanwhile, or claims the key afresh (already admitted: no gate this time).
      await this.opts.inputFiles.discard(accountId, staged);
      if (round >= CLAIM_ROUNDS) throw new ApiError('idempotency_conflict', 'requests with this Idempotency-Key kept failing while this one ran; nothing was created: send it again');
      return this.submit(accountId, body, idempotencyKey, undefined, signal, keyId, round + 1);
    }

    // No run was made with these files: the ones staged from https URLs and data: URIs for it go,
    // or every refused (or replayed) submission would leave a file the caller never asked to keep.
    // A create that threw is not among these: it may have made the run, whose files must stay.
    if (result.outcome === 'insufficient_credits' || result.outcome === 'no_account' || result.outcome === 'budget_exceeded') {
      await this.opts.inputFiles.discard(accountId, staged);
      await release();
      if (result.outcome === 'no_account') throw new UnauthorizedError('the account of this API key no longer exists');
      if (result.outcome === 'budget_exceeded') throw BudgetExceededError.of(result, createdAt, newRun.price);
      throw new InsufficientCreditsError(newRun.price, result.available);
    }
    if (result.outcome === 'exists') {
      if (result.run.account_id !== accountId) throw new ApiError('internal', 'run id collision');
      // Without a key the run id is this request's own: the run found is the one this create
      // made, its answer lost to a reconnect and the create sent again by ioredis. Its files are
      // the ones just staged, and its queue write is still to do.
      if (idempotencyKey === undefined) {
        this.opts.metrics?.runSubmitted(result.run);
        await this.enqueue(result.run, queued);
        await this.durable(result.run.run_id);
        return { run: result.run, replayed: false };
      }
      // The run an earlier request with this Idempotency-Key made keeps that request's files.
      await this.opts.inputFiles.discard(accountId, staged);
      // Its first answer may not have waited for the replicas (that request's gateway died).
      await this.durable(result.run.run_id);
      return { run: result.run, replayed: true };
    }
    this.opts.metrics?.runSubmitted(result.run);
    await this.enqueue(result.run, queued);
    await this.durable(result.run.run_id);
    return { run: result.run, replayed: false };
  }

  /**
   * The run's create (behind the fused gate, when there is one), and with it the add of its job
   * when the intake can send both in one round trip: `queued` says the job is in. Only a run with
   * a fresh id goes that way (no Idempotency-Key: the id is this request's alone), as a refused
   * create leaves a stray job under it for a moment; and not one the intake expects refused.
   */
  private async create(run: NewRun, fused?: SubmitGate): Promise<{ result: CreateRunResult; queued: boolean }> {
    const intake = this.opts.intake;
    if (intake && run.idempotency_key === null && intake.worthPipelining(run.account_id, fused?.check)) {
      const done = await intake.submit(run, fused?.check);
      if (done.ran) {
        if (fused) {
          if (!done.gate) throw new ApiError('internal', 'the gated create gave no verdict');
          fused.settle(done.gate);
        }
        if (!('result' in done)) throw new ApiError('internal', 'the gate refused without saying why');
        return { result: done.result, queued: done.queued };
      }
      // Nothing was made (Redis lacked the script): again the two-step way, under an id its stray job cannot meet.
      run = { ...run, run_id: newRunId(run.account_id) };
    }
    return { result: fused ? await this.createGated(run, fused) : await this.opts.runs.create(run), queued: false };
  }

  /** The create and the gate in one step; a refusal throws, having created nothing. */
  private async createGated(run: NewRun, gate: SubmitGate): Promise<CreateRunResult> {
    const gated = await this.opts.runs.createGated!(run, gate.check);
    gate.settle(gated.gate);
    if (!('result' in gated)) throw new ApiError('internal', 'the gate refused without saying why');
    return gated.result;
  }

  /** The SSRF guard's verdict on a webhook URL, naming the field. */
  private async checkWebhook(url: string): Promise<void> {
    try {
      await this.opts.outbound?.checkUrl(url);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      throw new ApiError(err.code, `webhook: ${err.message}`, { details: { path: '/webhook' }, cause: err });
    }
  }

  /**
   * Queue write (unless `written` with the create), then its confirmation. A failure here leaves
   * the run to the reconciler: it stays accepted.
   */
  private async enqueue(run: RunRecord, written: boolean): Promise<void> {
    if (written) this.opts.confirmer.confirm(run.run_id);
    else await this.write(run);
    // Best effort: a missed announcement only waits for the dispatchers' safety sweep.
    this.opts.dispatch?.announce(this.opts.queues.queueOf(run)).catch((err) => this.opts.log.warn({ err }, 'could not announce a queued job'));
  }

  private async write(run: RunRecord): Promise<void> {
    try {
      await this.opts.queues.add(run);
      // A job's add on another primary than its run (a cluster's spread queues) must reach the
      // replicas too; short of them the run stays unconfirmed, and the reconciler adds it again.
      if (this.opts.replicas && !(await this.opts.replicas.queueWrites(this.opts.queues.queueOf(run)))) return;
      this.opts.confirmer.confirm(run.run_id);
    } catch (err) {
      this.opts.log.warn({ err, runId: run.run_id }, 'queue write failed; the enqueue reconciler will retry it');
    }
  }

  /** REDIS_WAIT_REPLICAS: the run's accept is on the replicas, or (short of them) still in the store. */
  private async durable(runId: string): Promise<void> {
    await this.opts.replicas?.accepted(runId);
  }

  /** The account's run, or 404 (another account's run is as good as missing). */
  async get(accountId: string, runId: string): Promise<RunRecord> {
    const run = await this.opts.runs.get(runId);
    if (!run || run.account_id !== accountId) throw new NotFoundError('run');
    return run;
  }

  /** A queued run's place in its queue and why it waits; null for a run that is not queued. */
  async queueState(run: RunRecord): Promise<QueueState | null> {
    return (await this.queueStates([run]))[0];
  }

  /** `queueState` of each run of a page of a listing (QueueStateReader). */
  queueStates(runs: RunRecord[]): Promise<Array<QueueState | null>> {
    return this.queueStateReader.read(runs);
  }

  /** A page of the account's runs, newest first, with `next` the cursor of the next page (RunStore.list). */
  async list(accountId: string, q: { status?: RunStatus; kind?: string; batch_id?: string; limit: number; before?: string }) {
    // Another account's batch is as good as missing (docs/jobs.md, "Batches").
    if (q.batch_id !== undefined && (await this.opts.runs.getBatch(q.batch_id))?.account_id !== accountId) throw new NotFoundError('batch');
    return this.opts.runs.list(accountId, q);
  }

  /**
   * A queued run becomes canceled at once (credits returned); a running run is flagged and
   * its worker told to stop; a terminal run is a 409.
   */
  async cancel(accountId: string, runId: string): Promise<RunRecord> {
    const run = await this.get(accountId, runId);
    if (isTerminal(run.status)) throw new AlreadyTerminalError(runId, run.status);
    const now = new Date().toISOString();
    if (run.status === 'queued') {
      const t = await this.opts.runs.transition(run, {
        from: ['queued'],
        to: 'canceled',
        set: { cancel_requested_at: now, finished_at: now, error: { code: 'canceled', message: 'canceled by the caller', retryable: false, attempt: run.attempts } },
      });
      if (t.ok) {
        await this.opts.queues.remove(run).catch((err) => this.opts.log.warn({ err, runId }, 'could not remove a canceled job; dispatch will drop it'));
        await this.opts.replicas?.settled(runId);
        return t.run;
      }
      if (!t.run) throw new NotFoundError('run');
      if (isTerminal(t.run.status)) throw new AlreadyTerminalError(runId, t.run.status);
    }
    // Running: the dispatcher sees the flag and tells the worker; the run ends when the worker stops or its lease does.
    const t = await this.opts.runs.transition(run, { from: ['running'], set: { cancel_requested_at: now } });
    if (t.ok) await this.opts.dispatch?.requestCancel(runId);
    if (!t.ok) {
      if (t.run && isTerminal(t.run.status)) throw new AlreadyTerminalError(runId, t.run.status);
      throw new ApiError('conflict', 'the run changed state during the cancel; retry');
    }
    return t.run;
  }
}
