import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../api/main/logger.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { RedisKeys } from '../models/redis/keys.js';
import { ADMIN_TOKEN, cleanupPrefix, testRedis, uniquePrefix } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

/** A request as a client would send it; answers the status, a header and the JSON body. */
async function send(url: string, headers: Record<string, string>, init: { method?: string; body?: unknown; raw?: Buffer } = {}) {
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { ...headers, ...(init.body ? { 'content-type': 'application/json' } : {}) },
    body: init.raw ?? (init.body ? JSON.stringify(init.body) : undefined),
  });
  const text = await res.text();
  return { status: res.status, requestId: res.headers.get('x-request-id'), body: (text.startsWith('{') ? JSON.parse(text) : text) as any };
}

describe('structured logs', function () {
  this.timeout(60_000);

  it('at debug level, a flow with every kind of credential logs none of them; each request is one line with its request id, lease lines name their run', async () => {
    const prefix = uniquePrefix('logs');
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-logs-'));
    const gw = await new GatewayProcess({ REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'debug', HEARTBEAT_MS: '300' }).start();
    const redis = testRedis();
    const secrets: Record<string, string> = { admin: ADMIN_TOKEN };
    try {
      const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
      assert.equal((await send(`${gw.url}/healthz`, {})).status, 200);
      assert.equal((await send(`${gw.url}/readyz`, {})).status, 200);
      const created = await send(`${gw.url}/v1/admin/accounts`, bearer(ADMIN_TOKEN), { method: 'POST', body: { name: 'logs', credits: 100 } });
      secrets.apiKey = created.body.api_key;
      const accountId: string = created.body.account.id;
      assert.equal((await send(`${gw.url}/v1/account`, { 'x-service-key': secrets.apiKey })).status, 200);
      secrets.workerToken = (await send(`${gw.url}/v1/account/worker-tokens`, bearer(secrets.apiKey), { method: 'POST' })).body.worker_token;
      secrets.webhookSecret = (await send(`${gw.url}/v1/account/webhook-secret`, bearer(secrets.apiKey))).body.secret;
      assert.match(secrets.webhookSecret, /^whsec_/);
      // Failed authentications: a wrong account key, a wrong worker token.
      secrets.wrongKey = `sy_${'w'.repeat(16)}${'x'.repeat(32)}`;
      assert.equal((await send(`${gw.url}/v1/account`, bearer(secrets.wrongKey))).status, 401);
      secrets.wrongWorkerToken = `swt_${'z'.repeat(40)}`;
      await assert.rejects(new RawWorker(gw.url, secrets.wrongWorkerToken).connect(), /401/);

      // A run through a worker: lease (upload token), artifact upload, a refused upload, completion.
      const submitted = await send(`${gw.url}/v1/jobs`, { ...bearer(secrets.apiKey), 'x-request-id': 'trace-logs-1' }, { method: 'POST', body: { kind: 'inference:image:generate', input: { prompt: 'logs' } } });
      assert.equal(submitted.requestId, 'trace-logs-1', 'the caller’s request id is echoed');
      const runId: string = submitted.body.run_id;
      const worker = await new RawWorker(gw.url, secrets.workerToken).connect({ kinds: ['inference:image:generate'] });
      const lease = await worker.lease();
      secrets.uploadToken = lease.upload_token;
      secrets.lockToken = JSON.parse((await redis.get(new RedisKeys(prefix).lease(lease.lease_id)))!).lock_token;
      assert.equal((await send(lease.upload_url + '?name=a.png', bearer('not-the-upload-token'), { method: 'POST', raw: Buffer.from('png') })).status, 401);
      const uploaded = await send(lease.upload_url + '?name=a.png', bearer(secrets.uploadToken), { method: 'POST', raw: Buffer.from('png') });
      assert.equal(uploaded.status, 201);
      assert.equal((await worker.complete(lease, [uploaded.body.url])).type, 'ack');
      assert.equal((await send(`${gw.url}/v1/jobs/${runId}/events`, bearer(secrets.apiKey))).status, 200);
      worker.close();

      gw.signal('SIGTERM');
      assert.equal((await gw.exited).code, 0);
      const lines = gw.lines;
      assert.deepEqual(gw.stray, [], 'every stdout line is JSON');

      const text = lines.map((l) => JSON.stringify(l));
      for (const [name, value] of Object.entries(secrets)) {
        assert.ok(value && value.length >= 16, `${name} was captured`);
        const leaks = text.filter((t) => t.includes(value));
        assert.deepEqual(leaks, [], `the ${name} appears in no log line`);
      }

      const requests = lines.filter((l) => l.msg === 'request');
      for (const r of requests) {
        assert.match(String(r.requestId), /\S/, `request line has an id: ${JSON.stringify(r)}`);
        for (const field of ['method', 'status', 'durationMs']) assert.ok(r[field] !== undefined, `${field} in ${JSON.stringify(r)}`);
      }
      assert.deepEqual(requests.filter((r) => r.route === '/healthz' || r.route === '/readyz'), [], 'probes are not logged');
      const submit = requests.find((r) => r.requestId === 'trace-logs-1');
      assert.deepEqual([submit?.method, submit?.route, submit?.status, submit?.accountId], ['POST', '/v1/jobs', 202, accountId]);
      const refused = requests.find((r) => r.route === '/v1/account' && r.status === 401);
      assert.equal(refused?.accountId, null);
      assert.ok(requests.some((r) => r.route === '/v1/jobs/:run_id/events' && r.status === 200), 'a stream is logged once it ends, by its route template');
      assert.ok(requests.some((r) => r.route === '/v1/leases/:lease_id/artifacts' && r.status === 201));
      assert.ok(!text.some((t) => t.includes(uploaded.body.url)), 'artifact URLs (capabilities) are not logged');

      const leaseLines = lines.filter((l) => l.leaseId !== undefined);
      assert.ok(leaseLines.some((l) => l.msg === 'lease sent'), 'lease lines are logged at debug');
      for (const l of leaseLines) assert.equal(l.runId, runId, `lease line names its run: ${JSON.stringify(l)}`);
    } finally {
      await gw.kill();
      redis.disconnect();
      await cleanupPrefix(prefix);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('redacts credential headers and token fields wherever a logged object carries them', () => {
    const out: string[] = [];
    const log = createLogger('debug', { write: (line: string) => void out.push(line) });
    const secret = (n: number) => `s3cret-value-${n}`;
    log.warn(
      {
        req: { headers: { authorization: `Bearer ${secret(1)}`, cookie: secret(2), 'x-service-key': secret(3), 'user-agent': 'kept' } },
        err: { message: 'kept', headers: { authorization: secret(4), 'set-cookie': secret(5) } },
        token: secret(6),
        lease: { lease_id: 'lse_kept', upload_token: secret(7), lock_token: secret(8) },
        account: { id: 'acct_kept', api_key: secret(9) },
        webhook: { secret: secret(10), signing_secret: secret(11) },
        worker: { worker_token: secret(12) },
      },
      'something failed',
    );
    const [line] = out;
    for (let n = 1; n <= 12; n++) assert.ok(!line.includes(secret(n)), `secret ${n} is redacted: ${line}`);
    for (const kept of ['user-agent', 'lse_kept', 'acct_kept', 'something failed']) assert.ok(line.includes(kept), `${kept} stays`);
  });
});
