import { Deadline, sleep } from './deadline.js';
import { SwitchyardApiError, SwitchyardNetworkError, SwitchyardTimeoutError } from './errors.js';
import { SwitchyardFiles, isBinary } from './files.js';
import { HttpTransport, type FetchLike } from './http-transport.js';
import { toJobResult } from './job-result.js';
import { BatchEventStream, JobEventStream } from './sse-stream.js';
import type { Batch, BatchCanceled, BatchSubmitted } from './batch-types.js';
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
  SwitchyardFile,
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
 * it uses only fetch, Blob, ReadableStream, TextDecoder, AbortController and URL (and, in Node,
 * node:fs for uploads from a local path: sdk/client/local-file.ts).
 */
/** What get() takes: the usual request options, and extra fields of the job object to ask for. */
export interface GetJobOptions extends RequestOptions {
  /** `'input'`: the input the job was given (docs/api.md, "The job object"). */
  include?: Array<'input'>;
}

export class SwitchyardClient {
  private readonly http: HttpTransport;
  /** The Files API: upload, list, get, delete, content (docs/files.md). */
  readonly files: SwitchyardFiles;
  /** The file fields of each kind, from one GET /v1/capabilities (see fileFields()). */
  private fileFieldCache: Promise<Map<string, string[]>> | undefined;

