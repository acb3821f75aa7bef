import { monotonicFactory } from 'ulid';
import type { StoredTool } from '../../../models/stores.js';
import { OutboundError, type OutboundResponse, type SsrfGuard } from '../outbound/ssrf-guard.js';
import { signWebhook } from '../webhooks/signing.js';
import type { SecretBox } from './secret-box.js';

export const TOOL_USER_AGENT = 'Switchyard-Tools/1';

/** Output longer than this (in bytes) reaches the LLM cut, as text: it pays for every byte. */
export const TOOL_OUTPUT_MAX_BYTES = 32 * 1024;

/** What a call came to; the service adds the tool's names and the duration. */
export interface ToolOutcome {
  ok: boolean;
  status: number | null;
  output: unknown;
  error: { code: string; message: string } | null;
}

interface ToolRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** Guard failures worth their own code; the rest (connect, TLS, a URL no longer allowed) are `tool_failed`. */
const PASSED_THROUGH = new Set(['timeout', 'url_blocked', 'response_too_large', 'aborted']);

const messageId = monotonicFactory();

/**
 * One call of a registered tool, through the SSRF guard (re-checked at connect time, redirects
 * never followed), with arguments already checked. Never throws for anything the tool or the
 * network does: those become `ok: false` outcomes.
 */
export class ToolCaller {
  constructor(private readonly opts: { outbound: Pick<SsrfGuard, 'request'>; secrets: SecretBox }) {}

  async call(tool: StoredTool, args: Record<string, unknown>, signal?: AbortSignal): Promise<ToolOutcome> {
    let req: ToolRequest;
    try {
      req = tool.kind === 'webhook' ? this.webhookRequest(tool, args) : this.httpRequest(tool, args);
    } catch (err) {
      // Only a secret that cannot be opened gets here: sealed under another key id, or altered.
      return { ok: false, status: null, output: null, error: { code: 'unavailable', message: (err as Error).message } };
    }
    // The bearer token goes to the registered origin and nowhere else (the guard follows no redirect).
    if (req.url.origin !== new URL(tool.url).origin) throw new Error(`tool ${tool.id}: request URL left the registered origin`);
    let res: OutboundResponse;
    try {
      res = await this.opts.outbound.request(req.url, { method: req.method, headers: req.headers, body: req.body, signal });
    } catch (err) {
      if (!(err instanceof OutboundError)) throw err;
      const code = PASSED_THROUGH.has(err.code) ? err.code : 'tool_failed';
      return { ok: false, status: null, output: null, error: { code, message: `the tool could not be called: ${err.message}` } };
    }
    const output = outputOf(res);
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status, output, error: null };
    const why = res.status >= 300 && res.status < 400 ? ' (a redirect, which is never followed)' : '';
    return { ok: false, status: res.status, output, error: { code: 'tool_failed', message: `the tool answered HTTP ${res.status}${why}` } };
  }

  /** GET and DELETE carry the arguments as query parameters (non-strings as JSON), the others as a JSON body. */
  private httpRequest(tool: StoredTool, args: Record<string, unknown>): ToolRequest {
    const url = new URL(tool.url);
    const headers: Record<string, string> = { accept: 'application/json, text/*;q=0.9, */*;q=0.1', 'user-agent': TOOL_USER_AGENT };
    if (tool.auth?.type === 'bearer') headers.authorization = `Bearer ${this.opts.secrets.open(tool.secrets.bearer_token ?? '', `${tool.id}:bearer_token`)}`;
    if (tool.method === 'GET' || tool.method === 'DELETE') {
      for (const [name, value] of Object.entries(args)) {
        if (value !== undefined) url.searchParams.append(name, typeof value === 'string' ? value : JSON.stringify(value));
      }
      return { url, method: tool.method, headers };
    }
    return { url, method: tool.method, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(args) };
  }

  /** A signed POST of `{tool_id, name, arguments}` (Standard Webhooks, like run webhooks: docs/webhooks.md). */
  private webhookRequest(tool: StoredTool, args: Record<string, unknown>): ToolRequest {
    const secret = this.opts.secrets.open(tool.secrets.signing_secret ?? '', `${tool.id}:signing_secret`);
    const body = JSON.stringify({ tool_id: `custom:${tool.id}`, name: tool.name, arguments: args });
    const id = `msg_${messageId()}`;
    const timestamp = Math.floor(Date.now() / 1000);
    return {
      url: new URL(tool.url),
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/*;q=0.9, */*;q=0.1',
        'user-agent': TOOL_USER_AGENT,
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(secret, id, timestamp, body),
      },
      body,
    };
  }
}

/** The parsed JSON body when the tool says it is JSON, else the text; null for an empty body; cut when long. */
function outputOf(res: OutboundResponse): unknown {
  if (res.body.length === 0) return null;
  if (res.body.length > TOOL_OUTPUT_MAX_BYTES) {
    return `${res.body.subarray(0, TOOL_OUTPUT_MAX_BYTES).toString('utf8')}\n[truncated: the tool answered ${res.body.length} bytes]`;
  }
  const text = res.body.toString('utf8');
  if (/json/i.test(String(res.headers['content-type'] ?? ''))) {
    try {
      return JSON.parse(text);
    } catch {
      // Says JSON, is not: the text is still worth showing.
    }
  }
  return text;
}
