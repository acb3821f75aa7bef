import type { Capabilities } from '../../../sdk/client/index.js';
import { mediaType, type OutputFile } from './output-file.js';

/** A kind that can take a file as the input of one of its file fields. */
export interface ChainTarget {
  kind: string;
  field: string;
  /**
   * The field is all the kind needs (its only required field, and no "one of these" rule):
   * one click submits the next run; otherwise the kind's form opens with the field filled in.
   */
  direct: boolean;
}

type Schema = { properties?: Record<string, Record<string, unknown>>; required?: unknown; allOf?: unknown; anyOf?: unknown; oneOf?: unknown };

/**
 * The kinds whose file fields (`x-switchyard-file: {accept}` in the input schema of
 * GET /v1/capabilities) accept the file's content type, in the order the gateway lists them.
 */
export function chainTargets(caps: Capabilities, file: OutputFile): ChainTarget[] {
  const type = mediaType(file.content_type);
  if (!type) return [];
  const out: ChainTarget[] = [];
  for (const k of caps.kinds ?? []) {
    const schema = (k.input_schema ?? {}) as Schema;
    const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
    const rules = schema.allOf !== undefined || schema.anyOf !== undefined || schema.oneOf !== undefined;
    for (const [field, prop] of Object.entries(schema.properties ?? {})) {
      const accept = (prop['x-switchyard-file'] as { accept?: unknown } | undefined)?.accept;
      if (!Array.isArray(accept) || !accept.map((a) => String(a).toLowerCase()).includes(type)) continue;
      out.push({ kind: k.kind, field, direct: !rules && required.length === 1 && required[0] === field });
    }
  }
  return out;
}

/** The console path of a kind's form with one field filled in (the try page's prefill contract). */
export const prefillPath = (kind: string, field: string, value: string): string => `/kinds/${kind}?${encodeURIComponent(field)}=${encodeURIComponent(value)}`;
