import assert from 'node:assert/strict';
import { newAccountId, newFileId } from '../models/ids.js';
import type { FileRecord } from '../models/stores.js';
import { describeEachStore } from './helpers/store-targets.js';

/** The file store's contract, run against every store (MongoDB where MONGO_URL is set). */
describe('file store contract', () => {
  describeEachStore((stores) => {
    const file = (accountId: string, over: Partial<FileRecord> = {}): FileRecord => ({
      id: newFileId(),
      account_id: accountId,
      artifact_id: 'a'.repeat(32),
      filename: 'photo.png',
      content_type: 'image/png',
      size: 100,
      sha256: '0'.repeat(64),
      created_at: new Date().toISOString(),
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      ...over,
    });

    it('records a file, serves it to its account only, and counts its bytes', async () => {
      const acct = newAccountId();
      const f = file(acct, { size: 250 });
      assert.deepEqual(await stores.files.create(f, 1000), { created: true, usedBytes: 250 });
      assert.deepEqual(await stores.files.get(acct, f.id), f);
      assert.equal(await stores.files.get(newAccountId(), f.id), null);
      assert.equal(await stores.files.usedBytes(acct), 250);
    });

    it('refuses a file that would pass the quota and records nothing; concurrent creates never pass it together', async () => {
      const acct = newAccountId();
      await stores.files.create(file(acct, { size: 600 }), 1000);
      const over = file(acct, { size: 500 });
      assert.deepEqual(await stores.files.create(over, 1000), { created: false, usedBytes: 600 });
      assert.equal(await stores.files.get(acct, over.id), null);
      const results = await Promise.all(Array.from({ length: 10 }, () => stores.files.create(file(acct, { size: 100 }), 1000)));
      assert.equal(results.filter((r) => r.created).length, 4);
      assert.equal(await stores.files.usedBytes(acct), 1000);
    });

    it('lists an account\'s live files newest first, page by page', async () => {
      const acct = newAccountId();
      const made: FileRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const f = file(acct);
        made.push(f);
        await stores.files.create(f, 1e9);
      }
      await stores.files.create(file(acct, { expires_at: new Date(Date.now() - 1000).toISOString() }), 1e9);
      await stores.files.create(file(newAccountId()), 1e9);
      const first = await stores.files.list(acct, { limit: 3 });
      assert.deepEqual(first.map((f) => f.id), made.slice(2).reverse().map((f) => f.id));
      const second = await stores.files.list(acct, { limit: 3, after: first[2].id });
      assert.deepEqual(second.map((f) => f.id), made.slice(0, 2).reverse().map((f) => f.id));
    });

    it('deletes only the owner\'s file and gives its bytes back', async () => {
      const acct = newAccountId();
      const f = file(acct, { size: 300 });
      await stores.files.create(f, 1000);
      assert.equal(await stores.files.delete(newAccountId(), f.id), null);
      assert.deepEqual(await stores.files.delete(acct, f.id), f);
      assert.equal(await stores.files.get(acct, f.id), null);
      assert.equal(await stores.files.usedBytes(acct), 0);
      assert.equal(await stores.files.delete(acct, f.id), null);
      assert.deepEqual(await stores.files.list(acct, { limit: 10 }), []);
    });

    it('hands expired files to the sweeper until they are deleted', async () => {
      const acct = newAccountId();
      const gone = file(acct, { size: 40, expires_at: new Date(Date.now() - 1000).toISOString() });
      const kept = file(acct, { size: 60 });
      await stores.files.create(gone, 1000);
      await stores.files.create(kept, 1000);
      const due = await stores.files.expired(new Date(), 100);
      assert.ok(due.some((f) => f.id === gone.id));
      assert.ok(!due.some((f) => f.id === kept.id));
      assert.equal(await stores.files.get(acct, gone.id), null, 'an expired file is not served while it waits for the sweep');
      await stores.files.delete(acct, gone.id);
      assert.ok(!(await stores.files.expired(new Date(), 100)).some((f) => f.id === gone.id));
      assert.equal(await stores.files.usedBytes(acct), 60);
    });
  });
});
