import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
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

/** The record at the end of an open artifact file, or null when it has none (a damaged file). */
async function readTrailer(handle: fsp.FileHandle): Promise<ArtifactMeta | null> {
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
  const meta = JSON.parse(buf.subarray(len - TRAILER_TAIL - jsonLen, len - TRAILER_TAIL).toString('utf8')) as ArtifactMeta;
  // The bytes before the record are the artifact: a size that disagrees means a damaged file.
  return meta.size === size - TRAILER_TAIL - jsonLen ? meta : null;
}

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
 * - `tmp/<random>.part`: an upload in progress;
 * - `<id[0..2]>/<id>.art`: the bytes followed by their metadata ({@link ArtifactMeta}, see
 *   `encodeTrailer`). One file per artifact: a data file and a sidecar were two writes and
 *   two renames per upload, a cost that showed in the job cycle (issue 17).
 * - the layout before it, still read and swept: `<id>.data` (the bytes) and `<id>.json` (the
 *   metadata), the artifact existing exactly when its `.json` does.
 *
 * An upload streams into `tmp/`, hashing as it goes, appends its record, and is renamed into
 * place (atomic on one filesystem), so no reader ever sees a half-written artifact. Readers
 * of a file being deleted keep their open descriptor (POSIX).
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

  private paths(id: string): { dir: string; file: string; data: string; meta: string } {
    const dir = path.join(this.root, id.slice(0, 2));
    return { dir, file: path.join(dir, `${id}.art`), data: path.join(dir, `${id}.data`), meta: path.join(dir, `${id}.json`) };
  }

  async put(body: AsyncIterable<Uint8Array>, opts: PutArtifact): Promise<ArtifactMeta> {
    const id = newArtifactId();
    const part = path.join(this.tmp, `${id}.part`);
    const hash = createHash('sha256');
    let size = 0;
    const max = opts.maxBytes;
    let meta: ArtifactMeta | undefined;
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
          const now = Date.now();
          meta = {
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
          yield encodeTrailer(meta);
        },
        // Opened (created) before any byte is read, so a failure below always has a file to delete.
        (await fsp.open(part, 'wx', 0o644)).createWriteStream(),
      );
      const p = this.paths(id);
      await this.renameIntoDir(part, p.file, p.dir);
      if (meta!.run_id) this.remember(meta!);
      return meta!;
    } catch (err) {
      await unlinkQuietly(part).catch(() => {});
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

  /** The artifact's file, open, with its record; the old layout's (bytes and record apart) when it has no `.art`. */
  private async openArtifact(id: string): Promise<{ handle: fsp.FileHandle; meta: ArtifactMeta | null } | null> {
    const p = this.paths(id);
    try {
      const handle = await fsp.open(p.file, 'r');
      try {
        return { handle, meta: await readTrailer(handle) };
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
    this.uploaded.delete(id);
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
