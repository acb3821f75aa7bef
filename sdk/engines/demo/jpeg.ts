/**
 * A minimal baseline JPEG encoder (JFIF, YCbCr 4:4:4, one flat quantizer, fixed-length Huffman
 * codes). jpeg-js is correct but builds ~64k-entry tables for every image (~15 ms a frame), which
 * would make a dozen video frames far slower than the few milliseconds a demo job should take.
 * Fixed-length codes (4 bits for DC sizes, 8 bits for AC run/size pairs) are a valid Huffman
 * table, just not an optimal one; demo frames are tiny so the size cost does not matter.
 */

const QUANT = 8; // one step for every coefficient: simple, and sharp enough for flat synthetic frames

/** Zigzag position -> natural (row-major) index within the 8x8 block. */
const ZIGZAG = (() => {
  const order: number[] = [];
  for (let s = 0; s < 15; s++) {
    const cells: number[] = [];
    for (let y = Math.max(0, s - 7); y <= Math.min(7, s); y++) cells.push(y * 8 + (s - y));
    order.push(...(s % 2 ? cells : cells.reverse()));
  }
  return order;
})();

/** AC symbols: end-of-block, 16-zero run, then every (run, size) pair baseline allows; the code is the index. */
const AC_SYMBOLS = [0x00, 0xf0];
for (let run = 0; run < 16; run++) for (let size = 1; size <= 10; size++) AC_SYMBOLS.push((run << 4) | size);
const AC_CODE = new Uint8Array(256);
AC_SYMBOLS.forEach((s, i) => (AC_CODE[s] = i));

/** cos table for the separable 8-point DCT, COS[u * 8 + x], with the C(u)/2 normalisation folded in. */
const COS = Float64Array.from({ length: 64 }, (_, i) => {
  const u = i >> 3;
  const x = i & 7;
  return ((u === 0 ? Math.SQRT1_2 : 1) / 2) * Math.cos(((2 * x + 1) * u * Math.PI) / 16);
});

class BitWriter {
  bytes: number[] = [];
  private acc = 0; // pending bits, at most 7 + 16 of them
  private n = 0;

  /** Appends the low `length` bits of value (length <= 16), most significant first. */
  write(value: number, length: number): void {
    this.acc = (this.acc << length) | (value & ((1 << length) - 1));
    this.n += length;
    while (this.n >= 8) {
      this.n -= 8;
      const byte = (this.acc >> this.n) & 0xff;
      this.bytes.push(byte);
      if (byte === 0xff) this.bytes.push(0); // byte stuffing: 0xFF in data is followed by 0x00
    }
    this.acc &= (1 << this.n) - 1;
  }

  /** Pads the last byte with 1 bits, as the standard asks. */
  finish(): void {
    if (this.n > 0) this.write(0x7f, 8 - this.n);
  }
}

/** Number of bits needed for |v| (the JPEG "category"). */
const category = (v: number) => (v === 0 ? 0 : 32 - Math.clz32(Math.abs(v)));
/** The extra bits after a category: v itself when positive, its ones' complement when negative. */
const extraBits = (v: number, size: number) => (v >= 0 ? v : v + (1 << size) - 1);

function encodeBlock(block: Float64Array, prevDc: number, out: BitWriter): number {
  // forward DCT: rows then columns
  const tmp = new Float64Array(64);
  for (let y = 0; y < 8; y++) for (let u = 0; u < 8; u++) {
    let s = 0;
    for (let x = 0; x < 8; x++) s += COS[u * 8 + x] * block[y * 8 + x];
    tmp[y * 8 + u] = s;
  }
  const q = new Int32Array(64);
  for (let v = 0; v < 8; v++) for (let u = 0; u < 8; u++) {
    let s = 0;
    for (let y = 0; y < 8; y++) s += COS[v * 8 + y] * tmp[y * 8 + u];
    q[v * 8 + u] = Math.round(s / QUANT);
  }
  const diff = q[0] - prevDc;
  const dcSize = category(diff);
  out.write(dcSize, 4);
  out.write(extraBits(diff, dcSize), dcSize);
  let run = 0;
  for (let k = 1; k < 64; k++) {
    const c = q[ZIGZAG[k]];
    if (c === 0) {
      run++;
      continue;
    }
    for (; run >= 16; run -= 16) out.write(AC_CODE[0xf0], 8);
    const size = category(c);
    out.write(AC_CODE[(run << 4) | size], 8);
    out.write(extraBits(c, size), size);
    run = 0;
  }
  if (run > 0) out.write(AC_CODE[0x00], 8);
  return q[0];
}

function segment(marker: number, body: number[]): number[] {
  const len = body.length + 2;
  return [0xff, marker, len >> 8, len & 0xff, ...body];
}

/** Encodes RGB pixels (3 bytes each, row-major) as a baseline JFIF JPEG. */
export function encodeJpeg(rgb: Uint8Array, width: number, height: number): Buffer {
  const out = new BitWriter();
  const dc = [0, 0, 0];
  const blocks = [new Float64Array(64), new Float64Array(64), new Float64Array(64)];
  for (let by = 0; by < height; by += 8) {
    for (let bx = 0; bx < width; bx += 8) {
      for (let i = 0; i < 64; i++) {
        // edge blocks repeat the last row/column
        const x = Math.min(width - 1, bx + (i % 8));
        const y = Math.min(height - 1, by + (i >> 3));
        const o = (y * width + x) * 3;
        const r = rgb[o];
        const g = rgb[o + 1];
        const b = rgb[o + 2];
        blocks[0][i] = 0.299 * r + 0.587 * g + 0.114 * b - 128;
        blocks[1][i] = -0.168736 * r - 0.331264 * g + 0.5 * b;
        blocks[2][i] = 0.5 * r - 0.418688 * g - 0.081312 * b;
      }
      for (let c = 0; c < 3; c++) dc[c] = encodeBlock(blocks[c], dc[c], out);
    }
  }
  out.finish();
  const jfif = [0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const dqt = [0x00, ...new Array(64).fill(QUANT)];
  const sof = [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0];
  const bits = (length: number, count: number) => Array.from({ length: 16 }, (_, i) => (i === length - 1 ? count : 0));
  const dht = [0x00, ...bits(4, 12), ...Array.from({ length: 12 }, (_, i) => i), 0x10, ...bits(8, AC_SYMBOLS.length), ...AC_SYMBOLS];
  const sos = [3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0];
  return Buffer.from([
    0xff, 0xd8, // SOI
    ...segment(0xe0, jfif),
    ...segment(0xdb, dqt),
    ...segment(0xc0, sof),
    ...segment(0xc4, dht),
    ...segment(0xda, sos),
    ...out.bytes,
    0xff, 0xd9, // EOI
  ]);
}
