import { MAX_WORKER_MODELS, MODEL_ID_PATTERN, type WorkerModel } from '../../protocol/index.js';
import type { Engine, EngineContext, EngineResult } from '../types.js';
import { chatRequestOf } from './chat-request.js';
import { CompletionBuilder, type LlmOutput } from './completion-builder.js';
import { ContentChunks } from './content-chunks.js';
import { SseReader } from './sse.js';
import { type BackendAnswer, type BackendRequest, fetchClient, nodeHttpClient } from './backend-client.js';
import { UpstreamError, errorOfFetch, errorOfResponse } from '../upstream-error.js';

export { UpstreamError, type UpstreamErrorCode } from '../upstream-error.js';
export type { LlmOutput, ToolCall, Usage } from './completion-builder.js';

/** The one kind this engine serves. */
export const LLM_KIND = 'inference:llm:text-generate';

export interface OpenAiEngineOptions {
  /** The backend's OpenAI base URL, up to and including `/v1`: `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:11434/v1` (Ollama). */
  backendUrl: string;
  /** Sent as `Authorization: Bearer`, for backends started with a key (vLLM `--api-key`, llama-server `--api-key`). */
  apiKey?: string;
  /** The model ids to advertise; the first serves jobs that name none. Unset: the backend's `GET /models`. */
  models?: string[];
  /**
   * A fetch to call the backend through (a proxy, an agent of yours). Unset: node:http(s) with
   * Node's global keep-alive agents, which costs a fraction of Node's fetch per completion.
   */
  fetch?: typeof fetch;
  /**
   * The longest the backend may stay silent: before its answer starts (prompt processing
   * included) and between two pieces of a stream. Past it the call is aborted and the lease
   * fails retryable. @defaultValue 300000
   */
  timeoutMs?: number;
}

export interface OpenAiEngine {
  /** The handler of `inference:llm:text-generate` (pass it as the worker's `handler`). */
  handler: Engine;
  /** The models to advertise: the `models` option, or those the backend lists (ids the protocol refuses are left out). */
  listModels(): Promise<WorkerModel[]>;
  /** Resolves while the backend answers `GET /models`; the worker asks it after a lease found the backend gone (`backend.probe`). */
  probe(signal?: AbortSignal): Promise<void>;
}

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An engine that runs llm jobs on any OpenAI-compatible inference server (vLLM, llama.cpp's
 * llama-server, Ollama, LM Studio, TGI): each job is one streaming `POST /chat/completions`,
 * whose content deltas go out as the job's output while they arrive (docs/engines.md).
 */
