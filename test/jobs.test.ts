import assert from 'node:assert/strict';
import { dataUri, sampleGlb, samplePng, sampleWav } from './helpers/sample-files.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

const image = (prompt = 'a cat', extra: Record<string, unknown> = {}) => ({ kind: 'inference:image:generate', input: { prompt }, ...extra });

describe('jobs API', () => {
  const prefix = uniquePrefix('jobs');
  const gw = new TestGateway(prefix);
  let key: string;
  let other: string;

  before(async () => {
    await gw.start();
    key = (await gw.account(10_000)).key;
    other = (await gw.account(10_000)).key;
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  describe('POST /v1/jobs', () => {
    it('answers 202 with the run id, class, priority and a Location', async () => {
      const res = await gw.submit(key, image());
      assert.equal(res.status, 202);
      assert.match(res.body.run_id, /^run_[0-9A-HJKMNP-TV-Z]{26}$/);
      assert.deepEqual(Object.keys(res.body).sort(), ['class', 'confidentiality', 'created_at', 'kind', 'priority', 'run_id', 'status', 'warnings']);
      assert.deepEqual(res.body.warnings, []);
      assert.equal(res.body.status, 'queued');
      assert.equal(res.body.class, 'standard');
      assert.equal(res.body.confidentiality, 'open');
      assert.equal(typeof res.body.priority, 'number');
      assert.ok(!Number.isNaN(Date.parse(res.body.created_at)));
      assert.equal(res.headers.get('location'), `/v1/jobs/${res.body.run_id}`);
      assert.ok(res.headers.get('x-request-id'));
    });

    it('accepts the key as X-Service-Key too', async () => {
      const res = await gw.request('POST', '/v1/jobs', { body: image(), headers: { 'x-service-key': key } });
      assert.equal(res.status, 202);
    });

    it('maps class to priority: interactive before standard before batch', async () => {
      const p = async (cls: string) => (await gw.submit(key, image('x', { class: cls }))).body.priority as number;
      const [interactive, standard, batch] = [await p('interactive'), await p('standard'), await p('batch')];
      assert.ok(interactive >= 1 && interactive < standard && standard < batch, `${interactive} < ${standard} < ${batch}`);
    });

    it('puts the job into the BullMQ queue of its kind and tier with that priority', async () => {
      const res = await gw.submit(key, image('queued', { confidentiality: 'trusted', class: 'interactive' }));
      const job = await gw.queuedJob(res.body.run_id, 'inference:image:generate', 'trusted');
      assert.ok(job, 'job is in inference.image.generate.trusted');
      assert.equal(job.opts.priority, res.body.priority);
      // With the kind's deadlines (docs/jobs.md): when it expires unstarted, and how long an attempt may run.
      const expires = Date.parse((await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body.expires_at);
      // And the submitting key, whose concurrency limit it counts against (docs/jobs.md, "Limits and fairness").
      assert.deepEqual(job.data, { run_id: res.body.run_id, account_id: job.data.account_id, kind: 'inference:image:generate', tier: 'trusted', expires, timeout: 3600, key: job.data.key, attempts: 3 }, 'its attempts: JOB_MAX_ATTEMPTS, fixed at submission');
      assert.match(String(job.data.key), /^key_/);
      assert.equal(await gw.queuedJob(res.body.run_id, 'inference:image:generate'), undefined);
    });

    it('accepts every kind of the catalogue with a valid input', async () => {
      const png = dataUri('image/png', samplePng());
      const glb = dataUri('model/gltf-binary', await sampleGlb());
      const wav = dataUri('audio/wav', sampleWav());
      const inputs: Record<string, object> = {
        'inference:image:generate': { prompt: 'p' },
        'inference:3d:image-to-mesh': { image: png },
        'inference:3d:text-to-mesh': { prompt: 'p' },
        'inference:video:generate': { prompt: 'p' },
        'inference:texture:generate': { mesh: glb },
        'inference:rig': { mesh: glb },
        'inference:llm:text-generate': { messages: [{ role: 'user', content: 'hi' }] },
        'inference:audio:music-generate': { prompt: 'p' },
        'inference:audio:sfx-generate': { prompt: 'p' },
        'inference:audio:text-to-speech': { text: 'hello' },
        'inference:audio:transcribe': { audio: wav },
      };
      for (const [kind, input] of Object.entries(inputs)) {
        const res = await gw.submit(key, { kind, input });
        assert.equal(res.status, 202, `${kind}: ${res.text}`);
      }
    });

    it('rejects an unknown kind with 400 unknown_kind listing the kinds', async () => {
      const res = await gw.submit(key, { kind: 'inference:image:upscale', input: {} });
      assert.equal(res.status, 400);
      assert.equal(errorCode(res), 'unknown_kind');
      assert.ok(res.body.error.details.kinds.includes('inference:image:generate'));
    });

    it('rejects input that fails the kind schema with the ajv errors in details', async () => {
      const res = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 42, model: 'x' } });
      assert.equal(res.status, 400);
      assert.equal(errorCode(res), 'invalid_request');
      assert.equal(res.body.error.details.errors[0].path, '/input/prompt');
    });

    it('rejects a missing or non-string kind with 400 invalid_request', async () => {
      for (const body of [{ input: { prompt: 'x' } }, { kind: 7, input: { prompt: 'x' } }]) {
        const res = await gw.submit(key, body);
        assert.equal(res.status, 400);
        assert.equal(errorCode(res), 'invalid_request');
      }
    });

    it('forwards input verbatim, extra fields included', async () => {
      const input = { prompt: 'x', steps: 30, lora: { name: 'pixel', weight: 0.7 }, 'odd key': [null, true] };
      const res = await gw.submit(key, { kind: 'inference:image:generate', input });
      const run = await gw.stores.runs.get(res.body.run_id);
      assert.deepEqual(run?.input, input);
    });
  });

  describe('GET /v1/jobs/{run_id}', () => {
    it('returns every field of the job object, with queue_position while queued', async () => {
      const { body: accepted } = await gw.submit(key, image());
      const res = await gw.request('GET', `/v1/jobs/${accepted.run_id}`, { key });
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.body).sort(), [
        'attempt_history', 'attempts', 'attestation', 'batch_id', 'class', 'confidentiality', 'cost', 'created_at', 'error', 'expires_at', 'finished_at', 'kind', 'max_attempts', 'output',
        'priority', 'progress', 'queue_position', 'retry_on_timeout', 'run_id', 'started_at', 'status', 'terminal', 'timeout_at', 'timeout_s', 'ttl_s', 'usage', 'waiting_ranks', 'waiting_reason',
      ]);
      assert.equal(res.body.status, 'queued');
      assert.equal(res.body.terminal, false);
      assert.equal(res.body.output, null);
      assert.equal(res.body.error, null);
      assert.equal(res.body.attestation, null);
      assert.equal(typeof res.body.queue_position, 'number');
      assert.equal(res.body.waiting_reason, 'no_worker_for_kind', 'no worker is connected');
      assert.equal(res.body.waiting_ranks, null, 'a whole kind has no ranks to wait for');
    });

    it('reports queue positions in dispatch order', async () => {
      // Exact in an unsplit queue; a split one (QUEUE_PARTITIONS above 1)
      // estimates them (test/queue-partitions-dispatch.test.ts).
      const unsplit = await new TestGateway(prefix, { QUEUE_PARTITIONS: '1' }).start();
      try {
        await Promise.all(unsplit.kindQueues('inference:3d:text-to-mesh', 'private').map((q) => q.drain()));
        const submit = (cls: string) => unsplit.submit(key, { kind: 'inference:3d:text-to-mesh', input: { prompt: 'p' }, confidentiality: 'private', class: cls });
        const batch = (await submit('batch')).body.run_id;
        const std1 = (await submit('standard')).body.run_id;
        const std2 = (await submit('standard')).body.run_id;
        const interactive = (await submit('interactive')).body.run_id;
        const position = async (id: string) => (await unsplit.request('GET', `/v1/jobs/${id}`, { key })).body.queue_position;
        assert.deepEqual([await position(interactive), await position(std1), await position(std2), await position(batch)], [1, 2, 3, 4]);
      } finally {
        await unsplit.stop();
      }
    });

    it("answers 404 for an unknown run, a malformed id and another account's run", async () => {
      const { body } = await gw.submit(key, image());
      for (const [path, k] of [
        ['/v1/jobs/run_01HZZZZZZZZZZZZZZZZZZZZZZZ', key],
        ['/v1/jobs/not-a-run', key],
        [`/v1/jobs/${body.run_id}`, other],
      ] as const) {
        const res = await gw.request('GET', path, { key: k });
        assert.equal(res.status, 404, path);
        assert.equal(errorCode(res), 'not_found');
      }
    });
  });

  describe('GET /v1/jobs', () => {
    it('pages newest first with an opaque cursor and filters by status and kind', async () => {
      const acct = await gw.account(1000);
      const glb = dataUri('model/gltf-binary', await sampleGlb());
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await gw.submit(acct.key, image(`p${i}`))).body.run_id);
      ids.push((await gw.submit(acct.key, { kind: 'inference:rig', input: { mesh: glb } })).body.run_id);
      await gw.request('POST', `/v1/jobs/${ids[0]}/cancel`, { key: acct.key });
      const newest = [...ids].reverse();

      const p1 = await gw.request('GET', '/v1/jobs?limit=4', { key: acct.key });
      assert.equal(p1.status, 200);
      assert.deepEqual(p1.body.data.map((j: { run_id: string }) => j.run_id), newest.slice(0, 4));
      assert.equal(typeof p1.body.next_cursor, 'string');
      const p2 = await gw.request('GET', `/v1/jobs?limit=4&cursor=${p1.body.next_cursor}`, { key: acct.key });
      assert.deepEqual(p2.body.data.map((j: { run_id: string }) => j.run_id), newest.slice(4));
      assert.equal(p2.body.next_cursor, null);

      const canceled = await gw.request('GET', '/v1/jobs?status=canceled', { key: acct.key });
      assert.deepEqual(canceled.body.data.map((j: { run_id: string }) => j.run_id), [ids[0]]);
      assert.equal(canceled.body.data[0].terminal, true);
      const rigs = await gw.request('GET', '/v1/jobs?kind=inference:rig', { key: acct.key });
      assert.deepEqual(rigs.body.data.map((j: { run_id: string }) => j.run_id), [ids[5]]);
      const none = await gw.request('GET', '/v1/jobs', { key: other });
      assert.ok(!none.body.data.some((j: { run_id: string }) => ids.includes(j.run_id)), "another account's runs never show");
    });

    it('rejects a bad limit, status or cursor with 400', async () => {
      for (const q of ['limit=0', 'limit=101', 'status=done', 'cursor=bm9wZQ', 'color=red']) {
        const res = await gw.request('GET', `/v1/jobs?${q}`, { key });
        assert.equal(res.status, 400, q);
        assert.equal(errorCode(res), 'invalid_request');
      }
    });
  });

  describe('POST /v1/jobs/{run_id}/cancel', () => {
    it('cancels a queued run at once, returns its credits and removes it from the queue', async () => {
      const acct = await gw.account(100);
      const { body } = await gw.submit(acct.key, image());
      assert.equal((await gw.request('GET', '/v1/account', { key: acct.key })).body.credits, 96);
      const res = await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key: acct.key });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'canceled');
      assert.equal(res.body.terminal, true);
      assert.equal(res.body.queue_position, null);
      assert.ok(res.body.finished_at);
      const account = (await gw.request('GET', '/v1/account', { key: acct.key })).body;
      assert.deepEqual([account.credits, account.reserved], [100, 0]);
      assert.equal(await gw.queuedJob(body.run_id, 'inference:image:generate'), undefined);
    });

    it('answers 409 already_terminal for a terminal run', async () => {
      const { body } = await gw.submit(key, image());
      await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
      const res = await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
      assert.equal(res.status, 409);
      assert.equal(errorCode(res), 'already_terminal');
    });

    it('flags a running run for its worker and leaves it running', async () => {
      const { body } = await gw.submit(key, image());
      const run = (await gw.stores.runs.get(body.run_id))!;
      await gw.stores.runs.transition(run, { from: ['queued'], to: 'running' });
      const res = await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'running');
      assert.ok((await gw.stores.runs.get(body.run_id))?.cancel_requested_at);
    });

    it("answers 404 for another account's run and leaves it alone", async () => {
      const { body } = await gw.submit(key, image());
      const res = await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key: other });
      assert.equal(res.status, 404);
      assert.equal((await gw.request('GET', `/v1/jobs/${body.run_id}`, { key })).body.status, 'queued');
    });
  });
});
