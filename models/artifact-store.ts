import type { Readable } from 'node:stream';

/**
 * Stored files: the artifacts workers upload for a run (images, meshes, audio, video...),
 * served to anyone who has the URL, and the bytes of the files accounts upload (`/v1/files`),
 * served behind the account's key. A stored file is immutable: its id, name, bytes and
 * metadata never change, and it is deleted once its `expires_at` passes.
 */
export interface ArtifactMeta {
  /** Unguessable, 32 characters of lowercase base32 (160 random bits). */
  id: string;
  /** The file name the worker gave, validated by `checkArtifactName`; the last URL segment. */
  name: string;
  /** The run and lease that uploaded it; null for an account's own upload (`/v1/files`). */
  run_id: string | null;
  lease_id: string | null;
  account_id: string;
  size: number;
  /** Hex sha256 of the bytes; served as the strong ETag. */
  sha256: string;
  content_type: string;
  created_at: string;
  expires_at: string;
}

export interface PutArtifact {
  name: string;
  contentType: string;
  /** Unset for an account's own upload. */
  runId?: string;
  leaseId?: string;
  accountId: string;
  /** Bytes past this limit abort the upload with `payload_too_large`; nothing is kept. */
  maxBytes: number;
  retentionSeconds: number;
}

/** Inclusive byte range, as HTTP's `Range: bytes=start-end`. */
export interface ByteRange {
  start: number;
  end: number;
}

/** The response headers a presigned download answers with, as the gateway would have sent them. */
export interface PresignedResponse {
  contentType: string;
  contentDisposition: string;
  cacheControl: string;
}

export interface ArtifactStore {
  /** Creates whatever the store needs (directories); idempotent. */
  init(): Promise<void>;
  /**
   * Streams `body` into storage while hashing it, without ever holding it whole in memory.
   * The artifact becomes visible only once it is complete: a failed or oversize upload
   * (`ApiError('payload_too_large')`) leaves nothing behind.
   */
  put(body: AsyncIterable<Uint8Array>, opts: PutArtifact): Promise<ArtifactMeta>;
  /** The metadata of a live artifact, or null when the id is unknown, malformed, or expired, or its upload is still under way. */
  get(id: string): Promise<ArtifactMeta | null>;
  /** A stream of the artifact's bytes (a range of them); `not_found` when it is gone or not complete yet. */
  open(id: string, range?: ByteRange): Promise<Readable>;
  delete(id: string): Promise<void>;
  /**
   * The record of a run's artifact this instance uploaded and has not handed over yet, or null;
   * each is handed over once. Settlement describes `output.files` from it instead of reading
   * the record back (issue 17). Null for any other upload: the caller falls back to `get`.
   */
  takeUploaded?(id: string): ArtifactMeta | null;
  /**
   * A URL, valid `expiresInSeconds`, from which the storage itself serves the artifact's bytes
   * (Range included) with these headers: for a gateway that redirects downloads rather than
   * streaming them (S3_PRESIGNED_REDIRECT). Stores that cannot leave it out.
   */
  presignedGet?(id: string, response: PresignedResponse, expiresInSeconds: number): Promise<string>;
  /** Deletes every artifact that expired before `now` and any abandoned partial upload; returns how many artifacts went. */
  deleteExpired(now: Date): Promise<number>;
}

export const ARTIFACT_ID_PATTERN = /^[a-z2-7]{32}$/;

/** The record of a finished upload, as every store writes it: `opts` says whose it is, the rest what was stored and when. */
export function artifactRecord(id: string, opts: PutArtifact, stored: { size: number; sha256: string; createdMs: number; expiresMs: number }): ArtifactMeta {
  return {
    id,
    name: opts.name,
    run_id: opts.runId ?? null,
    lease_id: opts.leaseId ?? null,
    account_id: opts.accountId,
    size: stored.size,
    sha256: stored.sha256,
    content_type: opts.contentType,
    created_at: new Date(stored.createdMs).toISOString(),
    expires_at: new Date(stored.expiresMs).toISOString(),
  };
}

/**
 * Why a worker-chosen file name is refused, or null when it is safe: 1 to 200 characters,
 * letters (any script), digits, marks and `. _ - + = @ , ( ) ~` and inner spaces; no slash,
 * backslash, `..`, control or formatting character; not starting with a dot.
 */
export function checkArtifactName(name: unknown): string | null {
  if (typeof name !== 'string' || name.length === 0) return 'name (the file name) is required';
  const chars = [...name];
  if (chars.length > 200) return 'name must be at most 200 characters';
  if (name.includes('/') || name.includes('\\')) return 'name may not contain a slash';
  if (name.includes('..')) return 'name may not contain ".."';
  if (name.startsWith('.')) return 'name may not start with a dot';
  if (name !== name.trim()) return 'name may not start or end with a space';
  if (name.normalize('NFC') !== name) return 'name must be in Unicode NFC form';
  if (!/^[\p{L}\p{N}\p{M}._\-+=@,()~ ]+$/u.test(name)) {
    return 'name may only contain letters, digits, spaces and . _ - + = @ , ( ) ~';
  }
  return null;
}

const BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  glb: 'model/gltf-binary',
  gltf: 'model/gltf+json',
  obj: 'model/obj',
  usdz: 'model/vnd.usdz+zip',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  ogg: 'audio/ogg',
  flac: 'audio/flac',
  avi: 'video/x-msvideo',
  mp4: 'video/mp4',
  webm: 'video/webm',
  txt: 'text/plain; charset=utf-8',
  vtt: 'text/vtt; charset=utf-8',
  json: 'application/json',
  bin: 'application/octet-stream',
};

/** Types a browser would run as a page or script: never served from the gateway's origin. */
const ACTIVE = /^(text\/html|application\/xhtml\+xml|image\/svg\+xml|text\/xml|application\/xml|[a-z]+\/[a-z0-9.+-]*javascript|application\/ecmascript|text\/ecmascript|text\/xsl|application\/x-shockwave-flash|application\/pdf)$/;
/** Types that say nothing about the file (curl's default, form posts): the extension decides. */
const GENERIC = /^(application\/octet-stream|application\/x-www-form-urlencoded|multipart\/.*|application\/unknown|binary\/octet-stream)$/;
const TOKEN = "[a-z0-9][a-z0-9!#$&^_.+-]{0,126}";
const MEDIA_TYPE = new RegExp(`^(${TOKEN})/(${TOKEN})$`);

/**
 * The Content-Type an artifact is served with: the upload's own Content-Type when it is a
 * well-formed, specific and passive media type (only a `charset` parameter is kept, on text
 * types), else the type of the file extension, else `application/octet-stream`. Active
 * content (HTML, SVG, XML, scripts) is never served as such.
 */
export function artifactContentType(requestType: string | undefined, name: string): string {
  const fromName = (): string => {
    const dot = name.lastIndexOf('.');
    return (dot > 0 && BY_EXTENSION[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
  };
  if (!requestType) return fromName();
  const [essence, ...params] = requestType.split(';').map((p) => p.trim());
  const type = essence.toLowerCase();
  if (!MEDIA_TYPE.test(type) || GENERIC.test(type)) return fromName();
  if (ACTIVE.test(type)) return 'application/octet-stream';
  if (type.startsWith('text/')) {
    const charset = params.map((p) => /^charset="?([A-Za-z0-9_.:-]{1,40})"?$/i.exec(p)?.[1]).find(Boolean);
    return `${type}; charset=${(charset ?? 'utf-8').toLowerCase()}`;
  }
  return type;
}
