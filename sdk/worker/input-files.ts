import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { InputFile } from '../engines/types.js';
import type { LeaseInputFile } from '../protocol/index.js';
import { readError, retryAfterMs, TRANSIENT_STATUS, withRetries, type TryResult } from './http-retry.js';

export interface InputFileOptions {
  /** Further tries after a network error or a transient answer (408, 429, 5xx). @defaultValue 3 */
  retries?: number;
  /** Wait before the first retry, doubled at each one (with jitter). @defaultValue 250 */
  retryDelayMs?: number;
  /** Gives up on one try when no byte has come for this long. @defaultValue 60000 */
  stallTimeoutMs?: number;
  /** How long `503 unavailable` answers (a datastore outage) are retried on top of `retries`. @defaultValue 60000 */
  outageMs?: number;
  /** Where each lease gets its own temporary folder. @defaultValue os.tmpdir() */
  tmpDir?: string;
  /** For tests or custom agents. @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
}

/**
 * An input file that could not be had. `code` and `retryable` are what the lease's `fail`
 * reports when the handler lets it through: `bad_input` (not retryable: the lease names no such
 * file, or the bytes are not the ones the lease describes), `input_unavailable` (not retryable:
 * the gateway refused, 401/403/404...), `input_fetch_failed` (retryable: the network or the
 * gateway failed for every try).
 */
export class InputFileError extends Error {
  override readonly name = 'InputFileError';
  constructor(
    message: string,
    readonly code: 'bad_input' | 'input_unavailable' | 'input_fetch_failed',
    readonly retryable: boolean,
    /** The HTTP status (0 when none arrived or it does not apply). */
    readonly status = 0,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** File name extensions by content type, so programs that go by the name (ffmpeg, Blender) see the right one. */
const EXTENSIONS: Record<string, string> = {
  'image/png': '.png',
  'image/jpeg': '.jpg',
  'image/webp': '.webp',
  'image/gif': '.gif',
  'model/gltf-binary': '.glb',
  'model/gltf+json': '.gltf',
  'model/obj': '.obj',
  'audio/wav': '.wav',
  'audio/x-wav': '.wav',
  'audio/wave': '.wav',
  'audio/mpeg': '.mp3',
  'audio/ogg': '.ogg',
  'audio/flac': '.flac',
  'video/mp4': '.mp4',
  'video/webm': '.webm',
  'video/x-msvideo': '.avi',
};

function abortError(message: string): Error {
  return new DOMException(message, 'AbortError');
}

/**
 * The input files of one lease (its frame's `files`): each fetched on first demand, once, with
 * the lease's upload token, streamed to a file in a folder of its own under the temporary
 * directory while being hashed, and checked against the size and sha256 the lease gives.
 * `dispose()` stops fetches still running and deletes the folder when the lease ends.
 */
export class LeaseInputFiles {
  private readonly fetched = new Map<string, Promise<InputFile>>();
  /**
   * Made at the first fetch: most leases fetch no file, and two signals and an AbortError per
   * lease were ~2.4% of an LLM worker's CPU (docs/benchmarks.md, "stream").
   */
  private ended?: AbortController;
  private combined?: AbortSignal;
  private disposed = false;
  private dir?: Promise<string>;
  private count = 0;

  constructor(
    private readonly files: Readonly<Record<string, LeaseInputFile>>,
    private readonly token: string,
    private readonly leaseSignal: AbortSignal,
    private readonly opts: InputFileOptions = {},
  ) {}

  /** Aborted when the lease is, or when it ended (`dispose`). */
  private get signal(): AbortSignal {
    if (!this.combined) {
      this.ended = new AbortController();
      this.combined = AbortSignal.any([this.leaseSignal, this.ended.signal]);
      // A handler asking for a file after its lease ended gets nothing.
      if (this.disposed) this.ended.abort(abortError('the lease ended'));
    }
    return this.combined;
  }

  /** The file of input field `field`; a second call, even a concurrent one, gets the same fetch. */
  get(field: string): Promise<InputFile> {
    let file = this.fetched.get(field);
    if (!file) {
      file = this.fetch(field);
      // Rejections reach whoever awaits; a handler that never does must not crash the worker.
      file.catch(() => {});
      this.fetched.set(field, file);
    }
    return file;
  }

  /** Stops the fetches still running and deletes the lease's files. Never rejects. */
  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.ended && !this.ended.signal.aborted) this.ended.abort(abortError('the lease ended'));
    await Promise.allSettled(this.fetched.values());
    const dir = await this.dir?.catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => {});
  }

