import type { WorkUsage } from '../protocol/index.js';
import type { EngineArtifact, EngineResult } from './types.js';

/**
 * What a job used, as far as an engine can tell from its own result (docs/worker-protocol.md,
 * "Usage"): what a run with a per-unit price is charged for. Read from the kind's documented
 * output fields and the artifacts themselves:
 * - tokens: `usage.prompt_tokens` / `usage.completion_tokens` of an LLM output (the server's count);
 * - seconds: `duration_s`, else `frames / fps` (video), else the length of the WAV artifacts;
 * - images: the image artifacts of an image-generating kind.
 * A unit it cannot tell is left out; nothing known, no usage (the run is charged its reservation).
 */
export function usageOf(kind: string, result: EngineResult): WorkUsage | undefined {
  const extra = result.extra ?? {};
  const usage: WorkUsage = {};
  const u = extra.usage as Record<string, unknown> | undefined;
  if (u && typeof u === 'object') {
    // OpenAI's names, as the LLM kind's output has them, or the protocol's own (a command or Cog model may report either).
    const input = isCount(u.prompt_tokens) ? u.prompt_tokens : u.input_tokens;
    const output = isCount(u.completion_tokens) ? u.completion_tokens : u.output_tokens;
    if (isCount(input)) usage.input_tokens = input;
    if (isCount(output)) usage.output_tokens = output;
  }
  const seconds = secondsOf(extra, result.artifacts);
  if (seconds !== undefined) usage.seconds = seconds;
  if (kind === 'inference:image:generate') usage.images = result.artifacts.filter((a) => a.contentType.startsWith('image/')).length;
  return Object.keys(usage).length ? usage : undefined;
}

/** `result` with its usage filled in when the engine did not give one. */
export function withUsage(kind: string, result: EngineResult): EngineResult {
  if (result.usage) return result;
  const usage = usageOf(kind, result);
  return usage ? { ...result, usage } : result;
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;
const isSeconds = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

function secondsOf(extra: Record<string, unknown>, artifacts: EngineArtifact[]): number | undefined {
  if (isSeconds(extra.duration_s)) return extra.duration_s;
  if (isCount(extra.frames) && isCount(extra.fps) && extra.fps > 0) return extra.frames / extra.fps;
  let total: number | undefined;
  for (const a of artifacts) {
    const s = a.contentType === 'audio/wav' || a.contentType === 'audio/x-wav' ? wavSeconds(a.data) : undefined;
    if (s !== undefined) total = (total ?? 0) + s;
  }
  return total;
}

/** The length of a RIFF/WAVE file: its `data` chunk's bytes over the `fmt ` chunk's byte rate; undefined if it is not one. */
export function wavSeconds(data: Uint8Array): number | undefined {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') return undefined;
  let byteRate = 0;
  for (let at = 12; at + 8 <= buf.length; ) {
    const id = buf.toString('ascii', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= buf.length) byteRate = buf.readUInt32LE(at + 16);
    // A streamed WAV may say 0 or 0xffffffff: the rest of the file is its data.
    if (id === 'data') return byteRate > 0 ? Math.min(size === 0 || size === 0xffffffff ? Infinity : size, buf.length - at - 8) / byteRate : undefined;
    at += 8 + size + (size % 2);
  }
  return undefined;
}
