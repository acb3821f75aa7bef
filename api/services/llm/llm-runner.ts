import { ApiError } from '../../../models/errors.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import type { FleetCounters } from '../../../dispatch/fleet-counters.js';
import type { ModelStore } from '../../../models/stores.js';
import type { RunFollower } from '../events/run-follower.js';
import type { JobService, SubmitGate } from '../jobs/job-service.js';
import { rankedModelView, type RankedModelView } from '../fleet/ranked-models.js';

export const LLM_KIND = 'inference:llm:text-generate';

/**
 * The model name that asks for no model in particular: the job names none and goes to the
 * kind's default queue, which every llm worker serves (docs/models.md, "Routing").
 */
export const DEFAULT_MODEL = 'default';

/** Whether a model of the llm kind can be asked for now (`models()`), and why not. */
export type ModelAvailability = 'live' | 'no_worker' | 'unknown';

/** What one read of the fleet says of a request for a model: any llm worker at all, and the model's availability. */
export interface ModelCheck {
  anyWorker: boolean;
  availability: ModelAvailability;
}

/** One tool call as the LLM returns it (OpenAI's shape; `arguments` is JSON text). */
export interface LlmToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** The input of one llm job: OpenAI-style messages and tools (JSON Schemas as `parameters`). */
export interface LlmRequest {
  messages: Array<Record<string, unknown> & { role: string }>;
  model?: string;
  tools?: Array<{ type: 'function'; function: { name: string; description?: string; parameters: object } }>;
  tool_choice?: unknown;
  max_tokens?: number;
  temperature?: number;
}

export interface LlmResult {
  run_id: string;
  text: string;
  tool_calls: LlmToolCall[];
  finish_reason: string;
  /** As the worker reported it, when it did. */
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  model: string | null;
}

export interface LlmRunOptions {
  /** Called with the run id once the job is accepted (paid for and queued), before any delta. */
  onAccepted?: (runId: string) => void;
  /** Streamed text, as the worker sends it. */
  onDelta?: (delta: string) => void;
  signal?: AbortSignal;
  /** @defaultValue the runner's timeoutMs */
  timeoutMs?: number;
  /** The caller's `check()` of the request's model in this same request: not read again. */
  checked?: ModelCheck;
  /**
   * The request's gate, when the route left it to the handler: the job's create runs it (in
   * its own script when it can), as `POST /v1/jobs` does.
   */
  gate?: SubmitGate;
}

export interface LlmRunnerOptions {
  jobs: JobService;
  follower: RunFollower;
  /** The fleet's counts: which kinds and models connected workers serve. */
  fleet: Pick<FleetCounters, 'read' | 'localSnapshot'>;
  /** The model catalogue: the llm models there are. */
  catalogue: Pick<ModelStore, 'list' | 'get'>;
  /** How long one LLM step may take before it is canceled. @defaultValue 120000 */
  timeoutMs?: number;
}

/**
 * Runs one LLM step as an `inference:llm:text-generate` job on the fleet, for an account
 * (it pays the kind's price), and waits for it on the run's events: no polling. Used by the
 * agent loop and the OpenAI-compatible surface. Refuses at once (503) while no LLM worker is
 * connected, rather than queueing a job nobody will take.
 */
export class LlmRunner {
  constructor(private readonly opts: LlmRunnerOptions) {}

  /** Throws 503 `unavailable` unless some connected worker serves the llm kind. */
  async assertAvailable(): Promise<void> {
    if (!(await this.check(DEFAULT_MODEL)).anyWorker) throw noLlmWorker();
  }

  /**
   * The llm models of the catalogue that a connected worker serves now, for /v1/models, and
   * `default` while some connected llm worker advertises no model (it serves only that).
   */
  async models(): Promise<string[]> {
    return (await this.servedModels()).map((m) => m.id);
  }

