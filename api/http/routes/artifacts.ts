import type { ArtifactMeta } from '../../../models/artifact-store.js';
import { ApiError } from '../../../models/errors.js';
import type { ArtifactService } from '../../services/artifacts/artifact-service.js';
import { bearerToken } from '../../services/auth/bearer.js';
import { RANGE_NOT_SATISFIABLE, requestBody, sendStored } from '../stored-download.js';
import type { RouteSpec } from '../route-spec.js';

/**
 * Artifacts: workers upload run outputs with their lease's upload token; anyone holding the
 * (unguessable) URL downloads them, with ETag, Range and long-lived caching. See
 * docs/worker-protocol.md, "Artifacts". These routes read the request and render the answer;
 * `ArtifactService` checks the tokens, names and limits and stores the bytes.
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

const downloadHeaders = {
  'Content-Type': 'The media type given at upload (or derived from the file extension)',
  'Content-Length': 'Bytes in this answer',
  ETag: 'The sha256 of the whole artifact, in hex, quoted',
  'Accept-Ranges': 'bytes',
  'Cache-Control': 'public, max-age=31536000, immutable',
};

export interface ArtifactRoutesOptions {
  artifacts: ArtifactService;
}

export function artifactRoutes({ artifacts }: ArtifactRoutesOptions): RouteSpec[] {
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
        let meta: ArtifactMeta;
        try {
          meta = await artifacts.upload(ctx.params.lease_id, bearerToken(ctx.get('Authorization')), requestBody(ctx.req), {
            name: ctx.query.name,
            contentType: ctx.get('Content-Type'),
            contentEncoding: ctx.get('Content-Encoding'),
            length: ctx.request.length,
          });
        } catch (err) {
          if (!(err instanceof ApiError) && (ctx.req.destroyed || ctx.req.readableAborted)) {
            throw new ApiError('invalid_request', 'the upload was interrupted', { cause: err });
          }
          throw err;
        }
        ctx.status = 201;
        ctx.body = { url: artifacts.url(meta), sha256: meta.sha256, size: meta.size, content_type: meta.content_type, expires_at: meta.expires_at };
      },
    },
    {
      method: 'get',
      path: '/v1/leases/{lease_id}/files/{field}',
      operationId: 'getLeaseInputFile',
      summary: "A worker fetches a file of its lease's input (GET or HEAD, the lease's upload token; Range)",
      tag: 'artifacts',
      auth: 'none',
      headers: [{ name: 'Authorization', description: "Bearer <the lease's upload_token>", schema: { type: 'string' } }],
      responses: {
        200: { description: 'The bytes; their sha256 is the one the lease frame gave', mediaType: '*/*' },
        206: { description: 'The requested byte range', mediaType: '*/*' },
        401: { description: 'Unknown or ended lease, or another lease\'s token', headers: { 'WWW-Authenticate': 'Bearer' } },
        404: { description: 'The lease\'s input has no file in that field, or it is gone' },
        416: RANGE_NOT_SATISFIABLE,
      },
      async handler(ctx) {
        const meta = await artifacts.inputFile(ctx.params.lease_id, bearerToken(ctx.get('Authorization')), ctx.params.field);
        await sendStored(ctx, meta, 'private', (range) => artifacts.open(meta, range));
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
        307: { description: 'With STORAGE=s3 and S3_PRESIGNED_REDIRECT=true, a GET: the bytes are at Location, a presigned URL of the bucket valid up to an hour (Range works there too)', mediaType: 'none', headers: { Location: 'the presigned URL', ETag: downloadHeaders.ETag } },
        404: { description: 'Unknown, or past its retention' },
        416: RANGE_NOT_SATISFIABLE,
      },
      async handler(ctx) {
        const meta = await artifacts.published(ctx.params.artifact_id, ctx.params.name);
        await sendStored(ctx, meta, 'public', (range) => artifacts.open(meta, range), (response) => artifacts.redirect(meta, response));
      },
    },
  ];
}
