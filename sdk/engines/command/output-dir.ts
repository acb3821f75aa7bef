import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { EngineArtifact } from '../types.js';

/** By file extension; anything else goes up as application/octet-stream. */
const CONTENT_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.glb': 'model/gltf-binary',
  '.gltf': 'model/gltf+json',
  '.obj': 'model/obj',
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
  '.flac': 'audio/flac',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.avi': 'video/x-msvideo',
  '.txt': 'text/plain; charset=utf-8',
  '.srt': 'text/plain; charset=utf-8',
  '.vtt': 'text/vtt; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.json': 'application/json',
  '.zip': 'application/zip',
};

export const contentTypeOf = (name: string) => CONTENT_TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';

export class OutputDirError extends Error {
  override readonly name = 'OutputDirError';
  readonly code = 'bad_output';
  readonly retryable = false;
}

/**
 * The lease's scratch space: `out/`, the directory the program writes its artifacts to, inside
 * a temporary directory of its own that is removed when the lease ends, however it ends.
 */
export class OutputDir {
  private constructor(
    readonly root: string,
    readonly out: string,
  ) {}

  static async create(): Promise<OutputDir> {
    const root = await mkdtemp(path.join(os.tmpdir(), 'switchyard-command-'));
    const out = path.join(root, 'out');
    await mkdir(out);
    return new OutputDir(root, out);
  }

  /**
   * The regular files at the top of `out/`, by name, as artifacts. Subdirectories, links and
   * hidden files (a program's temporary files) are left out; too many files or bytes fail the
   * job rather than filling the worker's memory.
   */
  async artifacts(limits: { maxFiles: number; maxBytes: number }, log: (line: string) => void): Promise<EngineArtifact[]> {
    const entries = (await readdir(this.out, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
    const files = entries.filter((e) => e.isFile() && !e.name.startsWith('.'));
    const skipped = entries.filter((e) => !files.includes(e) && !e.name.startsWith('.'));
    if (skipped.length) log(`output directory: left out ${skipped.map((e) => e.name).join(', ')} (only regular files at its top are artifacts)`);
    if (files.length > limits.maxFiles) throw new OutputDirError(`the command wrote ${files.length} files to its output directory; at most ${limits.maxFiles} are taken`);
    let total = 0;
    for (const f of files) total += (await stat(path.join(this.out, f.name))).size;
    if (total > limits.maxBytes) throw new OutputDirError(`the command wrote ${total} bytes to its output directory; at most ${limits.maxBytes} are taken`);
    const artifacts: EngineArtifact[] = [];
    for (const f of files) artifacts.push({ name: f.name, contentType: contentTypeOf(f.name), data: await readFile(path.join(this.out, f.name)) });
    return artifacts;
  }

  async remove(): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
  }
}
