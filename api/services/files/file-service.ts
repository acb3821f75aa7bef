import { fileTypeFromBuffer } from 'file-type';
import type { Readable } from 'node:stream';
import { artifactContentType, checkArtifactName, type ArtifactMeta, type ArtifactStore, type ByteRange } from '../../../models/artifact-store.js';
import { ApiError, NotFoundError } from '../../../models/errors.js';
import { FILE_ID_PATTERN, newFileId } from '../../../models/ids.js';
import type { FileRecord, FileStore } from '../../../models/stores.js';
import type { SwitchyardFile } from '../../../sdk/client/types.js';

/** Bytes read before the upload is stored: enough for every signature file-type knows. */
const SNIFF_BYTES = 4100;

export interface FileServiceOptions {
  store: FileStore;
  /** Where the bytes go: the one storage of artifacts and files. */
  artifacts: ArtifactStore;
  maxBytes: number;
  quotaBytes: number;
  retentionSeconds: number;
  publicUrl: () => string;
}

/** What the uploader says of the file; the bytes have the last word on the type. */
export interface DeclaredFile {
  filename?: string;
  contentType?: string;
  /** Content-Length, when the body has one: refused at once when it cannot fit. */
  length?: number;
}

/**
 * Files accounts upload (`/v1/files`, docs/files.md): streamed into the artifact store,
 * typed from their bytes, counted against the account's quota, deleted at the end of their
 * retention.
 */
export class FileService {
  constructor(private readonly opts: FileServiceOptions) {}

  /** FILE_MAX_BYTES: the most a file may hold (a multipart body's file part is read up to it). */
  get maxBytes(): number {
    return this.opts.maxBytes;
  }

  async upload(accountId: string, body: AsyncIterable<Uint8Array>, declared: DeclaredFile): Promise<FileRecord> {
    const { maxBytes, quotaBytes } = this.opts;
    const problem = declared.filename === undefined ? null : checkArtifactName(declared.filename);
    if (problem) throw new ApiError('invalid_request', problem.replace(/^name/, 'filename'));
    const used = await this.opts.store.usedBytes(accountId);
    const room = Math.max(0, quotaBytes - used);
    if (declared.length !== undefined) this.checkFits(declared.length, used);

    const source = body[Symbol.asyncIterator]();
    const head = await readHead(source);
    const contentType = await typeOf(Buffer.concat(head.chunks), declared);
    const filename = declared.filename ?? `upload${extensionOf(contentType)}`;
    let meta: ArtifactMeta;
    try {
      meta = await this.opts.artifacts.put(replay(head.chunks, head.done ? null : source), {
        name: filename,
        contentType,
        accountId,
        maxBytes: Math.min(maxBytes, room),
        retentionSeconds: this.opts.retentionSeconds,
      });
    } catch (err) {
      // The store stopped at the smaller of the two limits: say which one the file passed.
      if (err instanceof ApiError && err.code === 'payload_too_large') this.checkFits(Math.min(maxBytes, room) + 1, used);
      throw err;
    }
    const file: FileRecord = {
      id: newFileId(),
      account_id: accountId,
      artifact_id: meta.id,
      filename,
      content_type: meta.content_type,
      size: meta.size,
      sha256: meta.sha256,
      created_at: meta.created_at,
      expires_at: meta.expires_at,
    };
    const created = await this.opts.store.create(file, quotaBytes).catch(async (err: unknown) => {
      await this.opts.artifacts.delete(meta.id);
      throw err;
    });
    if (!created.created) {
      // Another upload of the account took the room meanwhile.
      await this.opts.artifacts.delete(meta.id);
      throw quotaExceeded(quotaBytes, created.usedBytes);
    }
    return file;
  }

  /** Throws the error of a file of `size` bytes that does not fit: too large for any upload, or for the account's quota. */
  private checkFits(size: number, used: number): void {
    const { maxBytes, quotaBytes } = this.opts;
    if (size > maxBytes) throw new ApiError('payload_too_large', `a file may be at most ${maxBytes} bytes`, { details: { max_bytes: maxBytes } });
    if (used + size > quotaBytes) throw quotaExceeded(quotaBytes, used);
  }

  async get(accountId: string, id: string): Promise<FileRecord> {
    const file = FILE_ID_PATTERN.test(id) ? await this.opts.store.get(accountId, id) : null;
    if (!file) throw new NotFoundError('file');
    return file;
  }

  list(accountId: string, opts: { limit: number; after?: string }): Promise<FileRecord[]> {
    return this.opts.store.list(accountId, opts);
  }

  /** What the account's files hold now against FILE_QUOTA_BYTES, as the listing shows it. */
  async quota(accountId: string): Promise<{ used_bytes: number; quota_bytes: number }> {
    return { used_bytes: await this.opts.store.usedBytes(accountId), quota_bytes: this.opts.quotaBytes };
  }

