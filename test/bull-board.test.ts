import assert from 'node:assert/strict';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { BASIC_CHALLENGE } from '../api/http/middleware/bull-board.js';
import { KINDS, TIERS } from '../models/kinds.js';
import { partitionNames, queueName, unpartitioned } from '../queues/queue-names.js';
import { WEBHOOK_QUEUE } from '../queues/webhook-queue.js';
import { CHROMIUM, requireProgram } from './helpers/optional-program.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

/** Bull Board at /admin/queues: a real gateway, real Redis, Debian's Chromium. */

const BEARER = { authorization: `Bearer ${ADMIN_TOKEN}` };
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

const prefix = uniquePrefix('bullboard');

describe('Bull Board at /admin/queues', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let browser: Browser;
  let runId: string;
  let key: string;

  /** A browser context that reaches only the gateway. */
  async function context(httpCredentials?: { username: string; password: string }): Promise<BrowserContext> {
    const ctx = await browser.newContext(httpCredentials ? { httpCredentials } : {});
    await ctx.route((url) => !url.href.startsWith(gw.url), (route) => route.abort());
    return ctx;
  }

  before(async function () {
    const executablePath = requireProgram(this, CHROMIUM);
    gw = await new TestGateway(prefix).start();
    // No worker: the job stays in its queue, so the board has a count to show.
    ({ key } = await gw.account(100));
    const submitted = await gw.submit(key);
    assert.equal(submitted.status, 202, submitted.text);
    runId = submitted.body.run_id;
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  });

  after(async () => {
    await browser?.close();
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('renders every queue and the queued job for a browser logged in with basic auth as admin', async () => {
    const ctx = await context({ username: 'admin', password: ADMIN_TOKEN });
    try {
      const page = await ctx.newPage();
      const res = await page.goto(`${gw.url}/admin/queues`);
      assert.equal(res?.status(), 200);
      // The page is a client-side app: its queue names arrive through the board's API.
      await page.getByText('inference.image.generate.open', { exact: true }).first().waitFor({ timeout: 20_000 });
      await page.getByText(WEBHOOK_QUEUE, { exact: true }).first().waitFor({ timeout: 20_000 });
      // The job is in its partition when the queue is split (QUEUE_PARTITIONS).
      const queue = gw.queues.queueOf({ run_id: runId, kind: 'inference:image:generate', confidentiality: 'open', input: {} });
      await page.goto(`${gw.url}/admin/queues/queue/${encodeURIComponent(queue)}?status=prioritized`);
      await page.getByText(runId).first().waitFor({ timeout: 20_000 });
    } finally {
      await ctx.close();
    }
  });

  it('answers a browser without credentials 401 with a Basic challenge, so it asks for them', async () => {
    const ctx = await context();
    try {
      const page = await ctx.newPage();
      const answer = page.waitForResponse(`${gw.url}/admin/queues`);
      // Headless Chromium has no prompt to show, so it abandons the navigation as an auth failure.
      await assert.rejects(page.goto(`${gw.url}/admin/queues`), /ERR_INVALID_AUTH_CREDENTIALS/);
      const res = await answer;
      assert.equal(res.status(), 401);
      assert.equal(await res.headerValue('www-authenticate'), BASIC_CHALLENGE);
    } finally {
      await ctx.close();
    }
  });

  it('answers a browser with a wrong password 401 and shows no board', async () => {
    const ctx = await context({ username: 'admin', password: 'not-the-admin-token' });
    try {
      const page = await ctx.newPage();
      const res = await page.goto(`${gw.url}/admin/queues`);
      assert.equal(res?.status(), 401);
      assert.match(await page.content(), /a valid admin token is required/);
      assert.equal(await page.getByText('inference.image.generate.open').count(), 0);
    } finally {
      await ctx.close();
    }
  });

  it('lists every kind x tier queue and the webhooks queue, with the submitted job counted, through its API', async () => {
    const res = await gw.request('GET', '/admin/queues/api/queues', { headers: BEARER });
    assert.equal(res.status, 200, res.text);
    const names = (res.body.queues as { name: string }[]).map((q) => q.name).sort();
    // Each split queue's partitions too (QUEUE_PARTITIONS), and the unsplit queue.
    const partitions = gw.gateway.core.partitions.all;
    const expected = [...KINDS.flatMap(({ kind }) => TIERS.flatMap((tier) => partitionNames(queueName(kind, tier), partitions))), WEBHOOK_QUEUE].sort();
    assert.deepEqual(names, expected);
    const image = res.body.queues.filter((q: { name: string }) => unpartitioned(q.name) === 'inference.image.generate.open');
    assert.equal(image.reduce((n: number, q: { counts: Record<string, number> }) => n + q.counts.prioritized + q.counts.waiting, 0), 1);
    for (const q of image) assert.equal(q.readOnlyMode, true);
  });

  it("shows a model's queue once a job names the model, without a restart", async () => {
    const declared = await gw.request('PUT', '/v1/admin/models/inference:image:generate/sdxl-turbo', { headers: BEARER, body: {} });
    assert.equal(declared.status, 201, declared.text);
    const submitted = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'a cat', model: 'sdxl-turbo' } });
    assert.equal(submitted.status, 202, submitted.text);
    const res = await gw.request('GET', '/admin/queues/api/queues', { headers: BEARER });
    const queues = res.body.queues.filter((q: { name: string }) => unpartitioned(q.name) === 'inference.image.generate.open~sdxl-turbo');
    assert.equal(queues.length, gw.gateway.core.partitions.all.reduce((n, count) => n + (count === 1 ? 1 : count), 0), 'the model queue is listed, each of its partitions');
    assert.equal(queues.reduce((n: number, q: { counts: Record<string, number> }) => n + q.counts.prioritized + q.counts.waiting, 0), 1);
    for (const q of queues) assert.equal(q.readOnlyMode, true);
  });

  it('guards the page, its static assets and its API: 401 without credentials or with wrong ones, 200 with the bearer or basic auth', async () => {
    const html = await gw.request('GET', '/admin/queues', { headers: BEARER });
    assert.equal(html.status, 200);
    const asset = /static\/js\/[\w.-]+\.js/.exec(html.text)?.[0];
    assert.ok(asset, 'the page names its scripts');
    for (const path of ['/admin/queues', `/admin/queues/${asset}`, '/admin/queues/api/queues']) {
      for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, basic('admin', 'wrong'), basic('root', ADMIN_TOKEN)]) {
        const refused = await gw.request('GET', path, { headers });
        assert.equal(refused.status, 401, `${path} with ${JSON.stringify(headers)}`);
        assert.equal(refused.headers.get('www-authenticate'), BASIC_CHALLENGE);
        assert.equal(errorCode(refused), 'unauthorized');
      }
      for (const headers of [BEARER, basic('admin', ADMIN_TOKEN)]) {
        assert.equal((await gw.request('GET', path, { headers })).status, 200, path);
      }
    }
    assert.match((await gw.request('GET', `/admin/queues/${asset}`, { headers: BEARER })).headers.get('content-type') ?? '', /javascript/);
  });

  it('is read-only: an action from the board is refused and leaves the queue as it was', async () => {
    const res = await gw.request('PUT', '/admin/queues/api/queues/inference.image.generate.open/pause', { headers: BEARER });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, HEAD');
    assert.equal(await gw.queues.queue('inference:image:generate', 'open').isPaused(), false);
  });

  it('leaves paths that only start like the board alone', async () => {
    const res = await gw.request('GET', '/admin/queuesx', { headers: {} });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('www-authenticate'), null);
  });

  describe('with ADMIN_TOKEN unset', () => {
    const offPrefix = uniquePrefix('bullboard-off');
    let off: TestGateway;

    before(async () => {
      off = await new TestGateway(offPrefix, { ADMIN_TOKEN: '' }).start();
    });

    after(async () => {
      await off?.stop();
      await cleanupPrefix(offPrefix);
    });

    it('is off: 404 for any credential and no challenge a browser would prompt for', async () => {
      for (const path of ['/admin/queues', '/admin/queues/api/queues', '/admin/queues/static/favicon-32x32.png']) {
        for (const headers of [{}, BEARER, basic('admin', ADMIN_TOKEN)]) {
          const res = await off.request('GET', path, { headers });
          assert.equal(res.status, 404, path);
          assert.equal(errorCode(res), 'not_found');
          assert.match(res.body.error.message, /ADMIN_TOKEN/);
          assert.equal(res.headers.get('www-authenticate'), null);
        }
      }
    });
  });
});
