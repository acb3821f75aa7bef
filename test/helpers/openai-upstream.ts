import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for an OpenAI-compatible inference server (what vLLM, llama-server, Ollama serve),
 * written from OpenAI's public API reference, not from our engine:
 *   https://platform.openai.com/docs/api-reference/chat/create       (request, chat.completion)
 *   https://platform.openai.com/docs/api-reference/chat-streaming    (chat.completion.chunk)
 *   https://platform.openai.com/docs/api-reference/models/list       (GET /v1/models)
 *   https://platform.openai.com/docs/guides/error-codes              (error bodies)
 * Streams are OpenAI's wire format: `data: {chunk}\n\n` events, the first chunk's delta with
 * `role`, content in `delta.content`, tool calls as fragments keyed by `index` (id, type and
 * function.name in a call's first fragment with empty arguments, then `function.arguments` in
 * pieces), a chunk with `finish_reason` and an empty delta, then with
 * `stream_options.include_usage` a chunk with `choices: []` and `usage` (every earlier chunk
 * carrying `usage: null`), and `data: [DONE]`.
 */

export interface ScriptedError {
  status: number;
  message: string;
  type: string;
  param?: string | null;
  code?: string | null;
}

/** What the server answers to one chat completion. */
export interface ScriptedReply {
  /** Content pieces, one chunk each. A promise in the list pauses the stream until it settles (or the client leaves). */
  content?: Array<string | Promise<unknown>>;
  /** Tool calls, their arguments in the pieces given (one fragment each after the call's first). */
  toolCalls?: Array<{ id: string; name: string; arguments: string[] }>;
  /** Send the calls' fragments in turn (call 0, call 1, call 0...), as parallel calls may come. */
  interleave?: boolean;
  /** @defaultValue 'tool_calls' with tool calls, else 'stop' */
  finishReason?: string;
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Refuse the request with this status and OpenAI's error body. */
  error?: ScriptedError;
  /** After the content, an `{error}` chunk instead of finishing (how OpenAI reports a failure mid-stream). */
  errorMidStream?: Omit<ScriptedError, 'status'>;
  /**
   * After the content, stop without finish_reason or [DONE]: `drop` the connection mid-response
   * (a crashed server), or `end` the response cleanly (a server that just stops).
   */
  cut?: 'drop' | 'end';
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  /** The client closed the connection before the answer ended. */
  aborted: boolean;
  /** Settles when the exchange is over, either way. */
  closed: Promise<void>;
}

/** The default answer: the last user message echoed, word by word. */
export function echoReply(body: any): ScriptedReply {
  const last = [...(body.messages ?? [])].reverse().find((m: any) => m.role === 'user');
  const words = `You said: ${typeof last?.content === 'string' ? last.content : '...'}`.split(' ');
  return { content: words.map((w, i) => (i ? ` ${w}` : w)), usage: { prompt_tokens: 9, completion_tokens: words.length } };
}

export class OpenAiUpstream {
  /** The OpenAI base URL, `http://127.0.0.1:<port>/v1`. */
  url = '';
  readonly requests: RecordedRequest[] = [];
  /** Answers each chat completion; set by the tests. */
  reply: (body: any) => ScriptedReply = echoReply;
  private readonly server = http.createServer((req, res) => void this.handle(req, res));

