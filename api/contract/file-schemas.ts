/** JSON Schemas of the Files API (docs/files.md); they validate and feed the OpenAPI document. */

export const file = {
  type: 'object',
  required: ['id', 'url', 'filename', 'content_type', 'size', 'sha256', 'created_at', 'expires_at'],
  properties: {
    id: { type: 'string', pattern: '^file_[0-9A-HJKMNP-TV-Z]{26}$' },
    url: { type: 'string', format: 'uri', description: "The file's API URL: put it (or the id) in a job input's file field; GET it with the account key for this object" },
    filename: { type: 'string' },
    content_type: { type: 'string', description: 'Detected from the bytes where they have a signature, else as declared (or from the extension)' },
    size: { type: 'integer', minimum: 0 },
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: 'string', format: 'date-time', description: 'FILE_RETENTION_DAYS after the upload: the file and its bytes are deleted then' },
  },
} as const;

export const fileList = {
  type: 'object',
  required: ['data', 'next_cursor', 'quota'],
  properties: {
    data: { type: 'array', items: file },
    next_cursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last' },
    quota: {
      type: 'object',
      required: ['used_bytes', 'quota_bytes'],
      description: "All of the account's files (not only this page) against FILE_QUOTA_BYTES",
      properties: {
        used_bytes: { type: 'integer', minimum: 0, description: 'Bytes the account\'s files hold now' },
        quota_bytes: { type: 'integer', minimum: 0, description: 'The most they may hold (FILE_QUOTA_BYTES)' },
      },
    },
  },
} as const;

export const listFilesQuery = {
  type: 'object',
  properties: {
    limit: { type: 'string', pattern: '^[0-9]{1,3}$', description: 'Files per page, 1 to 100 (default 20)' },
    cursor: { type: 'string', maxLength: 200 },
  },
} as const;

export const uploadFileQuery = {
  type: 'object',
  properties: {
    filename: { type: 'string', minLength: 1, maxLength: 200, description: 'Raw uploads: the file name (multipart uploads take the part\'s)' },
  },
} as const;
