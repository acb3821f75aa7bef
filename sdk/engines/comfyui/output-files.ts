import type { HistoryEntry, OutputFile } from './comfy-client.js';

/**
 * The files a prompt wrote, from its history: every node's ui output lists them under a key of
 * its own (SaveImage `images`, SaveAnimatedWEBP `images`, VideoHelperSuite's video nodes `gifs`, SaveAudio
 * `audio`, SaveGLB `3d`...), each `{filename, subfolder, type}`; other ui values (`animated:
 * [true]`, `text: ["..."]`) are no files. Every file counts, whatever the key, so a template
 * may end in any saver node, a custom one included.
 */
export function outputFilesOf(history: HistoryEntry): Array<OutputFile & { node: string }> {
  const files: Array<OutputFile & { node: string }> = [];
  for (const [node, ui] of Object.entries(history.outputs)) {
    if (typeof ui !== 'object' || ui === null) continue;
    for (const list of Object.values(ui)) {
      if (!Array.isArray(list)) continue;
      for (const f of list) {
        if (typeof f !== 'object' || f === null || typeof f.filename !== 'string' || f.filename === '') continue;
        files.push({ node, filename: f.filename, subfolder: typeof f.subfolder === 'string' ? f.subfolder : '', type: typeof f.type === 'string' ? f.type : 'output' });
      }
    }
  }
  return files;
}

/**
 * By extension first: ComfyUI's /view guesses with Python's mimetypes, which knows no .glb or
 * .ply on many installs and answers application/octet-stream, and the gateway serves an
 * artifact with the type the worker names.
 */
const TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  avif: 'image/avif',
  exr: 'image/x-exr',
  mp4: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  avi: 'video/x-msvideo',
  wav: 'audio/wav',
  flac: 'audio/flac',
  mp3: 'audio/mpeg',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  glb: 'model/gltf-binary',
  gltf: 'model/gltf+json',
  obj: 'model/obj',
  stl: 'model/stl',
  ply: 'application/ply',
  fbx: 'application/octet-stream',
  usdz: 'model/vnd.usdz+zip',
  json: 'application/json',
  txt: 'text/plain; charset=utf-8',
};

export function contentTypeOf(filename: string, served: string | null): string {
  const ext = /\.([a-z0-9]+)$/i.exec(filename)?.[1].toLowerCase();
  if (ext && TYPES[ext]) return TYPES[ext];
  return served && !/^application\/octet-stream/i.test(served) ? served : 'application/octet-stream';
}

/** Artifact names unique within the job: a name two nodes both wrote gets its node's id in front. */
export function artifactNames(files: Array<{ node: string; filename: string }>): string[] {
  const count = new Map<string, number>();
  for (const f of files) count.set(f.filename, (count.get(f.filename) ?? 0) + 1);
  return files.map((f) => (count.get(f.filename)! > 1 ? `${f.node}-${f.filename}` : f.filename));
}

/** Width and height of a PNG (its IHDR chunk), for the image kinds' output; null for anything else. */
export function pngSize(data: Buffer): { width: number; height: number } | null {
  if (data.length < 24 || data.readUInt32BE(0) !== 0x89504e47 || data.toString('latin1', 12, 16) !== 'IHDR') return null;
  return { width: data.readUInt32BE(16), height: data.readUInt32BE(20) };
}
