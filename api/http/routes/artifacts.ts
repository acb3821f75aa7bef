import type { IncomingMessage } from 'node:http';
import { ARTIFACT_ID_PATTERN, artifactContentType, checkArtifactName, type ArtifactMeta, type ByteRange } from '../../../models/artifact-store.js';
import { NotFoundError, ApiError, UnauthorizedError } from '../../../models/errors.js';
import { artifactUrl } from '../../../sdk/protocol/index.js';
import { bearerToken } from '../../services/auth/bearer.js';
import type { RouteSpec } from '../route-spec.js';
import type { Services } from '../services.js';

/**
 * Artifacts: workers upload run outputs with their lease's upload token; anyone holding the
 * (unguessable) URL downloads them, with ETag, Range and long-lived caching. See
 * docs/worker-protocol.md, "Artifacts".
 */

export const artifactUploaded = {
  type: 'object',
  required: ['url', 'sha256', 'size', 'content_type'],
  properties: {
    url: { type: 'string', format: 'uri', description: 'Absolute URL that a plain GET fetches; put it in output.urls' },
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    size: { type: 'integer', minimum: 0 },
    content_type: { type: 'string' },
    expires_at: { type: 'string', format: 'date-time' },
  },
} as const;

const uploadQuery = {
  type: 'object',
  properties: {
    name: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'Required. The file name, last segment of the artifact URL: letters, digits, spaces and . _ - + = @ , ( ) ~; no slash, no "..", not starting with a dot.',
    },
  },
} as const;

/** 416, with the envelope of `invalid_request` and the `Content-Range` RFC 9110 asks for. */
export class RangeNotSatisfiableError extends ApiError {
  override readonly status = 416;
  constructor(size: number) {
    super('invalid_request', `the requested range is not satisfiable; the artifact has ${size} bytes`, {
      details: { size },
      headers: { 'Content-Range': `bytes */${size}` },
    });
  }
}

/**
 * The single range a `Range` header asks for; null to serve the whole body (no header, not
 * bytes, malformed, or several ranges), 'unsatisfiable' for a range wholly past the end.
 */
