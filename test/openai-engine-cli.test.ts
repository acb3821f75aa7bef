import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { LLM_KIND } from '../sdk/engines/openai/index.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { OpenAiUpstream } from './helpers/openai-upstream.js';
import { runCliWorker } from './helpers/cli-worker.js';

/**
 * `switchyard worker --engine openai`: the command a contributor with a vLLM or Ollama server
 * runs. Real processes of the real bin, a real gateway, a backend speaking OpenAI's format.
 */

const BACKEND_KEY = 'sk-cli-backend';
const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '', SWITCHYARD_BACKEND_KEY: '' };

/** An address where nothing listens (a server started, then stopped). */
async function deadUrl(): Promise<string> {
  const server = http.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}/v1`;
}

describe('switchyard worker --engine openai', function () {
  // CLI processes load the TypeScript sources: seconds each on a loaded machine.
  this.timeout(120_000);
  const prefix = uniquePrefix('openai-engine-cli');
  let gw: TestGateway, upstream: OpenAiUpstream, key: string, token: string;
  const modelIds = async () => ((await gw.request('GET', '/v1/models', { key })).body.data as Array<{ id: string }>).map((m) => m.id);

  const runWorker = (args: string[], whileUp: () => Promise<void>) => runCliWorker({ gateway: gw.url, token, env }, args, whileUp);

  before(async () => {
    upstream = await new OpenAiUpstream(['llama3.1:8b', 'qwen2.5:7b'], BACKEND_KEY).start();
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(100));
    token = await gw.workerToken();
  });
  after(async () => {
    await gw?.stop();
    await upstream?.stop();
    await cleanupPrefix(prefix);
  });

  it("serves the backend's models, discovered with its key, and runs llm jobs on it", async () => {
    const { code, stderr } = await runWorker(['--engine', 'openai', '--backend-url', upstream.url, '--backend-key', BACKEND_KEY], async () => {
      await until('the worker is registered', async () => (await modelIds()).length > 0, 60_000);
      assert.deepEqual(await modelIds(), ['llama3.1:8b', 'qwen2.5:7b']);
      const caps = (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: { kind: string }) => k.kind === 'inference:llm:text-generate');
      assert.deepEqual(caps.models.map((m: { id: string; workers: number }) => [m.id, m.workers]), [['llama3.1:8b', 1], ['qwen2.5:7b', 1]]);
      const res = await gw.request('POST', '/v1/chat/completions', { key, body: { model: 'qwen2.5:7b', messages: [{ role: 'user', content: 'ping' }] } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.choices[0].message.content, 'You said: ping');
    });
    assert.equal(code, 0, stderr);
    assert.match(stderr, /models: llama3\.1:8b, qwen2\.5:7b/);
    assert.equal(upstream.requests.find((r) => r.path === '/v1/models')?.headers.authorization, `Bearer ${BACKEND_KEY}`);
    assert.equal(upstream.completions.at(-1)!.body.model, 'qwen2.5:7b');
    await until('the worker has left', async () => (await modelIds()).length === 0);
  });

  it('advertises --models as given, without asking the backend', async () => {
    const { code, stderr } = await runWorker(['--engine', 'openai', '--backend-url', await deadUrl(), '--models', 'mistral-7b, phi-3'], async () => {
      await until('the worker is registered', async () => (await modelIds()).length > 0, 60_000);
      assert.deepEqual(await modelIds(), ['mistral-7b', 'phi-3']);
    });
    assert.equal(code, 0, stderr);
    await until('the worker has left', async () => (await modelIds()).length === 0);
  });

  it('exits 1 at once when the backend cannot be asked or lists no model; bad flags exit 2', async () => {
    const empty = await new OpenAiUpstream([]).start();
    const run = promisify(execFile);
    const cli = (args: string[]) =>
      run(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, ...args], { env }).then(
        (r) => ({ code: 0 as number | null, stderr: r.stderr }),
        (e: { code: number | null; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
      );
    const cases: Array<[string[], number, RegExp]> = [
      [['--engine', 'openai', '--backend-url', await deadUrl()], 1, /cannot list the models of the backend at http:\/\/127\.0\.0\.1:\d+\/v1: .*ECONNREFUSED.*--models/],
      [['--engine', 'openai', '--backend-url', upstream.url, '--backend-key', 'wrong'], 1, /answered GET \/models with 401: Incorrect API key provided/],
      [['--engine', 'openai', '--backend-url', empty.url], 1, /has no model to advertise: it lists none/],
      [['--engine', 'openai'], 2, /--engine openai needs --backend-url/],
      [['--engine', 'openai', '--backend-url', 'localhost:8000'], 2, /--backend-url must be an http\(s\) URL/],
      [['--engine', 'openai', '--backend-url', upstream.url, '--models', '/abs.gguf'], 2, /--models: "\/abs.gguf" is not a model id/],
      [['--engine', 'openai', '--backend-url', upstream.url, '--kinds', 'inference:image:generate'], 2, new RegExp(`serves ${LLM_KIND} only`)],
      [['--engine', 'openai', '--backend-url', upstream.url, '--demo-delay-ms', '5'], 2, /--demo-delay-ms is for --engine demo/],
      [['--kinds', LLM_KIND, '--backend-url', upstream.url], 2, /--backend-url is for --engine openai/],
    ];
    try {
      // Two processes at a time: each loads the TypeScript sources.
      for (let i = 0; i < cases.length; i += 2) {
        const batch = cases.slice(i, i + 2);
        const results = await Promise.all(batch.map(([args]) => cli(args)));
        batch.forEach(([args, code, message], j) => {
          assert.equal(results[j].code, code, `${args.join(' ')}: ${results[j].stderr}`);
          assert.match(results[j].stderr, message, args.join(' '));
        });
      }
    } finally {
      await empty.stop();
    }
  });
});
