import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { SwitchyardWorker, silentLogger, type Engine, type GatewayErrorFrame } from '../sdk/worker/index.js';
import type { RunStore } from '../models/stores.js';
import { ADMIN_TOKEN, TestGateway, until, uniquePrefix } from './helpers/harness.js';
import { REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisServerProcess } from './helpers/redis-server-process.js';
import { SseClient } from './helpers/sse-client.js';

/**
 * A short Redis outage (SIGKILL, restarted from its AOF ~3 s later; no
 * worker or gateway dies) must cost no attempt and no finished result. Each run is allowed
 * one attempt, so any attempt charged for nothing shows as a failed run.
 */

const KIND = 'inference:image:generate';
/** The outage of the fault model: Redis comes back about this long after the kill. */
const OUTAGE_MS = 3_000;

describe('a short Redis outage', function () {
  this.timeout(60_000);
  let redis: RedisServerProcess;
  let gw: TestGateway;
  let key: string;
  let workerToken: string;
  let worker: SwitchyardWorker | undefined;
  let killedAt = 0;

  before(async function () {
    redis = await RedisServerProcess.start(requireProgram(this, REDIS_SERVER));
    gw = await new TestGateway(uniquePrefix('outage'), { REDIS_URL: redis.url, JOB_MAX_ATTEMPTS: '1', HEARTBEAT_MS: '1000' }).start();
    key = (await gw.account(10_000)).key;
    const op = await gw.request('POST', '/v1/admin/operators', { body: { name: 'op-outage', trust: 'open' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(op.status, 201, op.text);
    workerToken = op.body.worker_token;
  });

  beforeEach(() => {
    killedAt = 0;
  });

  afterEach(async () => {
    await worker?.stop({ timeoutMs: 0 });
    worker = undefined;
    if (redis && !redis.running) await redis.restart();
  });

  after(async () => {
    await gw?.stop();
    await redis?.stop();
  });

  const kill = async () => {
    killedAt = Date.now();
    await redis.kill();
  };

  /** Brings Redis back from its AOF once `condition` holds, but not before the outage has lasted OUTAGE_MS. */
  const restartWhen = async (what: string, condition: () => boolean) => {
    await until(what, async () => condition(), 20_000);
    await until('the outage to last its 3 s', async () => Date.now() - killedAt >= OUTAGE_MS, OUTAGE_MS + 1_000);
    await redis.restart();
  };

  const startWorker = async (handler: Engine, slots = 1, extra: Partial<ConstructorParameters<typeof SwitchyardWorker>[0]> = {}) => {
    worker = new SwitchyardWorker({ gateway: gw.url, token: workerToken, kinds: [KIND], slots, handler, logger: silentLogger, ...extra });
    await worker.start();
    return worker;
  };

  const submit = async (prompt: string) => {
    const res = await gw.submit(key, { kind: KIND, input: { prompt } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };

  /** The run once terminal (polled over HTTP; 503 answers while Redis is down are waited out). */
  const finished = (runId: string, timeoutMs = 25_000) =>
    until(
      `run ${runId} to end`,
      async () => {
        const res = await gw.request('GET', `/v1/jobs/${runId}`, { key });
        return res.status === 200 && res.body.terminal ? res.body : undefined;
      },
      timeoutMs,
    );

  it('answers a request made while Redis is down with unavailable on every transport: 503 over HTTP, an unavailable frame on the caller socket', async () => {
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${key}` } });
    const frames: Array<Record<string, unknown>> = [];
    ws.on('message', (data) => frames.push(JSON.parse(data.toString())));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    try {
      await kill();
      const http = await gw.submit(key, { kind: KIND, input: { prompt: 'in-the-outage' } });
      assert.equal(http.status, 503, http.text);
      assert.equal(http.body.error.code, 'unavailable');
      ws.send(JSON.stringify({ type: 'submit', id: 'outage-1', kind: KIND, input: { prompt: 'in-the-outage' } }));
      const answer = await until('the answer to the socket submit', async () => frames.find((f) => f.id === 'outage-1'), 15_000);
      assert.equal(answer.type, 'error');
      assert.equal(answer.code, 'unavailable', JSON.stringify(answer));
      assert.equal(ws.readyState, WebSocket.OPEN, 'the socket stays open: the caller may retry on it');
    } finally {
      ws.terminate();
      await redis.restart();
    }
  });

  it('a complete (and a log line) sent while Redis is down are retried: the run succeeds on its one attempt with its output', async () => {
    const calls = new Map<string, number>();
    const errors: GatewayErrorFrame[] = [];
    const w = await startWorker(async (_kind, input, ctx) => {
      calls.set(String(input.prompt), (calls.get(String(input.prompt)) ?? 0) + 1);
      await kill();
      ctx.log('written during the outage');
      return { artifacts: [], extra: { answer: 42 } };
    });
    w.on('gateway-error', (e) => errors.push(e));
    // Said in the failure message: a registration beyond the first means the worker reconnected.
    let registrations = 0;
    w.on('registered', () => registrations++);
    const leases: string[] = [];
    w.on('lease', (l) => leases.push(l.lease_id));
    const runId = await submit('finished-in-the-outage');

    // The gateway could not take the reports: it says so, naming the lease, as retryable.
    await restartWhen('the gateway to refuse the final report', () => errors.length >= 2);
    const job = await finished(runId);

    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.attempts, 1);
    assert.equal(job.output.answer, 42);
    assert.deepEqual([...calls.values()], [1], 'the handler ran once');
    assert.ok(errors.every((e) => e.code === 'unavailable' && e.lease_id === leases[0]), `${JSON.stringify(errors)}; registered again ${registrations} times`);
    const events = await new SseClient(`${gw.url}/v1/jobs/${runId}/events?after=0`, key).open();
    await events.closed;
    assert.ok(events.frames.some((f) => f.event === 'log' && f.data.line === 'written during the outage'), 'the log line reached the run');
  });

  it('an artifact uploaded while Redis is down is retried past the ordinary upload retries', async () => {
    let refusedUploads = 0;
    const counting: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (res.status === 503) refusedUploads++;
      return res;
    };
    await startWorker(
      async () => {
        await kill();
        return { artifacts: [{ name: 'out.txt', contentType: 'text/plain', data: Buffer.from('made in the outage') }] };
      },
      1,
      // One ordinary retry: an outage of 3 s outlasts it.
      { upload: { retries: 1, fetch: counting } },
    );
    const runId = await submit('uploaded-in-the-outage');

    await restartWhen('an upload to be refused twice', () => refusedUploads >= 2);
    const job = await finished(runId);

    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.attempts, 1);
    assert.equal(job.output.urls.length, 1);
    assert.equal(await (await fetch(job.output.urls[0])).text(), 'made in the outage');
  });

  it('a job taken from its queue as Redis fails goes back at once without an attempt: every run succeeds once', async () => {
    const calls = new Map<string, number>();
    let ready!: () => void;
    const gate = new Promise<void>((r) => (ready = r));
    await startWorker(async (_kind, input) => {
      calls.set(String(input.prompt), (calls.get(String(input.prompt)) ?? 0) + 1);
      await gate;
      return { artifacts: [], extra: { prompt: input.prompt } };
    }, 2);
    const runIds: string[] = [];
    for (let i = 0; i < 5; i++) runIds.push(await submit(`filled-${i}`));

    // Redis dies at the moment the dispatcher starts the third run to lease it (after its fetch from the queue).
    const runs = (gw.dispatcher as unknown as { opts: { runs: RunStore } }).opts.runs;
    const transition = runs.transition.bind(runs);
    let fillFailed = false;
    runs.transition = (async (run: Parameters<typeof transition>[0], t: Parameters<typeof transition>[1]) => {
      if (run.run_id === runIds[2] && !killedAt && new Error().stack!.includes('startLease')) {
        await kill();
        return transition(run, t).catch((err: Error) => {
          fillFailed = true;
          throw err;
        });
      }
      return transition(run, t);
    }) as typeof runs.transition;
    try {
      // The first two runs hold both slots; the third is fetched when the first ends.
      await until('two runs leased', async () => calls.size === 2);
      ready();
      await restartWhen('the lease of the third run to fail', () => fillFailed);
      const jobs = await Promise.all(runIds.map((id) => finished(id)));
      for (const job of jobs) {
        assert.equal(job.status, 'succeeded', JSON.stringify(job));
        assert.equal(job.attempts, 1, JSON.stringify(job));
      }
      assert.deepEqual(
        runIds.map((_, i) => calls.get(`filled-${i}`)),
        [1, 1, 1, 1, 1],
        'each run ran exactly once',
      );
    } finally {
      runs.transition = transition;
    }
  });
});
