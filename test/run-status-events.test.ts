import assert from 'node:assert/strict';
import { jobView } from '../api/contract/presenters.js';
import { RedisKeys } from '../models/redis/keys.js';
import type { LoggedRunEvent } from '../models/run-event-log.js';
import type { RunRecord } from '../models/types.js';
import { scriptCalls } from './helpers/script-calls.js';
import { TestGateway, cleanupPrefix, newRunSpec, uniquePrefix } from './helpers/harness.js';

/**
 * With the Redis store, a run's status change logs its own `status` event (and `done` after a
 * terminal status) in the transition's script: one script per change, not two. The event's job
 * view is built in Lua from the record as stored; it must be the same object `jobView` gives.
 */
describe('run status events logged by the transition itself (Redis store)', function () {
  const prefix = uniquePrefix('status-events');
  let gw: TestGateway;
  let accountId: string;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    accountId = (await gw.account(1000)).id;
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const eventsOf = (runId: string): Promise<LoggedRunEvent[]> => gw.gateway.core.eventLog.after(runId, 0);
  const create = async (over: Record<string, unknown> = {}): Promise<RunRecord> => {
    const created = await gw.stores.runs.create(newRunSpec(accountId, over));
    assert.equal(created.outcome, 'created');
    return (await gw.stores.runs.get(created.run.run_id))!;
  };

  it('a status change is one script, and its event is the job view of the record as it now is', async () => {
    const run = await create({ confidentiality: 'trusted', class: 'interactive' });
    const calls = await scriptCalls(gw, async () => {
      const started = await gw.stores.runs.transition(run, { from: ['queued'], to: 'running', set: { attempts: 1, fence: 1, worker_id: 'wkr_x', progress: null }, setIfAbsent: { started_at: new Date().toISOString() } });
      assert.ok(started.ok && started.statusLogged);
    });
    assert.equal(calls.length, 1, 'the transition alone: no appendRunEvents for its status');
    const patched = await gw.stores.runs.transition(run, { from: ['running'], set: { progress: 0.5 } });
    assert.ok(patched.ok);
    const output = { urls: ['https://x/a.png'], files: [], width: 64, note: 'é "quoted" \\ slash/' };
    const done = await gw.stores.runs.transition(run, { from: ['running'], fence: 1, to: 'succeeded', set: { output, progress: 1, finished_at: new Date().toISOString(), error: null } });
    assert.ok(done.ok);
    const events = await eventsOf(run.run_id);
    assert.deepEqual(events.map((e) => e.event), ['status', 'status', 'done']);
    const final = (await gw.stores.runs.get(run.run_id))!;
    assert.deepEqual(JSON.parse(events[1].data), jobView(final));
    assert.deepEqual(JSON.parse(events[2].data), jobView(final));
    assert.equal(JSON.parse(events[0].data).status, 'running');
    assert.equal(JSON.parse(events[0].data).attempts, 1);
  });

  it('a failure with its error, a requeue and a cancel are logged with their views too', async () => {
    const run = await create();
    await gw.stores.runs.transition(run, { from: ['queued'], to: 'running', set: { attempts: 1, fence: 1 } });
    await gw.stores.runs.transition(run, { from: ['running'], fence: 1, to: 'queued', set: { worker_id: null, progress: null } });
    const error = { code: 'worker_lost', message: 'gone', retryable: false };
    await gw.stores.runs.transition(run, { from: ['queued'], to: 'failed', set: { error, finished_at: new Date().toISOString() } });
    const events = await eventsOf(run.run_id);
    assert.deepEqual(events.map((e) => [e.event, JSON.parse(e.data).status]), [['status', 'running'], ['status', 'queued'], ['status', 'failed'], ['done', 'failed']]);
    assert.deepEqual(JSON.parse(events[3].data), jobView((await gw.stores.runs.get(run.run_id))!));
  });

  it('events handed to the log before a status change are logged before it', async () => {
    const run = await create();
    await gw.stores.runs.transition(run, { from: ['queued'], to: 'running', set: { attempts: 1, fence: 1 } });
    const writer = gw.gateway.core.events;
    // Not awaited: queued in the run's group commit, then the change comes.
    void writer.progress(run.run_id, 0.9, 'almost');
    await gw.stores.runs.transition(run, { from: ['running'], fence: 1, to: 'succeeded', set: { output: { urls: [] }, finished_at: new Date().toISOString() } });
    const events = await eventsOf(run.run_id);
    assert.deepEqual(events.map((e) => e.event), ['status', 'progress', 'status', 'done']);
  });

  it('a record made before the view fragment existed is logged by the event writer, as before', async () => {
    const run = await create();
    await gw.redis.hdel(new RedisKeys(prefix).run(run.run_id), 'vw');
    const t = await gw.stores.runs.transition(run, { from: ['queued'], to: 'canceled', set: { finished_at: new Date().toISOString() } });
    assert.ok(t.ok && !t.statusLogged);
    await gw.gateway.core.events.settled(run.run_id);
    const events = await eventsOf(run.run_id);
    assert.deepEqual(events.map((e) => e.event), ['status', 'done']);
    assert.deepEqual(JSON.parse(events[0].data), jobView((await gw.stores.runs.get(run.run_id))!));
  });
});
