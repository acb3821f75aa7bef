/** The Files API's shapes as the client library sees them (docs/files.md). */
/** A file of the account (POST /v1/files, docs/files.md). */
export interface SwitchyardFile {
  /** `file_...`: put it in a file field of a job input (`image`, `mesh`, `audio`, `reference_audio`). */
  id: string;
  /** The file's API URL (with the account key: this object); a job input takes it as well as the id. */
  url: string;
  filename: string;
  /** As the gateway read it from the bytes where they have a signature, else as sent. */
  content_type: string;
  size: number;
  sha256: string;
  created_at: string;
  /** The file and its bytes are deleted then (FILE_RETENTION_DAYS after the upload). */
  expires_at: string;
}

export interface FilePage {
  /** Newest first. */
  data: SwitchyardFile[];
  /** Pass to files.list() for the next (older) page; null on the last one. */
  next_cursor: string | null;
  /** What all of the account's files hold against its quota (absent from gateways before it was added). */
  quota?: FileQuota;
}

/** The account's file storage: `used_bytes` of `quota_bytes` (FILE_QUOTA_BYTES). */
export interface FileQuota {
  used_bytes: number;
  quota_bytes: number;
}

export interface ListFilesParams {
  /** 1..100, the gateway's default is 20. */
  limit?: number;
  cursor?: string;
}

/**
 * What files.upload() takes: a local path (Node only; streamed from disk), a Blob or File
 * (browsers and Node), or bytes (a Uint8Array; Node's buffers are Uint8Arrays too).
 */
export type UploadSource = string | Blob | Uint8Array;
