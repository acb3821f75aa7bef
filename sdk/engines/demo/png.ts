import { crc32, deflateSync, inflateSync } from 'node:zlib';

/** Channels per pixel -> PNG colour type (grey, RGB, RGBA), all 8 bits per sample. */
const COLOR_TYPE = { 1: 0, 3: 2, 4: 6 } as const;

function chunk(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(body.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body, crc32(head.subarray(4))), 0); // CRC covers type + data
  return Buffer.concat([head, body, crc]);
}

export interface PngOptions {
  /** tEXt chunks (keyword, text), Latin-1, written after IHDR in this order. */
  text?: Array<[string, string]>;
  /**
   * Stored (uncompressed) deflate blocks instead of zlib level 9: the bytes then depend on the
   * pixels alone, not on the zlib build, so another language's writer can match them exactly
   * (the demo ranked image, docs/ranks.md).
   */
  stored?: boolean;
}

/** A zlib stream of stored deflate blocks (at most 65535 bytes each) and its Adler-32. */
export function zlibStored(data: Uint8Array): Buffer {
  const parts: Buffer[] = [Buffer.from([0x78, 0x01])];
  for (let at = 0; at === 0 || at < data.length; at += 0xffff) {
    const block = data.subarray(at, at + 0xffff);
    const head = Buffer.alloc(5);
    head[0] = at + 0xffff >= data.length ? 1 : 0; // BFINAL on the last block, BTYPE 00
    head.writeUInt16LE(block.length, 1);
    head.writeUInt16LE(~block.length & 0xffff, 3);
    parts.push(head, Buffer.from(block));
  }
  let a = 1;
  let b = 0;
  for (const byte of data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  const adler = Buffer.alloc(4);
  adler.writeUInt32BE(((b << 16) | a) >>> 0, 0);
  parts.push(adler);
  return Buffer.concat(parts);
}

/**
 * A minimal but complete PNG: IHDR, any tEXt chunks, one IDAT (filter 0 on every row) and IEND.
 * `pixels` holds width*height*channels bytes, row by row.
 */
export function encodePng(width: number, height: number, channels: 1 | 3 | 4, pixels: Uint8Array, options: PngOptions = {}): Buffer {
  if (pixels.length !== width * height * channels) throw new Error('encodePng: pixel buffer has the wrong size');
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = COLOR_TYPE[channels];
  // compression, filter method and interlace stay 0
  const stride = width * channels;
  const raw = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y++) raw.set(pixels.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const text = (options.text ?? []).map(([key, value]) => chunk('tEXt', Buffer.from(`${key}\0${value}`, 'latin1')));
  const idat = options.stored ? zlibStored(raw) : deflateSync(raw, { level: 9 });
  return Buffer.concat([signature, chunk('IHDR', ihdr), ...text, chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

export interface DecodedImage {
  width: number;
  height: number;
  /** RGBA, 8 bits a sample, row by row. */
  rgba: Uint8Array;
}

/** Images larger than this are refused: the demo reads them whole. */
const MAX_PIXELS = 4096 * 4096;
const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** Samples a pixel per colour type: grey, RGB, palette, grey + alpha, RGBA. */
const SAMPLES: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

export class PngError extends Error {}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/**
 * Decodes a non-interlaced PNG of 8 bits a sample (16 for grey, RGB and their alpha forms, of
 * which the high byte is kept; palettes of 8 bits) to RGBA. Anything else, or a damaged file,
 * throws a PngError saying what.
 */
export function decodePng(png: Buffer): DecodedImage {
  if (png.length < 8 || !png.subarray(0, 8).equals(SIGNATURE)) throw new PngError('not a PNG (no PNG signature)');
  let pos = 8;
  let header: { width: number; height: number; depth: number; type: number } | null = null;
  let palette: Buffer | null = null;
  let transparency: Buffer | null = null;
  const idat: Buffer[] = [];
  for (let ended = false; !ended; ) {
    if (pos + 12 > png.length) throw new PngError('truncated PNG (no IEND chunk)');
    const length = png.readUInt32BE(pos);
    const type = png.toString('latin1', pos + 4, pos + 8);
    const body = png.subarray(pos + 8, pos + 8 + length);
    if (body.length !== length || pos + 12 + length > png.length) throw new PngError(`truncated PNG (in its ${type} chunk)`);
    if (png.readUInt32BE(pos + 8 + length) !== crc32(png.subarray(pos + 4, pos + 8 + length))) throw new PngError(`damaged PNG (bad CRC of its ${type} chunk)`);
    pos += 12 + length;
    if (type === 'IHDR') {
      if (length !== 13) throw new PngError('damaged PNG (bad IHDR)');
      header = { width: body.readUInt32BE(0), height: body.readUInt32BE(4), depth: body[8], type: body[9] };
      if (body[12] !== 0) throw new PngError('interlaced PNGs are not supported by the demo engine');
    } else if (type === 'PLTE') palette = body;
    else if (type === 'tRNS') transparency = body;
    else if (type === 'IDAT') idat.push(body);
    else if (type === 'IEND') ended = true;
  }
  if (!header) throw new PngError('damaged PNG (no IHDR)');
  const { width, height, depth, type } = header;
  const samples = SAMPLES[type];
  if (!samples || !(depth === 8 || (depth === 16 && type !== 3))) throw new PngError(`PNG colour type ${type} at ${depth} bits is not supported by the demo engine (8-bit grey, RGB, RGBA or palette, or 16-bit grey or RGB)`);
  if (width === 0 || height === 0 || width * height > MAX_PIXELS) throw new PngError(`a ${width}x${height} PNG is out of the demo engine's range (1 to ${MAX_PIXELS} pixels)`);
  if (type === 3 && !palette) throw new PngError('damaged PNG (a palette image without PLTE)');
  const bpp = (samples * depth) / 8;
  const stride = width * bpp;
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(idat), { maxOutputLength: (stride + 1) * height });
  } catch (err) {
    throw new PngError(`damaged PNG (its image data does not inflate: ${(err as Error).message})`);
  }
  if (raw.length !== (stride + 1) * height) throw new PngError('damaged PNG (image data of the wrong size)');
  // Undo the row filters in place; `prev` is the unfiltered row above (zeros for the first).
  let prev: Uint8Array = new Uint8Array(stride);
  const rgba = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? row[i - bpp] : 0;
      const b = prev[i];
      const c = i >= bpp ? prev[i - bpp] : 0;
      const add = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : filter === 4 ? paeth(a, b, c) : -1;
      if (add < 0) throw new PngError(`damaged PNG (unknown row filter ${filter})`);
      row[i] = (row[i] + add) & 0xff;
    }
    prev = row;
    for (let x = 0; x < width; x++) {
      const at = (s: number) => row[x * bpp + (s * depth) / 8]; // the high byte of 16-bit samples
      const out = (y * width + x) * 4;
      if (type === 3) {
        const index = row[x];
        if (index * 3 + 2 >= palette!.length) throw new PngError('damaged PNG (a palette index past PLTE)');
        rgba.set([palette![index * 3], palette![index * 3 + 1], palette![index * 3 + 2], transparency && index < transparency.length ? transparency[index] : 255], out);
      } else if (type === 0 || type === 4) rgba.set([at(0), at(0), at(0), type === 4 ? at(1) : 255], out);
      else rgba.set([at(0), at(1), at(2), type === 6 ? at(3) : 255], out);
    }
  }
  return { width, height, rgba };
}
