/** 16-bit PCM mono WAV: the RIFF header with correct sizes, then the samples little-endian. */
export const SAMPLE_RATE = 22050;

export function encodeWav(samples: Int16Array, sampleRate = SAMPLE_RATE): Buffer {
  const header = Buffer.alloc(44);
  const dataBytes = samples.length * 2;
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  const data = Buffer.alloc(dataBytes);
  samples.forEach((s, i) => data.writeInt16LE(s, i * 2));
  return Buffer.concat([header, data]);
}

/** Float samples in [-1, 1] to 16-bit, clipping anything louder. */
export function toPcm16(samples: Float32Array): Int16Array {
  return Int16Array.from(samples, (s) => Math.round(Math.max(-1, Math.min(1, s)) * 32767));
}

/**
 * Reads PCM out of a WAV whose size fields may be bogus: `espeak-ng --stdout` streams, so it
 * writes 0x7ffffff0-ish sizes. Returns the 16-bit mono samples after the 'data' header, or null.
 */
export function readPcm16Mono(wav: Buffer): { sampleRate: number; samples: Int16Array } | null {
  if (wav.length < 44 || wav.toString('latin1', 0, 4) !== 'RIFF' || wav.toString('latin1', 8, 12) !== 'WAVE') return null;
  let pos = 12;
  let sampleRate = 0;
  while (pos + 8 <= wav.length) {
    const id = wav.toString('latin1', pos, pos + 4);
    const size = wav.readUInt32LE(pos + 4);
    if (id === 'fmt ') {
      const format = wav.readUInt16LE(pos + 8);
      const channels = wav.readUInt16LE(pos + 10);
      const bits = wav.readUInt16LE(pos + 22);
      if (format !== 1 || channels !== 1 || bits !== 16) return null;
      sampleRate = wav.readUInt32LE(pos + 12);
    } else if (id === 'data') {
      if (!sampleRate) return null;
      const end = Math.min(wav.length, pos + 8 + size);
      const bytes = wav.subarray(pos + 8, end - ((end - pos - 8) % 2));
      const samples = new Int16Array(bytes.length / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
      return { sampleRate, samples };
    }
    pos += 8 + size + (size % 2);
  }
  return null;
}
