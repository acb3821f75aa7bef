import { createHash } from 'node:crypto';

/**
 * The integer arithmetic of the demo ranked models (docs/ranks.md, "The demo ranked models").
 * Ranks of TypeScript and Python workers are mixed in one pipeline, so every step here has a
 * twin in sdk/python/worker/switchyard_worker/ranked_math.py that must agree bit for bit: no
 * floats (libm and summation order could split the languages), 32-bit words wrapped with
 * Math.imul and `>>> 0`, and sums kept below 2^31 so `>>` (ToInt32) never truncates one.
 */

/** Activations are kept within ±2^ACT_BITS by `normalize`; frames holding more are refused. */
export const ACT_BITS = 12;
export const ACT_LIMIT = 1 << ACT_BITS;

/** A 32-bit finalizer (lowbias32): every input bit moves about half of the output bits. */
export function mix32(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * Word `index` of the weight stream `tag` of a model seeded `seed`: counter-based, so a rank
 * generates only its own layers, in any order, without running the others' streams first.
 */
export function seededWord(seed: number, tag: number, index: number): number {
  return mix32((mix32((seed ^ tag) >>> 0) + Math.imul(index, 0x9e3779b9)) >>> 0);
}

/** `count` signed weights of `bits` bits (in [-2^(bits-1), 2^(bits-1))) from stream `tag`. */
export function seededInts(seed: number, tag: number, count: number, bits: number): Int32Array {
  const out = new Int32Array(count);
  const half = 1 << (bits - 1);
  for (let i = 0; i < count; i++) out[i] = (seededWord(seed, tag, i) >>> (32 - bits)) - half;
  return out;
}

/** FNV-1a over bytes: how an out-of-vocabulary word picks its token. */
export function fnv1a32(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

const bitLength = (m: number) => 32 - Math.clz32(m);

/**
 * Integer RMS-norm stand-in: shifts the whole vector right by one amount so its largest
 * magnitude fits in ACT_BITS bits (|v| <= 2^ACT_BITS). A common shift keeps the vector's shape,
 * and the next layer's sums stay far below 2^31 whatever the weights did. In place.
 */
export function normalize(v: Int32Array): Int32Array {
  let max = 0;
  for (const x of v) max = Math.max(max, Math.abs(x));
  const shift = Math.max(0, bitLength(max) - ACT_BITS);
  if (shift > 0) for (let i = 0; i < v.length; i++) v[i] >>= shift;
  return v;
}

/**
 * Subtracts the mean (rounded down: the sum shifted right by log2 of the length, a power of two),
 * the centring half of a LayerNorm: without it a shared positive offset (what a leaky ReLU leaves)
 * grows layer by layer and the head picks the same few words whatever the context. In place.
 */
export function center(v: Int32Array): Int32Array {
  let sum = 0;
  for (const x of v) sum += x;
  const mean = sum >> Math.log2(v.length);
  for (let i = 0; i < v.length; i++) v[i] -= mean;
  return v;
}

/**
 * out[i] = bias[i] + sum_j w[i*inputs + j] * x[j]. With |x| <= 2^12, |w| < 2^7, 64 inputs and
 * |bias| <= 2^18, every sum is below 2^26: exact in a double and in an Int32Array alike.
 */
export function dense(x: Int32Array, w: Int32Array, outputs: number, bias?: Int32Array): Int32Array {
  const inputs = x.length;
  const out = new Int32Array(outputs);
  for (let i = 0; i < outputs; i++) {
    let acc = bias ? bias[i] : 0;
    const row = i * inputs;
    for (let j = 0; j < inputs; j++) acc += w[row + j] * x[j];
    out[i] = acc;
  }
  return out;
}

/** Leaky ReLU in integers: negatives are divided by 8 rounding down (an arithmetic shift). */
export function leakyRelu(v: Int32Array): Int32Array {
  for (let i = 0; i < v.length; i++) if (v[i] < 0) v[i] >>= 3;
  return v;
}

/** Argmax with ties going to the lowest index (greedy sampling that both languages agree on). */
export function argmax(v: Int32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

/** Int32 little endian, the byte order of frames and of the weight digests. */
export function int32le(v: Int32Array): Buffer {
  const out = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) out.writeInt32LE(v[i], i * 4);
  return out;
}

export const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
