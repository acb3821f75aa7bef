import fc from 'fast-check';
import { anyJson } from './schema-arbitrary.js';

/** A request body as bytes, the Content-Type sent with it (null: none) and what was done to it. */
export interface BodyShape {
  bytes?: Buffer;
  contentType: string | null;
  extraHeaders: Record<string, string>;
  variant: string;
}

const JSON_TYPE = 'application/json';
const json = (value: unknown, variant: string, contentType: string | null = JSON_TYPE): BodyShape => ({ bytes: Buffer.from(JSON.stringify(value) ?? 'null'), contentType, extraHeaders: {}, variant });

/** `value` with the leaf or member at a random spot replaced by `replace(old)`; the body itself at the root. */
function replaceSomewhere(value: unknown, pick: number, replace: (old: unknown) => unknown): unknown {
  const spots: Array<{ parent: any; key: string | number }> = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach((x, i) => (spots.push({ parent: v, key: i }), walk(x)));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) spots.push({ parent: v, key: k }), walk(x);
  };
  const copy = structuredClone(value);
  walk(copy);
  if (!spots.length) return replace(copy);
  const spot = spots[pick % spots.length];
  spot.parent[spot.key] = replace(spot.parent[spot.key]);
  return copy;
}

/** A value of another JSON type than `old`. */
function otherType(old: unknown, n: number): unknown {
  const candidates: unknown[] = [null, true, 0, -1, 1.5, '', 'x', [], {}, [old], { value: old }];
  const differs = candidates.filter((c) => typeof c !== typeof old || Array.isArray(c) !== Array.isArray(old) || (c === null) !== (old === null));
  return differs[n % differs.length];
}

/** `{"k":{"k":...}}` or `[[...]]`, `depth` deep, as text (JSON.stringify would recurse as deep). */
const deepText = (depth: number, arrays: boolean) => (arrays ? '['.repeat(depth) + ']'.repeat(depth) : '{"k":'.repeat(depth) + '1' + '}'.repeat(depth));

/** JSON text of an object with one of its keys written twice, the second time with another value. */
function duplicateKey(value: unknown, other: unknown): string {
  if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.keys(value).length) return `{"k":1,"k":${JSON.stringify(other)}}`;
  const [first] = Object.keys(value);
  const text = JSON.stringify(value);
  return `${text.slice(0, -1)},${JSON.stringify(first)}:${JSON.stringify(other) ?? 'null'}}`;
}

const HUGE_NUMBERS = ['1e308', '-1e308', '1e400', '123456789012345678901234567890', '9007199254740993', '-0', '1e-400', '0.1e1'];
const WRONG_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/xml', 'application/json-patch+json', ';;;', 'application/json; charset=latin1', '*/*'];

/**
 * The body of a JSON operation: the valid-shaped `value` (most of the time) or one of the
 * malformed variants the issue lists. Every variant is named, so the summary and a failure say
 * which one was sent.
 */
