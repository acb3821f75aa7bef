import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ARTIFACT_ID_PATTERN, artifactRecord, type ArtifactMeta, type ArtifactStore, type ByteRange, type PutArtifact } from './artifact-store.js';
import { NotFoundError, ApiError } from './errors.js';
import { newArtifactId } from './ids.js';
import { UploadedRecords } from './uploaded-records.js';

export { newArtifactId } from './ids.js';

/** ENOSPC (no space left) or EDQUOT (quota exceeded): a write that may work once space is freed. */
function isStorageFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/**
 * The end of an artifact file: its metadata as JSON, then the JSON's byte length (uint32 BE)
 * and this magic. A trailer, not a header, as the size and hash are known only once the
 * bytes are in; one upload is then one sequential write.
 */
const MAGIC = Buffer.from('SYA1');
const TRAILER_TAIL = 8;
/** Read from the end in one go: a record (name <= 200 characters) is well under this. */
const TAIL_READ = 4096;

function encodeTrailer(meta: ArtifactMeta): Buffer {
  const json = Buffer.from(JSON.stringify(meta));
  const tail = Buffer.alloc(TRAILER_TAIL);
  tail.writeUInt32BE(json.length, 0);
  MAGIC.copy(tail, 4);
  return Buffer.concat([json, tail]);
}

/**
 * The record at the end of the open artifact file of `id`, or null when the file has no valid
 * one: an upload still being written (or cut by a crash), or a damaged file. Every reader goes
 * through here, so a file is an artifact exactly when this finds its record. The record must
 * name `id`: the uploader learns the id only once its upload is complete, so bytes crafted to
 * end like a record cannot pass for one while the upload is under way.
 */
async function readTrailer(handle: fsp.FileHandle, id: string): Promise<ArtifactMeta | null> {
  const { size } = await handle.stat();
  if (size < TRAILER_TAIL) return null;
  let len = Math.min(size, TAIL_READ);
  let buf = Buffer.alloc(len);
  await handle.read(buf, 0, len, size - len);
  if (!buf.subarray(len - 4).equals(MAGIC)) return null;
  const jsonLen = buf.readUInt32BE(len - TRAILER_TAIL);
  if (jsonLen + TRAILER_TAIL > size) return null;
  if (jsonLen + TRAILER_TAIL > len) {
    len = jsonLen + TRAILER_TAIL;
    buf = Buffer.alloc(len);
    await handle.read(buf, 0, len, size - len);
  }
  let meta: ArtifactMeta;
  try {
    meta = JSON.parse(buf.subarray(len - TRAILER_TAIL - jsonLen, len - TRAILER_TAIL).toString('utf8')) as ArtifactMeta;
  } catch {
    return null;
  }
  // The bytes before the record are the artifact: a size that disagrees means a damaged file.
  return meta?.id === id && meta.size === size - TRAILER_TAIL - jsonLen ? meta : null;
}

/**
 * Filesystems whose readers all share the writer's page cache (`statfs` types): there a
 * reader sees a file's bytes in the order they were written, so a complete record means
 * complete bytes. On any other (NFS, CIFS, FUSE...), dirty pages may reach the server out of
 * order, and the bytes are synced before the record is written.
 */
// ext2/3/4, xfs, btrfs, tmpfs, ramfs, overlayfs, zfs, f2fs.
const LOCAL_FILESYSTEMS = new Set([0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x858458f6, 0x794c7630, 0x2fc12fc1, 0xf2f52010]);

/** Bytes held back before they are written: fewer, larger writes, and a small upload is one write with its record. */
const WRITE_BATCH = 64 * 1024;

/** Writes every byte of `chunks` at `position` (a write may be short); returns the position after them. */
async function writeAll(handle: fsp.FileHandle, chunks: Uint8Array[], position: number): Promise<number> {
  const rest = chunks.filter((c) => c.length > 0);
  while (rest.length > 0) {
    const { bytesWritten } = await handle.writev(rest, position);
    if (bytesWritten === 0) throw new Error('the artifact file took no bytes');
    position += bytesWritten;
    let n = bytesWritten;
    while (rest.length > 0 && n >= rest[0].length) n -= rest.shift()!.length;
    if (n > 0) rest[0] = rest[0].subarray(n);
  }
  return position;
}