  /**
   * `models()` with what /v1/models shows of each: a ranked model (docs/ranks.md) is listed
   * while any worker serves one of its ranks, with its ranks, workers per rank and pipelines.
   */
  async servedModels(): Promise<Array<{ id: string; ranked: RankedModelView | null }>> {
    const [fleet, catalogue] = await Promise.all([this.opts.fleet.read(), this.opts.catalogue.list(LLM_KIND)]);
    const llm = fleet.kinds[LLM_KIND];
    if (!llm?.workers) return [];
    const live = catalogue.filter((m) => (llm.models[m.id]?.workers ?? 0) > 0).map((m) => ({ id: m.id, ranked: rankedModelView(m, llm.models[m.id]) }));
    return [...(llm.without_models > 0 ? [{ id: DEFAULT_MODEL, ranked: null }] : []), ...live].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Whether `model` is a model of the catalogue (or `default`) and whether a connected worker serves it. */
  async availability(model: string): Promise<ModelAvailability> {
    return (await this.check(model)).availability;
  }

  /** `assertAvailable` and `availability` from one read of the fleet: one per request on the chat path. */
  async check(model: string): Promise<ModelCheck> {
    // Served by a worker connected here: live, and known (a worker's models are catalogued before
    // it is counted), with no round trip. Otherwise the whole fleet says.
    // Workers whose backend does not answer are offered no step: they do not count as serving.
    const serving = (c: { workers: number; unavailable?: number } | undefined) => (c ? c.workers - (c.unavailable ?? 0) : 0);
    const here = this.opts.fleet.localSnapshot().kinds[LLM_KIND];
    const servedHere = serving(model === DEFAULT_MODEL ? here : here?.models[model]);
    if (servedHere > 0) return { anyWorker: true, availability: 'live' };
    const [fleet, known] = await Promise.all([this.opts.fleet.read(), model === DEFAULT_MODEL ? null : this.opts.catalogue.get(LLM_KIND, model)]);
    const llm = fleet.kinds[LLM_KIND];
    const anyWorker = serving(llm) > 0;
    if (model !== DEFAULT_MODEL && !known) return { anyWorker, availability: 'unknown' };
    const workers = serving(model === DEFAULT_MODEL ? llm : llm?.models[model]);
    return { anyWorker, availability: workers > 0 ? 'live' : 'no_worker' };
  }

  /**
   * Runs one step. 503 at once while no llm worker is connected, or none serves the model (a
   * step waits for a free worker, never for one to appear); an unknown model is the job's 400.
   */
  async run(accountId: string, request: LlmRequest, opts: LlmRunOptions = {}): Promise<LlmResult> {
    const { model, ...rest } = request;
    // No model: any llm worker will do (`default`).
    const checked = opts.checked ?? (await this.check(model ?? DEFAULT_MODEL));
    if (!checked.anyWorker) throw noLlmWorker();
    if (checked.availability === 'no_worker') {
      throw new ApiError('unavailable', `no connected worker serves the model ${JSON.stringify(model)} right now; retry later (GET /v1/models lists those that are served)`, {
        headers: { 'Retry-After': '5' },
        details: { param: 'model' },
      });
    }
    // `default` names no model: the job goes to the kind's default queue.
    const input = (model === undefined || model === DEFAULT_MODEL ? rest : request) as unknown as Record<string, unknown>;
    const { run } = await this.opts.jobs.submit(accountId, { kind: LLM_KIND, input, class: 'interactive' }, undefined, opts.gate);
    opts.onAccepted?.(run.run_id);
    const timeoutMs = opts.timeoutMs ?? this.opts.timeoutMs ?? 120_000;
    try {
      const done = opts.onDelta ? await this.streamToEnd(run, opts.onDelta, timeoutMs, opts.signal) : await this.opts.follower.waitForTerminal(run.run_id, timeoutMs, opts.signal);
      if (!done) {
        await this.opts.jobs.cancel(accountId, run.run_id).catch(() => {});
        if (opts.signal?.aborted) throw new ApiError('unavailable', 'the LLM step was abandoned by its caller');
        throw new ApiError('unavailable', 'the LLM step did not finish in time; retry later', { details: { run_id: run.run_id } });
      }
      return resultOf(done);
    } catch (err) {
      // Whatever went wrong here (Redis, the caller), the paid step must not run on unwatched.
      if (!(err instanceof ApiError && err.code === 'unavailable')) await this.opts.jobs.cancel(accountId, run.run_id).catch(() => {});
      throw err;
    }
  }

  /**
   * Follows the run from event 0 (deltas streamed before the subscription started are replayed,
   * not lost) to its `done` event, which carries the finished job: one follower and no read of
   * the record, where a second subscription waiting for the end read it twice per step.
   * Null after `ms` or when `signal` aborts.
   */
  private async streamToEnd(run: RunRecord, onDelta: (delta: string) => void, ms: number, signal?: AbortSignal): Promise<FinishedStep | null> {
    const started = Date.now();
    let wake!: (job: FinishedStep | null | undefined) => void;
    const ended = new Promise<FinishedStep | null | undefined>((resolve) => (wake = resolve));
    const timer = setTimeout(() => wake(null), ms);
    const abandon = () => wake(null);
    signal?.addEventListener('abort', abandon, { once: true });
    if (signal?.aborted) wake(null);
    let stop: (() => void) | undefined;
    try {
      stop = await this.opts.follower.follow(run, 0, {
        send: (e) => {
          if (e.event === 'output') {
            const delta = (JSON.parse(e.data) as { delta?: unknown }).delta;
            if (typeof delta === 'string') onDelta(delta);
          } else if (e.terminal) wake(JSON.parse(e.data) as FinishedStep);
        },
        // Ended without `done`: the follower cut off a client that fell too far behind.
        end: () => wake(undefined),
      });
      const done = await ended;
      if (done !== undefined) return done;
      return await this.opts.follower.waitForTerminal(run.run_id, Math.max(0, ms - (Date.now() - started)), signal);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abandon);
      stop?.();
    }
  }
}