export function jsonBodyArbitrary(valid: fc.Arbitrary<unknown>): fc.Arbitrary<BodyShape> {
  const v = valid;
  return fc.oneof(
    { weight: 8, arbitrary: v.map((x) => json(x, 'valid')) },
    { weight: 2, arbitrary: fc.tuple(v, fc.string({ minLength: 1, maxLength: 16 }), anyJson()).map(([x, k, extra]) => json(x && typeof x === 'object' && !Array.isArray(x) ? { ...x, [`zz_${k}`]: extra } : x, 'unknown-field')) },
    { weight: 2, arbitrary: fc.tuple(v, fc.nat(), fc.nat()).map(([x, pick, n]) => json(replaceSomewhere(x, pick, (old) => otherType(old, n)), 'wrong-type')) },
    { weight: 1, arbitrary: fc.tuple(v, fc.nat(), fc.constantFrom(10_000, 300_000, 2_000_000)).map(([x, pick, size]) => json(replaceSomewhere(x, pick, () => 'x'.repeat(size)), `huge-string-${size}`)) },
    {
      weight: 1,
      arbitrary: fc.tuple(v, fc.nat(), fc.constantFrom(...HUGE_NUMBERS)).map(([x, pick, num]) => {
        const marker = '"__fuzz_number__"';
        const text = JSON.stringify(replaceSomewhere(x, pick, () => '__fuzz_number__')).replace(marker, num);
        return { bytes: Buffer.from(text), contentType: JSON_TYPE, extraHeaders: {}, variant: 'huge-number' };
      }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(v, fc.nat(), fc.constantFrom(64, 2_000, 100_000), fc.boolean()).map(([x, pick, depth, arrays]) => {
        const marker = '"__fuzz_deep__"';
        const text = JSON.stringify(replaceSomewhere(x, pick, () => '__fuzz_deep__')).replace(marker, deepText(depth, arrays));
        return { bytes: Buffer.from(text), contentType: JSON_TYPE, extraHeaders: {}, variant: `deep-nesting-${depth}` };
      }),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(v, fc.nat(), fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82])).map(([x, pick, bad]) => {
        const marker = '__fuzz_bytes__';
        const text = JSON.stringify(replaceSomewhere(x, pick, () => marker));
        const at = text.indexOf(marker);
        const bytes = at < 0 ? Buffer.concat([Buffer.from(text), Buffer.from(bad)]) : Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(bad), Buffer.from(text.slice(at + marker.length))]);
        return { bytes, contentType: JSON_TYPE, extraHeaders: {}, variant: 'invalid-utf8' };
      }),
    },
    { weight: 1, arbitrary: v.map((x) => ({ ...json(x, 'bom'), bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(x) ?? 'null')]) })) },
    { weight: 1, arbitrary: fc.tuple(v, fc.nat()).map(([x, cut]) => { const t = JSON.stringify(x) ?? 'null'; return { ...json(x, 'truncated'), bytes: Buffer.from(t.slice(0, cut % Math.max(1, t.length))) }; }) },
    { weight: 1, arbitrary: fc.tuple(v, fc.constantFrom<string | null>(null, ...WRONG_TYPES)).map(([x, type]) => json(x, `content-type:${type}`, type)) },
    { weight: 1, arbitrary: fc.tuple(v, anyJson()).map(([x, other]) => ({ bytes: Buffer.from(duplicateKey(x, other)), contentType: JSON_TYPE, extraHeaders: {}, variant: 'duplicate-key' })) },
    { weight: 1, arbitrary: fc.constantFrom('', 'null', 'true', '"text"', '[]', '{', '}', '{"a":}', 'NaN', '\u0000', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}').map((t) => ({ bytes: Buffer.from(t), contentType: JSON_TYPE, extraHeaders: {}, variant: `not-an-object:${JSON.stringify(t)}` })) },
    { weight: 1, arbitrary: v.map((x) => ({ ...json(x, 'gzip-claimed'), extraHeaders: { 'content-encoding': 'gzip' } })) },
    { weight: 1, arbitrary: v.map((x) => ({ ...json(x, 'encoding-unknown'), extraHeaders: { 'content-encoding': 'br, zz' } })) },
  );
}

/** The body of a raw upload operation (bytes of any type), or of one that takes none (sometimes sent one anyway). */
export function rawBodyArbitrary(): fc.Arbitrary<BodyShape> {
  return fc.oneof(
    fc.tuple(fc.uint8Array({ maxLength: 256 }), fc.constantFrom<string | null>(null, 'application/octet-stream', 'image/png', 'text/plain; charset=utf-8', 'multipart/form-data', ';;')).map(([b, type]) => ({ bytes: Buffer.from(b), contentType: type, extraHeaders: {}, variant: `bytes:${type}` })),
    fc.constantFrom(0, 1_000_000).map((size) => ({ bytes: Buffer.alloc(size, 0x61), contentType: 'application/octet-stream', extraHeaders: {}, variant: `bytes-${size}` })),
  );
}

/** A stray body on an operation that takes none. */
export function strayBodyArbitrary(): fc.Arbitrary<BodyShape> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant<BodyShape>({ contentType: null, extraHeaders: {}, variant: 'no-body' }) },
    { weight: 1, arbitrary: anyJson().map((x) => json(x, 'stray-json')) },
    { weight: 1, arbitrary: fc.constant<BodyShape>({ bytes: Buffer.from('{'), contentType: JSON_TYPE, extraHeaders: {}, variant: 'stray-truncated' }) },
  );
}
