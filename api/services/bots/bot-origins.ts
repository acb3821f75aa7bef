/** `scheme://host[:port]` and nothing else: no path (not even `/`), query, fragment or credentials. */
const ORIGIN_SHAPE = /^https?:\/\/[^/?#@\s\\]+$/i;

/**
 * The serialized origin of `value` (lowercased host, default port dropped), as a browser sends
 * it in `Origin`; null when `value` is not an http(s) origin.
 */
export function originOf(value: string | undefined): string | null {
  if (!value || !ORIGIN_SHAPE.test(value)) return null;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : null;
  } catch {
    return null;
  }
}
