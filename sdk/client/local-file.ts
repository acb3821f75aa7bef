import { SwitchyardError } from './errors.js';

/**
 * Local files for uploads: the only place the client library touches the disk, and only in
 * Node. The Node module is loaded lazily, through a specifier bundlers do not follow, so a
 * browser build neither needs nor includes it; in a browser a path throws a clear error.
 */

/** The part of node:fs/promises the client uses. */
interface FileHandle {
  stat(): Promise<{ size: number; isFile(): boolean }>;
  read(buffer: Uint8Array, offset: number, length: number, position: number | null): Promise<{ bytesRead: number }>;
  close(): Promise<void>;
}
interface NodeFsPromises {
  open(path: string, flags: string): Promise<FileHandle>;
}

// A variable, not a literal: bundlers leave the import alone and browsers never run it.
const NODE_FS = 'node:fs/promises';
const CHUNK = 64 * 1024;

function isNode(): boolean {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof proc?.versions?.node === 'string';
}

/** A local file as an upload body: its bytes as a stream read from disk as it is sent, and its size. */
export interface LocalFile {
  stream: ReadableStream<Uint8Array>;
  size: number;
  type: string;
}

/**
 * Opens the file at `path` (relative to the working directory) for an upload: read 64 KB at a
 * time as fetch sends it, never whole into memory (a file-backed Blob would be, by Node 20's
 * fetch); the file is closed at its end, on an error or when the stream is canceled. Throws a
 * SwitchyardError when the file cannot be opened, is not a regular file, or outside Node.
 */
export async function openLocalFile(path: string, type: string): Promise<LocalFile> {
  if (!isNode()) throw new SwitchyardError(`cannot read the local file ${path}: local paths work in Node only; pass a Blob or File`);
  let fs: NodeFsPromises;
  try {
    fs = (await import(/* @vite-ignore */ /* webpackIgnore: true */ NODE_FS)) as NodeFsPromises;
  } catch (err) {
    throw new SwitchyardError(`cannot read the local file ${path}: node:fs is not available`, { cause: err });
  }
  let handle: FileHandle;
  let size: number;
  try {
    handle = await fs.open(path, 'r');
  } catch (err) {
    throw new SwitchyardError(`cannot read the local file ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error('not a regular file');
    size = stat.size;
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw new SwitchyardError(`cannot read the local file ${path}: ${(err as Error).message}`, { cause: err });
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close().catch(() => undefined);
  };
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = new Uint8Array(Math.min(CHUNK, Math.max(size - sent, 1)));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
        if (bytesRead === 0 || sent >= size) {
          await close();
          if (sent !== size) controller.error(new SwitchyardError(`${path} changed while it was uploaded (${sent} of ${size} bytes)`));
          else controller.close();
          return;
        }
        sent += bytesRead;
        controller.enqueue(bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead));
      } catch (err) {
        await close();
        controller.error(err);
      }
    },
    async cancel() {
      await close();
    },
  });
  return { stream, size, type };
}

/** The last segment of a path, `/` or `\` separated. */
export function baseName(path: string): string {
  const parts = path.split(/[\\/]/);
  return parts[parts.length - 1] ?? path;
}

/**
 * Content types by extension, for the formats the kinds' file fields take and a few common
 * others. The gateway reads the type from the bytes anyway; this only names what is sent.
 */
const BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  glb: 'model/gltf-binary',
  gltf: 'model/gltf+json',
  obj: 'model/obj',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  ogg: 'audio/ogg',
  oga: 'audio/ogg',
  flac: 'audio/flac',
  mp4: 'video/mp4',
  webm: 'video/webm',
  avi: 'video/x-msvideo',
  json: 'application/json',
  txt: 'text/plain',
};

/** The content type of a file name's extension; `application/octet-stream` (the gateway then detects it) otherwise. */
export function contentTypeOf(filename: string | undefined): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(filename ?? '')?.[1]?.toLowerCase();
  return (ext && BY_EXTENSION[ext]) || 'application/octet-stream';
}