  constructor(opts: SwitchyardClientOptions) {
    this.http = new HttpTransport({ baseUrl: opts.baseUrl, apiKey: opts.apiKey, timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, fetch: opts.fetch });
    this.files = new SwitchyardFiles(this.http);
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /**
   * POST /v1/jobs. With `wait`, the gateway answers with the finished job (201) when the run
   * ends within those seconds, else with the 202 of a queued run: check `terminal`.
   *
   * Files in the input: a top-level field of `body.input` that is one of the kind's file fields
   * (`image`, `mesh`, `audio`, `reference_audio`: see fileFields()) and whose value is
   * - a string starting with `@`: the rest is a local path (Node only), e.g. `'@./photo.png'`,
   * - a Blob or File, or a Uint8Array,
   * is uploaded first (files.upload()) and replaced by the file's id; `opts.onUpload` hears of
   * each. Nothing else is touched: strings without `@` (file ids, URLs, data: URIs) go as
   * they are, and an `@` string in a field that is not a file field (a prompt `'@alice hi'`)
   * stays a string. A Blob or bytes in a field that is not a file field is a TypeError. The
   * kinds' file fields are read from GET /v1/capabilities once per client, and only when the
   * input holds such a value. If the gateway refuses the job (an error answer), the files this
   * call uploaded are deleted again; after a network error or timeout they are kept (the job
   * may exist). Each call uploads anew, so the body differs from one call to the next: to retry
   * with an `idempotencyKey`, upload first and pass the ids.
   */
  async submit(body: SubmitJobBody, opts: SubmitOptions = {}): Promise<JobResult> {
    const uploaded: SwitchyardFile[] = [];
    const sent = await this.uploadInputFiles(body, opts, uploaded);
    try {
      return await this.submitJson(sent, opts);
    } catch (err) {
      if (uploaded.length && err instanceof SwitchyardApiError && err.status >= 400 && err.status < 500) {
        await Promise.all(uploaded.map((f) => this.files.delete(f.id).catch(() => undefined)));
      }
      throw err;
    }
  }

  /**
   * The names of a kind's file fields (marked `x-switchyard-file` in its input schema), from
   * GET /v1/capabilities, fetched once per client and again once when the kind is not in it;
   * undefined for a kind the gateway does not know.
   */
  async fileFields(kind: string, opts: RequestOptions = {}): Promise<string[] | undefined> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const fresh = this.fileFieldCache === undefined || attempt > 0;
      if (fresh) {
        const loading = this.capabilities(opts).then(fileFieldsByKind);
        this.fileFieldCache = loading;
        loading.catch(() => {
          if (this.fileFieldCache === loading) this.fileFieldCache = undefined;
        });
      }
      const fields = (await this.fileFieldCache!).get(kind);
      if (fields || fresh) return fields;
    }
    return undefined;
  }

  /** The input with its file values uploaded and replaced by ids (see submit()). */
  private async uploadInputFiles(body: SubmitJobBody, opts: SubmitOptions, uploaded: SwitchyardFile[]): Promise<SubmitJobBody> {
    const input = body.input ?? {};
    const candidates = Object.keys(input).filter((k) => isBinary(input[k]) || (typeof input[k] === 'string' && (input[k] as string).startsWith('@')));
    if (!candidates.length) return body;
    const fields = await this.fileFields(body.kind, { timeoutMs: opts.timeoutMs, signal: opts.signal });
    if (!fields) return body; // an unknown kind: the gateway says so
    const out: Record<string, unknown> = { ...input };
    try {
      for (const field of candidates) {
        const value = input[field];
        if (!fields.includes(field)) {
          if (isBinary(value)) throw new TypeError(`input.${field} of ${body.kind} is not a file field (its file fields: ${fields.join(', ') || 'none'}); a Blob or bytes cannot go there`);
          continue;
        }
        const source = typeof value === 'string' ? value.slice(1) : (value as Blob | Uint8Array);
        // Named after the path or the File; bytes get the gateway's `upload.<ext>` name.
        const file = await this.files.upload(source, { timeoutMs: opts.timeoutMs, signal: opts.signal });
        uploaded.push(file);
        out[field] = file.id;
        opts.onUpload?.(field, file);
      }
    } catch (err) {
      await Promise.all(uploaded.map((f) => this.files.delete(f.id).catch(() => undefined)));
      throw err;
    }
    return { ...body, input: out };
  }

  private async submitJson(body: SubmitJobBody, opts: SubmitOptions): Promise<JobResult> {
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

  /**
   * GET /v1/jobs/{run_id}. `include: ['input']` asks for the job's input too (`JobResult.input`),
   * which the job object otherwise leaves out.
   */
  async get(runId: string, opts: GetJobOptions = {}): Promise<JobResult> {
    const { include, ...rest } = opts;
    const query = include?.length ? { include: include.join(',') } : undefined;
    return toJobResult((await this.http.request({ method: 'GET', path: jobPath(runId), query, ...rest })).body);
  }

  /** POST /v1/jobs/{run_id}/cancel: the job after the cancel; a terminal run throws SwitchyardConflictError. */
  async cancel(runId: string, opts: RequestOptions = {}): Promise<JobResult> {
    return toJobResult((await this.http.request({ method: 'POST', path: `${jobPath(runId)}/cancel`, ...opts })).body);
  }

  /** GET /v1/jobs: the account's jobs, newest first. */
  async list(params: ListJobsParams = {}, opts: RequestOptions = {}): Promise<JobPage> {
    const { status, kind, batch_id, limit, cursor } = params;
    const res = await this.http.request({ method: 'GET', path: '/v1/jobs', query: { status, kind, batch_id, limit, cursor }, ...opts });
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

  /**
   * POST /v1/jobs/batch: up to 1,000 jobs, all accepted or none (docs/jobs.md, "Batches"). A
   * refused batch throws a SwitchyardBadRequestError whose `details.errors` names each refused
   * job by `index`; a balance short of the total, SwitchyardInsufficientCreditsError. File inputs
   * are refused: submit such a job alone. `idempotencyKey` covers the whole batch.
   */
  async submitBatch(jobs: SubmitJobBody[], opts: Pick<SubmitOptions, 'idempotencyKey' | 'timeoutMs' | 'signal'> = {}): Promise<BatchSubmitted> {
    const headers: Record<string, string> = opts.idempotencyKey !== undefined ? { 'idempotency-key': opts.idempotencyKey } : {};
    const res = await this.http.request({ method: 'POST', path: '/v1/jobs/batch', body: { jobs }, headers, timeoutMs: opts.timeoutMs, signal: opts.signal });
    const raw = res.body as JsonObject;
    const { batch_id, created_at, size, price } = raw as unknown as Batch;
    return { batch_id, created_at, size, price, jobs: ((raw.jobs as unknown[]) ?? []).map(toJobResult), replayed: res.headers.get('idempotent-replayed') === 'true', raw };
  }

  /** GET /v1/batches/{batch_id}: its jobs by status. List its jobs with list({batch_id}). */
  async getBatch(batchId: string, opts: RequestOptions = {}): Promise<Batch> {
    return (await this.http.request({ method: 'GET', path: batchPath(batchId), ...opts })).body as Batch;
  }

  /** POST /v1/batches/{batch_id}/cancel: every job not ended is canceled; the answer counts them. */
  async cancelBatch(batchId: string, opts: RequestOptions = {}): Promise<BatchCanceled> {
    return (await this.http.request({ method: 'POST', path: `${batchPath(batchId)}/cancel`, ...opts })).body as BatchCanceled;
  }

  /** Every job of the batch over one SSE stream, reconnecting with Last-Event-ID; ends after `done` (the batch). */
  streamBatch(batchId: string, opts: StreamOptions = {}): BatchEventStream {
    return new BatchEventStream(this.http, batchId, opts);
  }

  /** GET /v1/capabilities: every kind, its input schema, its outputs and the workers serving it now. */
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

function batchPath(batchId: string): string {
  return `/v1/batches/${encodeURIComponent(batchId)}`;
}

function jobPath(runId: string): string {
  return `/v1/jobs/${encodeURIComponent(runId)}`;
}

/** The file fields of every kind in a capabilities answer. */
function fileFieldsByKind(caps: Capabilities): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const k of caps.kinds ?? []) {
    const props = ((k.input_schema as { properties?: Record<string, Record<string, unknown>> }).properties ?? {}) as Record<string, Record<string, unknown>>;
    out.set(k.kind, Object.keys(props).filter((name) => props[name]?.['x-switchyard-file'] !== undefined));
  }
  return out;
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
