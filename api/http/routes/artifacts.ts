import { ARTIFACT_ID_PATTERN, artifactContentType, checkArtifactName, type ArtifactMeta } from '../../../models/artifact-store.js';
import { NotFoundError, ApiError, UnauthorizedError } from '../../../models/errors.js';
import { artifactUrl } from '../../../sdk/protocol/index.js';
import { bearerToken } from '../../services/auth/bearer.js';
import { RANGE_NOT_SATISFIABLE, requestBody, sendStored } from '../stored-download.js';
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
        const token = bearerToken(ctx.get('Authorization'));
        const lease = token ? await s.leases.verifyUpload(ctx.params.lease_id, token) : null;
        if (!lease) throw new UnauthorizedError("a live lease's upload_token is required (Authorization: Bearer <upload_token>)");
        const run = await s.stores.runs.get(lease.run_id);
        const ref = run && Object.hasOwn(run.input_files, ctx.params.field) ? run.input_files[ctx.params.field] : undefined;
        const meta = ref ? await s.artifacts.get(ref.artifact_id) : null;
        if (!meta) throw new NotFoundError(`input file ${ctx.params.field} of this lease`);
        await sendStored(ctx, s.artifacts, meta, 'private');
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
        416: RANGE_NOT_SATISFIABLE,
      },
      async handler(ctx) {
        const { artifacts } = s;
        const id = ctx.params.artifact_id;
        const meta = ARTIFACT_ID_PATTERN.test(id) ? await artifacts.get(id) : null;
        if (!meta || meta.name !== ctx.params.name) throw new NotFoundError('artifact');

        await sendStored(ctx, artifacts, meta, 'public');
      },
    },
  ];
}
