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

export class WavError extends Error {}

export interface WavInfo {
  /** 1: integer PCM, 3: IEEE float. */
  format: 1 | 3;
  channels: number;
  sampleRate: number;
  bitsPerSample: number;
  /** Where the samples start, and how many bytes of them arrived (streamed WAVs carry bogus sizes). */
  dataOffset: number;
  dataBytes: number;
  durationS: number;
}

const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

/** The header of a PCM or float WAV (8, 16, 24 or 32-bit integers, 32 or 64-bit floats, any channels). */
export function readWav(wav: Buffer): WavInfo {
  if (wav.length < 12 || wav.toString('latin1', 0, 4) !== 'RIFF' || wav.toString('latin1', 8, 12) !== 'WAVE') throw new WavError('not a WAV file (no RIFF/WAVE header)');
  let fmt: Omit<WavInfo, 'dataOffset' | 'dataBytes' | 'durationS'> | null = null;
  for (let pos = 12; pos + 8 <= wav.length; ) {
    const id = wav.toString('latin1', pos, pos + 4);
    const size = wav.readUInt32LE(pos + 4);
    if (id === 'fmt ') {
      if (size < 16 || pos + 8 + 16 > wav.length) throw new WavError('damaged WAV (short fmt chunk)');
      let format = wav.readUInt16LE(pos + 8);
      if (format === WAVE_FORMAT_EXTENSIBLE && size >= 40 && pos + 8 + 26 <= wav.length) format = wav.readUInt16LE(pos + 8 + 24); // the sub-format GUID starts with it
      const channels = wav.readUInt16LE(pos + 10);
      const sampleRate = wav.readUInt32LE(pos + 12);
      const blockAlign = wav.readUInt16LE(pos + 20);
      const bitsPerSample = wav.readUInt16LE(pos + 22);
      const known = (format === 1 && [8, 16, 24, 32].includes(bitsPerSample)) || (format === 3 && [32, 64].includes(bitsPerSample));
      if (!known) throw new WavError(`a WAV of format ${format} at ${bitsPerSample} bits is not supported by the demo engine (integer PCM or float)`);
      if (channels < 1 || sampleRate < 1 || sampleRate > 768_000 || blockAlign !== (channels * bitsPerSample) / 8) throw new WavError('damaged WAV (inconsistent fmt chunk)');
      fmt = { format: format as 1 | 3, channels, sampleRate, bitsPerSample };
    } else if (id === 'data') {
      if (!fmt) throw new WavError('damaged WAV (data before fmt)');
      const block = (fmt.channels * fmt.bitsPerSample) / 8;
      const arrived = Math.min(size, wav.length - pos - 8);
      const dataBytes = arrived - (arrived % block);
      return { ...fmt, dataOffset: pos + 8, dataBytes, durationS: dataBytes / block / fmt.sampleRate };
    }
    pos += 8 + size + (size % 2);
  }
  throw new WavError(fmt ? 'damaged WAV (no data chunk)' : 'damaged WAV (no fmt chunk)');
}

/** The samples of a WAV mixed down to one channel, in [-1, 1]. */
export function wavToMono(wav: Buffer, info: WavInfo): Float32Array {
  const { channels, bitsPerSample: bits, format } = info;
  const bytes = bits / 8;
  const frames = info.dataBytes / (bytes * channels);
  const out = new Float32Array(frames);
  const read = (at: number): number => {
    if (format === 3) return bits === 32 ? wav.readFloatLE(at) : wav.readDoubleLE(at);
    if (bits === 8) return (wav[at] - 128) / 128;
    if (bits === 16) return wav.readInt16LE(at) / 32768;
    if (bits === 24) return wav.readIntLE(at, 3) / 8388608;
    return wav.readInt32LE(at) / 2147483648;
  };
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read(info.dataOffset + (f * channels + c) * bytes);
    out[f] = sum / channels;
  }
  return out;
}

/** Taps on each side of the resampling filter (more when downsampling, whose cut-off is lower). */
const HALF_TAPS = 16;

/** Band-limited resampling (a Hann-windowed sinc, cut off below the lower Nyquist frequency). */
export function resampleAudio(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return samples;
  const ratio = from / to;
  const cutoff = Math.min(1, to / from);
  const half = Math.ceil(HALF_TAPS / cutoff);
  const out = new Float32Array(Math.floor(samples.length / ratio));
  for (let i = 0; i < out.length; i++) {
    const t = i * ratio;
    const centre = Math.floor(t);
    let acc = 0;
    for (let j = Math.max(0, centre - half + 1); j <= Math.min(samples.length - 1, centre + half); j++) {
      const d = t - j;
      const arg = Math.PI * cutoff * d;
      acc += samples[j] * cutoff * (arg === 0 ? 1 : Math.sin(arg) / arg) * (0.5 + 0.5 * Math.cos((Math.PI * d) / half));
    }
    out[i] = acc;
  }
  return out;
}

/** The clip as a 16-bit mono WAV at `rate` (what a speech recognizer's model wants), cut to `maxSeconds`. */
export function resampledWav(wav: Buffer, info: WavInfo, rate: number, maxSeconds: number): Buffer {
  return encodeWav(toPcm16(resampleAudio(wavToMono(wav, info), info.sampleRate, rate).subarray(0, maxSeconds * rate)), rate);
}
