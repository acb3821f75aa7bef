import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayProcess } from '../helpers/gateway-process.js';
import { ADMIN_TOKEN, cleanupPrefix, uniquePrefix } from '../helpers/harness.js';

/** An account the fuzzer made, with what it owns (ids of each kind of thing). */
export interface FuzzAccount {
  id: string;
  key: string;
  keyId: string;
  /** Keys besides `key`, which fuzzed requests may revoke or limit. */
  spareKeyIds: string[];
  runId: string;
  batchId: string;
  fileId: string;
  toolId: string;
  botId: string;
}

type Answer = { status: number; body: any; text: string };

/**
 * The gateway under fuzzing, as its own process (its RSS is its own, a crash is an exit), and
 * the accounts the fuzzer needs: A, whose key the fuzzed requests carry, and B, a bystander
 * that owns one of everything and must come out of the run unchanged.
 */
export class FuzzWorld {
  readonly prefix = uniquePrefix('fuzz');
  readonly dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-fuzz-'));
  gateway!: GatewayProcess;
  a!: FuzzAccount;
  b!: FuzzAccount;
  operatorId = '';
  doc!: any;

  async start(): Promise<this> {
    this.gateway = await new GatewayProcess({ REDIS_PREFIX: this.prefix, DATA_DIR: this.dataDir, SHUTDOWN_DRAIN_MS: '0', OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: '9' }).start();
    this.doc = (await this.call('GET', '/v1/openapi.json')).body;
    this.a = await this.account('fuzz-a');
    this.b = await this.account('fuzz-b');
    const op = await this.call('POST', '/v1/admin/operators', { name: 'fuzz-operator', trust: 'open' }, ADMIN_TOKEN);
    this.operatorId = op.body.operator.id;
    return this;
  }

  get url(): URL {
    return new URL(this.gateway.url);
  }

  get pid(): number {
    return this.gateway.child.pid!;
  }

  /** A JSON request of the fuzzer's own (set-up, snapshots), not a fuzzed one. */
  async call(method: string, p: string, body?: unknown, token?: string, headers: Record<string, string> = {}): Promise<Answer> {
    const h: Record<string, string> = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    if (body !== undefined && !(body instanceof Buffer)) h['content-type'] = 'application/json';
    const res = await fetch(this.gateway.url + p, { method, headers: h, body: body instanceof Buffer ? body : body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed, text };
  }

  private async must(expected: number, method: string, p: string, body?: unknown, token?: string): Promise<any> {
    const res = await this.call(method, p, body, token);
    if (res.status !== expected) throw new Error(`fuzz set-up: ${method} ${p} answered ${res.status} ${res.text.slice(0, 300)}`);
    return res.body;
  }

  /** An account with credits to spend and one of each thing an account owns. */
  private async account(name: string): Promise<FuzzAccount> {
    const created = await this.must(201, 'POST', '/v1/admin/accounts', { name, credits: 10_000_000 }, ADMIN_TOKEN);
    const key: string = created.api_key;
    const keys = await this.must(200, 'GET', '/v1/account/keys', undefined, key);
    const spare = [];
    for (let i = 0; i < 3; i++) spare.push((await this.must(201, 'POST', '/v1/account/keys', { name: `spare-${i}` }, key)).id as string);
    const run = await this.must(202, 'POST', '/v1/jobs', { kind: 'inference:image:generate', input: { prompt: 'a cat' } }, key);
    const batch = await this.must(202, 'POST', '/v1/jobs/batch', { jobs: [{ kind: 'inference:image:generate', input: { prompt: 'a dog' }, class: 'batch' }] }, key);
    const file = await this.call('POST', '/v1/files?filename=a.txt', Buffer.from('hello'), key);
    if (file.status !== 201) throw new Error(`fuzz set-up: file upload answered ${file.status} ${file.text}`);
    const tool = await this.must(201, 'POST', '/v1/tools/definitions', { name: 'order_status', description: 'Look up an order', kind: 'http', method: 'GET', url: 'https://127.0.0.1:9/api/orders', inputSchema: { type: 'object', properties: { order: { type: 'string' } } } }, key);
    const bot = await this.must(201, 'POST', '/v1/bots', { name: 'helpdesk', model: 'default', systemPrompt: 'You answer.', allowedOrigins: ['https://shop.example'] }, key);
    await this.must(200, 'GET', '/v1/account/webhook-secret', undefined, key);
    return {
      id: created.account.id,
      key,
      keyId: keys.data[0].id,
      spareKeyIds: spare,
      runId: run.run_id ?? run.id,
      batchId: batch.batch_id ?? batch.id,
      fileId: file.body.id,
      toolId: tool.tool?.id ?? tool.id,
      botId: bot.id ?? bot.bot?.id,
    };
  }

  /**
   * Everything of B's that a request of A's could change: balance and account, keys, runs,
   * batch, files, tools, bots, limits, webhook secret. Fields that reading itself moves (a key's
   * last use) are left out.
   */
  async snapshotB(): Promise<string> {
    const b = this.b;
    const reads = ['/v1/account', '/v1/account/keys', '/v1/jobs?limit=100', `/v1/jobs/${b.runId}`, `/v1/batches/${b.batchId}`, '/v1/files', `/v1/files/${b.fileId}`, '/v1/tools/definitions', '/v1/bots', '/v1/account/limits', '/v1/account/webhook-secret'];
    const parts: Record<string, unknown> = {};
    for (const p of reads) {
      const res = await this.call('GET', p, undefined, b.key);
      parts[p] = { status: res.status, body: res.body };
    }
    const content = await this.call('GET', `/v1/files/${b.fileId}/content`, undefined, b.key);
    parts.fileContent = { status: content.status, text: content.text };
    return JSON.stringify(parts, (k, v) => (/last_used|lastUsed|queue_position/.test(k) ? undefined : v), 1);
  }

  /**
   * Puts A back where a fuzzed request may have moved it (credits spent, a budget, limits that
   * hold its runs), so later operations still get past the account's own gates.
   */
  async restoreA(): Promise<void> {
    await this.call('PUT', `/v1/admin/accounts/${this.a.id}/budget`, { budget: null }, ADMIN_TOKEN);
    await this.call('PUT', `/v1/admin/accounts/${this.a.id}/limits`, { max_running: null }, ADMIN_TOKEN);
    const account = await this.call('GET', '/v1/account', undefined, this.a.key);
    const credits = Number(account.body?.credits ?? account.body?.account?.credits ?? 0);
    if (credits < 1_000_000) await this.call('POST', `/v1/admin/accounts/${this.a.id}/credits`, { delta: 10_000_000 }, ADMIN_TOKEN);
  }

  /** The gateway's resident set size, from /proc (Linux). */
  rssMb(): number {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
    if (!m) throw new Error('no VmRSS in /proc/<pid>/status');
    return Number(m[1]) / 1024;
  }

  /** The gateway's V8 heap in use, from its own /metrics (prom-client's default metrics). */
  async heapUsedMb(): Promise<number> {
    const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec((await this.call('GET', '/metrics')).text);
    return m ? Number(m[1]) / 2 ** 20 : NaN;
  }

  async stop(): Promise<void> {
    await this.gateway?.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
    await cleanupPrefix(this.prefix);
  }
}
