import type { EngineArtifact } from '../types.js';
import { UpstreamError } from '../upstream-error.js';

/**
 * A finished prediction's output as the job's result. Cog returns a file output (`cog.Path`,
 * `cog.File`) as a base64 data URL by default, or as the URL it uploaded the file to when the
 * server runs with `--upload-url` (Cog's docs/http.md "File uploads"). Those become artifacts; the
 * rest of the output stays JSON, each file replaced by its artifact's name.
 */

export interface OutputResult {
  artifacts: EngineArtifact[];
  extra: Record<string, unknown>;
}

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/mpeg': 'mp3',
  'audio/ogg': 'ogg',
  'audio/flac': 'flac',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'model/gltf-binary': 'glb',
  'application/json': 'json',
  'text/plain': 'txt',
};

/** `data:[<type>][;base64],<data>` (RFC 2397). */
function decodeDataUri(uri: string): { data: Buffer; contentType: string } {
  const comma = uri.indexOf(',');
  if (comma < 0) throw new UpstreamError('upstream_bad_response', 'the Cog output has a data URI without a comma', true);
  const meta = uri.slice(5, comma).split(';');
  const base64 = meta.at(-1)?.toLowerCase() === 'base64';
  if (base64) meta.pop();
  const contentType = meta.join(';').trim() || 'text/plain;charset=US-ASCII';
  const payload = uri.slice(comma + 1);
  return { data: base64 ? Buffer.from(payload, 'base64') : Buffer.from(decodeURIComponent(payload), 'utf8'), contentType };
}

const extensionOf = (type: string) => EXTENSIONS[type.split(';')[0].trim().toLowerCase()] ?? 'bin';

/** The last segment of a URL's path, if it looks like a file name. */
function urlName(url: string): string | null {
  try {
    const last = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
    return /^[\w.+-]{1,200}$/.test(last) && last.includes('.') ? last : null;
  } catch {
    return null;
  }
}

export interface OutputFileOptions {
  /** Whether a string of the output is a file URL: Cog marks file outputs `format: uri` in its Output schema. */
  isFileUrl: (value: string, path: string) => boolean;
  download: (url: string) => Promise<{ data: Buffer; contentType: string | null }>;
}

/**
 * Artifacts and the remaining JSON of `output`. A textual output (a string, or the list of
 * strings of an iterator) is also given as `text`: the field the llm and transcription kinds
 * report their text in.
 */
export async function outputResult(output: unknown, opts: OutputFileOptions): Promise<OutputResult> {
  const artifacts: EngineArtifact[] = [];
  const names = new Set<string>();
  const unique = (name: string) => {
    let n = name;
    for (let i = 2; names.has(n); i++) n = name.replace(/(\.[^.]*)?$/, (ext) => `-${i}${ext}`);
    names.add(n);
    return n;
  };
  const visit = async (value: unknown, path: string): Promise<unknown> => {
    if (typeof value === 'string') {
      let file: { data: Buffer; contentType: string; name: string | null } | null = null;
      if (value.startsWith('data:')) file = { ...decodeDataUri(value), name: null };
      else if (/^https?:\/\//i.test(value) && opts.isFileUrl(value, path)) {
        const got = await opts.download(value);
        file = { data: got.data, contentType: got.contentType ?? 'application/octet-stream', name: urlName(value) };
      }
      if (!file) return value;
      const name = unique(file.name ?? `output-${artifacts.length}.${extensionOf(file.contentType)}`);
      artifacts.push({ name, contentType: file.contentType, data: file.data });
      return name;
    }
    if (Array.isArray(value)) {
      const out: unknown[] = [];
      for (let i = 0; i < value.length; i++) out.push(await visit(value[i], `${path}/${i}`));
      return out;
    }
    if (typeof value === 'object' && value !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = await visit(v, `${path}/${k}`);
      return out;
    }
    return value;
  };
  const rest = await visit(output, '');
  const extra: Record<string, unknown> = {};
  if (artifacts.length === 0 && typeof rest === 'string') extra.text = rest;
  else if (artifacts.length === 0 && Array.isArray(rest) && rest.every((s) => typeof s === 'string')) extra.text = rest.join('');
  if (rest !== null && rest !== undefined) extra.cog_output = rest;
  return { artifacts, extra };
}

/**
 * Which output strings are file URLs, from Cog's Output schema: `format: uri` on the output
 * itself, its array items (lists and iterators of Path) or an object's properties. Paths are
 * JSON pointers into the output, with array indexes as `*`.
 */
export function fileUrlPaths(openapi: unknown): Set<string> {
  const paths = new Set<string>();
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const schemas = isObject(openapi) && isObject(openapi.components) && isObject(openapi.components.schemas) ? openapi.components.schemas : {};
  const deref = (s: unknown): unknown => (isObject(s) && typeof s.$ref === 'string' && s.$ref.startsWith('#/components/schemas/') ? schemas[s.$ref.slice(21)] : s);
  const walk = (s: unknown, path: string, depth: number) => {
    s = deref(s);
    if (!isObject(s) || depth > 8) return;
    if (s.format === 'uri') paths.add(path);
    if (s.items) walk(s.items, `${path}/*`, depth + 1);
    if (isObject(s.properties)) for (const [k, v] of Object.entries(s.properties)) walk(v, `${path}/${k}`, depth + 1);
    for (const k of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(s[k])) for (const v of s[k] as unknown[]) walk(v, path, depth + 1);
  };
  walk(schemas.Output, '', 0);
  return paths;
}
