import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mintSecret } from '../models/credentials.js';
import { NotFoundError } from '../models/errors.js';
import { newRunId } from '../models/ids.js';
import { newBotId, newConversationId, newFlowId, type BotRecord, type ConversationMessage, type FlowRecord } from '../models/bot-types.js';
import type { StoredTool } from '../models/stores.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

describe('store contract', () => {
  if (!process.env.MONGO_URL) {
    // Pending, so every run shows it: no MongoDB server can be installed on the CI machines.
    it('also runs against MongoDB when MONGO_URL is set (MONGO_URL is not set here)');
  }

  describeEachStore((stores, _peer, target) => {
    describe('accounts', () => {
      it('creates and reads an account with zero reserved', async () => {
        const a = await stores.accounts.create({ name: 'acme', credits: 50 });
        assert.match(a.id, /^acct_/);
        const got = await stores.accounts.get(a.id);
        assert.deepEqual(got, { ...a, reserved: 0, in_flight: 0 });
        assert.equal(await stores.accounts.get('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ'), null);
      });

      it('adjusts credits and refuses to go below zero', async () => {
        const a = await stores.accounts.create({ name: 'acme', credits: 10 });
        assert.equal((await stores.accounts.adjustCredits(a.id, 5))!.credits, 15);
        assert.equal((await stores.accounts.adjustCredits(a.id, -15))!.credits, 0);
        assert.equal(await stores.accounts.adjustCredits(a.id, -1), null);
        assert.equal((await stores.accounts.get(a.id))!.credits, 0);
        await assert.rejects(stores.accounts.adjustCredits('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ', 1), NotFoundError);
      });

      it('keeps the first webhook secret of concurrent first reads, replaces it on rotation', async () => {
        const a = await stores.accounts.create({ name: 'acme', credits: 10 });
        const candidates = Array.from({ length: 10 }, (_, i) => ({ secret: `whsec_${i}`, created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() }));
        const got = await Promise.all(candidates.map((c) => stores.accounts.webhookSecret(a.id, c)));
        assert.equal(new Set(got.map((g) => JSON.stringify(g))).size, 1, 'every reader got the same secret');
        assert.ok(candidates.some((c) => JSON.stringify(c) === JSON.stringify(got[0])), 'the stored secret is one of the candidates, whole');
        assert.deepEqual(await stores.accounts.webhookSecret(a.id, { secret: 'whsec_late', created_at: new Date().toISOString() }), got[0]);
        const rotated = { secret: 'whsec_rotated', created_at: new Date().toISOString() };
        assert.deepEqual(await stores.accounts.setWebhookSecret(a.id, rotated), rotated);
        assert.deepEqual(await stores.accounts.webhookSecret(a.id, candidates[0]), rotated);
        assert.deepEqual(await stores.accounts.get(a.id), { ...a, reserved: 0, in_flight: 0 }, 'the account itself is unchanged');
        const ghost = 'acct_01HZZZZZZZZZZZZZZZZZZZZZZZ';
        await assert.rejects(stores.accounts.webhookSecret(ghost, candidates[0]), NotFoundError);
        await assert.rejects(stores.accounts.setWebhookSecret(ghost, rotated), NotFoundError);
        assert.equal(await stores.accounts.get(ghost), null, 'no account is created by a secret read');
      });
    });

    describe('api keys', () => {
      it('finds by lookup id, lists per account, revokes once and only for the owner', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 0 });
        const b = await stores.accounts.create({ name: 'b', credits: 0 });
        const { lookupId } = mintSecret('sy');
        const record = { id: `key_${lookupId}`, account_id: a.id, prefix: 'sy_abcdefgh', name: null, hash: 'ab'.repeat(32), created_at: new Date().toISOString(), revoked_at: null, max_running: null };
        await stores.apiKeys.insert(record, lookupId);
        assert.deepEqual(await stores.apiKeys.findByLookupId(lookupId), record);
        assert.deepEqual(await stores.apiKeys.list(a.id), [record]);
        assert.deepEqual(await stores.apiKeys.list(b.id), []);
        assert.equal(await stores.apiKeys.revoke(b.id, record.id), null, 'another account cannot revoke it');
        const revoked = await stores.apiKeys.revoke(a.id, record.id);
        assert.ok(revoked?.revoked_at);
        const again = await stores.apiKeys.revoke(a.id, record.id);
        assert.equal(again?.revoked_at, revoked.revoked_at, 'revoking twice keeps the first time');
        assert.equal(await stores.apiKeys.revoke(a.id, 'key_nonexistentkeyid'), null);
      });
    });

    describe('operators and worker tokens', () => {
      it('creates operators and changes their trust', async () => {
        const op = await stores.operators.create({ name: 'gpu-farm', trust: 'open' });
        assert.equal((await stores.operators.setTrust(op.id, 'trusted'))!.trust, 'trusted');
        assert.deepEqual(await stores.operators.get(op.id), { ...op, trust: 'trusted' });
        assert.equal(await stores.operators.setTrust('op_01HZZZZZZZZZZZZZZZZZZZZZZZ', 'trusted'), null);
      });

      it('lists every operator oldest first, with its current trust', async () => {
        const first = await stores.operators.create({ name: 'first', trust: 'trusted' });
        const second = await stores.operators.create({ name: 'second', trust: 'open' });
        await stores.operators.setTrust(first.id, 'open');
        const listed = (await stores.operators.list()).filter((o) => o.id === first.id || o.id === second.id);
        assert.deepEqual(listed, [{ ...first, trust: 'open' }, second]);
      });

      it('stores worker tokens by lookup id and revokes them', async () => {
        const record = { id: 'wtok_qrstuvwxyzabcdef', owner: { type: 'account' as const, id: 'acct_x' }, trust: 'open' as const, prefix: 'swt_qrstuvwx', hash: 'cd'.repeat(32), created_at: new Date().toISOString(), revoked_at: null };
        await stores.workerTokens.insert(record, 'qrstuvwxyzabcdef');
        assert.deepEqual(await stores.workerTokens.findByLookupId('qrstuvwxyzabcdef'), record);
        assert.ok((await stores.workerTokens.revoke(record.id))?.revoked_at);
        assert.ok((await stores.workerTokens.findByLookupId('qrstuvwxyzabcdef'))?.revoked_at);
        assert.equal(await stores.workerTokens.revoke('wtok_unknown'), null);
      });
    });

    describe('runs', () => {
      it('creates a queued run, reserving its price atomically', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const spec = newRunSpec(a.id);
        const res = await stores.runs.create(spec);
        assert.equal(res.outcome, 'created');
        const run = res.outcome === 'created' ? res.run : assert.fail();
        assert.equal(run.status, 'queued');
        assert.equal(run.settlement, 'reserved');
        assert.equal(run.priority, 20);
        assert.equal(run.attempts, 0);
        assert.deepEqual(run.input, spec.input);
        assert.equal(run.output, null);
        assert.deepEqual(await stores.runs.get(run.run_id), run);
        const acct = (await stores.accounts.get(a.id))!;
        assert.deepEqual([acct.credits, acct.reserved, acct.in_flight], [6, 4, 1]);
      });

      it("keeps a run's webhook and its events filter, which defaults to completed", async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const hooked = await stores.runs.create(newRunSpec(a.id, { webhook: 'https://hooks.example/x', webhook_events_filter: ['start', 'completed'] }));
        const plain = await stores.runs.create(newRunSpec(a.id));
        const hookedRun = hooked.outcome === 'created' ? hooked.run : assert.fail();
        const plainRun = plain.outcome === 'created' ? plain.run : assert.fail();
        assert.deepEqual([hookedRun.webhook, hookedRun.webhook_events_filter], ['https://hooks.example/x', ['start', 'completed']]);
        assert.deepEqual(plainRun.webhook_events_filter, ['completed']);
        assert.deepEqual(await stores.runs.get(hookedRun.run_id), hookedRun);
        assert.deepEqual(await stores.runs.get(plainRun.run_id), plainRun);
      });

      it('creates a run id at most once (no second reservation)', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const spec = newRunSpec(a.id);
        assert.equal((await stores.runs.create(spec)).outcome, 'created');
        const again = await stores.runs.create({ ...spec, input: { prompt: 'other' } });
        assert.equal(again.outcome, 'exists');
        assert.deepEqual(again.outcome === 'exists' && again.run.input, spec.input);
        assert.equal((await stores.accounts.get(a.id))!.credits, 6);
      });

      it('refuses a run the balance cannot cover, and an unknown account', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 3 });
        assert.deepEqual(await stores.runs.create(newRunSpec(a.id)), { outcome: 'insufficient_credits', available: 3 });
        assert.deepEqual(await stores.runs.create(newRunSpec('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ')), { outcome: 'no_account' });
        assert.deepEqual((await stores.runs.list(a.id, { limit: 10 })).runs, []);
      });

      it('never overdraws under concurrent creates', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 30 });
        const results = await Promise.all(Array.from({ length: 25 }, () => stores.runs.create(newRunSpec(a.id))));
        assert.equal(results.filter((r) => r.outcome === 'created').length, 7);
        const acct = (await stores.accounts.get(a.id))!;
        assert.deepEqual([acct.credits, acct.reserved, acct.in_flight], [2, 28, 7]);
      });

      it('raises the priority number of an account with many runs in flight (fair share)', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 100 });
        const priorities: number[] = [];
        for (let i = 0; i < 7; i++) {
          const r = await stores.runs.create(newRunSpec(a.id, { priorityBase: 10, price: 1 }));
          priorities.push(r.outcome === 'created' ? r.run.priority : -1);
        }
        assert.deepEqual(priorities, [10, 10, 10, 11, 11, 11, 12]);
      });

      it('charges on success exactly once', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const created = await stores.runs.create(newRunSpec(a.id));
        const run = created.outcome === 'created' ? created.run : assert.fail();
        const started = await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { started_at: new Date().toISOString(), attempts: 1 } });
        assert.equal(started.ok, true);
        assert.equal(started.run?.status, 'running');
        const done = await stores.runs.transition(run, { from: ['running'], to: 'succeeded', set: { output: { urls: ['https://x/a.png'] }, progress: 1 } });
        assert.equal(done.ok, true);
        assert.equal(done.run?.settlement, 'charged');
        assert.deepEqual(done.run?.output, { urls: ['https://x/a.png'] });
        const dup = await stores.runs.transition(run, { from: ['running', 'queued'], to: 'succeeded' });
        assert.equal(dup.ok, false);
        assert.equal(dup.run?.status, 'succeeded');
        const failedLate = await stores.runs.transition(run, { from: ['running'], to: 'failed' });
        assert.equal(failedLate.ok, false);
        const acct = (await stores.accounts.get(a.id))!;
        assert.deepEqual([acct.credits, acct.reserved, acct.in_flight], [6, 0, 0]);
      });

      it("keeps a private run's attestation, written by the transition that makes it succeed", async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const created = await stores.runs.create(newRunSpec(a.id, { confidentiality: 'private' }));
        const run = created.outcome === 'created' ? created.run : assert.fail();
        assert.equal(run.attestation, null);
        await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { attempts: 1, fence: 1, worker_id: 'wkr_1' } });
        const attestation = { tier: 'private', worker_id: 'wkr_1', nonce: 'n', receipt_key: { kty: 'EC', crv: 'P-384', x: 'x', y: 'y' }, evidence: { token: 't', gpus: { 'GPU-0': 'g' } }, receipt: 'r', evidence_url: 'https://gw/v1/attestation/workers/wkr_1', verified_at: new Date().toISOString() };
        const done = await stores.runs.transition(run, { from: ['running'], fence: 1, to: 'succeeded', set: { output: { urls: [] }, attestation } });
        assert.deepEqual([done.ok, done.run?.attestation], [true, attestation]);
        assert.deepEqual((await stores.runs.get(run.run_id))?.attestation, attestation);
      });

      it('returns the reservation on failure and on cancel exactly once', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const r1 = await stores.runs.create(newRunSpec(a.id));
        const r2 = await stores.runs.create(newRunSpec(a.id));
        const run1 = r1.outcome === 'created' ? r1.run : assert.fail();
        const run2 = r2.outcome === 'created' ? r2.run : assert.fail();
        await stores.runs.transition(run1, { from: ['queued'], to: 'running' });
        const error = { code: 'worker_lost', message: 'lost', retryable: false };
        const failed = await Promise.all([1, 2, 3].map(() => stores.runs.transition(run1, { from: ['running'], to: 'failed', set: { error } })));
        assert.equal(failed.filter((f) => f.ok).length, 1, 'one of three concurrent finishes wins');
        const canceled = await stores.runs.transition(run2, { from: ['queued'], to: 'canceled' });
        assert.equal(canceled.run?.settlement, 'released');
        assert.deepEqual((await stores.runs.get(run1.run_id))?.error, error);
        const acct = (await stores.accounts.get(a.id))!;
        assert.deepEqual([acct.credits, acct.reserved, acct.in_flight], [10, 0, 0]);
      });

      it("refuses a transition for a missing run or another account's run", async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const created = await stores.runs.create(newRunSpec(a.id));
        const run = created.outcome === 'created' ? created.run : assert.fail();
        assert.deepEqual(await stores.runs.transition({ run_id: run.run_id, account_id: 'acct_other' }, { from: ['queued'], to: 'canceled' }), { ok: false, run: null });
        assert.deepEqual(await stores.runs.transition({ run_id: newRunId(a.id), account_id: a.id }, { from: ['queued'], to: 'canceled' }), { ok: false, run: null });
        assert.equal((await stores.runs.get(run.run_id))?.status, 'queued');
      });

      it('fences transitions on the lease number', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const created = await stores.runs.create(newRunSpec(a.id));
        const run = created.outcome === 'created' ? created.run : assert.fail();
        assert.equal(run.fence, 0);
        assert.equal(run.worker_id, null);
        const leased = await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { fence: 1, worker_id: 'wkr_a' } });
        assert.deepEqual([leased.run?.fence, leased.run?.worker_id], [1, 'wkr_a']);
        const released = await stores.runs.transition(run, { from: ['running'], fence: 1, to: 'queued', set: { worker_id: null } });
        assert.equal(released.run?.worker_id, null);
        await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { fence: 2, worker_id: 'wkr_b' } });
        const stale = await stores.runs.transition(run, { from: ['running'], fence: 1, to: 'succeeded' });
        assert.equal(stale.ok, false, 'a report from the superseded lease is refused');
        assert.equal(stale.run?.status, 'running');
        const current = await stores.runs.transition(run, { from: ['running'], fence: 2, to: 'succeeded' });
        assert.equal(current.ok, true);
      });

      it('patches fields without a status change', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 10 });
        const created = await stores.runs.create(newRunSpec(a.id));
        const run = created.outcome === 'created' ? created.run : assert.fail();
        await stores.runs.transition(run, { from: ['queued'], to: 'running' });
        const patched = await stores.runs.transition(run, { from: ['running'], set: { progress: 0.5, cancel_requested_at: '2026-01-01T00:00:00.000Z' } });
        assert.equal(patched.ok, true);
        assert.equal(patched.run?.status, 'running');
        assert.equal(patched.run?.progress, 0.5);
        assert.equal(patched.run?.cancel_requested_at, '2026-01-01T00:00:00.000Z');
      });

      it('lists newest first with cursor pages and status/kind filters', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 1000 });
        const b = await stores.accounts.create({ name: 'b', credits: 1000 });
        const ids: string[] = [];
        for (let i = 0; i < 7; i++) {
          const kind = i % 2 ? 'inference:rig' : 'inference:image:generate';
          const r = await stores.runs.create(newRunSpec(a.id, { kind, price: 1 }));
          ids.push(r.outcome === 'created' ? r.run.run_id : assert.fail());
        }
        await stores.runs.create(newRunSpec(b.id));
        await stores.runs.transition({ run_id: ids[0], account_id: a.id }, { from: ['queued'], to: 'canceled' });
        const newest = [...ids].reverse();

        const page1 = await stores.runs.list(a.id, { limit: 3 });
        assert.deepEqual(page1.runs.map((r) => r.run_id), newest.slice(0, 3));
        assert.equal(page1.next, newest[2], 'the next page goes on below the last run of this one');
        const page2 = await stores.runs.list(a.id, { limit: 3, before: newest[2] });
        assert.deepEqual(page2.runs.map((r) => r.run_id), newest.slice(3, 6));
        const page3 = await stores.runs.list(a.id, { limit: 3, before: newest[5] });
        assert.deepEqual(page3.runs.map((r) => r.run_id), newest.slice(6));
        assert.equal(page3.next, null);
        const exact = await stores.runs.list(a.id, { limit: 7 });
        assert.equal(exact.next, null, 'no cursor when the page holds the last run');

        const rigs = await stores.runs.list(a.id, { limit: 10, kind: 'inference:rig' });
        assert.deepEqual(rigs.runs.map((r) => r.run_id), newest.filter((_, i) => ids.indexOf(newest[i]) % 2 === 1));
        const canceled = await stores.runs.list(a.id, { limit: 10, status: 'canceled' });
        assert.deepEqual(canceled.runs.map((r) => r.run_id), [ids[0]]);
        const queuedImages = await stores.runs.list(a.id, { limit: 10, status: 'queued', kind: 'inference:image:generate' });
        assert.deepEqual(queuedImages.runs.map((r) => r.run_id), [ids[6], ids[4], ids[2]]);
      });

      it('keeps new runs in the outbox until their queue write is confirmed', async () => {
        const a = await stores.accounts.create({ name: 'a', credits: 100 });
        const r1 = await stores.runs.create(newRunSpec(a.id, { created_at: new Date(Date.now() - 60_000).toISOString() }));
        const r2 = await stores.runs.create(newRunSpec(a.id));
        const id1 = r1.outcome === 'created' ? r1.run.run_id : assert.fail();
        const id2 = r2.outcome === 'created' ? r2.run.run_id : assert.fail();
        const old = (await stores.runs.listUnconfirmed(30_000, 100)).map((r) => r.run_id);
        assert.ok(old.includes(id1));
        assert.ok(!old.includes(id2), 'a young run is left to its own request');
        assert.ok((await stores.runs.listUnconfirmed(0, 100)).some((r) => r.run_id === id2));
        // Read in parts (the reconciler reads one a sweep), each run is in exactly one of them.
        const parts = stores.runs.outboxParts ?? 1;
        const byPart = await Promise.all(Array.from({ length: parts }, (_, p) => stores.runs.listUnconfirmed(0, 100, parts > 1 ? p : undefined)));
        for (const id of [id1, id2]) assert.equal(byPart.filter((runs) => runs.some((r) => r.run_id === id)).length, 1, `${id} in one part of ${parts}`);
        await stores.runs.confirmEnqueued([id1, id2]);
        const after = (await stores.runs.listUnconfirmed(0, 100)).map((r) => r.run_id);
        assert.ok(!after.includes(id1) && !after.includes(id2));
      });
    });

    describe('tools', () => {
      /** A tool of `accountId`; ids come from the run id clock, so they sort by creation. */
      const tool = (accountId: string, name: string): StoredTool => ({
        id: `tool_${newRunId('acct_tools').slice(4)}`,
        account_id: accountId,
        name,
        description: 'd',
        kind: 'http',
        method: 'GET',
        url: 'https://tools.example/x',
        inputSchema: { type: 'object' },
        auth: { type: 'bearer' },
        created_at: new Date().toISOString(),
        secrets: { bearer_token: 'v1.sealed' },
      });

      it('stores, lists oldest first, reads and deletes a tool for its owner only', async () => {
        const [first, second] = [tool('acct_t1', 'one'), tool('acct_t1', 'two')];
        assert.equal(await stores.tools.create(first, 10), 'created');
        assert.equal(await stores.tools.create(second, 10), 'created');
        assert.deepEqual(await stores.tools.get('acct_t1', first.id), first);
        assert.equal(await stores.tools.get('acct_t2', first.id), null, "another account's tool");
        assert.deepEqual(await stores.tools.list('acct_t1'), [first, second]);
        assert.deepEqual(await stores.tools.list('acct_t2'), []);
        assert.equal(await stores.tools.delete('acct_t2', first.id), null);
        assert.deepEqual(await stores.tools.delete('acct_t1', first.id), first);
        assert.equal(await stores.tools.delete('acct_t1', first.id), null, 'deleted once');
        assert.deepEqual(await stores.tools.list('acct_t1'), [second]);
      });

      it('keeps names unique per account, one winner among concurrent creates, the name free again after delete', async () => {
        const results = await Promise.all(Array.from({ length: 20 }, () => stores.tools.create(tool('acct_t3', 'same'), 100)));
        assert.deepEqual(results.sort(), ['created', ...Array(19).fill('name_conflict')]);
        assert.equal(await stores.tools.create(tool('acct_t4', 'same'), 100), 'created', 'names are per account');
        const [kept] = await stores.tools.list('acct_t3');
        await stores.tools.delete('acct_t3', kept.id);
        assert.equal(await stores.tools.create(tool('acct_t3', 'same'), 100), 'created');
      });

      it('refuses a create past the per-account limit, also among concurrent creates', async () => {
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => stores.tools.create(tool('acct_t5', `n${i}`), 3)));
        assert.equal(results.filter((r) => r === 'created').length, 3);
        assert.equal(results.filter((r) => r === 'limit_reached').length, 7);
        const [one] = await stores.tools.list('acct_t5');
        await stores.tools.delete('acct_t5', one.id);
        assert.equal(await stores.tools.create(tool('acct_t5', 'again'), 3), 'created', 'a delete makes room');
      });

      it('keeps the first key check of concurrent claims and returns it to every later claim', async () => {
        const claims = await Promise.all(['v1.a', 'v1.b', 'v1.c'].map((sealed) => stores.tools.claimKeyCheck(sealed)));
        assert.equal(new Set(claims).size, 1, 'one winner');
        assert.ok(['v1.a', 'v1.b', 'v1.c'].includes(claims[0]));
        assert.equal(await stores.tools.claimKeyCheck('v1.d'), claims[0]);
      });

      it('reads the key check: none on a new store, then the one claimed', async () => {
        const fresh = await target.open();
        try {
          assert.equal(await fresh.stores.tools.keyCheck(), null);
          await fresh.stores.tools.claimKeyCheck('v1.first');
          assert.equal(await fresh.stores.tools.keyCheck(), 'v1.first');
        } finally {
          await fresh.teardown();
        }
      });

      it('samples a sealed secret of some tool with what it was sealed for, or null when no tool holds one', async () => {
        const fresh = await target.open();
        try {
          assert.equal(await fresh.stores.tools.sampleSecret(), null, 'no tools');
          await fresh.stores.tools.create({ ...tool('acct_t6', 'plain'), auth: null, secrets: {} }, 10);
          assert.equal(await fresh.stores.tools.sampleSecret(), null, 'tools without secrets');
          const hook = { ...tool('acct_t6', 'hook'), kind: 'webhook' as const, auth: null, secrets: { signing_secret: 'v1.signing' } };
          await fresh.stores.tools.create(hook, 10);
          assert.deepEqual(await fresh.stores.tools.sampleSecret(), { toolId: hook.id, role: 'signing_secret', sealed: 'v1.signing' });
        } finally {
          await fresh.teardown();
        }
      });
    });

    describe('bots', () => {
      /** A bot and its flow as BotService makes them. */
      const botPair = (accountId: string): [BotRecord, FlowRecord] => {
        const id = newBotId();
        const flow: FlowRecord = {
          id: newFlowId(),
          account_id: accountId,
          bot_id: id,
          version: 1,
          status: 'published',
          definition: { type: 'single_agent', model: 'demo-llm', systemPrompt: 'be brief', tools: ['custom:tool_1'], maxSteps: 8 },
          created_at: new Date().toISOString(),
        };
        const bot: BotRecord = {
          id,
          account_id: accountId,
          name: 'helper',
          model: 'demo-llm',
          systemPrompt: 'be brief',
          tools: ['custom:tool_1'],
          greeting: 'hi',
          allowedOrigins: ['https://shop.example'],
          secure: false,
          embed_token: `sybot_${randomBytes(8).toString('hex')}`,
          flow: { id: flow.id, status: 'published', version: 1 },
          created_at: flow.created_at,
        };
        return [bot, flow];
      };

      it('stores a bot with its flow and lists an account\'s bots oldest first', async () => {
        const [a, flowA] = botPair('acct_bots_1');
        const [b, flowB] = botPair('acct_bots_1');
        await stores.bots.create(a, flowA);
        await stores.bots.create(b, flowB);
        await stores.bots.create(...botPair('acct_bots_2'));
        assert.deepEqual(await stores.bots.get(a.id), a);
        assert.deepEqual(await stores.bots.getFlow(flowA.id), flowA);
        assert.deepEqual((await stores.bots.list('acct_bots_1')).map((x) => x.id), [a.id, b.id]);
        assert.equal(await stores.bots.get(newBotId()), null);
      });

      it("deletes only the owner's bot, and its flow with it", async () => {
        const [bot, flow] = botPair('acct_bots_3');
        await stores.bots.create(bot, flow);
        assert.equal(await stores.bots.delete('acct_other', bot.id), null);
        assert.deepEqual(await stores.bots.delete('acct_bots_3', bot.id), bot);
        assert.equal(await stores.bots.get(bot.id), null);
        assert.equal(await stores.bots.getFlow(flow.id), null);
        assert.deepEqual(await stores.bots.list('acct_bots_3'), []);
        assert.equal(await stores.bots.delete('acct_bots_3', bot.id), null, 'a second delete finds nothing');
      });

      it('finds a session until it expires', async () => {
        const live = { bot_id: newBotId(), expires_at: new Date(Date.now() + 60_000).toISOString() };
        await stores.bots.createSession('hash-live', live);
        await stores.bots.createSession('hash-expired', { bot_id: live.bot_id, expires_at: new Date(Date.now() - 1000).toISOString() });
        assert.deepEqual(await stores.bots.findSession('hash-live'), live);
        assert.equal(await stores.bots.findSession('hash-expired'), null);
        assert.equal(await stores.bots.findSession('hash-unknown'), null);
      });
    });

    describe('conversations', () => {
      const message = (i: number): ConversationMessage => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}`, at: new Date().toISOString() });

      it('appends messages in order and keeps only the last ones', async () => {
        const id = newConversationId();
        await stores.conversations.create({ id, bot_id: 'bot_x', created_at: '2024-01-01T00:00:00.000Z' }, 3600);
        assert.deepEqual(await stores.conversations.get(id), { id, bot_id: 'bot_x', created_at: '2024-01-01T00:00:00.000Z', messages: [] });
        assert.equal(await stores.conversations.append(id, [message(0), message(1)], 3, 3600), true);
        assert.equal(await stores.conversations.append(id, [message(2), message(3)], 3, 3600), true);
        assert.deepEqual((await stores.conversations.get(id))!.messages.map((m) => m.content), ['m1', 'm2', 'm3']);
      });

      it('does not append to a conversation that does not exist', async () => {
        const id = newConversationId();
        assert.equal(await stores.conversations.append(id, [message(0)], 50, 3600), false);
        assert.equal(await stores.conversations.get(id), null);
      });
    });
  });
});
