import { UpstreamError, errorOfFetch, errorOfResponse } from '../upstream-error.js';

/**
 * The calls the engine makes to a Cog container's HTTP server, as Cog documents them
 * (Cog's docs/http.md, in replicate/cog; the server is crates/coglet/src/transport/http/routes.rs, and
 * python/cog/server/http.py in images built with cog <= 0.16). Each call has a time limit, so a
 * container that hangs fails the call instead of the lease waiting for ever.
 */

/** `GET /health-check`'s `status` (Cog's docs/http.md): READY and BUSY serve, STARTING will. */
export type CogHealth = 'STARTING' | 'READY' | 'BUSY' | 'SETUP_FAILED' | 'DEFUNCT' | 'UNHEALTHY' | string;

export interface HealthCheck {
  status: CogHealth;
  /** Setup's captured output, for saying why setup failed. */
  setupLogs?: string;
  userHealthcheckError?: string;
}

/** Body of `PUT /predictions/{id}` (Cog's docs/http.md "Webhooks"; coglet's PredictionRequest). */
export interface PredictionRequest {
  id: string;
  input: Record<string, unknown>;
  webhook: string;
  webhook_events_filter: Array<'start' | 'output' | 'logs' | 'completed'>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class CogClient {
  readonly base: string;

  constructor(url: string, private readonly timeoutMs = 30_000) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new TypeError(`the Cog URL must be an http(s) URL, not ${JSON.stringify(url)}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`the Cog URL must be an http(s) URL, not ${JSON.stringify(url)}`);
    this.base = parsed.href.replace(/\/+$/, '');
  }

  async health(): Promise<HealthCheck> {
    const body = await this.json('GET', '/health-check');
    if (!isObject(body) || typeof body.status !== 'string') throw new UpstreamError('upstream_bad_response', `GET /health-check of ${this.base} is not Cog's {"status": ...}`, true);
    const setup = isObject(body.setup) ? body.setup : {};
    return {
      status: body.status,
      ...(typeof setup.logs === 'string' ? { setupLogs: setup.logs } : {}),
      ...(typeof body.user_healthcheck_error === 'string' ? { userHealthcheckError: body.user_healthcheck_error } : {}),
    };
  }

  openapi(): Promise<unknown> {
    return this.json('GET', '/openapi.json');
  }

  /**
   * Creates the prediction with `Prefer: respond-async` at its own id (the idempotent endpoint,
   * so the id to cancel is ours from the start). Cog answers 202 at once; the webhook reports
   * the rest. 422 is Cog's refusal of the input (`{"detail": [{loc, msg, type}]}`), which
   * errorOfResponse already makes non-retryable; 409 (all slots busy) and 503 (not ready)
   * are retryable like every 5xx.
   */
  async createAsync(request: PredictionRequest, signal: AbortSignal): Promise<void> {
    await this.call('PUT', `/predictions/${encodeURIComponent(request.id)}`, { 'content-type': 'application/json', prefer: 'respond-async' }, JSON.stringify(request), signal, true);
  }

  /** 404 (the prediction already ended, or never started) is fine: there is nothing left to stop. */
  async cancel(id: string): Promise<boolean> {
    const res = await this.raw('POST', `/predictions/${encodeURIComponent(id)}/cancel`, {}, undefined, undefined);
    await res.body?.cancel();
    return res.ok;
  }

  /** A file the prediction's output names by URL (Cog started with --upload-url). */
  async download(url: string, signal: AbortSignal): Promise<{ data: Buffer; contentType: string | null }> {
    const res = await this.fetchWithin('GET', url, {}, undefined, signal, `GET ${url}`);
    if (!res.ok) throw await errorOfResponse(res, `GET ${url}`);
    return { data: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') };
  }

  private async json(method: string, path: string): Promise<unknown> {
    const res = await this.call(method, path, { accept: 'application/json' }, undefined, undefined, false);
    try {
      return await res.json();
    } catch {
      throw new UpstreamError('upstream_bad_response', `${method} ${path} of ${this.base} did not answer JSON`, true);
    }
  }

  private async call(method: string, path: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal | undefined, drain: boolean): Promise<Response> {
    const res = await this.raw(method, path, headers, body, signal);
    if (!res.ok) throw await errorOfResponse(res, `${method} ${path}`);
    if (drain) await res.body?.cancel();
    return res;
  }

  private raw(method: string, path: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal | undefined): Promise<Response> {
    return this.fetchWithin(method, `${this.base}${path}`, headers, body, signal, `${method} ${path}`);
  }

  private async fetchWithin(method: string, url: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal | undefined, what: string): Promise<Response> {
    const limit = AbortSignal.timeout(this.timeoutMs);
    try {
      return await fetch(url, { method, headers, body, signal: signal ? AbortSignal.any([signal, limit]) : limit });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (limit.aborted) throw new UpstreamError('upstream_unavailable', `the Cog server at ${this.base} did not answer ${what} within ${this.timeoutMs} ms`, true);
      throw errorOfFetch(err, what, this.base);
    }
  }
}
