import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';
import { Receiver } from './helpers/webhook-receiver.js';

const KIND = 'inference:llm:text-generate';

/**
 * The `output` and `logs` webhooks (docs/webhooks.md, "Output and logs"), as Replicate defines
 * them: at most one delivery per run every 500 ms each, carrying everything since the last, a
 * real worker's reports through a real gateway to a real HTTPS receiver.
 */
describe('webhook output and logs events: coalesced, complete, in order', function () {
  this.timeout(60_000);
  let dir: string;
  let receiver: Receiver;
  let gw: TestGateway;
  let key: string;
  let token: string;
  let secret: string;
  const prefix = uniquePrefix('webhook-stream');
  let n = 0;
  const hookPath = () => `/stream/${++n}`;
  const workers: RawWorker[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-webhook-stream-'));
    receiver = await new Receiver().start(dir);
    gw = await new TestGateway(prefix, {
      DATA_DIR: dir,
      OUTBOUND_CA_FILE: Receiver.caFile(dir),
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(receiver.port),
      WEBHOOK_RETRY_DELAYS_MS: '100,200,400',
    }).start();
    key = (await gw.account(10_000)).key;
    token = await gw.accountWorkerToken(key);
    secret = (await gw.request('GET', '/v1/account/webhook-secret', { key })).body.secret;
  });
  after(async () => {
    for (const w of workers) w.terminate();
    await gw?.stop();
    await receiver?.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Submits a run with a webhook at a fresh path and leases it to a new raw worker. */
  const leased = async (filter: string[]) => {
    const p = hookPath();
    // An earlier test's worker would take the run: one worker at a time.
    for (const old of workers.splice(0)) old.terminate();
    const res = await gw.submit(key, { kind: KIND, input: { prompt: 'hi' }, webhook: receiver.url(p), webhook_events_filter: filter });
    assert.equal(res.status, 202, res.text);
    const w = await new RawWorker(gw.url, token).connect({ protocol: [1, 2, 3, 4], kinds: [KIND] });
    workers.push(w);
    const lease = await w.lease();
    return { p, runId: res.body.run_id as string, w, lease };
  };
  /** The verified bodies delivered at `p` of `type`, in the order they came. */
  const bodies = (p: string, type: string) =>
    receiver
      .at(p)
      .map((r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as any)
      .filter((b) => b.type === type);
  const pace = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('100 log lines over a second reach the receiver in one delivery per 500 ms window they span, every line once and in order', async () => {
    const { p, runId, w, lease } = await leased(['logs', 'completed']);
    const lines = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    // The worker's pace, not a wait for the gateway: 100 lines spread over about a second.
    const first = Date.now();
    for (const line of lines) {
      w.send({ type: 'log', lease_id: lease.lease_id, fence: lease.fence, line });
      await pace(10);
    }
    assert.equal((await w.complete(lease)).type, 'ack');
    // The gateway took every line between these two moments (it handles a worker's frames in
    // order, the complete's ack last), and delivers at most once per wall-clock window of
    // 500 ms: so at most one delivery per window the lines span (3 for a second on time; more
    // only where a loaded machine stretched the worker's second).
    const windows = Math.floor(Date.now() / 500) - Math.floor(first / 500) + 1;
    await until('the completed webhook came', async () => bodies(p, 'job.completed').length === 1);
    const delivered = await until('every line was delivered', async () => {
      const got = bodies(p, 'job.logs');
      return got.flatMap((b) => b.delta.lines.map((l: { line: string }) => l.line)).length === lines.length ? got : null;
    });
    assert.ok(delivered.length <= windows, `${delivered.length} deliveries over ${windows} windows`);
    assert.ok(delivered.length < lines.length / 10, 'coalesced: far fewer deliveries than lines');
    assert.deepEqual(delivered.flatMap((b) => b.delta.lines.map((l: { line: string }) => l.line)), lines, 'every line, once, in order');
    for (const b of delivered) assert.equal(b.data.run_id, runId);
    for (let i = 1; i < delivered.length; i++) assert.ok(delivered[i].delta.after_event >= delivered[i - 1].delta.last_event, 'each carries what came after the last');
    const ids = receiver.at(p).map((r) => r.headers['webhook-id']);
    assert.equal(new Set(ids).size, ids.length, 'each delivery its own webhook-id');
    assert.ok(!receiver.at(p).some((r) => JSON.parse(r.body).type === 'job.output'), 'no output event: the filter did not ask');
  });

  it('streamed output arrives as the run\'s whole text, coalesced, and a failed delivery is retried with the same body', async () => {
    const { p, w, lease } = await leased(['output']);
    receiver.script(p, [{ status: 500 }]);
    const deltas = Array.from({ length: 40 }, (_, i) => `w${i} `);
    for (const [i, delta] of deltas.entries()) {
      w.send({ type: 'output', lease_id: lease.lease_id, fence: lease.fence, delta, seq: i + 1 });
      await pace(10);
    }
    const ack = await w.report(lease, { type: 'complete', output: { urls: [], text: deltas.join('') } } as Frame);
    assert.equal(ack.type, 'ack');
    const delivered = await until('every delta was delivered', async () => {
      const got = receiver.at(p).filter((r) => r.headers['webhook-id'] !== undefined);
      const ok = got.slice(1); // the first answer was 500
      const text = [...new Map(ok.map((r) => [r.headers['webhook-id'], JSON.parse(r.body)])).values()].map((b) => b.delta.text).join('');
      return text === deltas.join('') ? got : null;
    });
    // The 500-answered delivery was tried again with the very same body.
    const first = delivered[0];
    const again = delivered.filter((r) => r.headers['webhook-id'] === first.headers['webhook-id']);
    assert.equal(again.length, 2);
    assert.equal(again[1].body, again[0].body);
    assert.ok(new Set(delivered.map((r) => r.headers['webhook-id'])).size <= 3, 'at most one delivery per 500 ms');
    assert.ok(!receiver.at(p).some((r) => JSON.parse(r.body).type === 'job.completed'), 'no completed event: the filter did not ask');
  });
});
