import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { LLM_KIND } from '../../api/services/llm/llm-runner.js';
import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until, type Res } from './harness.js';
import { ToolServer } from './tool-server.js';

/** How a bot surface is called: a bot token (query or bearer), the owner's key, an Origin, a client address. */
export interface SurfaceCall {
  token?: string;
  bearer?: string;
  origin?: string;
  /** X-Forwarded-For (the gateway runs with TRUST_PROXY): the client address the rate limits see. */
  client?: string;
}

/**
 * A real gateway for bot tests (TRUST_PROXY on, tools allowed to reach a real HTTPS tool server
 * trusted through OUTBOUND_CA_FILE), with a demo LLM worker on demand.
 */
export class BotFixture {
  gw!: TestGateway;
  tools!: ToolServer;
  private dir!: string;
  private worker?: SwitchyardWorker;
  private readonly prefix: string;
  private clients = 0;

  constructor(name: string, private readonly env: Record<string, string> = {}) {
    this.prefix = uniquePrefix(name);
  }

  async start(): Promise<this> {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'sy-bots-'));
    this.tools = await new ToolServer(this.dir).start();
    this.gw = await new TestGateway(this.prefix, {
      DATA_DIR: this.dir,
      TRUST_PROXY: 'true',
      OUTBOUND_CA_FILE: this.tools.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(this.tools.port),
      TOOL_SECRET_KEY: randomBytes(32).toString('base64'),
      ...this.env,
    }).start();
    // Bots are made before any llm worker connects, so their model is declared ahead, as an operator would.
    const declared = await this.gw.request('PUT', `/v1/admin/models/${encodeURIComponent(LLM_KIND)}/demo-llm`, { body: {}, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(declared.status, 201, declared.text);
    return this;
  }

  /** Connects a demo LLM worker (an operator's), as the fleet would. */
  async startLlmWorker(): Promise<void> {
    const res = await this.gw.request('POST', '/v1/admin/operators', { body: { name: 'llm', trust: 'open' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const handler = createDemoEngine({ delayMs: 0 });
    this.worker = new SwitchyardWorker({ gateway: this.gw.url, token: res.body.worker_token, kinds: [LLM_KIND], handler, logger: silentLogger, models: { [LLM_KIND]: [{ id: 'demo-llm' }] } });
    await this.worker.start();
  }

  async stop(): Promise<void> {
    await this.worker?.stop({ timeoutMs: 0 });
    await this.gw?.stop();
    await this.tools?.stop();
    await cleanupPrefix(this.prefix);
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Registers a POST tool `name` at /tools/<name> taking `{city: string}`; returns the tool object. */
  async tool(key: string, name: string): Promise<any> {
    const body = {
      name,
      description: `Looks up the ${name} of a city`,
      kind: 'http',
      method: 'POST',
      url: this.tools.url(`/tools/${name}`),
      inputSchema: { type: 'object', properties: { city: { type: 'string', minLength: 1 } }, required: ['city'], additionalProperties: false },
    };
    const res = await this.gw.request('POST', '/v1/tools/definitions', { body, key });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  /** Creates a bot (a valid body, `over` replacing fields); returns the bot object. */
  async bot(key: string, over: Record<string, unknown> = {}): Promise<any> {
    const res = await this.createBot(key, { name: 'helper', model: 'demo-llm', systemPrompt: 'Be brief.', tools: [], greeting: 'Hi! Ask me anything.', allowedOrigins: ['https://shop.example'], ...over });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  createBot(key: string, body: unknown): Promise<Res> {
    return this.gw.request('POST', '/v1/bots', { body, key });
  }

  /** POST invokeUrl; each call comes from a fresh client address unless `call.client` names one. */
  invoke(botId: string, body: unknown, call: SurfaceCall = {}): Promise<Res> {
    return this.gw.request('POST', `/v1/bots/${botId}/invoke${tokenQuery(call)}`, { body, headers: this.headers(call) });
  }

  /** Opens wsUrl (or refuses: rejects with the HTTP status and error body of the refusal). */
  socket(botId: string, call: SurfaceCall = {}): Promise<BotSocket> {
    return BotSocket.open(`${this.gw.url.replace(/^http/, 'ws')}/v1/bots/${botId}/ws${tokenQuery(call)}`, this.headers(call));
  }

  private headers(call: SurfaceCall): Record<string, string> {
    this.clients++;
    const headers: Record<string, string> = { 'x-forwarded-for': call.client ?? `10.9.${Math.floor(this.clients / 250)}.${this.clients % 250}` };
    if (call.origin) headers.origin = call.origin;
    if (call.bearer) headers.authorization = `Bearer ${call.bearer}`;
    return headers;
  }
}

const tokenQuery = (call: SurfaceCall) => (call.token ? `?token=${encodeURIComponent(call.token)}` : '');

/** An upgrade the gateway refused: its status and error envelope. */
export class UpgradeRefused extends Error {
  constructor(readonly status: number, readonly body: any) {
    super(`upgrade refused: ${status} ${JSON.stringify(body)}`);
  }
}

/** A client of the bot socket that keeps every frame it receives, in order. */
export class BotSocket {
  readonly frames: any[] = [];
  readonly closed: Promise<number>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frames.push(JSON.parse(data.toString())));
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  }

  static open(url: string, headers: Record<string, string>): Promise<BotSocket> {
    const ws = new WebSocket(url, { headers });
    const socket = new BotSocket(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(socket));
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, JSON.parse(text))));
      });
      ws.once('error', reject);
    });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The first frame (from `from` on) that `pred` accepts, once it has arrived. */
  next(pred: (f: any) => boolean, from = 0): Promise<any> {
    return until('a bot socket frame', async () => this.frames.slice(from).find(pred));
  }

  close(): void {
    this.ws.close();
  }
}