/**
 * Files older than this without a valid record are abandoned uploads (a gateway that crashed
 * mid-upload), as are orphaned blobs of the old layouts: an upload cannot take this long.
 */
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
 * - `<id[0..2]>/<id>.art`: the bytes followed by their metadata ({@link ArtifactMeta}, see
 *   `encodeTrailer`). One file per artifact: a data file and a sidecar were two writes and
 *   two renames per upload, a cost that showed in the job cycle (issue 17).
 * - layouts before it, still read and swept: `<id>.data` (the bytes) and `<id>.json` (the
 *   metadata), the artifact existing exactly when its `.json` does; `tmp/*.part`, uploads
 *   that were in progress then, swept once abandoned.
 *
 * An upload is written in place: the file is created (exclusively) at its final path, the
 * bytes stream in, hashed as they go, and the record is written last. A file is an artifact
 * exactly when its record is complete and valid (`readTrailer`): until then every reader and
 * the expiry sweep see no artifact, so no reader, on this instance or another sharing the
 * directory, ever serves half an upload. A failed upload deletes its file; a crashed one's is
 * swept once abandoned. This replaced a temporary file and a rename, one file system call per
 * upload fewer (issue 26). Readers of a file being deleted keep their open descriptor (POSIX).
 */
export class FsArtifactStore implements ArtifactStore {
  readonly root: string;
  private readonly dirs = new Set<string>();
  private readonly uploaded = new UploadedRecords();
  /** Whether bytes must be synced before their record (see LOCAL_FILESYSTEMS); found once. */
  private syncBeforeRecord?: Promise<boolean>;

  constructor(opts: FsArtifactStoreOptions) {
    this.root = path.resolve(opts.root);
  }

  async init(): Promise<void> {
    await fsp.mkdir(this.root, { recursive: true });
    await this.mustSyncBeforeRecord();
  }

  private mustSyncBeforeRecord(): Promise<boolean> {
    this.syncBeforeRecord ??= fsp.statfs(this.root).then(
      ({ type }) => !LOCAL_FILESYSTEMS.has(type),
      () => true,
    );
    return this.syncBeforeRecord;
  }

  private paths(id: string): { dir: string; file: string; data: string; meta: string } {
    const dir = path.join(this.root, id.slice(0, 2));
    return { dir, file: path.join(dir, `${id}.art`), data: path.join(dir, `${id}.data`), meta: path.join(dir, `${id}.json`) };
  }

  /**
   * Creates the artifact's file, failing if it exists, in its directory made on first use.
   * Directories made are remembered: a mkdir on every upload was 3% of the gateway's time in
   * the job cycle (bench cycle). One removed behind the store's back (by hand) is made again.
   */
  private async create(file: string, dir: string): Promise<fsp.FileHandle> {
    if (!this.dirs.has(dir)) {
      await fsp.mkdir(dir, { recursive: true });
      this.dirs.add(dir);
    }
    try {
      return await fsp.open(file, 'wx', 0o644);
    } catch (err) {
      if (!isMissing(err)) throw err;
      this.dirs.delete(dir);
      await fsp.mkdir(dir, { recursive: true });
      this.dirs.add(dir);
      return await fsp.open(file, 'wx', 0o644);
    }
  }

  async put(body: AsyncIterable<Uint8Array>, opts: PutArtifact): Promise<ArtifactMeta> {
    const syncBeforeRecord = await this.mustSyncBeforeRecord();
    const id = newArtifactId();
    const p = this.paths(id);
    const handle = await this.create(p.file, p.dir);
    // From here on the file is ours: any failure deletes it (never another's, hence after create).
    try {
      let meta: ArtifactMeta;
      try {
        meta = await this.write(handle, body, id, opts, syncBeforeRecord);
      } finally {
        await handle.close();
      }
      if (meta.run_id) this.uploaded.remember(meta);
      return meta;
    } catch (err) {
      await unlinkQuietly(p.file).catch(() => {});
      // A full disk is the gateway's trouble, not the uploader's, and it passes: 503 tells the
      // worker to try again (its upload retries, then a retryable failure that requeues the run).
      // Left as it was, the route took the consumed request for an interrupted upload: a 400,
      // and the run failed for good with upload_failed (found by npm run chaos, disk-full).
      if (isStorageFull(err)) throw new ApiError('unavailable', 'the artifact storage is full; retry later', { headers: { 'Retry-After': '5' }, cause: err });
      throw err;
    }
  }

