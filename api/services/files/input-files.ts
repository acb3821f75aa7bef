import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../../../models/artifact-store.js';
import { ApiError, NotFoundError } from '../../../models/errors.js';
import { FILE_ID_PATTERN } from '../../../models/ids.js';
import { fileFields, type KindSpec } from '../../../models/kinds.js';
import type { FileRecord } from '../../../models/stores.js';
import type { InputFileRef } from '../../../models/types.js';
import { parseArtifactUrl } from '../../../sdk/protocol/index.js';
import { OutboundError, type OutboundStream, type SsrfGuard } from '../outbound/ssrf-guard.js';
import { mediaEssence as essence, type FileService } from './file-service.js';

export interface InputFilesOptions {
  files: FileService;
  artifacts: ArtifactStore;
  outbound: Pick<SsrfGuard, 'stream'>;
  publicUrl: () => string;
  /** Largest decoded `data:` URI. */
  dataUriMaxBytes: number;
  /** Largest file fetched from an https URL (FILE_MAX_BYTES). */
  fetchMaxBytes: number;
  /** The whole fetch of an https URL, to its last byte (FILE_FETCH_TIMEOUT_MS). */
  fetchTimeoutMs: number;
  /** Where a staged file that could not be deleted is reported. */
  log: Pick<Logger, 'warn'>;
}

/** A job input with its file fields staged: what the run stores, and what its workers fetch. */
export interface StagedInput {
  /** The input, each file field holding the gateway's reference instead of what the caller sent. */
  input: Record<string, unknown>;
  files: Record<string, InputFileRef>;
  /**
   * The files this staging made (from https URLs and data: URIs), by id: the ones to delete when
   * the submission makes no run. Files the caller referenced are never among them.
   */
  created: string[];
}

interface Resolved {
  ref: InputFileRef;
  reference: string;
  /** True when the file was made for this input (and is this input's to delete). */
  created: boolean;
}

const FORMS = 'a file id (file_...) or URL from /v1/files, an artifact URL of one of your runs, an https URL, or a data: URI';

/**
 * Stages the files of a job input before the job is queued (docs/files.md): a file of the
 * account is used as it is, an artifact of one of its runs too (jobs chain), an https URL is
 * fetched through the SSRF guard and a data: URI decoded, both into a new file of the account.
 * Each must be a type its field accepts. Workers then fetch every file from the gateway.
 */
export class InputFiles {
  constructor(private readonly opts: InputFilesOptions) {}

  /**
   * Stages every file field of `input`; when one fails, the files made for the others are deleted
   * before the error is thrown. `signal` (the caller hung up) cuts an https fetch, which then
   * fails as any other fetch does.
   */
  async stage(accountId: string, spec: KindSpec, input: Record<string, unknown>, signal?: AbortSignal): Promise<StagedInput> {
    const fields = fileFields(spec);
    const out = { ...input };
    const files: Record<string, InputFileRef> = {};
    const created: string[] = [];
    try {
      for (const [field, { accept }] of Object.entries(fields)) {
        const value = input[field];
        if (value === undefined) continue;
        const where = `/input/${field}`;
        const { ref, reference, created: made } = await this.resolve(accountId, String(value), where, signal).catch((err: unknown) => {
          if (err instanceof ApiError) throw new ApiError(err.code, err.message.startsWith(where) ? err.message : `${where}: ${err.message}`, { details: { ...err.details, path: `/input/${field}` }, cause: err });
          throw err;
        });
        if (made) created.push(reference);
        if (!accept.includes(essence(ref.content_type))) {
          throw new ApiError('invalid_request', `${where} takes ${accept.join(', ')}; the file given is ${ref.content_type}`, {
            details: { path: `/input/${field}`, accept, content_type: ref.content_type },
          });
        }
        files[field] = ref;
        out[field] = reference;
      }
    } catch (err) {
      await this.discard(accountId, { created });
      throw err;
    }
    return { input: out, files, created };
  }

  /**
   * Deletes the files `staged` made, for a submission that made no run. Best effort: a file that
   * cannot be deleted now is logged and left to expire with its retention, and the caller's
   * answer (the refusal) stands.
   */
  async discard(accountId: string, staged: Pick<StagedInput, 'created'>): Promise<void> {
    for (const id of staged.created) {
      await this.opts.files.delete(accountId, id).catch((err: unknown) => {
        if (err instanceof NotFoundError) return; // already gone: nothing left behind
        this.opts.log.warn({ err, accountId, fileId: id }, 'could not delete a file staged for a submission that made no run; it stays until its retention ends');
      });
    }
  }

