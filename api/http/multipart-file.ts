import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { Busboy, type BusboyHeaders } from '@fastify/busboy';
import { ApiError } from '../../models/errors.js';

/** The file of a multipart upload, streamed as it arrives. */
export interface FilePart {
  body: AsyncIterable<Uint8Array>;
  filename?: string;
  contentType?: string;
  /**
   * Settles once the whole request is read: rejects when what followed the file makes the
   * upload invalid (a second file, a malformed or cut-short body). Await it before answering.
   */
  rest: Promise<void>;
}

/**
 * The first file part of a `multipart/form-data` request, as soon as its headers arrive; the
 * bytes stream from the request to the caller without being held. Other fields are read and
 * ignored, a second file part is refused. The part stops at `maxBytes + 1`, so a store
 * limited to `maxBytes` sees that it is too large.
 */
export function firstFilePart(req: IncomingMessage, maxBytes: number): Promise<FilePart> {
  let parser;
  try {
    parser = Busboy({ headers: req.headers as BusboyHeaders, limits: { files: 1, fileSize: maxBytes + 1, fields: 20, fieldSize: 4096, parts: 30 } });
  } catch (err) {
    return Promise.reject(new ApiError('invalid_request', `the multipart body cannot be read: ${(err as Error).message}`));
  }
  return new Promise((resolve, reject) => {
    let file: Readable | undefined;
    let settleRest!: { resolve: () => void; reject: (err: ApiError) => void };
    const rest = new Promise<void>((res, rej) => (settleRest = { resolve: res, reject: rej }));
    rest.catch(() => {}); // read by the caller once the file is stored; never an unhandled rejection
    const fail = (err: ApiError) => {
      if (!file) return reject(err);
      // A file still streaming stops with the error; one already read whole is refused afterwards.
      // (Its reader, if any, gets the error from its own listener; none left is not a crash.)
      if (!file.readableEnded) file.on('error', () => {}).destroy(err);
      settleRest.reject(err);
    };
    parser.on('file', (_field, stream, filename, _encoding, mimeType) => {
      if (file) return stream.resume();
      file = stream;
      resolve({ body: stream, filename: filename || undefined, contentType: mimeType || undefined, rest });
    });
    parser.on('filesLimit', () => fail(new ApiError('invalid_request', 'send one file per upload')));
    parser.on('error', (err: Error) => fail(new ApiError('invalid_request', `the multipart body is malformed: ${err.message}`)));
    parser.on('finish', () => {
      if (!file) reject(new ApiError('invalid_request', 'the multipart body has no file: send it in a part with a filename (curl -F file=@photo.png)'));
      else settleRest.resolve();
    });
    // A client that goes away mid-upload must not leave the part waiting for bytes forever.
    req.on('close', () => {
      if (!req.complete) fail(new ApiError('invalid_request', 'the upload was interrupted'));
    });
    req.pipe(parser);
  });
}
