import assert from 'node:assert/strict';
import { CreateForecast } from '../queues/create-forecast.js';

/**
 * The priority a submission's job is queued with before its create has answered
 * (queues/create-and-enqueue.ts): its class's band plus the fair-share step of the account's
 * runs in flight as this instance last heard, and whether a create is expected to be refused.
 */
describe('CreateForecast', () => {
  let now = 1_000_000;
  const forecast = (max?: number) => new CreateForecast({ step: 10, ttlMs: 1000, now: () => now, ...(max ? { max } : {}) });

  it('guesses no runs in flight for an account it has not heard of, then what the last reply said', () => {
    const f = forecast();
    assert.equal(f.priority('acct_a', 20), 20);
    f.answered('acct_a', 35);
    assert.equal(f.priority('acct_a', 20), 23);
    f.answered('acct_a', 36);
    assert.equal(f.priority('acct_b', 10), 10, 'per account');
  });

  it('counts the creates sent and not answered yet, which Redis runs before the next one', () => {
    const f = forecast();
    f.priority('acct_a', 20);
    f.answered('acct_a', 8);
    // 8 in flight, then two sent: the second runs with 9 before it, the third with 10.
    assert.deepEqual([f.priority('acct_a', 20), f.priority('acct_a', 20), f.priority('acct_a', 20)], [20, 20, 21]);
    f.answered('acct_a', 9);
    f.answered('acct_a', 10);
    f.answered('acct_a', 11);
    assert.equal(f.priority('acct_a', 20), 21);
  });

  it('counts the runs finished here since the last reply out', () => {
    const f = forecast();
    f.priority('acct_a', 20);
    f.answered('acct_a', 21);
    f.finished('acct_a');
    f.finished('acct_a');
    assert.equal(f.priority('acct_a', 20), 21, '19 in flight, and this one');
    f.answered('acct_a', 20);
    for (let i = 0; i < 25; i++) f.finished('acct_a');
    assert.equal(f.priority('acct_a', 20), 20, 'never below none');
  });

  it('caps the step at 9 and forgets a reply after its ttl', () => {
    const f = forecast();
    f.priority('acct_a', 30);
    f.answered('acct_a', 500);
    assert.equal(f.priority('acct_a', 30), 39);
    f.answered('acct_a');
    now += 1001;
    assert.equal(f.priority('acct_a', 30), 30);
  });

  it('holds at most `max` accounts, the least recently answered going first', () => {
    const f = forecast(2);
    for (const a of ['acct_a', 'acct_b']) {
      f.priority(a, 20);
      f.answered(a, 20);
    }
    f.priority('acct_a', 20);
    f.answered('acct_a', 20);
    f.priority('acct_c', 20);
    f.answered('acct_c', 20);
    assert.equal(f.priority('acct_a', 20), 22, 'kept: answered last but one');
    assert.equal(f.priority('acct_b', 20), 20, 'dropped');
  });

  it('expects a create refused for a while after its account was, or its key limited or revoked', () => {
    const f = forecast();
    f.priority('acct_a', 20);
    f.answered('acct_a');
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
    f.priority('acct_a', 20);
    f.answered('acct_a', 1);
    assert.equal(f.likelyAdmitted('acct_a'), true);
  });
});