  private async resolve(accountId: string, value: string, where: string, signal?: AbortSignal): Promise<Resolved> {
    const base = this.opts.publicUrl();
    const fileId = FILE_ID_PATTERN.test(value) ? value : value.startsWith(`${base}/v1/files/`) ? value.slice(`${base}/v1/files/`.length) : null;
    if (fileId !== null) {
      // Only "no such file" is the caller's mistake; a datastore outage stays a 503.
      const file = await this.opts.files.get(accountId, fileId).catch((err: unknown) => {
        if (!(err instanceof NotFoundError)) throw err;
        throw new ApiError('invalid_request', `${where}: no file ${fileId} of this account (unknown, deleted or expired)`);
      });
      return { ref: refOf(file), reference: file.id, created: false };
    }
    const artifact = parseArtifactUrl(base, value);
    if (artifact) {
      const meta = await this.opts.artifacts.get(artifact.id);
      if (!meta || meta.name !== artifact.name || meta.account_id !== accountId) {
        throw new ApiError('invalid_request', `${where}: the artifact is not one of this account's runs' (or it has expired)`);
      }
      return { ref: { artifact_id: meta.id, size: meta.size, content_type: meta.content_type, sha256: meta.sha256 }, reference: value, created: false };
    }
    let file: FileRecord;
    if (/^data:/i.test(value)) {
      const got = decodeDataUri(value, this.opts.dataUriMaxBytes, where);
      file = await this.opts.files.upload(accountId, Readable.from([got.bytes]), { contentType: got.contentType, length: got.bytes.length });
    } else if (/^https:\/\/[^\s/?#@]+(?:[/?#]\S*)?$/i.test(value) && URL.canParse(value)) {
      file = await this.fetch(accountId, value, where, signal);
    } else {
      throw new ApiError('invalid_request', `${where} must be ${FORMS}`);
    }
    return { ref: refOf(file), reference: file.id, created: true };
  }

  /**
   * One GET through the SSRF guard (no redirect followed, its checks and timeouts), its body
   * streamed into a new file of the account: never held whole, at most FILE_MAX_BYTES, within
   * the account's quota. A failure at any point keeps nothing (the file store deletes a partial
   * upload); `signal` aborting is one, before the answer or during its body.
   */
  private async fetch(accountId: string, url: string, where: string, signal?: AbortSignal): Promise<FileRecord> {
    const max = this.opts.fetchMaxBytes;
    let res: OutboundStream;
    try {
      res = await this.opts.outbound.stream(url, { maxResponseBytes: max, totalTimeoutMs: this.opts.fetchTimeoutMs, signal });
    } catch (err) {
      throw fetchFailed(err, where, max);
    }
    try {
      if (res.status >= 300 && res.status < 400) throw new ApiError('invalid_request', `${where}: the URL answered a redirect (${res.status}); redirects are not followed: give the final URL`);
      if (res.status !== 200) throw new ApiError('invalid_request', `${where}: the URL answered ${res.status}, not 200`);
      const last = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
      const filename = /^[\p{L}\p{N}._-]{1,200}$/u.test(last) && !last.startsWith('.') ? last : undefined;
      const contentType = typeof res.headers['content-type'] === 'string' ? res.headers['content-type'] : undefined;
      // A declared length lets an oversize file or a full quota be refused before a byte is read.
      const declared = Number(res.headers['content-length']);
      const length = res.headers['content-length'] !== undefined && Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined;
      return await this.opts.files.upload(accountId, res.body, { contentType, filename, length });
    } catch (err) {
      throw fetchFailed(err, where, max);
    } finally {
      // A no-op once the body was read to its end; else it closes the connection instead of leaving it to its timers.
      res.body.destroy();
    }
  }
}

const refOf = (file: FileRecord): InputFileRef => ({ artifact_id: file.artifact_id, size: file.size, content_type: file.content_type, sha256: file.sha256 });

/** What the caller is told of a fetch the guard failed (before or during the body); other errors pass as they are. */
function fetchFailed(err: unknown, where: string, maxBytes: number): unknown {
  if (!(err instanceof OutboundError)) return err;
  const message = `${where}: the file could not be fetched (${err.code}): ${err.message}`;
  // The same answer as an upload past FILE_MAX_BYTES.
  if (err.code === 'response_too_large') return new ApiError('payload_too_large', message, { details: { reason: err.code, max_bytes: maxBytes } });
  const code = err.code === 'url_blocked' || err.code === 'invalid_url' ? err.code : 'invalid_request';
  return new ApiError(code, message, { details: { reason: err.code } });
}

/** RFC 2397: `data:[<type>][;base64],<data>`. */
function decodeDataUri(uri: string, maxBytes: number, where: string): { bytes: Buffer; contentType?: string } {
  const comma = uri.indexOf(',');
  if (comma < 0) throw new ApiError('invalid_request', `${where}: a data: URI needs a comma before its data`);
  const meta = uri.slice(5, comma).split(';');
  const base64 = meta[meta.length - 1].toLowerCase() === 'base64';
  const type = meta[0] || undefined;
  const data = uri.slice(comma + 1);
  // Checked before decoding, so an oversize URI costs no memory beyond the request.
  const estimate = base64 ? Math.floor((data.length * 3) / 4) : data.length;
  if (estimate > maxBytes + 2) throw new ApiError('payload_too_large', `${where}: a data: URI may carry at most ${maxBytes} bytes; upload larger files with POST /v1/files`, { details: { max_bytes: maxBytes } });
  let bytes: Buffer;
  if (base64) {
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(data)) throw new ApiError('invalid_request', `${where}: the data: URI is not valid base64`);
    bytes = Buffer.from(data, 'base64');
  } else {
    if (/%(?![0-9a-f]{2})/i.test(data)) throw new ApiError('invalid_request', `${where}: the data: URI is not valid percent-encoding`);
    // Byte by byte: a percent-encoded file is bytes, not UTF-8 text.
    bytes = Buffer.from(data.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1');
  }
  if (bytes.length > maxBytes) throw new ApiError('payload_too_large', `${where}: a data: URI may carry at most ${maxBytes} bytes`, { details: { max_bytes: maxBytes } });
  if (bytes.length === 0) throw new ApiError('invalid_request', `${where}: the data: URI is empty`);
  return { bytes, contentType: type };
}
