import { SwitchyardError } from './errors.js';

/**
 * Local files for uploads: the only place the client library touches the disk, and only in
 * Node. The Node module is loaded lazily, through a specifier bundlers do not follow, so a
 * browser build neither needs nor includes it; in a browser a path throws a clear error.
 */

/** The part of node:fs the client uses: a Blob backed by the file, read as it is sent. */
interface NodeFs {
  openAsBlob(path: string, options?: { type?: string }): Promise<Blob>;
}

// A variable, not a literal: bundlers leave the import alone and browsers never run it.
const NODE_FS = 'node:fs';

function isNode(): boolean {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof proc?.versions?.node === 'string';
}

/**
 * A Blob of the file at `path` (relative to the working directory), streamed from disk when
 * sent; never read whole into memory. Throws a SwitchyardError when the file cannot be opened
 * or outside Node.
 */
export async function openLocalFile(path: string, type: string): Promise<Blob> {
  if (!isNode()) throw new SwitchyardError(`cannot read the local file ${path}: local paths work in Node only; pass a Blob or File`);
  let fs: NodeFs;
  try {
    fs = (await import(/* @vite-ignore */ /* webpackIgnore: true */ NODE_FS)) as NodeFs;
  } catch (err) {
    throw new SwitchyardError(`cannot read the local file ${path}: node:fs is not available`, { cause: err });
  }
  if (typeof fs.openAsBlob !== 'function') throw new SwitchyardError(`cannot read the local file ${path}: this Node lacks fs.openAsBlob (Node 20+ has it)`);
  try {
    return await fs.openAsBlob(path, { type });
  } catch (err) {
    throw new SwitchyardError(`cannot read the local file ${path}: ${(err as Error).message}`, { cause: err });
  }
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
