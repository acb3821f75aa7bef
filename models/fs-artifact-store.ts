import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ARTIFACT_ID_PATTERN, type ArtifactMeta, type ArtifactStore, type ByteRange, type PutArtifact } from './artifact-store.js';
import { NotFoundError, ApiError } from './errors.js';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** 32 characters of lowercase base32 from 160 random bits: unguessable, and safe on case-insensitive disks. */
export function newArtifactId(): string {
  const bytes = randomBytes(20);
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

/**
 * Records of run uploads kept for their settlement. A lease settles within seconds of its
 * uploads, so the bound only matters for leases that never settle (lost workers): the oldest go.
 */
const MAX_UPLOADED = 4096;

/** Partial uploads and orphaned blobs older than this are abandoned (an upload cannot take this long). */
const ABANDONED_MS = 24 * 3600 * 1000;

const isMissing = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === 'ENOENT';

async function unlinkQuietly(file: string): Promise<void> {
  await fsp.unlink(file).catch((err) => {
    if (!isMissing(err)) throw err;
  });
}

export interface FsArtifactStoreOptions {
  /** Directory of the artifacts, e.g. `${DATA_DIR}/artifacts`; gateways sharing it serve each other's uploads. */
  root: string;
}

/**
 * Artifacts as files. Layout under `root`:
 *
 * - `tmp/<random>.part`: an upload in progress (and `tmp/<random>.json` while metadata is written);
 * - `<id[0..2]>/<id>.data`: the bytes;
 * - `<id[0..2]>/<id>.json`: the metadata sidecar ({@link ArtifactMeta}).
 *
 * An artifact exists exactly when its sidecar does. An upload streams into `tmp/`, hashing as
 * it goes, then the bytes are renamed into place and the sidecar last (both renames are
 * atomic on one filesystem), so no reader ever sees a half-written artifact. Deletion removes
 * the sidecar first. Readers of a file being deleted keep their open descriptor (POSIX).
 */
export class FsArtifactStore implements ArtifactStore {
  readonly root: string;
  private readonly tmp: string;
  private readonly dirs = new Set<string>();
  private readonly uploaded = new Map<string, ArtifactMeta>();

  constructor(opts: FsArtifactStoreOptions) {
    this.root = path.resolve(opts.root);
    this.tmp = path.join(this.root, 'tmp');
  }

  /**
   * Moves a finished upload into its directory, made on first use. Directories made are
   * remembered: a mkdir on every upload was 3% of the gateway's time in the job cycle (bench
   * cycle). One removed behind the store's back (by hand) is made again.
   */
  private async renameIntoDir(from: string, to: string, dir: string): Promise<void> {
    if (!this.dirs.has(dir)) {
      await fsp.mkdir(dir, { recursive: true });
      this.dirs.add(dir);
    }
    try {
      await fsp.rename(from, to);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      this.dirs.delete(dir);
      await fsp.mkdir(dir, { recursive: true });
      this.dirs.add(dir);
      await fsp.rename(from, to);
    }
  }

  async init(): Promise<void> {
    await fsp.mkdir(this.tmp, { recursive: true });
  }

  private paths(id: string): { dir: string; data: string; meta: string } {
    const dir = path.join(this.root, id.slice(0, 2));
    return { dir, data: path.join(dir, `${id}.data`), meta: path.join(dir, `${id}.json`) };
  }

  async put(body: AsyncIterable<Uint8Array>, opts: PutArtifact): Promise<ArtifactMeta> {
    const id = newArtifactId();
    const part = path.join(this.tmp, `${id}.part`);
    const sidecar = path.join(this.tmp, `${id}.json`);
    const hash = createHash('sha256');
    let size = 0;
    const max = opts.maxBytes;
    try {
      await pipeline(
        body,
        async function* (source: AsyncIterable<Uint8Array>) {
          for await (const chunk of source) {
            size += chunk.length;
            if (size > max) throw new ApiError('payload_too_large', `an artifact may be at most ${max} bytes`, { details: { max_bytes: max } });
            hash.update(chunk);
            yield chunk;
          }
        },
        // Opened (created) before any byte is read, so a failure below always has a file to delete.
        (await fsp.open(part, 'wx', 0o644)).createWriteStream(),
      );
      const now = Date.now();
      const meta: ArtifactMeta = {
        id,
        name: opts.name,
        run_id: opts.runId ?? null,
        lease_id: opts.leaseId ?? null,
        account_id: opts.accountId,
        size,
        sha256: hash.digest('hex'),
        content_type: opts.contentType,
        created_at: new Date(now).toISOString(),
        expires_at: new Date(now + opts.retentionSeconds * 1000).toISOString(),
      };
      const p = this.paths(id);
      await fsp.writeFile(sidecar, JSON.stringify(meta), { flag: 'wx', mode: 0o644 });
      await this.renameIntoDir(part, p.data, p.dir);
      await fsp.rename(sidecar, p.meta);
      if (meta.run_id) this.remember(meta);
      return meta;
    } catch (err) {
      await Promise.all([unlinkQuietly(part), unlinkQuietly(sidecar), unlinkQuietly(this.paths(id).data)]).catch(() => {});
      throw err;
    }
  }

  private remember(meta: ArtifactMeta): void {
    if (this.uploaded.size >= MAX_UPLOADED) this.uploaded.delete(this.uploaded.keys().next().value!);
    this.uploaded.set(meta.id, meta);
  }

  takeUploaded(id: string): ArtifactMeta | null {
    const meta = this.uploaded.get(id);
    if (!meta) return null;
    this.uploaded.delete(id);
    return Date.parse(meta.expires_at) > Date.now() ? meta : null;
  }

  private async readMeta(id: string): Promise<ArtifactMeta | null> {
    if (!ARTIFACT_ID_PATTERN.test(id)) return null;
    try {
      return JSON.parse(await fsp.readFile(this.paths(id).meta, 'utf8')) as ArtifactMeta;
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async get(id: string): Promise<ArtifactMeta | null> {
    const meta = await this.readMeta(id);
    return meta && Date.parse(meta.expires_at) > Date.now() ? meta : null;
  }

  async open(id: string, range?: ByteRange): Promise<Readable> {
    if (!ARTIFACT_ID_PATTERN.test(id)) throw new NotFoundError('artifact');
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(this.paths(id).data, 'r');
    } catch (err) {
      if (isMissing(err)) throw new NotFoundError('artifact');
      throw err;
    }
    // The handle closes itself when the stream ends or is destroyed.
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async delete(id: string): Promise<void> {
    if (!ARTIFACT_ID_PATTERN.test(id)) return;
    const p = this.paths(id);
    this.uploaded.delete(id);
    await unlinkQuietly(p.meta);
    await unlinkQuietly(p.data);
  }

  async deleteExpired(now: Date): Promise<number> {
    const cutoff = now.getTime();
    let deleted = 0;
    const shards = await fsp.readdir(this.root, { withFileTypes: true }).catch((err) => {
      if (isMissing(err)) return [];
      throw err;
    });
    for (const shard of shards) {
      if (!shard.isDirectory() || !/^[a-z2-7]{2}$/.test(shard.name)) continue;
      const dir = path.join(this.root, shard.name);
      const files = await fsp.readdir(dir).catch((err) => {
        if (isMissing(err)) return [] as string[];
        throw err;
      });
      const ids = new Set(files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)));
      for (const file of files) {
        const id = file.replace(/\.(json|data)$/, '');
        if (!ARTIFACT_ID_PATTERN.test(id)) continue;
        if (file.endsWith('.json')) {
          const meta = await this.readMeta(id).catch(() => null);
          const expires = meta ? Date.parse(meta.expires_at) : NaN;
          // An unreadable sidecar is left alone: only an expiry we can read deletes.
          if (Number.isFinite(expires) && expires <= cutoff) {
            await this.delete(id);
            deleted++;
          }
        } else if (file.endsWith('.data') && !ids.has(id)) {
          // Bytes whose sidecar never got written (a crash between the two renames).
          await this.removeIfOlder(path.join(dir, file), cutoff - ABANDONED_MS);
        }
      }
    }
    for (const file of await fsp.readdir(this.tmp).catch(() => [] as string[])) {
      await this.removeIfOlder(path.join(this.tmp, file), cutoff - ABANDONED_MS);
    }
    return deleted;
  }

  private async removeIfOlder(file: string, beforeMs: number): Promise<void> {
    try {
      const st = await fsp.stat(file);
      if (st.mtimeMs < beforeMs) await fsp.unlink(file);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  }
}