  async delete(accountId: string, id: string): Promise<void> {
    const file = FILE_ID_PATTERN.test(id) ? await this.opts.store.delete(accountId, id) : null;
    if (!file) throw new NotFoundError('file');
    await this.opts.artifacts.delete(file.artifact_id);
  }

  /** The stored bytes' metadata, for serving them; not found once the bytes are gone. */
  async stored(file: FileRecord): Promise<ArtifactMeta> {
    const meta = await this.opts.artifacts.get(file.artifact_id);
    if (!meta) throw new NotFoundError('file');
    return meta;
  }

  open(file: FileRecord, range?: ByteRange): Promise<Readable> {
    return this.opts.artifacts.open(file.artifact_id, range);
  }

  /** The file as the API shows it. */
  view(file: FileRecord): SwitchyardFile {
    return {
      id: file.id,
      url: `${this.opts.publicUrl()}/v1/files/${file.id}`,
      filename: file.filename,
      content_type: file.content_type,
      size: file.size,
      sha256: file.sha256,
      created_at: file.created_at,
      expires_at: file.expires_at,
    };
  }

  /** Deletes files past their retention (record first, so the quota frees at once); returns how many went. */
  async sweep(now = new Date()): Promise<number> {
    let deleted = 0;
    for (;;) {
      const due = await this.opts.store.expired(now, 100);
      if (due.length === 0) return deleted;
      for (const file of due) {
        if (await this.opts.store.delete(file.account_id, file.id)) deleted++;
        await this.opts.artifacts.delete(file.artifact_id);
      }
    }
  }
}

function quotaExceeded(quotaBytes: number, usedBytes: number): ApiError {
  return new ApiError('quota_exceeded', `this account's files may hold at most ${quotaBytes} bytes and hold ${usedBytes}: delete files (DELETE /v1/files/{id}) or wait for them to expire`, {
    details: { quota_bytes: quotaBytes, used_bytes: usedBytes },
  });
}

async function readHead(source: AsyncIterator<Uint8Array>): Promise<{ chunks: Uint8Array[]; done: boolean }> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < SNIFF_BYTES) {
    const next = await source.next();
    if (next.done) return { chunks, done: true };
    chunks.push(next.value);
    size += next.value.length;
  }
  return { chunks, done: false };
}

async function* replay(head: Uint8Array[], rest: AsyncIterator<Uint8Array> | null): AsyncGenerator<Uint8Array> {
  yield* head;
  if (!rest) return;
  for (;;) {
    const next = await rest.next();
    if (next.done) return;
    yield next.value;
  }
}

/**
 * The type the file is stored and served with. What the bytes say wins; a declared type that
 * names another specific type is refused (a WAV sent as image/png). Formats without a
 * signature (OBJ, glTF JSON, text) keep the declared type or their extension's.
 */
async function typeOf(head: Buffer, declared: DeclaredFile): Promise<string> {
  const sniffed = head.length ? await fileTypeFromBuffer(head) : undefined;
  const claimed = artifactContentType(declared.contentType, declared.filename ?? '');
  if (!sniffed) return claimed;
  const detected = artifactContentType(sniffed.mime, declared.filename ?? '');
  const generic = claimed === 'application/octet-stream';
  if (!generic && essence(claimed) !== essence(sniffed.mime) && !sameFamily(claimed, sniffed.mime)) {
    throw new ApiError('unsupported_media_type', `the file was declared ${essence(claimed)} but its bytes are ${sniffed.mime}`, {
      details: { declared: essence(claimed), detected: sniffed.mime },
    });
  }
  // Active types (an SVG, a script) are never served as such.
  return detected;
}

/** A media type without its parameters, lower-cased: `Image/PNG; x=1` -> `image/png`. */
export const mediaEssence = (type: string) => type.split(';')[0].trim().toLowerCase();
const essence = mediaEssence;

/** Spellings of one format that file-type and senders disagree on. */
const ALIASES: string[][] = [
  ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/vnd.wave'],
  ['audio/mpeg', 'audio/mp3'],
  ['video/x-msvideo', 'video/avi', 'video/vnd.avi'],
  ['audio/flac', 'audio/x-flac'],
  ['image/jpeg', 'image/jpg'],
];

function sameFamily(a: string, b: string): boolean {
  return ALIASES.some((names) => names.includes(essence(a)) && names.includes(essence(b)));
}

const EXTENSIONS: Record<string, string> = { 'image/png': '.png', 'image/jpeg': '.jpg', 'image/webp': '.webp', 'image/gif': '.gif', 'model/gltf-binary': '.glb', 'audio/wav': '.wav', 'audio/x-wav': '.wav', 'audio/mpeg': '.mp3', 'audio/ogg': '.ogg', 'audio/flac': '.flac', 'video/mp4': '.mp4', 'video/webm': '.webm', 'video/x-msvideo': '.avi' };

function extensionOf(contentType: string): string {
  return EXTENSIONS[essence(contentType)] ?? '.bin';
}
