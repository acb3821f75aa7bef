import { Deadline, sleep } from './deadline.js';
import { SwitchyardApiError, SwitchyardNetworkError, SwitchyardTimeoutError } from './errors.js';
import { HttpTransport, type FetchLike } from './http-transport.js';
import { toJobResult } from './job-result.js';
import { JobEventStream } from './sse-stream.js';
import type {
  Bot,
  BotInput,
  Capabilities,
  Capacity,
  JobPage,
  JobResult,
  JsonObject,
  ListJobsParams,
  RequestOptions,
  StreamOptions,
  SubmitJobBody,
  SubmitOptions,
  ToolDefinition,
  ToolDefinitionInput,
  WaitOptions,
  WebhookAttempt,
} from './types.js';

export interface SwitchyardClientOptions {
  /** The gateway's base URL, e.g. `https://switchyard.example` (a path prefix is kept). */
  baseUrl: string;
  /** The account key, sent as `Authorization: Bearer`. Only capacity() works without one. */
  apiKey?: string;
  /** Default timeout of each request, overridable per call; 0 = none. @defaultValue 30000 */
  timeoutMs?: number;
  /** A fetch implementation (tests, proxies, older runtimes). @defaultValue globalThis.fetch */
  fetch?: FetchLike;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_POLL_MS = 1000;

/**
 * A thin client of the Switchyard wire contract (REST and SSE). Runs in Node 20+ and browsers:
 * it uses only fetch, ReadableStream, TextDecoder, AbortController and URL.
 */
export class SwitchyardClient {
  private readonly http: HttpTransport;

