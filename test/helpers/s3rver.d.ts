/** The part of s3rver (which ships no types) that test/helpers/s3-stand-in.ts uses. */
declare module 's3rver' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  interface S3rverOptions {
    directory: string;
    silent?: boolean;
    configureBuckets?: { name: string }[];
  }

  export default class S3rver {
    constructor(options: S3rverOptions);
    configureBuckets(): Promise<void>;
    /** Koa's request handler. */
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