  constructor(
    public models: string[] = ['upstream-model'],
    /** When set, requests must carry `Authorization: Bearer <apiKey>` (401 otherwise). */
    readonly apiKey?: string,
  ) {}

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The chat completion requests received so far. */
  get completions(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === '/v1/chat/completions');
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body: any = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      // answered 400 below
    }
    const rec: RecordedRequest = { method: req.method!, path: req.url!, headers: req.headers, body, aborted: false, closed: null as never };
    rec.closed = new Promise((resolve) =>
      res.once('close', () => {
        rec.aborted = !res.writableFinished;
        resolve();
      }),
    );
    this.requests.push(rec);

    if (this.apiKey && req.headers.authorization !== `Bearer ${this.apiKey}`) {
      return this.fail(res, { status: 401, message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' });
    }
    if (req.method === 'GET' && req.url === '/v1/models') {
      return this.json(res, 200, { object: 'list', data: this.models.map((id) => ({ id, object: 'model', created: 1686935002, owned_by: 'organization-owner' })) });
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return this.fail(res, { status: 404, message: `Unknown request URL: ${req.method} ${req.url}.`, type: 'invalid_request_error', code: 'unknown_url' });
    }
    if (!body || !Array.isArray(body.messages) || body.messages.length === 0) {
      return this.fail(res, { status: 400, message: "Missing required parameter: 'messages'.", type: 'invalid_request_error', param: 'messages', code: 'missing_required_parameter' });
    }
    if (!this.models.includes(body.model)) {
      return this.fail(res, { status: 404, message: `The model \`${body.model}\` does not exist or you do not have access to it.`, type: 'invalid_request_error', code: 'model_not_found' });
    }
    const reply = this.reply(body);
    if (reply.error) return this.fail(res, reply.error);
    if (body.stream === true) return this.stream(res, rec, body, reply);
    return this.complete(res, body, reply);
  }

  private json(res: http.ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  private fail(res: http.ServerResponse, e: ScriptedError): void {
    this.json(res, e.status, { error: { message: e.message, type: e.type, param: e.param ?? null, code: e.code ?? null } });
  }

  private async stream(res: http.ServerResponse, rec: RecordedRequest, body: any, reply: ScriptedReply): Promise<void> {
    const withUsage = body.stream_options?.include_usage === true;
    const base = { id: 'chatcmpl-upstream1', object: 'chat.completion.chunk', created: 1694268190, model: body.model, system_fingerprint: 'fp_test' };
    const send = (choices: unknown[], extra: Record<string, unknown> = {}) => {
      if (!res.destroyed) res.write(`data: ${JSON.stringify({ ...base, choices, ...(withUsage ? { usage: null } : {}), ...extra })}\n\n`);
    };
    const choice = (delta: Record<string, unknown>, finish_reason: string | null = null) => [{ index: 0, delta, logprobs: null, finish_reason }];
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    send(choice({ role: 'assistant', content: '', refusal: null }));
    for (const piece of reply.content ?? []) {
      if (typeof piece === 'string') send(choice({ content: piece }));
      else await Promise.race([piece, rec.closed]);
      if (res.destroyed) return;
    }
    for (const fragment of this.toolFragments(reply)) send(choice({ tool_calls: [fragment] }));
    if (reply.cut === 'end') return void res.end();
    // What was written reaches the client first; then the connection drops mid-response.
    if (reply.cut === 'drop') return void res.write('', () => res.socket?.destroy());
    if (reply.errorMidStream) {
      const e = reply.errorMidStream;
      res.end(`data: ${JSON.stringify({ error: { message: e.message, type: e.type, param: e.param ?? null, code: e.code ?? null } })}\n\n`);
      return;
    }
    send(choice({}, reply.finishReason ?? (reply.toolCalls?.length ? 'tool_calls' : 'stop')));
    if (withUsage && reply.usage) send([], { usage: { ...reply.usage, total_tokens: reply.usage.prompt_tokens + reply.usage.completion_tokens } });
    res.end('data: [DONE]\n\n');
  }

  /** Each call's first fragment (index, id, type, name, empty arguments), then its argument pieces. */
  private toolFragments(reply: ScriptedReply): Array<Record<string, unknown>> {
    const perCall = (reply.toolCalls ?? []).map((c, index) => [
      { index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } },
      ...c.arguments.map((a) => ({ index, function: { arguments: a } })),
    ]);
    if (!reply.interleave) return perCall.flat();
    const out: Array<Record<string, unknown>> = [];
    for (let i = 0; perCall.some((f) => i < f.length); i++) for (const f of perCall) if (i < f.length) out.push(f[i]);
    return out;
  }

  /** The non-streaming `chat.completion`, for a request without `stream: true`. */
  private async complete(res: http.ServerResponse, body: any, reply: ScriptedReply): Promise<void> {
    const text = (reply.content ?? []).filter((p): p is string => typeof p === 'string').join('');
    const calls = (reply.toolCalls ?? []).map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments.join('') } }));
    const usage = reply.usage ?? { prompt_tokens: 0, completion_tokens: 0 };
    this.json(res, 200, {
      id: 'chatcmpl-upstream1',
      object: 'chat.completion',
      created: 1694268190,
      model: body.model,
      system_fingerprint: 'fp_test',
      choices: [{ index: 0, message: { role: 'assistant', content: calls.length && !text ? null : text, refusal: null, ...(calls.length ? { tool_calls: calls } : {}) }, logprobs: null, finish_reason: reply.finishReason ?? (calls.length ? 'tool_calls' : 'stop') }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    });
  }
}
