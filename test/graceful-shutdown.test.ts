import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { EventSource } from 'eventsource';
import { RedisKeys } from '../models/redis/keys.js';
import { partitionNames, queueName } from '../queues/queue-names.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, sleep, testRedis, uniquePrefix, until } from './helpers/harness.js';
import type { SseFrame } from './helpers/sse-client.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const IMAGE = 'inference:image:generate';
const image = { kind: IMAGE, input: { prompt: 'a lighthouse' } };
const LLM = 'inference:llm:text-generate';

/** JSON over fetch with the account key; network errors surface as status 0. */
async function call(url: string, key: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any }> {
  try {
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  } catch {
    return { status: 0, body: null };
  }
}

/**
 * Submits jobs through the load balancer without pause until stopped. Each submission has
 * its own Idempotency-Key and is retried with it after a network error or a 5xx, so a request
 * cut by the shutdown is neither lost nor doubled: every 202 is one accepted run.
 */
class LoadGenerator {
  readonly accepted = new Set<string>();
  private running = true;
  private loops: Promise<void>[] = [];

  constructor(private readonly url: string, private readonly key: string) {}

  start(loops: number, pauseMs: number): this {
    this.loops = Array.from({ length: loops }, () => this.loop(pauseMs));
    return this;
  }

  private async loop(pauseMs: number): Promise<void> {
    while (this.running) {
      const idempotencyKey = randomUUID();
      for (let tries = 0; tries < 50; tries++) {
        const res = await call(`${this.url}/v1/jobs`, this.key, { method: 'POST', body: { kind: IMAGE, input: { prompt: `load ${idempotencyKey}` } }, headers: { 'idempotency-key': idempotencyKey } });
        if (res.status === 202) {
          this.accepted.add(res.body.run_id);
          break;
        }
        if (res.status !== 0 && res.status < 500) throw new Error(`submission refused: ${res.status} ${JSON.stringify(res.body)}`);
        await sleep(100);
      }
      await sleep(pauseMs);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

/** An EventSource through the load balancer that records every frame and every (re)connection. */
function follow(url: string, key: string) {
  const frames: SseFrame[] = [];
  let opens = 0;
  const es = new EventSource(url, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${key}` } }),
  });
  es.addEventListener('open', () => opens++);
  for (const name of ['status', 'progress', 'log', 'output', 'done']) {
    es.addEventListener(name, (e) => {
      frames.push({ id: Number(e.lastEventId), event: name, data: JSON.parse(e.data) });
      if (name === 'done') es.close();
    });
  }
  return { es, frames, opens: () => opens };
}

/** A run's whole event log, read with `?after=0` until the server closes after `done`. */
async function eventLog(url: string, key: string, runId: string): Promise<Array<{ event: string; data: any }>> {
  const text = await fetch(`${url}/v1/jobs/${runId}/events?after=0`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.text());
  return text
    .split('\n\n')
    .map((block) => ({ event: /^event: (.*)$/m.exec(block)?.[1], data: /^data: (.*)$/m.exec(block)?.[1] }))
    .filter((f): f is { event: string; data: string } => !!f.event && !!f.data)
    .map((f) => ({ event: f.event, data: JSON.parse(f.data) }));
}

describe('graceful shutdown: leases handed over to another instance', function () {
  this.timeout(120_000);

  it('SIGTERM under load: the instance exits 0, its running leases finish on the other instance, every accepted run succeeds once, and an SSE follower resumes without a gap', async () => {
    const prefix = uniquePrefix('shutdown');
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-shutdown-'));
    const lb = await new TcpProxy().listen();
    // Both instances link through the load balancer (lease upload URLs, artifact URLs) and share the artifacts.
    const env = { REDIS_PREFIX: prefix, PUBLIC_URL: lb.url, DATA_DIR: dataDir, HEARTBEAT_MS: '500', LEASE_TTL_MS: '20000', SHUTDOWN_DRAIN_MS: '10000' };
    const a = await new GatewayProcess(env).start();
    const b = await new GatewayProcess(env).start();
    // New connections go to A while it listens, then to B.
    lb.targets = [a.port, b.port];
    const workers: SwitchyardWorker[] = [];
    const redis = testRedis('test-shutdown');
    let load: LoadGenerator | undefined;
    try {
      const created = await call(`${lb.url}/v1/admin/accounts`, ADMIN_TOKEN, { method: 'POST', body: { name: 'load', credits: 1_000_000 } });
      const key: string = created.body.api_key;
      const operator = await call(`${lb.url}/v1/admin/operators`, ADMIN_TOKEN, { method: 'POST', body: { name: 'fleet', trust: 'open' } });
      const lost: string[] = [];
      const completed: string[] = [];
      const worker = (kinds: string[], slots: number, delayMs: number) => {
        const w = new SwitchyardWorker({ gateway: lb.url, token: operator.body.worker_token, kinds, slots, handler: createDemoEngine({ delayMs }), logger: silentLogger });
        w.on('dropped', (lease, reason) => lost.push(`${lease.run_id}: ${reason}`));
        w.on('completed', (lease) => completed.push(lease.run_id));
        workers.push(w);
        return w.start();
      };
      await Promise.all([worker([IMAGE], 3, 1200), worker([IMAGE], 3, 1200), worker([IMAGE], 3, 1200), worker([LLM], 1, 6000)]);

      // A long LLM run, followed over SSE through the load balancer (so on A) while it runs.
      const llm = await call(`${lb.url}/v1/jobs`, key, { method: 'POST', body: { kind: LLM, input: { prompt: 'tell a long story', max_tokens: 48 } } });
      assert.equal(llm.status, 202);
      load = new LoadGenerator(lb.url, key).start(3, 150);
      const followed = follow(`${lb.url}/v1/jobs/${llm.body.run_id}/events`, key);
      await until('the followed run to run and some load to be accepted', async () => followed.frames.some((f) => f.data?.status === 'running') && load!.accepted.size >= 10, 20_000);
      const running = await until('image runs leased on A', async () => {
        const res = await call(`${b.url}/v1/jobs?status=running&limit=100`, key);
        return res.body.data.length >= 4 ? (res.body.data as Array<{ run_id: string }>) : null;
      });
      assert.ok(running.length >= 4);

      const signaledAt = Date.now();
      a.signal('SIGTERM');
      // An unref'd deadline: it must not hold the test process open once A has exited.
      const exit = await Promise.race([a.exited, new Promise<null>((r) => setTimeout(() => r(null), 30_000).unref())]);
      assert.deepEqual(exit, { code: 0, signal: null }, 'A exits 0 within 30 s of SIGTERM');
      assert.ok(Date.now() - signaledAt < 30_000);
      assert.ok(a.logged('gateway stopped').length === 1, 'A closed its Redis connections and said so');
      await sleep(1_000); // submissions keep arriving, now on B
      await load.stop();
      const accepted = [...load.accepted];

      await until(
        'every accepted run to end',
        async () => {
          for (const id of [...accepted, llm.body.run_id]) if (!(await call(`${b.url}/v1/jobs/${id}`, key)).body?.terminal) return false;
          return true;
        },
        60_000,
      );
      for (const id of [...accepted, llm.body.run_id]) {
        const job = (await call(`${b.url}/v1/jobs/${id}`, key)).body;
        assert.equal(job.status, 'succeeded', `${id} succeeded`);
        assert.equal(job.attempts, 1, `${id} ran once: handed over or leased once, never requeued`);
      }

      // The leases A held when it stopped moved to B; none was requeued.
      const handedOver = a.logged('lease handed over').map((l) => l.runId as string);
      const adopted = new Set(b.logged('lease adopted').map((l) => l.runId as string));
      assert.ok(handedOver.length >= 1, 'A handed leases over');
      for (const runId of handedOver) assert.ok(adopted.has(runId), `B adopted ${runId}`);
      assert.deepEqual(a.logged('lease lost'), []);
      assert.deepEqual(b.logged('lease not resumed'), []);
      assert.deepEqual(lost, [], 'no worker lost a lease');
      for (const runId of handedOver) {
        const log = await eventLog(b.url, key, runId);
        assert.deepEqual(log.filter((e) => e.event === 'status').map((e) => e.data.status), ['running', 'succeeded'], `${runId}: running once, then succeeded`);
        assert.equal(log.filter((e) => e.event === 'done').length, 1);
      }

      // Each run completed once: on the workers, in BullMQ and in the books. A worker hears of
      // its completion after the record says so (the answer follows the transition).
      await until('every completion answered to its worker', async () => completed.length >= accepted.length + 1);
      assert.equal(completed.length, accepted.length + 1);
      assert.equal(new Set(completed).size, completed.length, 'no run completed twice');
      // Each queue under its own tag on a cluster, as the gateway places them (models/redis/keys.ts).
      // Every partition of each (QUEUE_PARTITIONS), and the unsplit queue.
      const keys = new RedisKeys(prefix);
      const counted = [1, ...(await redis.smembers(keys.queuePartitionCounts())).map(Number)];
      const open = (kind: string) => partitionNames(queueName(kind, 'open'), counted).map((name) => new Queue(name, { connection: redis, prefix: keys.queuePrefixOf(name) }));
      const queues = { [IMAGE]: open(IMAGE), [LLM]: open(LLM) };
      const sums: Record<string, number> = { completed: 0, failed: 0, active: 0, wait: 0, prioritized: 0, delayed: 0 };
      for (const q of queues[IMAGE]) for (const [state, n] of Object.entries(await q.getJobCounts('completed', 'failed', 'active', 'wait', 'prioritized', 'delayed'))) sums[state] += n;
      assert.deepEqual(sums, { completed: accepted.length, failed: 0, active: 0, wait: 0, prioritized: 0, delayed: 0 });
      for (const id of handedOver) {
        const found = await Promise.all(queues[id === llm.body.run_id ? LLM : IMAGE].map((q) => q.getJob(id)));
        const job = found.find((j) => j);
        assert.equal(await job?.getState(), 'completed');
        assert.equal(job?.attemptsStarted, 1, `${id}'s job was fetched once`);
      }
      const account = (await call(`${b.url}/v1/account`, key)).body;
      assert.deepEqual([account.credits, account.reserved], [1_000_000 - 4 * accepted.length - 1, 0], 'each run charged once');

      // The SSE follower was told to reconnect, came back through the balancer to B and missed nothing.
      await until('the followed run’s done event', async () => followed.frames.some((f) => f.event === 'done'), 20_000);
      assert.ok(followed.opens() >= 2, 'the stream reconnected');
      const ids = followed.frames.map((f) => f.id);
      ids.forEach((id, i) => i > 0 && assert.equal(id, ids[i - 1] + 1, `contiguous ids: ${ids.join(',')}`));
      assert.equal(followed.frames.filter((f) => f.event === 'done').length, 1);
      assert.ok(followed.frames.some((f) => f.event === 'output'), 'streamed output reached the follower');
      assert.ok(lb.routed.includes(b.port), 'new connections went to B once A stopped');
      await Promise.all(Object.values(queues).flat().map((q) => q.close()));
    } finally {
      await load?.stop();
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
      await a.kill();
      b.signal('SIGTERM');
      await b.exited;
      await lb.close();
      redis.disconnect();
      await cleanupPrefix(prefix);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  /**
   * An SDK worker reaching instance A through a balancer; B runs but is put behind the
   * balancer only when the test says. The worker's first job runs until aborted, later ones at once.
   */
  async function workerLeavingA(test: (t: { a: TestGateway; b: TestGateway; lb: TcpProxy; key: string; run: string; leaseId: string; dropped: Map<string, string>; worker: SwitchyardWorker; toB: () => void }) => Promise<void>) {
    const prefix = uniquePrefix('handover-sdk');
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-handover-'));
    const lb = await new TcpProxy().listen();
    const env = { HEARTBEAT_MS: '300', LEASE_TTL_MS: '2000', DATA_DIR: dataDir, PUBLIC_URL: lb.url };
    const a = await new TestGateway(prefix, env).start();
    const b = await new TestGateway(prefix, env).start();
    const port = (gw: TestGateway) => Number(new URL(gw.url).port);
    lb.targets = [port(a)];
    const dropped = new Map<string, string>();
    let started = 0;
    const worker = new SwitchyardWorker({
      gateway: lb.url,
      token: (await call(`${a.url}/v1/admin/operators`, ADMIN_TOKEN, { method: 'POST', body: { name: 'fleet', trust: 'open' } })).body.worker_token,
      kinds: [IMAGE],
      logger: silentLogger,
      handler: async (_kind, _input, ctx) => {
        if (++started === 1) await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
        return { artifacts: [] };
      },
    });
    worker.on('dropped', (lease, reason) => dropped.set(lease.run_id, reason));
    let leaseId = '';
    worker.once('lease', (lease) => (leaseId = lease.lease_id));
    try {
      const { key } = await a.account(100);
      await worker.start();
      const run = (await a.submit(key, image)).body.run_id;
      await until('the handler to start', async () => started === 1);
      await test({ a, b, lb, key, run, leaseId, dropped, worker, toB: () => (lb.targets = [port(b)]) });
      await until('the run to succeed on its second attempt', async () => {
        const job = (await b.request('GET', `/v1/jobs/${run}`, { key })).body;
        return job.status === 'succeeded' && job.attempts === 2;
      }, 20_000);
    } finally {
      await worker.stop({ timeoutMs: 0 });
      await a.stop();
      await b.stop();
      await lb.close();
      await cleanupPrefix(prefix);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  it('with no other instance, an SDK worker gives its moving lease up after the lease TTL, and the run runs again once an instance is back', async () => {
    await workerLeavingA(async ({ a, run, dropped, toB }) => {
      const stopping = a.stop(); // B is not behind the balancer: the lease has nowhere to go
      await until('the lease to be given up', async () => dropped.get(run), 15_000);
      assert.match(dropped.get(run)!, /lease TTL/);
      await stopping;
      toB();
    });
  });

  it('a lease the new instance does not take back is aborted on the SDK worker, and the run runs again', async () => {
    await workerLeavingA(async ({ a, b, run, leaseId, dropped, worker, toB }) => {
      const stopping = a.stop();
      await until('the worker to leave A with its lease', async () => !worker.connected && worker.activeLeases === 1);
      // As if the lease had lapsed meanwhile: B finds no lease to adopt.
      await b.redis.del(new RedisKeys(b.prefix).lease(leaseId));
      toB();
      await until('the lease to be dropped', async () => dropped.get(run));
      assert.match(dropped.get(run)!, /did not take the lease back/);
      await stopping;
    });
  });
});
