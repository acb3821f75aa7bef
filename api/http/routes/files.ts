import { ApiError } from '../../../models/errors.js';
import { FILE_ID_PATTERN } from '../../../models/ids.js';
import * as F from '../../contract/file-schemas.js';
import type { FileService } from '../../services/files/file-service.js';
import { listCursor } from '../cursor.js';
import { firstFilePart } from '../multipart-file.js';
import type { RouteSpec } from '../route-spec.js';
import { RANGE_NOT_SATISFIABLE, requestBody, sendStored } from '../stored-download.js';

/** Files an account uploads, to pass to jobs (docs/files.md). */

const cursor = listCursor(FILE_ID_PATTERN);

export interface FileRoutesOptions {
  files: FileService;
}

export function fileRoutes({ files }: FileRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/files',
      operationId: 'uploadFile',
      summary: 'Upload a file: the raw bytes (Content-Type of the file, ?filename=) or multipart/form-data with one file part',
      tag: 'files',
      auth: 'account',
      raw: true,
      query: F.uploadFileQuery,
      responses: {
        201: { description: 'Stored; pass `id` or `url` in a file field of a job input', schema: F.file },
        400: { description: 'Unsafe file name, malformed multipart body, or an interrupted upload' },
        409: { description: 'quota_exceeded: the account\'s files would pass FILE_QUOTA_BYTES' },
        413: { description: 'Larger than FILE_MAX_BYTES; nothing is stored' },
        415: { description: 'The bytes are another type than the one declared, or a Content-Encoding other than identity' },
      },
      async handler(ctx) {
        const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
        if (encoding !== '' && encoding !== 'identity') throw new ApiError('unsupported_media_type', 'send the file without a Content-Encoding');
        const accountId = ctx.state.principal!.accountId;
        const type = ctx.get('Content-Type');
        const filename = typeof ctx.query.filename === 'string' ? ctx.query.filename : undefined;
        let record;
        try {
          if (/^multipart\/form-data\b/i.test(type)) {
            const part = await firstFilePart(ctx.req, files.maxBytes);
            record = await files.upload(accountId, part.body, { filename: filename ?? part.filename, contentType: part.contentType });
            const stored = record;
            await part.rest.catch(async (err: unknown) => {
              await files.delete(accountId, stored.id);
              throw err;
            });
          } else {
            record = await files.upload(accountId, requestBody(ctx.req), { filename, contentType: type || undefined, length: ctx.request.length });
          }
        } catch (err) {
          if (!(err instanceof ApiError) && (ctx.req.destroyed || ctx.req.readableAborted)) throw new ApiError('invalid_request', 'the upload was interrupted', { cause: err });
          throw err;
        }
        ctx.status = 201;
        ctx.set('Location', files.view(record).url);
        ctx.body = files.view(record);
      },
    },
    {
      method: 'get',
      path: '/v1/files',
      operationId: 'listFiles',
      summary: "List the account's files, newest first",
      tag: 'files',
      auth: 'account',
      query: F.listFilesQuery,
      responses: { 200: { description: 'A page of files, and what all of the account\'s files hold against the quota', schema: F.fileList } },
      async handler(ctx) {
        const q = ctx.query as { limit?: string; cursor?: string };
        const limit = q.limit === undefined ? 20 : Number(q.limit);
        if (!(limit >= 1 && limit <= 100)) throw new ApiError('invalid_request', 'limit must be between 1 and 100');
        const after = q.cursor ? cursor.decode(q.cursor) : undefined;
        // One more than asked tells whether another page exists.
        const accountId = ctx.state.principal!.accountId;
        const [listed, quota] = await Promise.all([files.list(accountId, { limit: limit + 1, after }), files.quota(accountId)]);
        const page = listed.slice(0, limit);
        ctx.body = { data: page.map((f) => files.view(f)), next_cursor: listed.length > limit ? cursor.encode(page[page.length - 1].id) : null, quota };
      },
    },
    {
      method: 'get',
      path: '/v1/files/{file_id}',
      operationId: 'getFile',
      summary: 'Get a file\'s description',
      tag: 'files',
      auth: 'account',
      responses: { 200: { description: 'The file', schema: F.file }, 404: { description: "Unknown, expired, or another account's" } },
      async handler(ctx) {
        ctx.body = files.view(await files.get(ctx.state.principal!.accountId, ctx.params.file_id));
      },
    },
    {
      method: 'get',
      path: '/v1/files/{file_id}/content',
      operationId: 'getFileContent',
      summary: "Download a file's bytes (GET or HEAD; Range, If-None-Match)",
      tag: 'files',
      auth: 'account',
      responses: {
        200: { description: 'The bytes', mediaType: '*/*' },
        206: { description: 'The requested byte range', mediaType: '*/*' },
        304: { description: 'Not modified', mediaType: 'none' },
        404: { description: "Unknown, expired, or another account's" },
        416: RANGE_NOT_SATISFIABLE,
      },
      async handler(ctx) {
        const file = await files.get(ctx.state.principal!.accountId, ctx.params.file_id);
        await sendStored(ctx, await files.stored(file), 'private', (range) => files.open(file, range));
      },
    },
    {
      method: 'delete',
      path: '/v1/files/{file_id}',
      operationId: 'deleteFile',
      summary: 'Delete a file now; its bytes stop counting against the quota',
      tag: 'files',
      auth: 'account',
      responses: { 204: { description: 'Deleted', mediaType: 'none' }, 404: { description: "Unknown, expired, or another account's" } },
      async handler(ctx) {
        await files.delete(ctx.state.principal!.accountId, ctx.params.file_id);
        ctx.status = 204;
      },
    },
  ];
}
