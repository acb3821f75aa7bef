import assert from 'node:assert/strict';
import { newRunId, RUN_ID_PATTERN } from '../models/ids.js';

describe('run ids', () => {
  // Ids draw their randomness from a pool refilled every 4 KiB (256 ids of 16 bytes): crossing
  // several refills must still give well-formed ids, each after the one before, none twice.
  it('stay well-formed, strictly increasing and unique across many pool refills', () => {
    const ids = Array.from({ length: 5000 }, () => newRunId());
    for (const id of ids) assert.match(id, RUN_ID_PATTERN);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i], `${ids[i - 1]} then ${ids[i]}`);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('spread their random part over the whole alphabet', () => {
    // One id per millisecond would take seconds; the first random character of ids made in
    // different milliseconds is fresh, so compare ids across a few waits instead.
    const seen = new Set<string>();
    const started = Date.now();
    while (Date.now() - started < 200) seen.add(newRunId().slice(4 + 10, 4 + 11));
    assert.ok(seen.size >= 16, `only ${seen.size} distinct leading random characters`);
  });
});