/** What a finished step's result is read from: its record, or the job its `done` event carries. */
type FinishedStep = Pick<RunRecord, 'run_id' | 'status' | 'output' | 'error'>;

/** The 503 while no connected worker serves the llm kind. */
export function noLlmWorker(): ApiError {
  return new ApiError('unavailable', 'no LLM worker is connected with a backend that answers right now; retry later (see GET /v1/capabilities)', { headers: { 'Retry-After': '5' } });
}

function resultOf(run: FinishedStep): LlmResult {
  if (!isTerminal(run.status) || run.status !== 'succeeded' || !run.output) {
    const error = run.error ?? { code: run.status, message: `the LLM step ended ${run.status}` };
    throw new ApiError('unavailable', `the LLM step failed: ${error.message}`, { details: { run_id: run.run_id, code: error.code } });
  }
  const out = run.output as Record<string, unknown>;
  const usage = out.usage as LlmResult['usage'] | undefined;
  return {
    run_id: run.run_id,
    text: typeof out.text === 'string' ? out.text : '',
    tool_calls: toolCallsOf(out.tool_calls),
    finish_reason: typeof out.finish_reason === 'string' ? out.finish_reason : 'stop',
    usage: usage && typeof usage === 'object' ? usage : null,
    model: typeof out.model === 'string' ? out.model : null,
  };
}

/**
 * Tool calls as a worker reported them, kept only in the shape callers rely on: any account can
 * run an llm worker, so its output is input like any other.
 */
function toolCallsOf(raw: unknown): LlmToolCall[] {
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((c, i): LlmToolCall[] => {
    const fn = c && typeof c === 'object' ? (c as { function?: unknown }).function : undefined;
    if (!fn || typeof fn !== 'object' || typeof (fn as { name?: unknown }).name !== 'string') return [];
    const args = (fn as { arguments?: unknown }).arguments;
    const id = (c as { id?: unknown }).id;
    return [{ id: typeof id === 'string' && id ? id : `call_${i}`, type: 'function', function: { name: (fn as { name: string }).name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) } }];
  });
}
