import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { ToolServer } from './helpers/tool-server.js';

const SHOP = 'https://shop.example';

/**
 * `switchyard serve` as production runs it, with no TOOL_SECRET_KEY: the tool of the service's
 * own example (bearer auth) registers, a bot uses it, and after a restart the bot still calls it
 * with the stored token, sealed with the key the gateway made under DATA_DIR.
 */
describe('tool secrets under serve without TOOL_SECRET_KEY', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('tool-key-serve');
  let dir: string;
  let tools: ToolServer;
  let gw: GatewayProcess | undefined;
  let worker: SwitchyardWorker | undefined;

  const env = () => ({
    REDIS_PREFIX: prefix,
    DATA_DIR: dir,
    TOOL_SECRET_KEY: '',
    OUTBOUND_CA_FILE: tools.caFile,
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    OUTBOUND_ALLOWED_PORTS: String(tools.port),
  });
  const call = async (method: string, pathname: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(gw!.url + pathname, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const startWorker = async (workerToken: string) => {
    worker = new SwitchyardWorker({ gateway: gw!.url, token: workerToken, kinds: [LLM_KIND], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger, models: { [LLM_KIND]: [{ id: 'demo-llm' }] } });
    await worker.start();
  };

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-tool-key-'));
    tools = await new ToolServer(dir).start();
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.kill();
    await tools?.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers the bearer tool and a bot using it, and calls it with the stored token after a restart', async () => {
    gw = await new GatewayProcess(env()).start();
    const warnings = gw.lines.filter((l) => /TOOL_SECRET_KEY is not set/.test(l.msg ?? ''));
    assert.equal(warnings.length, 1, 'one warning at start');
    assert.equal(warnings[0].file, path.join(dir, 'tool-secret.key'));

    const account = await call('POST', '/v1/admin/accounts', { name: 'shop', credits: 1000 }, admin);
    assert.equal(account.status, 201, JSON.stringify(account.body));
    const key = account.body.api_key as string;
    const auth = { authorization: `Bearer ${key}` };
    const tool = await call(
      'POST',
      '/v1/tools/definitions',
      {
        name: 'weather',
        description: 'Looks up the weather of a city',
        kind: 'http',
        method: 'GET',
        url: tools.url('/weather'),
        inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        auth: { type: 'bearer', token: 'TOOL_API_TOKEN-1234' },
      },
      auth,
    );
    assert.equal(tool.status, 201, JSON.stringify(tool.body));
    // The bot is made before any llm worker connects: its model is declared ahead of them.
    assert.equal((await call('PUT', `/v1/admin/models/${encodeURIComponent(LLM_KIND)}/demo-llm`, {}, admin)).status, 201);
    const bot = await call('POST', '/v1/bots', { name: 'helper', model: 'demo-llm', systemPrompt: 'Be brief.', tools: [tool.body.tool_id], greeting: 'Hi!', allowedOrigins: [SHOP] }, auth);
    assert.equal(bot.status, 201, JSON.stringify(bot.body));
    const operator = await call('POST', '/v1/admin/operators', { name: 'llm', trust: 'open' }, admin);
    const ask = async () => {
      const before = tools.at('/weather').length;
      const res = await call('POST', `/v1/bots/${bot.body.id}/invoke?token=${encodeURIComponent(bot.body.embedToken)}`, { message: 'weather in Rome?' }, { origin: SHOP });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const seen = tools.at('/weather').slice(before);
      assert.equal(seen.length, 1, 'the bot called the tool once');
      assert.equal(seen[0].headers.authorization, 'Bearer TOOL_API_TOKEN-1234');
    };

    await startWorker(operator.body.worker_token);
    await ask();

    await worker!.stop({ timeoutMs: 0 });
    gw.signal('SIGTERM');
    assert.deepEqual(await gw.exited, { code: 0, signal: null });
    gw = await new GatewayProcess(env()).start();
    assert.ok(gw.lines.some((l) => /TOOL_SECRET_KEY is not set/.test(l.msg ?? '') && l.created === false), 'the same key, read back');
    await startWorker(operator.body.worker_token);
    await ask();
  });
});
