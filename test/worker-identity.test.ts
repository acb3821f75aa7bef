import assert from 'node:assert/strict';
import { SwitchyardWorker, silentLogger, type WorkerRefusedError } from '../sdk/worker/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { RedisKeys } from '../models/redis/keys.js';
import { keysMatching } from './helpers/redis-nodes.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { RawWorker } from './helpers/raw-worker.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';
const register = (identity: string) => ({ protocol: [1, 2, 3, 4, 5], kinds: [KIND], identity });

/**
 * A worker that registers again under its identity (protocol 5) retires its old connection at
 * once, wherever that connection is: the fleet's counts never hold the worker twice, not even
 * while a dead gateway instance's counts are still alive.
 */
describe('worker identity: a worker registering again is counted once', function () {
  this.timeout(60_000);

  describe('on one instance and across two', function () {
    const prefix = uniquePrefix('identity');
    let a: TestGateway;
    let b: TestGateway;
    let token: string;
    const workers: RawWorker[] = [];
    const capacity = async (gw: TestGateway) => (await gw.request('GET', '/v1/network/capacity')).body;

    before(async () => {
      a = await new TestGateway(prefix).start();
      b = await new TestGateway(prefix).start();
      token = await a.workerToken();
    });
    afterEach(() => {
      for (const w of workers.splice(0)) w.ws.terminate();
    });
    after(async () => {
      await a.stop();
      await b.stop();
      await cleanupPrefix(prefix);
    });

    it('the same identity registering again on the same instance closes the old connection with 4409 superseded', async () => {
      const old = await new RawWorker(a.url, token).connect(register('box-1'));
      workers.push(old);
      const refusal = old.next((f) => f.type === 'error');
      const fresh = await new RawWorker(a.url, token).connect(register('box-1'));
      workers.push(fresh);
      assert.equal((await refusal).code, 'superseded');
      assert.equal((await old.closed).code, 4409);
      assert.equal((await capacity(a)).workers.total, 1);
      // The new connection is the one served.
      const { key } = await a.account(100);
      const { body } = await a.submit(key);
      assert.equal((await fresh.lease()).run_id, body.run_id);
    });

    it('registering again on another instance closes the old connection there; both count the worker once', async () => {
      const old = await new RawWorker(a.url, token).connect(register('box-2'));
      workers.push(old);
      await until('the worker counted', async () => (await capacity(b)).workers.total === 1);
      // Both instances' views, sampled all along the second registration.
      let most = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) for (const gw of [a, b]) most = Math.max(most, (await capacity(gw)).workers.total);
      })();
      const fresh = await new RawWorker(b.url, token).connect(register('box-2'));
      workers.push(fresh);
      assert.equal((await old.closed).code, 4409);
      await until('the worker counted on its new instance', async () => (await capacity(a)).workers.total === 1 && (await capacity(b)).workers.total === 1);
      sampling = false;
      await sampler;
      assert.equal(most, 1, 'never counted twice');
    });

    it("another token owner's worker of the same name is another worker", async () => {
      const other = await a.workerToken('open', 'op-other');
      const first = await new RawWorker(a.url, token).connect(register('box-3'));
      const second = await new RawWorker(b.url, other).connect(register('box-3'));
      workers.push(first, second);
      await until('both counted', async () => (await capacity(a)).workers.total === 2);
      assert.equal(first.frames.filter((f) => f.type === 'error').length, 0);
    });

    it('identity needs protocol 5, and a malformed one is refused', async () => {
      await assert.rejects(new RawWorker(a.url, token).connect({ protocol: [1, 2, 3, 4], identity: 'box-4' }), /identity needs protocol 5/);
      await assert.rejects(new RawWorker(a.url, token).connect(register('-not an identity')), /invalid register frame: \/identity/);
    });

    it('an SDK worker whose identity another live process takes stops as refused (4409), and the other keeps it', async () => {
      const opts = { gateway: a.url, token, kinds: [KIND], identity: 'twin', handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger };
      const first = new SwitchyardWorker(opts);
      await first.start();
      const refused = new Promise<WorkerRefusedError>((resolve) => first.once('refused', resolve));
      const second = new SwitchyardWorker(opts);
      await second.start();
      try {
        const err = await refused;
        assert.equal(err.code, 'superseded');
        assert.equal(err.status, 4409);
        await first.wait().catch(() => {});
        assert.ok(second.connected);
        assert.equal((await capacity(a)).workers.total, 1);
      } finally {
        await first.stop({ timeoutMs: 0 });
        await second.stop({ timeoutMs: 0 });
      }
    });
  });

  it("an instance's counts live one heartbeat interval past its last refresh, so a dead one's workers leave within that", async () => {
    const prefix = uniquePrefix('identity-ttl');
    const gw = await new TestGateway(prefix, { HEARTBEAT_MS: '2000' }).start();
    try {
      const w = await new RawWorker(gw.url, await gw.workerToken()).connect(register('box-ttl'));
      const counts = new RedisKeys(prefix).fleetCounts(gw.gatewayId);
      await until('the worker counted', async () => (await gw.request('GET', '/v1/network/capacity')).body.workers.total === 1);
      const ttl = await gw.redis.pttl(counts);
      assert.ok(ttl > 0 && ttl <= 2000, `the counts expire within one heartbeat interval (${ttl} ms)`);
      w.ws.terminate();
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  describe('a gateway instance SIGKILLed under its workers', function () {
    const prefix = uniquePrefix('identity-kill');
    let survivor: TestGateway;
    let doomed: GatewayProcess;
    let proxy: TcpProxy;
    const workers: SwitchyardWorker[] = [];

    after(async () => {
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
      await doomed?.kill();
      await proxy?.close();
      await survivor?.stop();
      await cleanupPrefix(prefix);
    });

    it('its workers register again on the survivor and capacity never counts one twice, while the dead counts live on', async () => {
      survivor = await new TestGateway(prefix).start();
      doomed = await new GatewayProcess({ REDIS_PREFIX: prefix }).start();
      // A load balancer: new connections go to the doomed instance while it listens, then to the survivor.
      proxy = await new TcpProxy([doomed.port, Number(new URL(survivor.url).port)]).listen();
      const token = await survivor.workerToken();
      const { key } = await survivor.account(1000);
      for (let i = 0; i < 3; i++) {
        const w = new SwitchyardWorker({ gateway: proxy.url, token, kinds: [KIND], slots: 2, handler: createDemoEngine({ delayMs: 2_000 }), logger: silentLogger, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
        workers.push(w);
        await w.start();
      }
      const capacity = async () => (await survivor.request('GET', '/v1/network/capacity')).body;
      await until('the three workers counted', async () => (await capacity()).workers.total === 3);
      // Under load: every worker holds leases when the instance dies (jobs of 2 s: all six run at once, however slowly a loaded machine submits them).
      for (let i = 0; i < 6; i++) await survivor.submit(key);
      await until('every slot busy', async () => (await capacity()).slots.busy === 6);

      // The doomed instance's counts: the record that holds the three workers.
      const records = await keysMatching(survivor.redis, new RedisKeys(prefix).fleetCounts('*'));
      const totals = await Promise.all(records.map(async (k) => JSON.parse((await survivor.redis.hget(k, 'total')) ?? '{}').workers));
      const deadCounts = records[totals.indexOf(3)];
      assert.ok(deadCounts, 'the doomed instance counts the three workers');
      doomed.signal('SIGKILL');
      await doomed.exited;
      let most = 0;
      let samples = 0;
      // Until the workers are back, counted on the survivor, and the dead instance's counts have expired.
      await until(
        'the workers back on the survivor and the dead counts expired',
        async () => {
          const c = await capacity();
          samples++;
          most = Math.max(most, c.workers.total);
          const here = survivor.dispatcher.localWorkers().length;
          return here === 3 && (await survivor.redis.exists(deadCounts)) === 0 && c.workers.total === 3;
        },
        20_000,
      );
      assert.ok(samples > 5, `sampled capacity ${samples} times`);
      assert.ok(most <= 3, `capacity counted ${most} workers for the 3 that exist`);
    });
  });
});
