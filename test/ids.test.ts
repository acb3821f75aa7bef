import assert from 'node:assert/strict';
import { accountGroup, groupOfId, newBatchId, newRunId, RUN_ID_PATTERN } from '../models/ids.js';

describe('run ids', () => {
  // Ids draw their randomness from a pool refilled every 4 KiB (256 ids of 16 bytes): crossing
  // several refills must still give well-formed ids, each after the one before, none twice.
  it("stay well-formed, strictly increasing and unique across many pool refills (one account's)", () => {
    const ids = Array.from({ length: 5000 }, () => newRunId('acct_one'));
    for (const id of ids) assert.match(id, RUN_ID_PATTERN);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1] < ids[i], `${ids[i - 1]} then ${ids[i]}`);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('spread their random part over the whole alphabet', () => {
    // One id per millisecond would take seconds; the first random character of ids made in
    // different milliseconds is fresh (after the two of the account's group), so compare ids
    // across a few waits instead.
    const seen = new Set<string>();
    const started = Date.now();
    while (Date.now() - started < 200) seen.add(newRunId('acct_one').slice(4 + 12, 4 + 13));
    assert.ok(seen.size >= 16, `only ${seen.size} distinct leading random characters`);
  });

  it("carry their account's group, read back from the id alone, and spread accounts over the 1,024 groups", () => {
    for (const account of ['acct_a', 'acct_b', 'acct_01JXYZ']) {
      assert.equal(groupOfId(newRunId(account)), accountGroup(account));
      assert.equal(groupOfId(newBatchId(account)), accountGroup(account));
    }
    // 10,240 accounts over 1,024 groups: about 10 each; none far from it (a skewed hash would put
    // many accounts, and their load, on one Redis Cluster primary).
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_240; i++) {
      const g = accountGroup(`acct_${i.toString(36).padStart(8, '0')}`);
      counts.set(g, (counts.get(g) ?? 0) + 1);
    }
    assert.ok(counts.size > 1000, `${counts.size} groups used`);
    assert.ok(Math.max(...counts.values()) <= 30, `the fullest group has ${Math.max(...counts.values())}`);
  });
});
