import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { FrameError, parseFrame } from '../dispatch/worker-frames.js';
import { WORKER_PATH, type WorkerFrame } from '../sdk/protocol/index.js';
import { PYTHON, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const LLM = 'inference:llm:text-generate';

/**
 * The frames the Python worker SDK (sdk/python/worker/) sends are the wire contract's: a gateway
 * stand-in checks every one with the gateway's own frame schemas (dispatch/worker-frames.ts,
 * which must cover exactly the frame types of sdk/protocol) while a Python worker goes through
 * every frame it can send but `attestation` (that one needs a private worker and a verifier:
 * the private-tier tests cover it): register with identity and models, heartbeats, progress, a
 * log line, numbered outputs, a `fail` whose backend went down, `backend` both ways, `models` (with a rank of protocol 6),
 * `complete`. Its constants are compared with sdk/protocol in python-protocol-drift.test.ts.
 */
describe('Python worker SDK: every frame it sends is one the gateway takes', function () {
  this.timeout(60_000);
  let python: string;

  before(function () {
    python = requireProgram(this, PYTHON);
  });

  it('register, heartbeat, progress, log, output, backend, fail, models and complete all pass the gateway frame schemas', async () => {
    const received: WorkerFrame[] = [];
    const refused: string[] = [];
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: WORKER_PATH });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    let leases = 0;
    const lease = () => ({ type: 'lease', lease_id: `lse_${++leases}`, fence: 1, run_id: `run_${leases}`, kind: LLM, tier: 'open', attempt: 1, input: { prompt: 'hi' }, upload_token: 'tok', upload_url: 'http://127.0.0.1:1/v1/leases/x/artifacts' });
    wss.on('connection', (ws) => {
      ws.on('message', (data) => {
        let frame: WorkerFrame;
        try {
          frame = parseFrame(data.toString());
        } catch (err) {
          if (!(err instanceof FrameError)) throw err;
          refused.push(`${err.message}: ${data.toString().slice(0, 300)}`);
          return;
        }
        received.push(frame);
        const answer = (f: object) => ws.send(JSON.stringify(f));
        if (frame.type === 'register') {
          answer({ type: 'registered', worker_id: 'wkr_drift', protocol: 6, heartbeat_ms: 100, lease_ttl_ms: 5000 });
          answer(lease());
        } else if (frame.type === 'models') answer({ type: 'models_accepted' });
        else if ('lease_id' in frame) {
          answer({ type: 'ack', lease_id: frame.lease_id, of: frame.type });
          // The first lease failed on a backend that is down; once it is back, a second one.
          if (frame.type === 'fail') setTimeout(() => answer(lease()), 50);
        }
      });
    });
    const url = `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    const script = `
import asyncio
from switchyard_worker import Worker, BackendOptions, WorkerError

calls = {"n": 0}

async def main():
    probes = {"n": 0}
    def probe():
        probes["n"] += 1
        if probes["n"] < 2:
            raise RuntimeError("still down")
    done = asyncio.Event()
    async def handler(job):
        calls["n"] += 1
        job.progress(0.5, "thinking")
        job.log("a log line")
        job.output("hello ")
        job.output("world")
        if calls["n"] == 1:
            raise WorkerError("the server refused the connection", "upstream_unavailable", True)
        worker.set_models({"${LLM}": [{"id": "drift-llm", "max_concurrency": 1}, {"id": "drift-ranked", "rank": {"index": 1, "count": 3}}]})
        done.set()
        return {"text": "hello world"}
    worker = Worker("${url}", "swt_test", handlers={"${LLM}": handler}, identity="drift-box",
                    models={"${LLM}": ["drift-llm"]}, probe=probe,
                    backend=BackendOptions(first_delay=0.05, max_delay=0.1, probe_timeout=5))
    await worker.start()
    await asyncio.wait_for(done.wait(), 30)
    await asyncio.sleep(0.3)  # heartbeats and the complete's answer
    await worker.stop(5)

asyncio.run(main())
`;
    try {
      const child = spawn(python, ['-c', script], { cwd: ROOT, env: { ...process.env, PYTHONPATH: path.join(ROOT, 'sdk/python/worker') }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      assert.equal(code, 0, output);
    } finally {
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
    }
    assert.deepEqual(refused, [], 'frames the gateway would refuse');
    const types = new Set(received.map((f) => f.type));
    for (const type of ['register', 'heartbeat', 'progress', 'log', 'output', 'backend', 'fail', 'models', 'complete']) assert.ok(types.has(type as WorkerFrame['type']), `a ${type} frame was sent (${[...types].join(', ')})`);
    const register = received.find((f) => f.type === 'register')!;
    assert.equal(register.type === 'register' && register.identity, 'drift-box');
    const backend = received.filter((f) => f.type === 'backend').map((f) => f.type === 'backend' && f.available);
    assert.deepEqual(backend, [false, true]);
    assert.ok(received.filter((f) => f.type === 'output').every((f) => f.type === 'output' && typeof f.seq === 'number'), 'outputs are numbered on protocol 5');
    const models = received.find((f) => f.type === 'models');
    assert.deepEqual(models?.type === 'models' && models.models[LLM].find((m) => m.id === 'drift-ranked')?.rank, { index: 1, count: 3 }, 'a rank (protocol 6) in the shape the gateway takes');
    assert.ok(register.type === 'register' && register.protocol.includes(6), 'the Python SDK offers protocol 6');
  });
});
