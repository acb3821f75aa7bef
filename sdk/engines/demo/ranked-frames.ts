/**
 * The binary frames ranks of the demo ranked models pass to each other through the gateway
 * (docs/ranks.md, "Frame layout"). A 16-byte header then `count` int32 values, all little endian:
 *
 *   0  4  magic "SYRK"
 *   4  1  version (1)
 *   5  1  type: 1 prompt, 2 activations, 3 token, 4 latent
 *   6  1  model: 1 demo-ranked-llm, 2 demo-ranked-image
 *   7  1  reserved, 0
 *   8  4  step (uint32): the generation step the frame belongs to
 *  12  4  count (uint32): int32 values after the header; the frame is exactly 16 + 4*count bytes
 *
 * Twin: sdk/python/worker/switchyard_worker/ranked_frames.py (same bytes, same error messages).
 */

export const FRAME_MAGIC = 'SYRK';
export const FRAME_VERSION = 1;
export const FRAME_HEADER_BYTES = 16;
/** A frame never holds more values than this (a prompt's tokens are the largest: 4096). */
export const MAX_FRAME_VALUES = 1 << 16;

export const FrameType = { prompt: 1, activations: 2, token: 3, latent: 4 } as const;
export type FrameTypeName = keyof typeof FrameType;
export const FrameModel = { 'demo-ranked-llm': 1, 'demo-ranked-image': 2 } as const;
export type RankedModelName = keyof typeof FrameModel;

export interface RankedFrame {
  type: FrameTypeName;
  model: RankedModelName;
  step: number;
  values: Int32Array;
}

/** A frame that is not one of this format, or not the one a stage expects; the message says which. */
export class RankedFrameError extends Error {
  override name = 'RankedFrameError';
}

const nameOf = <T extends Record<string, number>>(table: T, code: number): keyof T | undefined => (Object.keys(table) as Array<keyof T>).find((k) => table[k] === code);

export function encodeFrame(frame: RankedFrame): Buffer {
  const { values } = frame;
  if (values.length > MAX_FRAME_VALUES) throw new RankedFrameError(`ranked frame: ${values.length} values is over the limit of ${MAX_FRAME_VALUES}`);
  const out = Buffer.alloc(FRAME_HEADER_BYTES + values.length * 4);
  out.write(FRAME_MAGIC, 0, 'latin1');
  out[4] = FRAME_VERSION;
  out[5] = FrameType[frame.type];
  out[6] = FrameModel[frame.model];
  out.writeUInt32LE(frame.step >>> 0, 8);
  out.writeUInt32LE(values.length, 12);
  for (let i = 0; i < values.length; i++) out.writeInt32LE(values[i], FRAME_HEADER_BYTES + i * 4);
  return out;
}

/** Reads a frame's header and values, refusing anything malformed with a RankedFrameError. */
export function decodeFrame(bytes: Uint8Array): RankedFrame {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < FRAME_HEADER_BYTES) throw new RankedFrameError(`ranked frame: ${buf.length} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  if (buf.toString('latin1', 0, 4) !== FRAME_MAGIC) throw new RankedFrameError(`ranked frame: bad magic ${buf.toString('hex', 0, 4)} (expected "${FRAME_MAGIC}")`);
  if (buf[4] !== FRAME_VERSION) throw new RankedFrameError(`ranked frame: version ${buf[4]} (this code reads version ${FRAME_VERSION})`);
  const type = nameOf(FrameType, buf[5]);
  if (!type) throw new RankedFrameError(`ranked frame: unknown type ${buf[5]}`);
  const model = nameOf(FrameModel, buf[6]);
  if (!model) throw new RankedFrameError(`ranked frame: unknown model ${buf[6]}`);
  if (buf[7] !== 0) throw new RankedFrameError(`ranked frame: reserved byte 7 is ${buf[7]} (expected 0)`);
  const step = buf.readUInt32LE(8);
  const count = buf.readUInt32LE(12);
  if (count > MAX_FRAME_VALUES) throw new RankedFrameError(`ranked frame: ${count} values is over the limit of ${MAX_FRAME_VALUES}`);
  const expected = FRAME_HEADER_BYTES + count * 4;
  if (buf.length !== expected) throw new RankedFrameError(`ranked frame: header says ${count} values (${expected} bytes) but the frame has ${buf.length} bytes`);
  const values = new Int32Array(count);
  for (let i = 0; i < count; i++) values[i] = buf.readInt32LE(FRAME_HEADER_BYTES + i * 4);
  return { type, model, step, values };
}

/** decodeFrame, then the model and one of the types a stage takes, named in the error for whoever wired it wrong. */
export function expectFrame(bytes: Uint8Array, model: RankedModelName, types: FrameTypeName[], who: string): RankedFrame {
  const frame = decodeFrame(bytes);
  if (frame.model !== model) throw new RankedFrameError(`ranked frame: a ${frame.model} frame sent to ${who} of ${model}`);
  if (!types.includes(frame.type)) throw new RankedFrameError(`ranked frame: a ${frame.type} frame sent to ${who}, which takes ${types.join(' or ')} frames`);
  return frame;
}

/** Refuses values outside [min, max] (activations beyond what normalize leaves, token ids past the vocabulary). */
export function checkRange(frame: RankedFrame, min: number, max: number, what: string): void {
  const bad = frame.values.findIndex((v) => v < min || v > max);
  if (bad >= 0) throw new RankedFrameError(`ranked frame: ${what} ${bad} is ${frame.values[bad]}, outside [${min}, ${max}]`);
}

/** Refuses a frame whose count is not the one its type needs here. */
export function checkCount(frame: RankedFrame, count: number, what: string): void {
  if (frame.values.length !== count) throw new RankedFrameError(`ranked frame: a ${frame.type} frame of ${frame.values.length} values where ${what} takes ${count}`);
}
