import assert from 'node:assert/strict';
import { reconnectDelay } from '../sdk/worker/reconnect-backoff.js';

const backoff = { initialDelayMs: 250, maxDelayMs: 15_000, factor: 2 };

/**
 * The SDK's reconnect policy (sdk/worker/reconnect-backoff.ts): full jitter over a capped
 * exponential bound. A gateway restart drops all its workers at once; the draw over the whole
 * bound is what spreads their reconnections (bench/fleet.ts measures the storm, not this test).
 */
describe('reconnect backoff: full jitter over a capped exponential bound', function () {
  it('draws from 0 up to the bound: the lowest draw waits nothing, the highest the whole bound', function () {
    assert.equal(reconnectDelay(backoff, 0, () => 0), 0);
    assert.equal(reconnectDelay(backoff, 0, () => 0.999999), 250 * 0.999999);
    assert.equal(reconnectDelay(backoff, 3, () => 0.5), 1_000);
  });

  it('doubles the bound per failed try until maxDelayMs', function () {
    const bounds = Array.from({ length: 10 }, (_, tries) => reconnectDelay(backoff, tries, () => 1));
    assert.deepEqual(bounds, [250, 500, 1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000, 15_000]);
  });

  it('spreads a fleet dropped at once over the whole bound, not its upper half', function () {
    // A deterministic stand-in for Math.random: evenly spaced draws, as 1,000 workers would make.
    const draws = Array.from({ length: 1_000 }, (_, i) => reconnectDelay(backoff, 0, () => i / 1_000));
    assert.ok(draws.every((d) => d >= 0 && d < 250));
    assert.equal(draws.filter((d) => d < 125).length, 500, 'half the fleet tries in the first half of the bound');
  });

  it('follows the caller options', function () {
    assert.equal(reconnectDelay({ initialDelayMs: 100, maxDelayMs: 450, factor: 3 }, 2, () => 1), 450);
    assert.equal(reconnectDelay({ initialDelayMs: 100, maxDelayMs: 10_000, factor: 3 }, 2, () => 1), 900);
  });
});
