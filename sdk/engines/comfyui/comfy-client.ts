import { UpstreamError, errorOfFetch, errorOfResponse, quote } from '../upstream-error.js';
import type { ApiGraph } from './workflow-templates.js';

/**
 * ComfyUI's HTTP routes (server.py, PromptServer.__init__), each failure an UpstreamError: no
 * answer is `upstream_unavailable` (retryable), a 4xx `upstream_error`, a 5xx retryable.
 */

/** A file a node wrote, as its `ui` output lists it: `GET /view?filename&subfolder&type` serves it. */
export interface OutputFile {
  filename: string;
  subfolder: string;
  type: string;
}

/** `GET /history/{prompt_id}`'s entry: `outputs` node id -> the node's ui output; `status` on newer servers (PromptQueue.task_done). */
export interface HistoryEntry {
  outputs: Record<string, Record<string, unknown>>;
  status?: { status_str?: string; completed?: boolean; messages?: unknown[] } | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** How long one HTTP call may take; a running prompt is followed over the WebSocket, not here. */
const CALL_TIMEOUT_MS = 60_000;

export class ComfyClient {
  constructor(
    /** The server's base URL, without a trailing slash. */
    readonly base: string,
    private readonly doFetch: typeof fetch = fetch,
  ) {}

  /** `GET /system_stats`: the server answers, and says its version. */
  async systemStats(): Promise<{ comfyui_version?: string }> {
    const body = await this.json('GET', '/system_stats');
    if (!isObject(body) || !isObject(body.system)) throw new UpstreamError('upstream_bad_response', `${this.base} answered GET /system_stats without {system}: is it ComfyUI?`, true);
    return { comfyui_version: typeof body.system.comfyui_version === 'string' ? body.system.comfyui_version : undefined };
  }

  /** `GET /object_info`: the node types the server has (core, and the custom nodes it loaded). */
  async nodeTypes(): Promise<Set<string>> {
    const body = await this.json('GET', '/object_info');
    if (!isObject(body)) throw new UpstreamError('upstream_bad_response', `${this.base} answered GET /object_info without an object of node types`, true);
    return new Set(Object.keys(body));
  }

  /** `POST /prompt`; a graph ComfyUI refuses (400 with `node_errors`) is an `upstream_error`, not retried. */
  async queuePrompt(prompt: ApiGraph, clientId: string): Promise<{ prompt_id: string; node_errors: unknown }> {
    const body = await this.json('POST', '/prompt', { prompt, client_id: clientId });
    if (!isObject(body) || typeof body.prompt_id !== 'string') throw new UpstreamError('upstream_bad_response', `${this.base} answered POST /prompt without a prompt_id`, true);
    return { prompt_id: body.prompt_id, node_errors: body.node_errors };
  }

  /** The prompt's entry of `GET /history/{prompt_id}`; undefined when ComfyUI has none. */
  async history(promptId: string): Promise<HistoryEntry | undefined> {
    const body = await this.json('GET', `/history/${encodeURIComponent(promptId)}`);
    const entry = isObject(body) ? body[promptId] : undefined;
    if (entry === undefined) return undefined;
    if (!isObject(entry) || !isObject(entry.outputs)) throw new UpstreamError('upstream_bad_response', `${this.base}'s history of prompt ${promptId} has no outputs`, true);
    return entry as unknown as HistoryEntry;
  }

  /** `GET /view`: an output file's bytes and the content type ComfyUI served it with. */
  async view(file: OutputFile): Promise<{ data: Buffer; contentType: string | null }> {
    const query = new URLSearchParams({ filename: file.filename, subfolder: file.subfolder, type: file.type });
    const res = await this.call('GET', `/view?${query}`);
    try {
      return { data: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') };
    } catch (err) {
      throw new UpstreamError('upstream_unavailable', `${this.base} broke off sending ${file.filename}: ${(err as Error).message}`, true);
    }
  }

  /**
   * `POST /upload/image` (multipart: image, type=input): any file lands in ComfyUI's input
   * folder, where LoadImage and the 3D loaders read it. Returns the value those nodes take:
   * the name ComfyUI gave it (renamed when another file had the name), under its subfolder.
   */
  async upload(data: Buffer, filename: string, contentType: string): Promise<string> {
    const form = new FormData();
    form.append('image', new Blob([new Uint8Array(data)], { type: contentType }), filename);
    form.append('type', 'input');
    form.append('overwrite', 'false');
    const res = await this.call('POST', '/upload/image', form);
    const body = await res.json().catch(() => null);
    if (!isObject(body) || typeof body.name !== 'string') throw new UpstreamError('upstream_bad_response', `${this.base} answered POST /upload/image without a name`, true);
    return typeof body.subfolder === 'string' && body.subfolder !== '' ? `${body.subfolder}/${body.name}` : body.name;
  }

  /**
   * `POST /interrupt` with the prompt's id: recent ComfyUI (server.py post_interrupt reads
   * `prompt_id`) interrupts only that prompt if it runs; older ones ignore the body and interrupt
   * whatever runs, so callers send it only while their prompt is the one running.
   */
  async interrupt(promptId: string): Promise<void> {
    await this.call('POST', '/interrupt', { prompt_id: promptId });
  }

  /** `POST /queue {delete: [id]}`: takes a prompt that has not started out of the queue (a no-op otherwise). */
  async deleteQueued(promptId: string): Promise<void> {
    await this.call('POST', '/queue', { delete: [promptId] });
  }

  private async json(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await this.call(method, path, body);
    try {
      return await res.json();
    } catch {
      throw new UpstreamError('upstream_bad_response', `${this.base} answered ${method} ${path.split('?')[0]} with something that is not JSON`, true);
    }
  }

  private async call(method: string, path: string, body?: unknown): Promise<Response> {
    const what = `${method} ${path.split('?')[0]}`;
    const init: RequestInit = { method, signal: AbortSignal.timeout(CALL_TIMEOUT_MS) };
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'content-type': 'application/json' };
    }
    let res: Response;
    try {
      res = await this.doFetch(`${this.base}${path}`, init);
    } catch (err) {
      throw errorOfFetch(err, what, this.base);
    }
    if (!res.ok) throw await errorOfResponse(res, what, describeComfyError);
    return res;
  }
}

/**
 * ComfyUI's error bodies: `{error: {type, message, details}, node_errors: {id: {class_type,
 * errors: [{message, details}]}}}` from POST /prompt (execution.py validate_prompt), `{error:
 * "text"}` from older servers, else the text.
 */
export function describeComfyError(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return quote(text.trim()) || 'no details';
  }
  if (!isObject(body)) return quote(text.trim());
  const parts: string[] = [];
  const nodeErrors = isObject(body.node_errors) ? Object.entries(body.node_errors) : [];
  const err = body.error;
  // With node errors, `details` only repeats them without saying which node.
  if (isObject(err)) parts.push([err.message, nodeErrors.length ? undefined : err.details].filter((s) => typeof s === 'string' && s !== '').join(': '));
  else if (typeof err === 'string') parts.push(err);
  for (const [id, n] of nodeErrors) {
    if (!isObject(n) || !Array.isArray(n.errors)) continue;
    const reasons = n.errors.filter(isObject).map((e) => [e.message, e.details].filter((s) => typeof s === 'string' && s !== '').join(': '));
    parts.push(`node ${id} (${typeof n.class_type === 'string' ? n.class_type : '?'}): ${reasons.join('; ')}`);
  }
  const said = parts.filter(Boolean).join('; ');
  return quote(said || text.trim());
}
