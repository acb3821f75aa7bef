import assert from 'node:assert/strict';
import { RANK_CAP } from '../models/fair-share.js';
import { CreateForecast } from '../queues/create-forecast.js';

/**
 * The priority a submission's job is queued with before its create has answered
 * (queues/create-and-enqueue.ts): its class's band plus the fair-share rank of the account's
 * runs of its kind in flight as this instance last heard (per share of a round: step × weight),
 * and whether a create is expected to be refused.
 */
describe('CreateForecast', () => {
  let now = 1_000_000;
  const K = 'kind:a';
  const forecast = (max?: number) => new CreateForecast({ step: 10, ttlMs: 1000, now: () => now, ...(max ? { max } : {}) });

  it('guesses no runs in flight for an account it has not heard of, then what the last reply said', () => {
    const f = forecast();
    assert.equal(f.priority('acct_a', K, 20), 20);
    f.answered('acct_a', K, 35, 10);
    assert.equal(f.priority('acct_a', K, 20), 23);
    f.answered('acct_a', K, 36, 10);
    assert.equal(f.priority('acct_b', K, 10), 10, 'per account');
    assert.equal(f.priority('acct_a', 'kind:b', 20), 20, 'per kind');
  });

  it("divides by the account's share the reply gave (its weight)", () => {
    const f = forecast();
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K, 35, 20);
    assert.equal(f.priority('acct_a', K, 20), 21, '35 in flight, 20 a round');
  });

  it('counts the creates sent and not answered yet, which Redis runs before the next one', () => {
    const f = forecast();
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K, 8, 10);
    // 8 in flight, then two sent: the second runs with 9 before it, the third with 10.
    assert.deepEqual([f.priority('acct_a', K, 20), f.priority('acct_a', K, 20), f.priority('acct_a', K, 20)], [20, 20, 21]);
    f.answered('acct_a', K, 9, 10);
    f.answered('acct_a', K, 10, 10);
    f.answered('acct_a', K, 11, 10);
    assert.equal(f.priority('acct_a', K, 20), 21);
  });

  it('counts the runs finished here since the last reply out', () => {
    const f = forecast();
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K, 21, 10);
    f.finished('acct_a', K);
    f.finished('acct_a', K);
    assert.equal(f.priority('acct_a', K, 20), 21, '19 in flight, and this one');
    f.answered('acct_a', K, 20, 10);
    for (let i = 0; i < 25; i++) f.finished('acct_a', K);
    assert.equal(f.priority('acct_a', K, 20), 20, 'never below none');
  });

  it('caps the rank and forgets a reply after its ttl', () => {
    const f = forecast();
    f.priority('acct_a', K, 30);
    f.answered('acct_a', K, 500, 10);
    assert.equal(f.priority('acct_a', K, 30), 80);
    f.answered('acct_a', K);
    f.priority('acct_a', K, 30);
    f.answered('acct_a', K, 100 * RANK_CAP, 10);
    assert.equal(f.priority('acct_a', K, 30), 30 + RANK_CAP);
    f.answered('acct_a', K);
    now += 1001;
    assert.equal(f.priority('acct_a', K, 30), 30);
  });

  it('holds at most `max` accounts, the least recently answered going first', () => {
    const f = forecast(2);
    for (const a of ['acct_a', 'acct_b']) {
      f.priority(a, K, 20);
      f.answered(a, K, 20, 10);
    }
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K, 20, 10);
    f.priority('acct_c', K, 20);
    f.answered('acct_c', K, 20, 10);
    assert.equal(f.priority('acct_a', K, 20), 22, 'kept: answered last but one');
    assert.equal(f.priority('acct_b', K, 20), 20, 'dropped');
  });

  it('expects a create refused for a while after its account was, or its key limited or revoked', () => {
    const f = forecast();
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K);
    f.refused('acct_a');
    assert.equal(f.likelyAdmitted('acct_a'), false);
    now += 1001;
    assert.equal(f.likelyAdmitted('acct_a'), true);
    f.gateRefused('key_a', { outcome: 'limited', retryAfterMs: 5000 });
    f.gateRefused('key_b', { outcome: 'revoked' });
    assert.deepEqual([f.likelyAdmitted('acct_a', 'key_a'), f.likelyAdmitted('acct_a', 'key_b'), f.likelyAdmitted('acct_a', 'key_c')], [false, false, true]);
    now += 5001;
    assert.deepEqual([f.likelyAdmitted('acct_a', 'key_a'), f.likelyAdmitted('acct_a', 'key_b')], [true, false]);
    // A created run says the account has credits again.
    f.refused('acct_a');
    f.priority('acct_a', K, 20);
    f.answered('acct_a', K, 1, 10);
    assert.equal(f.likelyAdmitted('acct_a'), true);
  });
});