export function parseRange(header: string, size: number): ByteRange | null | 'unsatisfiable' {
  const m = /^bytes=(.*)$/i.exec(header.trim());
  if (!m) return null;
  const specs = m[1].split(',').map((s) => s.trim());
  if (specs.length !== 1) return null;
  const r = /^(\d{0,20})-(\d{0,20})$/.exec(specs[0]);
  if (!r || (r[1] === '' && r[2] === '')) return null;
  if (r[1] === '') {
    const suffix = Number(r[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(r[1]);
  if (r[2] !== '' && Number(r[2]) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end: r[2] === '' ? size - 1 : Math.min(Number(r[2]), size - 1) };
}

function etagMatches(header: string, etag: string): boolean {
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}

/** RFC 5987 / 6266 `filename*` value, and a plain-ASCII fallback for old clients. */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `inline; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/**
 * The request body as it arrives. The store may stop reading early (too large): the request is
 * then left unread rather than destroyed, so that the 413 still reaches the worker. A body
 * cut short never reads as a complete one.
 */
async function* requestBody(req: IncomingMessage): AsyncGenerator<Uint8Array> {
  for await (const chunk of req.iterator({ destroyOnReturn: false })) yield chunk as Uint8Array;
  if (!req.complete) throw new ApiError('invalid_request', 'the upload was interrupted');
}

const downloadHeaders = {
  'Content-Type': 'The media type given at upload (or derived from the file extension)',
  'Content-Length': 'Bytes in this answer',
  ETag: 'The sha256 of the whole artifact, in hex, quoted',
  'Accept-Ranges': 'bytes',
  'Cache-Control': 'public, max-age=31536000, immutable',
};

export function artifactRoutes(s: Services): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/leases/{lease_id}/artifacts',
      operationId: 'uploadArtifact',
      summary: "Upload a run's artifact (worker side; the body is the file, any content type)",
      tag: 'workers',
      auth: 'none',
      raw: true,
      security: [{ uploadToken: [] }],
      query: uploadQuery,
      headers: [
        {
          name: 'Content-Type',
          description: "The artifact's media type; when missing, generic (application/octet-stream, form types) or active (HTML, SVG, XML, scripts), the file extension decides.",
          schema: { type: 'string' },
        },
      ],
      responses: {
        201: { description: 'Stored; `url` serves it until `expires_at`', schema: artifactUploaded },
        400: { description: 'Missing or unsafe file name' },
        401: { description: 'Unknown or expired lease, or wrong upload token', headers: { 'WWW-Authenticate': 'Bearer' } },
        413: { description: 'Larger than ARTIFACT_MAX_BYTES; nothing is stored' },
        415: { description: 'A Content-Encoding other than identity' },
      },
      async handler(ctx) {
        const { artifacts, leases } = s;
        const token = bearerToken(ctx.get('Authorization'));
        const lease = token ? await leases.verifyUpload(ctx.params.lease_id, token) : null;
        if (!lease) throw new UnauthorizedError("a live lease's upload_token is required (Authorization: Bearer <upload_token>)");

        const name = ctx.query.name;
        const problem = checkArtifactName(name);
        if (problem) throw new ApiError('invalid_request', problem);
        const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
        if (encoding !== '' && encoding !== 'identity') {
          throw new ApiError('unsupported_media_type', 'send the artifact without a Content-Encoding');
        }
        const max = s.config.artifactMaxBytes;
        const declared = ctx.request.length;
        if (declared !== undefined && declared > max) {
          throw new ApiError('payload_too_large', `an artifact may be at most ${max} bytes`, { details: { max_bytes: max } });
        }

        let meta: ArtifactMeta;
        try {
          meta = await artifacts.put(requestBody(ctx.req), {
            name: name as string,
            contentType: artifactContentType(ctx.get('Content-Type') || undefined, name as string),
            runId: lease.run_id,
            leaseId: lease.lease_id,
            accountId: lease.account_id,
            maxBytes: max,
            retentionSeconds: s.config.artifactRetentionSeconds,
          });
        } catch (err) {
          if (!(err instanceof ApiError) && (ctx.req.destroyed || ctx.req.readableAborted)) {
            throw new ApiError('invalid_request', 'the upload was interrupted', { cause: err });
          }
          throw err;
        }
        ctx.status = 201;
        ctx.body = {
          url: artifactUrl(s.publicUrl(), meta),
          sha256: meta.sha256,
          size: meta.size,
          content_type: meta.content_type,
          expires_at: meta.expires_at,
        };
      },
    },
    {
      method: 'get',
      path: '/v1/artifacts/{artifact_id}/{name}',
      operationId: 'getArtifact',
      summary: 'Download an artifact (GET or HEAD, no credential; Range, If-None-Match, If-Range)',
      tag: 'artifacts',
      auth: 'none',
      headers: [
        { name: 'Range', description: 'One range: `bytes=a-b`, `bytes=a-` or `bytes=-n`; several ranges get the whole body (200)', schema: { type: 'string' } },
        { name: 'If-None-Match', description: 'The ETag you hold: 304 when it matches', schema: { type: 'string' } },
        { name: 'If-Range', description: 'Honour Range only while the ETag is still this one', schema: { type: 'string' } },
      ],
      responses: {
        200: { description: 'The artifact', mediaType: '*/*', headers: downloadHeaders },
        206: { description: 'The requested byte range', mediaType: '*/*', headers: { ...downloadHeaders, 'Content-Range': 'bytes start-end/size' } },
        304: { description: 'Not modified (If-None-Match / If-Modified-Since)', mediaType: 'none', headers: { ETag: downloadHeaders.ETag } },
        404: { description: 'Unknown, or past its retention' },
        416: { description: 'Range not satisfiable (error code invalid_request)', headers: { 'Content-Range': 'bytes */size' } },
      },
      async handler(ctx) {
        const { artifacts } = s;
        const id = ctx.params.artifact_id;
        const meta = ARTIFACT_ID_PATTERN.test(id) ? await artifacts.get(id) : null;
        if (!meta || meta.name !== ctx.params.name) throw new NotFoundError('artifact');

        const etag = `"${meta.sha256}"`;
        const lastModified = new Date(meta.created_at).toUTCString();
        const validators = () => {
          ctx.set('ETag', etag);
          ctx.set('Last-Modified', lastModified);
          ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
          ctx.set('Accept-Ranges', 'bytes');
          // Public by URL: any page may embed or fetch it (three.js loaders, <video>, canvas).
          ctx.set('Access-Control-Allow-Origin', '*');
          ctx.set('Access-Control-Expose-Headers', 'Content-Length, Content-Range, ETag, Accept-Ranges');
          ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
        };

        const inm = ctx.get('If-None-Match');
        const ims = Date.parse(ctx.get('If-Modified-Since'));
        const notModified = inm !== '' ? etagMatches(inm, etag) : Number.isFinite(ims) && ims >= Math.floor(Date.parse(meta.created_at) / 1000) * 1000;
        if (notModified) {
          validators();
          ctx.status = 304;
          return;
        }

        const ifRange = ctx.get('If-Range').trim();
        const rangeHeader = ifRange === '' || ifRange === etag || ifRange === lastModified ? ctx.get('Range') : '';
        const range = rangeHeader ? parseRange(rangeHeader, meta.size) : null;
        if (range === 'unsatisfiable') throw new RangeNotSatisfiableError(meta.size);

        validators();
        // Worker-supplied bytes from our origin: never sniffed, never scripted.
        ctx.set('Content-Security-Policy', 'sandbox');
        ctx.set('Content-Disposition', contentDisposition(meta.name));
        ctx.set('Content-Type', meta.content_type);
        if (range) {
          ctx.status = 206;
          ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${meta.size}`);
        }
        const length = range ? range.end - range.start + 1 : meta.size;
        ctx.body = ctx.method === 'HEAD' ? Buffer.alloc(0) : await artifacts.open(meta.id, range ?? undefined);
        ctx.set('Content-Length', String(length));
      },
    },
  ];
}
