import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { newRunId } from '../models/ids.js';
import { ADMIN_TOKEN, REDIS_URL, TEST_TOOL_SECRET_KEY, TestGateway, cleanupPrefix, newRunSpec, sleep, uniquePrefix, until } from './helpers/harness.js';

/** A gateway in its own process, so it can really be killed with SIGKILL. */
async function spawnGateway(prefix: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve'], {
    env: { ...process.env, PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, ADMIN_TOKEN, TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY, LOG_LEVEL: 'info', RATE_LIMIT_PER_SEC: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const entry = JSON.parse(line) as { msg?: string; url?: string };
    if (entry.msg === 'gateway listening') return { child, url: entry.url! };
  }
  throw new Error('the gateway exited before listening');
}

describe('crash between the run record and the queue write', () => {
  it('enqueues a recorded run that never reached its queue, once, after a restart', async () => {
    const prefix = uniquePrefix('crash');
    const first = await new TestGateway(prefix).start();
    const { id: accountId } = await first.account(100);
    // The state a crash right after the record write leaves: a run (credits reserved) in the outbox, no job.
    const runId = newRunId(accountId);
    const created = await first.stores.runs.create(
      newRunSpec(accountId, { run_id: runId, input: { prompt: 'survivor' }, created_at: new Date(Date.now() - 10_000).toISOString() }),
    );
    assert.equal(created.outcome, 'created');
    await first.stop();

    const jobs = async (gw: TestGateway) => (await Promise.all(gw.kindQueues('inference:image:generate').map((q) => q.count()))).reduce((a, b) => a + b, 0);
    const second = await new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: '200' }).start();
    const third = await new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: '200' }).start();
    try {
      const job = await until('the reconciler to enqueue the run', () => second.queuedJob(runId, 'inference:image:generate'));
      assert.equal(job.data.run_id, runId);
      assert.equal(job.opts.priority, 20);
      await until('the outbox to empty', async () => (await second.stores.runs.listUnconfirmed(0, 10)).length === 0);
      // Both instances swept; still one job.
      assert.equal(await jobs(second), 1);
      const account = await second.stores.accounts.get(accountId);
      assert.deepEqual([account?.credits, account?.reserved], [96, 4], 'reserved once');
    } finally {
      await second.stop();
      await third.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('does not queue a run that was canceled before the reconciler got to it', async () => {
    const prefix = uniquePrefix('crash-cancel');
    const gw = await new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: '200' }).start();
    try {
      const { id: accountId, key } = await gw.account(100);
      const runId = newRunId(accountId);
      await gw.stores.runs.create(
        newRunSpec(accountId, { run_id: runId, kind: 'inference:rig', class: 'batch', priorityBase: 30, price: 10, input: { mesh: 'https://example.com/m.glb' } }),
      );
      const canceled = await gw.request('POST', `/v1/jobs/${runId}/cancel`, { key });
      assert.equal(canceled.body.status, 'canceled');
      await sleep(600);
      assert.equal(await gw.queuedJob(runId, 'inference:rig'), undefined);
      assert.deepEqual(await gw.stores.runs.listUnconfirmed(0, 10), []);
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('after kill -9 under load, every accepted run is queued exactly once and every job has its record', async function () {
    this.timeout(60_000);
    const prefix = uniquePrefix('crash-kill');
    const { child, url } = await spawnGateway(prefix);
    const created = await fetch(`${url}/v1/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'load', credits: 1_000_000 }),
    }).then((r) => r.json() as Promise<{ account: { id: string }; api_key: string }>);
    const accepted = new Set<string>();
    let stop = false;
    const submitter = async () => {
      while (!stop) {
        try {
          const res = await fetch(`${url}/v1/jobs`, {
            method: 'POST',
            headers: { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ kind: 'inference:image:generate', input: { prompt: 'load' } }),
          });
          if (res.status === 202) accepted.add(((await res.json()) as { run_id: string }).run_id);
        } catch {
          return; // the gateway died under us
        }
      }
    };
    const loops = Array.from({ length: 16 }, submitter);
    await until('some accepted runs', async () => accepted.size >= 100, 20_000);
    child.kill('SIGKILL');
    await once(child, 'exit');
    stop = true;
    await Promise.all(loops);

    const gw = await new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: '100' }).start();
    try {
      await until('the outbox to empty', async () => (await gw.stores.runs.listUnconfirmed(0, 10)).length === 0);
      const runs = [];
      let before: string | undefined;
      for (;;) {
        const page = await gw.stores.runs.list(created.account.id, { limit: 100, before });
        runs.push(...page.runs);
        if (page.next === null) break;
        before = page.next;
      }
      const jobs = (await Promise.all(gw.kindQueues('inference:image:generate').map((q) => q.getJobs(['prioritized', 'wait'], 0, -1)))).flat();
      const recordIds = new Set(runs.map((r) => r.run_id));
      const jobIds = jobs.map((j) => j.id!);
      for (const id of accepted) assert.ok(recordIds.has(id), `accepted run ${id} has its record`);
      assert.deepEqual(new Set(jobIds), recordIds, 'every record has one job and every job its record');
      assert.equal(jobIds.length, new Set(jobIds).size, 'no run is queued twice');
      const account = await gw.stores.accounts.get(created.account.id);
      assert.equal(account?.reserved, runs.length * 4, 'one reservation per run');
      assert.equal((account?.credits ?? 0) + (account?.reserved ?? 0), 1_000_000);
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });
});
