import { crc32, deflateSync } from 'node:zlib';

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

/**
 * A minimal but complete PNG: IHDR, one IDAT (zlib, filter 0 on every row) and IEND.
 * `pixels` holds width*height*channels bytes, row by row.
 */
export function encodePng(width: number, height: number, channels: 1 | 3 | 4, pixels: Uint8Array): Buffer {
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
  return Buffer.concat([signature, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw, { level: 9 })), chunk('IEND', Buffer.alloc(0))]);
}