  constructor(opts: SwitchyardClientOptions) {
    this.http = new HttpTransport({ baseUrl: opts.baseUrl, apiKey: opts.apiKey, timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, fetch: opts.fetch });
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /**
   * POST /v1/jobs. With `wait`, the gateway answers with the finished job (201) when the run
   * ends within those seconds, else with the 202 of a queued run: check `terminal`.
   */
  async submit(body: SubmitJobBody, opts: SubmitOptions = {}): Promise<JobResult> {
    const headers: Record<string, string> = {};
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    let timeoutMs = opts.timeoutMs;
    if (opts.wait !== undefined) {
      if (!(Number.isInteger(opts.wait) && opts.wait >= 0)) throw new RangeError('wait is a whole number of seconds');
      headers.prefer = `wait=${opts.wait}`;
      if (timeoutMs === undefined && this.http.timeoutMs) timeoutMs = this.http.timeoutMs + opts.wait * 1000;
    }
    const res = await this.http.request({ method: 'POST', path: '/v1/jobs', body, headers, timeoutMs, signal: opts.signal });
    return toJobResult(res.body);
  }

  /** GET /v1/jobs/{run_id}. */
  async get(runId: string, opts: RequestOptions = {}): Promise<JobResult> {
    return toJobResult((await this.http.request({ method: 'GET', path: jobPath(runId), ...opts })).body);
  }

  /** POST /v1/jobs/{run_id}/cancel: the job after the cancel; a terminal run throws SwitchyardConflictError. */
  async cancel(runId: string, opts: RequestOptions = {}): Promise<JobResult> {
    return toJobResult((await this.http.request({ method: 'POST', path: `${jobPath(runId)}/cancel`, ...opts })).body);
  }

  /** GET /v1/jobs: the account's jobs, newest first. */
  async list(params: ListJobsParams = {}, opts: RequestOptions = {}): Promise<JobPage> {
    const { status, kind, limit, cursor } = params;
    const res = await this.http.request({ method: 'GET', path: '/v1/jobs', query: { status, kind, limit, cursor }, ...opts });
    const raw = res.body as JsonObject;
    return { data: ((raw.data as unknown[]) ?? []).map(toJobResult), next_cursor: (raw.next_cursor as string | null) ?? null, raw };
  }

  /**
   * Polls get() every `intervalMs` until the run is terminal. Network errors, 5xx and 429 on a
   * poll are retried at the next one. Past `timeoutMs`, rejects with a SwitchyardTimeoutError
   * whose `runId` and `lastJob` tell what is still running.
   */
  async wait(runId: string, opts: WaitOptions = {}): Promise<JobResult> {
    const overall = new Deadline(opts.timeoutMs, opts.signal);
    let last: JobResult | undefined;
    try {
      for (;;) {
        let pause = opts.intervalMs ?? DEFAULT_POLL_MS;
        try {
          last = await this.get(runId, { signal: overall.signal, timeoutMs: opts.requestTimeoutMs });
          if (last.terminal) return last;
        } catch (err) {
          if (overall.timedOut || overall.callerAborted || !transient(err)) throw err;
          if (err instanceof SwitchyardApiError && err.retryAfter) pause = Math.max(pause, err.retryAfter * 1000);
        }
        await sleep(pause, overall.signal);
      }
    } catch (err) {
      if (!overall.timedOut) throw err;
      throw new SwitchyardTimeoutError(`${runId} was not terminal after ${opts.timeoutMs} ms (last status: ${last?.status ?? 'unknown'}); it keeps running`, {
        timeoutMs: opts.timeoutMs!,
        runId,
        lastJob: last,
        cause: err,
      });
    } finally {
      overall.dispose();
    }
  }

  /** The run's live events (SSE), reconnecting with Last-Event-ID; ends after `done`. */
  stream(runId: string, opts: StreamOptions = {}): JobEventStream {
    return new JobEventStream(this.http, runId, opts);
  }

  /** GET /v1/capabilities: every kind, its input schema and the workers serving it now. */
  async capabilities(opts: RequestOptions = {}): Promise<Capabilities> {
    return (await this.http.request({ method: 'GET', path: '/v1/capabilities', ...opts })).body as Capabilities;
  }

  /** GET /v1/network/capacity (no credential needed). */
  async capacity(opts: RequestOptions = {}): Promise<Capacity> {
    return (await this.http.request({ method: 'GET', path: '/v1/network/capacity', ...opts })).body as Capacity;
  }

  /** GET /v1/jobs/{run_id}/webhooks: the run's webhook delivery attempts, oldest first. */
  async webhooks(runId: string, opts: RequestOptions = {}): Promise<WebhookAttempt[]> {
    return listOf<WebhookAttempt>((await this.http.request({ method: 'GET', path: `${jobPath(runId)}/webhooks`, ...opts })).body);
  }

  async listTools(opts: RequestOptions = {}): Promise<ToolDefinition[]> {
    return listOf<ToolDefinition>((await this.http.request({ method: 'GET', path: '/v1/tools/definitions', ...opts })).body);
  }

  /** POST /v1/tools/definitions; a webhook tool's answer carries `signing_secret` once. */
  async createTool(def: ToolDefinitionInput, opts: RequestOptions = {}): Promise<ToolDefinition> {
    return (await this.http.request({ method: 'POST', path: '/v1/tools/definitions', body: def, ...opts })).body as ToolDefinition;
  }

  async getTool(id: string, opts: RequestOptions = {}): Promise<ToolDefinition> {
    return (await this.http.request({ method: 'GET', path: `/v1/tools/definitions/${encodeURIComponent(id)}`, ...opts })).body as ToolDefinition;
  }

  async deleteTool(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.http.request({ method: 'DELETE', path: `/v1/tools/definitions/${encodeURIComponent(id)}`, ...opts });
  }

  async listBots(opts: RequestOptions = {}): Promise<Bot[]> {
    return listOf<Bot>((await this.http.request({ method: 'GET', path: '/v1/bots', ...opts })).body);
  }

  /** POST /v1/bots: also creates and publishes the bot's flow. */
  async createBot(bot: BotInput, opts: RequestOptions = {}): Promise<Bot> {
    return (await this.http.request({ method: 'POST', path: '/v1/bots', body: bot, ...opts })).body as Bot;
  }

  async getBot(id: string, opts: RequestOptions = {}): Promise<Bot> {
    return (await this.http.request({ method: 'GET', path: `/v1/bots/${encodeURIComponent(id)}`, ...opts })).body as Bot;
  }

  async deleteBot(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.http.request({ method: 'DELETE', path: `/v1/bots/${encodeURIComponent(id)}`, ...opts });
  }
}

function jobPath(runId: string): string {
  return `/v1/jobs/${encodeURIComponent(runId)}`;
}

/** A list answer: `{data: [...]}` as the jobs list, or a bare array. */
function listOf<T>(body: unknown): T[] {
  if (Array.isArray(body)) return body as T[];
  const data = (body as { data?: unknown } | undefined)?.data;
  return Array.isArray(data) ? (data as T[]) : [];
}

/** Worth another poll: the network, a request timeout, 5xx or 429. */
function transient(err: unknown): boolean {
  if (err instanceof SwitchyardApiError) return err.retryable;
  return err instanceof SwitchyardNetworkError || err instanceof SwitchyardTimeoutError;
}
