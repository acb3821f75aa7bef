/**
 * A Motion-JPEG AVI writer (RIFF 'AVI ': hdrl with avih + one video strl, movi with one '00dc'
 * chunk per JPEG frame, and an idx1 index so players can seek). Everything little-endian.
 */

function riffChunk(id: string, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.write(id, 0, 'latin1');
  head.writeUInt32LE(body.length, 4);
  // chunks are word-aligned: an odd body gets a pad byte that the size does not count
  return Buffer.concat(body.length % 2 ? [head, body, Buffer.alloc(1)] : [head, body]);
}

function list(type: string, parts: Buffer[]): Buffer {
  return riffChunk('LIST', Buffer.concat([Buffer.from(type, 'latin1'), ...parts]));
}

function u32s(values: number[], size: number): Buffer {
  const b = Buffer.alloc(size);
  values.forEach((v, i) => b.writeUInt32LE(v >>> 0, i * 4));
  return b;
}

export function writeMjpegAvi(frames: Buffer[], width: number, height: number, fps: number): Buffer {
  const maxFrame = Math.max(...frames.map((f) => f.length));
  const AVIF_HASINDEX = 0x10;
  const avih = u32s([Math.round(1e6 / fps), maxFrame * fps, 0, AVIF_HASINDEX, frames.length, 0, 1, maxFrame, width, height], 56);

  const strh = Buffer.alloc(56);
  strh.write('vids', 0, 'latin1');
  strh.write('MJPG', 4, 'latin1');
  // flags, priority, language, initial frames stay 0
  strh.writeUInt32LE(1, 20); // dwScale
  strh.writeUInt32LE(fps, 24); // dwRate: rate / scale = frames per second
  strh.writeUInt32LE(frames.length, 32); // dwLength
  strh.writeUInt32LE(maxFrame, 36); // dwSuggestedBufferSize
  strh.writeInt32LE(-1, 40); // dwQuality: default
  strh.writeInt16LE(width, 52); // rcFrame right
  strh.writeInt16LE(height, 54); // rcFrame bottom

  const strf = Buffer.alloc(40); // BITMAPINFOHEADER
  strf.writeUInt32LE(40, 0);
  strf.writeInt32LE(width, 4);
  strf.writeInt32LE(height, 8);
  strf.writeUInt16LE(1, 12); // planes
  strf.writeUInt16LE(24, 14); // bit count
  strf.write('MJPG', 16, 'latin1');
  strf.writeUInt32LE(width * height * 3, 20);

  const hdrl = list('hdrl', [riffChunk('avih', avih), list('strl', [riffChunk('strh', strh), riffChunk('strf', strf)])]);
  const chunks = frames.map((f) => riffChunk('00dc', f));
  const movi = list('movi', chunks);

  // idx1 offsets are relative to the 'movi' fourcc, so the first chunk sits at 4
  const idx = Buffer.alloc(16 * frames.length);
  let offset = 4;
  frames.forEach((f, i) => {
    idx.write('00dc', i * 16, 'latin1');
    idx.writeUInt32LE(0x10, i * 16 + 4); // AVIIF_KEYFRAME: every MJPEG frame is one
    idx.writeUInt32LE(offset, i * 16 + 8);
    idx.writeUInt32LE(f.length, i * 16 + 12);
    offset += chunks[i].length;
  });

  const body = Buffer.concat([Buffer.from('AVI ', 'latin1'), hdrl, movi, riffChunk('idx1', idx)]);
  return riffChunk('RIFF', body);
}
