import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { Receiver, type Answer, type Received } from './helpers/webhook-receiver.js';

/**
 * Webhooks end to end: a real gateway, a real worker running the demo engine, and a real HTTPS
 * receiver whose self-signed certificate the gateway trusts only through OUTBOUND_CA_FILE.
 */

const KIND = 'inference:image:generate';

describe('webhooks', function () {
  this.timeout(30_000);
  let dir: string;
  let receiver: Receiver;
  let gw: TestGateway;
  let worker: SwitchyardWorker;
  let key: string;
  const prefix = uniquePrefix('webhooks');
  let n = 0;
  /** A receiver path no other test uses. */
  const hookPath = () => `/hook/${++n}`;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-webhooks-'));
    receiver = await new Receiver().start(dir);
    gw = await new TestGateway(prefix, {
      DATA_DIR: dir,
      OUTBOUND_CA_FILE: Receiver.caFile(dir),
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(receiver.port),
      WEBHOOK_RETRY_DELAYS_MS: '100,200,400',
    }).start();
    key = (await gw.account(10_000)).key;
    const mintedToken = await gw.accountWorkerToken(key);
    worker = new SwitchyardWorker({ gateway: gw.url, token: mintedToken, kinds: [KIND], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await worker.start();
  });

  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await receiver?.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  async function submit(body: Record<string, unknown>, as = key): Promise<string> {
    const res = await gw.submit(as, { kind: KIND, input: { prompt: 'a lighthouse' }, ...body });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id;
  }

  const attempts = async (runId: string, as = key) => {
    const res = await gw.request('GET', `/v1/jobs/${runId}/webhooks`, { key: as });
    assert.equal(res.status, 200, res.text);
    return res.body.data as any[];
  };

  /** The run's attempts once one of them has `outcome`. */
  const attemptsOnce = (runId: string, outcome: string, as = key) =>
    until(`a ${outcome} attempt of ${runId}`, async () => {
      const data = await attempts(runId, as);
      return data.some((a) => a.outcome === outcome) && data;
    });

  /** Runs a job whose receiver first answers `answers`; returns its attempts once one ends `outcome`. */
  async function scripted(answers: Answer[], outcome: string) {
    const p = hookPath();
    receiver.script(p, answers);
    const runId = await submit({ webhook: receiver.url(p) });
    return { p, log: await attemptsOnce(runId, outcome) };
  }

  /** [attempt, status_code, outcome] of each attempt. */
  const summary = (log: any[]) => log.map((a) => [a.attempt, a.status_code, a.outcome]);

  const secretOf = async (as: string): Promise<string> => {
    const res = await gw.request('GET', '/v1/account/webhook-secret', { key: as });
    assert.equal(res.status, 200, res.text);
    return res.body.secret;
  };

  /** Standard Webhooks verification, as a receiver would do it. */
  const verify = (secret: string, r: Received) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as any;

  it('POSTs the completed job, signed so that the standardwebhooks package verifies it with the account secret', async () => {
    const p = hookPath();
    const runId = await submit({ webhook: receiver.url(p) });
    const [got] = await until('the completed webhook', async () => receiver.at(p).length > 0 && receiver.at(p));
    const secret = await secretOf(key);
    const payload = verify(secret, got);

    assert.equal(payload.type, 'job.completed');
    assert.ok(!Number.isNaN(Date.parse(payload.timestamp)));
    const job = (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
    assert.deepEqual(payload.data, { ...job, queue_position: null }, 'the payload carries the job object');
    assert.equal(payload.data.status, 'succeeded');
    assert.equal(payload.data.output.urls.length, 1);
    // Artifacts travel as URLs only: the body is small and holds no image bytes.
    assert.ok(got.body.length < 4096, `payload of ${got.body.length} bytes`);
    assert.ok(!got.body.includes('PNG'), 'no artifact bytes in the payload');

    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['user-agent'], 'Switchyard-Webhooks/1');
    assert.equal(got.headers['webhook-id'], `msg_${runId}_completed`);
    assert.match(String(got.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32,}=*$/);

    const log = await attemptsOnce(runId, 'delivered');
    assert.equal(log.length, 1);
    assert.deepEqual(
      { ...log[0], at: undefined, duration_ms: undefined },
      { webhook_id: `msg_${runId}_completed`, event: 'completed', url: receiver.url(p), attempt: 1, at: undefined, status_code: 200, error: null, duration_ms: undefined, outcome: 'delivered', next_attempt_at: null },
    );
    assert.ok(receiver.at(p).every((r) => JSON.parse(r.body).type === 'job.completed'), 'no start event without the filter asking for it');
  });

  it('sends job.started too when webhook_events_filter asks for start', async () => {
    const p = hookPath();
    const runId = await submit({ webhook: receiver.url(p), webhook_events_filter: ['start', 'completed'] });
    await until('both webhooks', async () => receiver.at(p).length >= 2);
    const secret = await secretOf(key);
    const byType = new Map(receiver.at(p).map((r) => [verify(secret, r).type as string, r]));
    assert.deepEqual([...byType.keys()].sort(), ['job.completed', 'job.started']);
    const started = verify(secret, byType.get('job.started')!);
    assert.equal(started.data.run_id, runId);
    assert.equal(started.data.status, 'running');
    assert.equal(byType.get('job.started')!.headers['webhook-id'], `msg_${runId}_start`);
    assert.equal(verify(secret, byType.get('job.completed')!).data.status, 'succeeded');
  });

  it('retries a failing receiver on the schedule: 500, 500, then delivered on the third attempt', async () => {
    const { p, log } = await scripted([{ status: 500 }, { status: 500 }], 'delivered');
    assert.deepEqual(summary(log), [
      [1, 500, 'retrying'],
      [2, 500, 'retrying'],
      [3, 200, 'delivered'],
    ]);
    for (const a of log.slice(0, 2)) assert.ok(Date.parse(a.next_attempt_at) >= Date.parse(a.at), 'a retry names its time');
    const seen = receiver.at(p);
    assert.equal(seen.length, 3);
    assert.equal(new Set(seen.map((r) => r.headers['webhook-id'])).size, 1, 'the message id is stable across retries');
    assert.equal(new Set(seen.map((r) => r.body)).size, 1, 'every attempt sends the same payload');
    const secret = await secretOf(key);
    for (const r of seen) verify(secret, r);
  });

  it('counts a redirect as a failed attempt and never follows it', async () => {
    const elsewhere = hookPath();
    const redirect = { status: 302, headers: { location: receiver.url(elsewhere) } };
    const { p, log } = await scripted([redirect, redirect, redirect, redirect], 'gave_up');
    assert.deepEqual(summary(log), [
      [1, 302, 'retrying'],
      [2, 302, 'retrying'],
      [3, 302, 'retrying'],
      [4, 302, 'gave_up'],
    ]);
    assert.equal(log[3].next_attempt_at, null);
    assert.equal(receiver.at(p).length, 4);
    assert.equal(receiver.at(elsewhere).length, 0, 'the Location was never requested');
  });

  it('stops retrying when the receiver answers 410 Gone', async () => {
    const { p, log } = await scripted([{ status: 410 }], 'failed');
    assert.deepEqual(summary(log), [[1, 410, 'failed']]);
    assert.equal(log[0].next_attempt_at, null);
    assert.equal(receiver.at(p).length, 1);
  });

  it('refuses blocked or invalid webhook URLs and a filter without a webhook at submission', async () => {
    const before = (await gw.request('GET', '/v1/account', { key })).body.credits;
    const port = receiver.port;
    for (const url of [`https://10.0.0.1:${port}/`, `https://[::ffff:a00:1]:${port}/`, `https://169.254.169.254:${port}/`, `https://127.0.0.2:${port}/`]) {
      const res = await gw.submit(key, { kind: KIND, input: { prompt: 'x' }, webhook: url });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(errorCode(res), 'url_blocked', url);
      assert.equal(res.body.error.details.path, '/webhook');
    }
    const badPort = await gw.submit(key, { kind: KIND, input: { prompt: 'x' }, webhook: 'https://127.0.0.1:1/' });
    assert.equal(errorCode(badPort), 'invalid_url', 'a port outside OUTBOUND_ALLOWED_PORTS');
    for (const body of [
      { webhook_events_filter: ['completed'] },
      { webhook: receiver.url('/x'), webhook_events_filter: ['completed', 'completed'] },
      { webhook: receiver.url('/x'), webhook_events_filter: ['progress'] },
      { webhook: receiver.url('/x'), webhook_events_filter: [] },
    ]) {
      const res = await gw.submit(key, { kind: KIND, input: { prompt: 'x' }, ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(errorCode(res), 'invalid_request');
    }
    assert.equal((await gw.request('GET', '/v1/account', { key })).body.credits, before, 'nothing was accepted');
  });

  it('signs with the new secret after a rotation; the old one no longer verifies', async () => {
    const other = (await gw.account(1000, 'rotating')).key;
    const [first, again] = await Promise.all([secretOf(other), secretOf(other)]);
    assert.equal(first, again, 'concurrent first reads get one secret');
    const rotated = await gw.request('POST', '/v1/account/webhook-secret/rotate', { key: other });
    assert.equal(rotated.status, 200, rotated.text);
    assert.notEqual(rotated.body.secret, first);
    assert.ok(!Number.isNaN(Date.parse(rotated.body.created_at)));
    assert.equal(await secretOf(other), rotated.body.secret);

    const p = hookPath();
    await submit({ webhook: receiver.url(p) }, other);
    const [got] = await until('the webhook', async () => receiver.at(p).length > 0 && receiver.at(p));
    assert.equal(verify(rotated.body.secret, got).type, 'job.completed');
    assert.throws(() => verify(first, got), WebhookVerificationError);
    assert.notEqual(await secretOf(key), rotated.body.secret, 'secrets are per account');
  });

  it("answers 404 for another account's run, an unknown run and a malformed id", async () => {
    const runId = await submit({ webhook: receiver.url(hookPath()) });
    assert.equal((await attemptsOnce(runId, 'delivered')).length, 1, 'the owner sees the attempts');
    const stranger = (await gw.account(1000, 'stranger')).key;
    const foreign = await gw.request('GET', `/v1/jobs/${runId}/webhooks`, { key: stranger });
    assert.equal(foreign.status, 404);
    assert.equal(errorCode(foreign), 'not_found');
    assert.equal((await gw.request('GET', '/v1/jobs/run_01HZZZZZZZZZZZZZZZZZZZZZZZ/webhooks', { key })).status, 404);
    assert.equal((await gw.request('GET', '/v1/jobs/nope/webhooks', { key })).status, 404);
    assert.equal((await gw.request('GET', '/v1/account/webhook-secret')).status, 401);
  });
});