  private async fetch(field: string): Promise<InputFile> {
    this.signal.throwIfAborted();
    const file = Object.hasOwn(this.files, field) ? this.files[field] : undefined;
    if (!file) {
      const held = Object.keys(this.files);
      throw new InputFileError(`the lease has no file for input field ${JSON.stringify(field)}${held.length ? ` (it has ${held.join(', ')})` : ''}`, 'bad_input', false);
    }
    this.dir ??= mkdtemp(path.join(this.opts.tmpDir ?? os.tmpdir(), 'switchyard-input-'));
    const dir = await this.dir;
    this.signal.throwIfAborted();
    const name = `${this.count++}-${field.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64)}${EXTENSIONS[file.content_type.split(';')[0].trim().toLowerCase()] ?? ''}`;
    const target = path.join(dir, name);
    const { retries = 3, retryDelayMs = 250, outageMs = 60_000 } = this.opts;
    return withRetries({ retries, baseDelayMs: retryDelayMs, outageMs, signal: this.signal }, () => this.tryOnce(field, file, target));
  }

  /** One GET of the file into `target` (truncated first), hashed on the way. */
  private async tryOnce(field: string, file: LeaseInputFile, target: string): Promise<TryResult<InputFile>> {
    const stallMs = this.opts.stallTimeoutMs ?? 60_000;
    const stalled = new AbortController();
    const timer = setTimeout(() => stalled.abort(abortError(`no byte for ${stallMs} ms`)), stallMs);
    const signal = AbortSignal.any([this.signal, stalled.signal]);
    const failed = (error: InputFileError, waitMs: number | null = null, outage = false): TryResult<InputFile> => ({ ok: false, error, retryable: error.retryable, outage, waitMs });
    try {
      const res = await (this.opts.fetch ?? globalThis.fetch)(file.url, { headers: { authorization: `Bearer ${this.token}` }, signal });
      if (!res.ok) {
        const { code, message } = await readError(res);
        const transient = TRANSIENT_STATUS.has(res.status);
        const error = new InputFileError(`fetching input file ${field} failed (${res.status} ${code}): ${message}`, transient ? 'input_fetch_failed' : 'input_unavailable', transient, res.status);
        return failed(error, retryAfterMs(res.headers.get('retry-after'), 10_000), res.status === 503 && code === 'unavailable');
      }
      const hash = createHash('sha256');
      let size = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > file.size) return done(new InputFileError(`input file ${field} is larger than the ${file.size} bytes its lease gives`, 'bad_input', false));
          hash.update(chunk);
          timer.refresh();
          done(null, chunk);
        },
      });
      const body = res.body ? Readable.fromWeb(res.body as unknown as NodeReadableStream<Uint8Array>) : Readable.from([]);
      await pipeline(body, meter, createWriteStream(target, { mode: 0o600 }), { signal });
      const sha256 = hash.digest('hex');
      if (size !== file.size) return failed(new InputFileError(`input file ${field} has ${size} bytes, not the ${file.size} its lease gives`, 'bad_input', false));
      if (sha256 !== file.sha256.toLowerCase()) return failed(new InputFileError(`input file ${field} has sha256 ${sha256}, not the ${file.sha256} its lease gives`, 'bad_input', false));
      return { ok: true, value: { path: target, size, contentType: file.content_type, sha256 } };
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      if (err instanceof InputFileError) return failed(err);
      const message = stalled.signal.aborted ? `stalled: no byte for ${stallMs} ms` : (err as Error).message;
      return failed(new InputFileError(`fetching input file ${field} failed: ${message}`, 'input_fetch_failed', true, 0, { cause: err }));
    } finally {
      clearTimeout(timer);
    }
  }
}
