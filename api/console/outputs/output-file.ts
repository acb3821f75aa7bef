import type { JobResult } from '../../../sdk/client/index.js';

/** An entry of a succeeded run's `output.files`, as the gateway writes it at settlement. */
export interface OutputFile {
  url: string;
  name: string;
  content_type: string | null;
  size: number | null;
  sha256: string | null;
}

/** How the page shows a file, from its content type (and, for a type the gateway did not know, its name). */
export type Viewer = 'image' | 'mesh' | 'audio' | 'video' | 'video-other' | 'text' | 'none';

const IMAGE = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']);
const AUDIO = new Set(['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/mpeg', 'audio/ogg', 'audio/flac']);
/** The video types browsers play: the local engine's ffmpeg writes MP4 (H.264). */
const PLAYABLE_VIDEO = new Set(['video/mp4', 'video/webm']);

/** The bare media type: `text/plain; charset=utf-8` -> `text/plain`. */
export const mediaType = (contentType: string | null): string => (contentType ?? '').split(';')[0].trim().toLowerCase();

export function viewerFor(file: OutputFile): Viewer {
  const type = mediaType(file.content_type);
  if (IMAGE.has(type)) return 'image';
  if (type === 'model/gltf-binary' || (!type && file.name.endsWith('.glb'))) return 'mesh';
  if (AUDIO.has(type)) return 'audio';
  if (PLAYABLE_VIDEO.has(type)) return 'video';
  if (type.startsWith('video/')) return 'video-other';
  if (type.startsWith('text/') || type === 'application/json' || type.endsWith('+json')) return 'text';
  return 'none';
}

/** The run's files (none when the output has no `files`). */
export function outputFiles(run: JobResult): OutputFile[] {
  const files = (run.output as { files?: unknown } | null | undefined)?.files;
  return Array.isArray(files) ? (files as OutputFile[]) : [];
}

/**
 * What the run was asked for, in words, for alt text and labels: its prompt or text when its
 * input is known (`asked`, from GET ?include=input, or an answer that carries it), else its kind.
 */
export function runSubject(run: JobResult, asked?: Record<string, unknown>): string {
  const input = (asked ?? (run.raw as { input?: unknown }).input ?? {}) as Record<string, unknown>;
  for (const field of ['prompt', 'text']) {
    const v = input[field];
    if (typeof v === 'string' && v.trim()) return v.trim().slice(0, 200);
  }
  return run.kind.replace(/^inference:/, '').replace(/[:-]/g, ' ');
}
