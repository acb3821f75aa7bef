import type { Readable } from 'node:stream';
import { ARTIFACT_ID_PATTERN, artifactContentType, checkArtifactName, type ArtifactMeta, type ArtifactStore, type ByteRange, type PresignedResponse } from '../../../models/artifact-store.js';
import { ApiError, NotFoundError, UnauthorizedError } from '../../../models/errors.js';
import type { RunStore } from '../../../models/stores.js';
import { artifactUrl } from '../../../sdk/protocol/index.js';

/** What an upload needs of a lease: whose run the bytes belong to. */
export interface UploadLease {
  lease_id: string;
  run_id: string;
  account_id: string;
}

/**
 * The live leases, as every instance sees them (an upload may reach another instance than the
 * worker's socket). Declared here rather than naming dispatch's store: this service needs one
 * question answered, and dispatch may reshape how it keeps leases.
 */
export interface UploadTokens {
  /** The live lease whose upload token this is, or null (compared in constant time). */
  verifyUpload(leaseId: string, token: string): Promise<UploadLease | null>;
}

export interface ArtifactServiceOptions {
  /** Where the bytes go: the one storage of artifacts and account files. */
  store: ArtifactStore;
  leases: UploadTokens;
  /** Where a lease's input files are named (`input_files` of its run). */
  runs: Pick<RunStore, 'get'>;
  /** ARTIFACT_MAX_BYTES: larger uploads get 413 and nothing is kept. */
  maxBytes: number;
  retentionSeconds: number;
  publicUrl: () => string;
  /** S3_PRESIGNED_REDIRECT: artifact downloads are redirected to the storage rather than streamed (when the store can). */
  redirectDownloads?: boolean;
}

/** How long a presigned download URL lives: long enough for a slow download to start, short enough that a leaked one soon dies. */
const PRESIGNED_TTL_S = 3600;

/** What the worker says of an upload, as its request carried it. */
export interface ArtifactUpload {
  /** The file name: the last segment of the artifact's URL (`?name=`; two of them are refused). */
  name: unknown;
  contentType?: string;
  /** Content-Encoding: only identity, since the bytes are stored and served as sent. */
  contentEncoding?: string;
  /** Content-Length, when the body has one: refused at once when it is over the limit. */
  length?: number;
}

const NO_UPLOAD_TOKEN = "a live lease's upload_token is required (Authorization: Bearer <upload_token>)";

/**
 * Run artifacts (docs/worker-protocol.md, "Artifacts"): workers upload a run's outputs with
 * their lease's upload token and fetch its input files with it; anyone holding an artifact's
 * (unguessable) URL downloads it. An upload is stored under its lease, which is how settlement
 * finds the run's files without reading them back.
 */
export class ArtifactService {
  constructor(private readonly opts: ArtifactServiceOptions) {}

  /**
   * Stores a run's artifact. Checked in this order, each before a byte is read: the upload
   * token (401), the name (400), the encoding (415), a declared length over the limit (413).
   */
  async upload(leaseId: string, token: string | null, body: AsyncIterable<Uint8Array>, upload: ArtifactUpload): Promise<ArtifactMeta> {
    const lease = await this.lease(leaseId, token);
    const problem = checkArtifactName(upload.name);
    if (problem) throw new ApiError('invalid_request', problem);
    const name = upload.name as string;
    const encoding = (upload.contentEncoding ?? '').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') throw new ApiError('unsupported_media_type', 'send the artifact without a Content-Encoding');
    const max = this.opts.maxBytes;
    if (upload.length !== undefined && upload.length > max) {
      throw new ApiError('payload_too_large', `an artifact may be at most ${max} bytes`, { details: { max_bytes: max } });
    }
    return this.opts.store.put(body, {
      name,
      contentType: artifactContentType(upload.contentType || undefined, name),
      runId: lease.run_id,
      leaseId: lease.lease_id,
      accountId: lease.account_id,
      maxBytes: max,
      retentionSeconds: this.opts.retentionSeconds,
    });
  }

  /** The absolute URL a plain GET fetches the artifact from. */
  url(meta: ArtifactMeta): string {
    return artifactUrl(this.opts.publicUrl(), meta);
  }

  /** A file of the lease's input, for its worker only: 401 without the lease's token, 404 when the input has no such file or it is gone. */
  async inputFile(leaseId: string, token: string | null, field: string): Promise<ArtifactMeta> {
    const lease = await this.lease(leaseId, token);
    const run = await this.opts.runs.get(lease.run_id);
    const ref = run && Object.hasOwn(run.input_files, field) ? run.input_files[field] : undefined;
    const meta = ref ? await this.opts.store.get(ref.artifact_id) : null;
    if (!meta) throw new NotFoundError(`input file ${field} of this lease`);
    return meta;
  }

  /** A live artifact by its URL's id and name; 404 when either is wrong or it is past its retention. */
  async published(id: string, name: string): Promise<ArtifactMeta> {
    const meta = ARTIFACT_ID_PATTERN.test(id) ? await this.opts.store.get(id) : null;
    if (!meta || meta.name !== name) throw new NotFoundError('artifact');
    return meta;
  }

  /**
   * Where the storage serves this artifact itself, for a redirect (S3_PRESIGNED_REDIRECT), or
   * null to stream it through the gateway. The URL never outlives the artifact's retention.
   */
  async redirect(meta: ArtifactMeta, response: PresignedResponse): Promise<string | null> {
    const store = this.opts.store;
    if (!this.opts.redirectDownloads || !store.presignedGet) return null;
    const left = Math.floor((Date.parse(meta.expires_at) - Date.now()) / 1000);
    return store.presignedGet(meta.id, response, Math.max(1, Math.min(PRESIGNED_TTL_S, left)));
  }

  /** The stored bytes (a range of them); `not_found` once they are gone. */
  open(meta: ArtifactMeta, range?: ByteRange): Promise<Readable> {
    return this.opts.store.open(meta.id, range);
  }

  private async lease(leaseId: string, token: string | null): Promise<UploadLease> {
    const lease = token ? await this.opts.leases.verifyUpload(leaseId, token) : null;
    if (!lease) throw new UnauthorizedError(NO_UPLOAD_TOKEN);
    return lease;
  }
}
