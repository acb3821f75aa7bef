import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/** Mounts a tmpfs of `size` on a new directory; null where mounting is not permitted (not root, no CAP_SYS_ADMIN). */
function mountTmpfs(size: string): string | null {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-disk-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return dir;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
}

/**
 * A full artifact disk is the gateway's trouble and it passes: uploads must be answered 503
 * `unavailable` (retry), never 400 (the uploader's fault). It was a 400 "the upload was
 * interrupted", so a worker failed its run for good with upload_failed; `npm run chaos --
 * --scenario disk-full` found it.
 */
describe('a full artifact disk', function () {
  let dataDir: string | null = null;
  let gw: TestGateway | undefined;
  const prefix = uniquePrefix('disk-full');

  before(function () {
    dataDir = mountTmpfs('1m');
    if (!dataDir) {
      // CI runs as root in a container that may mount; elsewhere this needs root.
      if (process.env.CI === 'true') throw new Error('mounting a tmpfs is not permitted here; this test needs root (CAP_SYS_ADMIN)');
      this.skip();
    }
  });

  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
    if (dataDir) {
      execFileSync('umount', [dataDir], { stdio: 'ignore' });
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('answers an upload 503 unavailable with Retry-After while full, and stores it once there is room', async () => {
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir! }).start();
    const { key } = await gw.account(100);
    const filler = path.join(dataDir!, 'filler');
    try {
      writeFileSync(filler, Buffer.alloc(2 << 20));
    } catch {
      // ENOSPC: the disk is full, as wanted
    }
    const upload = () =>
      fetch(`${gw!.url}/v1/files?filename=a.bin`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: Buffer.alloc(64 << 10, 1) });
    const full = await upload();
    const body = (await full.json()) as { error: { code: string } };
    assert.equal(full.status, 503, JSON.stringify(body));
    assert.equal(body.error.code, 'unavailable');
    assert.ok(full.headers.get('retry-after'));

    rmSync(filler);
    const room = await upload();
    assert.equal(room.status, 201, await room.text());
  });
});