  /** Streams the bytes into the new file, hashing them, then writes their record. */
  private async write(handle: fsp.FileHandle, body: AsyncIterable<Uint8Array>, id: string, opts: PutArtifact, syncBeforeRecord: boolean): Promise<ArtifactMeta> {
    const hash = createHash('sha256');
    const max = opts.maxBytes;
    let size = 0;
    let written = 0;
    // Chunks wait until a batch is full; the last batch goes out with the record.
    let held: Uint8Array[] = [];
    let heldBytes = 0;
    for await (const chunk of body) {
      size += chunk.length;
      if (size > max) throw new ApiError('payload_too_large', `an artifact may be at most ${max} bytes`, { details: { max_bytes: max } });
      hash.update(chunk);
      held.push(chunk);
      heldBytes += chunk.length;
      if (heldBytes >= WRITE_BATCH) {
        written = await writeAll(handle, held, written);
        held = [];
        heldBytes = 0;
      }
    }
    const now = Date.now();
    const meta = artifactRecord(id, opts, { size, sha256: hash.digest('hex'), createdMs: now, expiresMs: now + opts.retentionSeconds * 1000 });
    if (syncBeforeRecord) {
      written = await writeAll(handle, held, written);
      held = [];
      await handle.datasync();
    }
    await writeAll(handle, [...held, encodeTrailer(meta)], written);
    return meta;
  }

  takeUploaded(id: string): ArtifactMeta | null {
    return this.uploaded.take(id);
  }

  /** The artifact's file, open, with its record; the old layout's (bytes and record apart) when it has no `.art`. */
  private async openArtifact(id: string): Promise<{ handle: fsp.FileHandle; meta: ArtifactMeta | null } | null> {
    const p = this.paths(id);
    try {
      const handle = await fsp.open(p.file, 'r');
      try {
        return { handle, meta: await readTrailer(handle, id) };
      } catch (err) {
        await handle.close();
        throw err;
      }
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    return null;
  }

  private async readOldMeta(id: string): Promise<ArtifactMeta | null> {
    try {
      return JSON.parse(await fsp.readFile(this.paths(id).meta, 'utf8')) as ArtifactMeta;
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  private async readMeta(id: string): Promise<ArtifactMeta | null> {
    if (!ARTIFACT_ID_PATTERN.test(id)) return null;
    const art = await this.openArtifact(id);
    if (!art) return this.readOldMeta(id);
    await art.handle.close();
    return art.meta;
  }

  async get(id: string): Promise<ArtifactMeta | null> {
    const meta = await this.readMeta(id);
    return meta && Date.parse(meta.expires_at) > Date.now() ? meta : null;
  }

  async open(id: string, range?: ByteRange): Promise<Readable> {
    if (!ARTIFACT_ID_PATTERN.test(id)) throw new NotFoundError('artifact');
    const art = await this.openArtifact(id);
    if (art) {
      if (!art.meta) {
        await art.handle.close();
        throw new NotFoundError('artifact');
      }
      // Only the bytes before the record are the artifact's.
      const last = art.meta.size - 1;
      const start = range ? range.start : 0;
      const end = range ? Math.min(range.end, last) : last;
      if (start > end) {
        await art.handle.close();
        return Readable.from([]);
      }
      return art.handle.createReadStream({ start, end });
    }
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
    this.uploaded.forget(id);
    await unlinkQuietly(p.file);
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
        const id = file.replace(/\.(json|data|art)$/, '');
        if (!ARTIFACT_ID_PATTERN.test(id)) continue;
        if (file.endsWith('.json') || file.endsWith('.art')) {
          const meta = await this.readMeta(id).catch(() => undefined);
          if (meta === null && file.endsWith('.art')) {
            // No valid record: an upload under way, or one cut by a crash once it is this old.
            await this.removeIfOlder(path.join(dir, file), cutoff - ABANDONED_MS);
            continue;
          }
          const expires = meta ? Date.parse(meta.expires_at) : NaN;
          // An unreadable file or sidecar is left alone: only an expiry we can read deletes.
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
    // Uploads in progress when a gateway before issue 26 stopped.
    const tmp = path.join(this.root, 'tmp');
    for (const file of await fsp.readdir(tmp).catch(() => [] as string[])) {
      await this.removeIfOlder(path.join(tmp, file), cutoff - ABANDONED_MS);
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