export function createOpenAiEngine(opts: OpenAiEngineOptions): OpenAiEngine {
  const base = backendBase(opts.backendUrl);
  const client = opts.fetch ? fetchClient(opts.fetch, base) : nodeHttpClient(base);
  const timeoutMs = opts.timeoutMs ?? 300_000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError('timeoutMs must be a positive number of milliseconds');
  const given = opts.models === undefined ? undefined : checkModelIds(opts.models);
  const headers = (extra: Record<string, string>) => ({ ...extra, ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}) });
  let discovered: Promise<WorkerModel[]> | undefined;

  /** A call to the backend under the silence limit; `signal` (the lease's) aborts it at once. */
  const call = async <T>(path: string, request: BackendRequest, signal: AbortSignal | undefined, read: (answer: BackendAnswer, touch: () => void) => Promise<T>): Promise<T> => {
    const what = `${request.method} ${path}`;
    const exchange = client(path, request);
    let silent: UpstreamError | undefined;
    // One timer for the whole call, re-armed on each piece of the answer (refresh, not a new one).
    const timer = setTimeout(() => {
      silent = new UpstreamError('upstream_unavailable', `the backend sent nothing for ${timeoutMs} ms (${what})`, true);
      exchange.abort(silent);
    }, timeoutMs);
    const touch = () => void timer.refresh();
    const onAbort = () => exchange.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    try {
      let answer: BackendAnswer;
      try {
        answer = await exchange.answer;
      } catch (err) {
        throw signal?.aborted ? signal.reason : (silent ?? errorOfFetch(err, what, base));
      }
      touch();
      if (answer.status < 200 || answer.status > 299) throw await errorOfResponse(answer, what);
      try {
        return await read(answer, touch);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (silent) throw silent;
        if (err instanceof UpstreamError) throw err;
        throw new UpstreamError('upstream_unavailable', `the backend's answer to ${what} broke off: ${(err as Error)?.message ?? err}`, true);
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      exchange.release();
    }
  };

  const listModels = async (): Promise<WorkerModel[]> => {
    if (given) return given.map((id) => ({ id }));
    const body = await call('/models', { method: 'GET', headers: headers({ accept: 'application/json' }) }, undefined, readJson);
    const data = isObject(body) && Array.isArray(body.data) ? body.data : null;
    if (!data) throw new UpstreamError('upstream_bad_response', `the backend's GET /models is not a list of models ({"data": [{"id"}]})`, true);
    const ids = [...new Set(data.map((m) => (isObject(m) ? m.id : undefined)).filter((id): id is string => typeof id === 'string'))];
    const usable = ids.filter((id) => MODEL_ID.test(id)).slice(0, MAX_WORKER_MODELS);
    if (usable.length === 0) {
      const why = ids.length ? `none of its ids is a valid model id (${ids.slice(0, 5).join(', ')}): name them with the models option (--models)` : 'it lists none';
      throw new UpstreamError('upstream_bad_response', `the backend at ${base} has no model to advertise: ${why}`, true);
    }
    return usable.map((id) => ({ id }));
  };

  /** The model of a job that names none: the first advertised one (discovered once, again after a failure). */
  const defaultModel = async (): Promise<string> => {
    if (given) return given[0];
    discovered ??= listModels();
    try {
      return (await discovered)[0].id;
    } catch (err) {
      discovered = undefined;
      throw err;
    }
  };

  const handler: Engine = async (kind, input, ctx): Promise<EngineResult> => {
    if (kind !== LLM_KIND) throw Object.assign(new Error(`the openai engine serves ${LLM_KIND} only, not ${kind}`), { code: 'unsupported_kind', retryable: true });
    ctx.signal.throwIfAborted();
    const model = typeof input.model === 'string' && input.model !== '' ? input.model : await defaultModel();
    const request: BackendRequest = { method: 'POST', headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream' }), body: JSON.stringify(chatRequestOf(input, model)) };
    const output = await call('/chat/completions', request, ctx.signal, (answer, touch) => readCompletion(answer, model, ctx, touch));
    // The server's own count (streamed with stream_options.include_usage) is what the run is charged for.
    const usage = output.usage && { input_tokens: output.usage.prompt_tokens, output_tokens: output.usage.completion_tokens };
    return { artifacts: [], extra: { ...output }, ...(usage && { usage }) };
  };

  const probe = async (signal?: AbortSignal) => {
    await call('/models', { method: 'GET', headers: headers({ accept: 'application/json' }) }, signal, readJson);
  };
  return { handler, listModels, probe };
}

/** The base URL without its trailing slash; only http(s). */
function backendBase(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`backendUrl must be an http(s) URL, not ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`backendUrl must be an http(s) URL, not ${JSON.stringify(url)}`);
  return parsed.href.replace(/\/+$/, '');
}

function checkModelIds(models: string[]): string[] {
  if (!Array.isArray(models) || models.length === 0) throw new TypeError('models must be a non-empty list of model ids (or left unset to ask the backend)');
  if (models.length > MAX_WORKER_MODELS) throw new RangeError(`at most ${MAX_WORKER_MODELS} models`);
  const bad = models.find((m) => typeof m !== 'string' || !MODEL_ID.test(m));
  if (bad !== undefined) throw new TypeError(`${JSON.stringify(bad)} is not a model id (1-200 of letters, digits and ._:/@+-, starting with a letter or digit)`);
  return [...new Set(models)];
}

/** A JSON body (as fetch's `json()`: text that does not parse throws). */
const readJson = async (answer: BackendAnswer): Promise<unknown> => JSON.parse(await answer.text());

/**
 * Reads the answer: an SSE stream of chunks up to `data: [DONE]`, each content delta sent on
 * through `ctx.output` at once; or, from a backend that ignores `stream: true`, one JSON
 * completion. A stream that ends without [DONE] counts as whole only if it said how it finished.
 */
async function readCompletion(answer: BackendAnswer, model: string, ctx: EngineContext, touch: () => void): Promise<LlmOutput> {
  const builder = new CompletionBuilder(model);
  const type = answer.contentType;
  if (/^application\/json/i.test(type)) {
    const text = await answer.text();
    let completion: unknown;
    try {
      completion = JSON.parse(text);
    } catch {
      throw new UpstreamError('upstream_bad_response', 'the backend answered JSON that does not parse', true);
    }
    const delta = builder.addCompletion(completion);
    if (delta) ctx.output(delta);
    return builder.result();
  }
  if (!/^text\/event-stream/i.test(type)) throw new UpstreamError('upstream_bad_response', `the backend answered ${type || 'no content type'}, not an event stream`, true);
  const reader = new SseReader();
  const plain = new ContentChunks();
  let done = false;
  // Each piece of the body is read where it arrives: its events parsed, their deltas handed on,
  // and true ("read enough") once [DONE] came.
  await answer.read((bytes) => {
    touch();
    for (const event of reader.feedBytes(bytes)) {
      if (event.data.trim() === '[DONE]') return (done = true);
      const isError = event.event === 'error';
      const content = isError ? undefined : plain.contentOf(event.data);
      if (content !== undefined) {
        if (builder.addPlainContent(content, plain.model)) ctx.output(content);
        continue;
      }
      let chunk: unknown;
      try {
        chunk = JSON.parse(event.data);
      } catch {
        if (event.event === 'error') throw new UpstreamError('upstream_unavailable', `the backend failed mid-stream: ${event.data.slice(0, 500)}`, true);
        throw new UpstreamError('upstream_bad_response', `the backend streamed data that is not JSON: ${event.data.slice(0, 200)}`, true);
      }
      // llama-server's `error:` line carries the error object itself.
      const delta = builder.addChunk(isError && isObject(chunk) && !('error' in chunk) ? { error: chunk } : chunk);
      if (delta) ctx.output(delta);
      if (!isError) plain.learn(event.data, chunk);
    }
    return false;
  });
  if (!done && builder.finishReason === null) {
    throw new UpstreamError('upstream_unavailable', 'the backend ended its stream before the completion finished (no finish_reason, no [DONE])', true);
  }
  return builder.result();
}
