/**
 * The binary frames that carry a pipeline's activations between its ranks through the gateway
 * (protocol 6, docs/worker-protocol.md, "Ranks"). Workers only connect out, so rank i sends its
 * frames to the gateway, which sends them on to rank i+1 (and from the last rank back to rank
 * 0): the tensor bytes travel as one binary WebSocket message, never as base64 in JSON.
 *
 * Layout, little endian: a 32-byte header, then the payload (the bytes the ranks agree on).
 *
 * | offset | size | field                                                                   |
 * | 0      | 4    | magic, ASCII `SYPF`                                                     |
 * | 4      | 1    | version, 1                                                              |
 * | 5      | 1    | flags: bit 0 `end` (the sender sends nothing more on this pipeline)     |
 * | 6      | 2    | reserved, 0                                                             |
 * | 8      | 16   | the lease id's 16 bytes (`lse_` + 32 hex digits)                        |
 * | 24     | 4    | fence, uint32                                                           |
 * | 28     | 4    | seq, uint32: 1, 2, 3... per lease and direction                         |
 * | 32     | ...  | payload, at most MAX_FRAME_BYTES - 32 bytes                             |
 *
 * From a worker, the lease is the sender's own rank lease; from the gateway, the receiver's.
 */
import { MAX_FRAME_BYTES } from './limits.js';

export const PIPELINE_FRAME_MAGIC = 'SYPF';
export const PIPELINE_FRAME_VERSION = 1;
export const PIPELINE_HEADER_BYTES = 32;
/** The largest payload one pipeline frame carries. */
export const MAX_PIPELINE_PAYLOAD = MAX_FRAME_BYTES - PIPELINE_HEADER_BYTES;
const END_FLAG = 1;
const LEASE_ID = /^lse_[0-9a-f]{32}$/;

export interface PipelineFrame {
  /** The rank lease the frame is about (`lse_...`). */
  leaseId: string;
  fence: number;
  /** 1, 2, 3... for the frames one lease sends (or receives). */
  seq: number;
  /** The sender's last frame on this pipeline: its stream ends here (the payload may be empty). */
  end: boolean;
  payload: Uint8Array;
}

/** A binary frame that is not a pipeline frame: its message says why. */
export class PipelineFrameError extends Error {
  override readonly name = 'PipelineFrameError';
}

/** Whether `id` is a lease id a pipeline frame can carry. */
export const isPipelineLeaseId = (id: string): boolean => LEASE_ID.test(id);

export function encodePipelineFrame(frame: PipelineFrame): Buffer {
  if (!isPipelineLeaseId(frame.leaseId)) throw new PipelineFrameError(`lease id ${JSON.stringify(frame.leaseId)} is not lse_ and 32 hex digits`);
  if (frame.payload.byteLength > MAX_PIPELINE_PAYLOAD) throw new PipelineFrameError(`a pipeline frame's payload is at most ${MAX_PIPELINE_PAYLOAD} bytes, this one is ${frame.payload.byteLength}`);
  const out = Buffer.allocUnsafe(PIPELINE_HEADER_BYTES + frame.payload.byteLength);
  writePipelineHeader(out, frame.leaseId, frame.fence, frame.seq, frame.end);
  out.set(frame.payload, PIPELINE_HEADER_BYTES);
  return out;
}

/** Writes a header into the first 32 bytes of `out` (the gateway rewrites a frame's header in place when it forwards it). */
export function writePipelineHeader(out: Buffer, leaseId: string, fence: number, seq: number, end: boolean): void {
  out.write(PIPELINE_FRAME_MAGIC, 0, 'latin1');
  out.writeUInt8(PIPELINE_FRAME_VERSION, 4);
  out.writeUInt8(end ? END_FLAG : 0, 5);
  out.writeUInt16LE(0, 6);
  out.write(leaseId.slice(4), 8, 16, 'hex');
  out.writeUInt32LE(fence >>> 0, 24);
  out.writeUInt32LE(seq >>> 0, 28);
}

/** Reads a pipeline frame; the payload is a view of `data`, not a copy. */
export function decodePipelineFrame(data: Uint8Array): PipelineFrame {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf.length < PIPELINE_HEADER_BYTES) throw new PipelineFrameError(`a pipeline frame is at least ${PIPELINE_HEADER_BYTES} bytes, this one is ${buf.length}`);
  if (buf.toString('latin1', 0, 4) !== PIPELINE_FRAME_MAGIC) throw new PipelineFrameError('a pipeline frame starts with SYPF');
  if (buf[4] !== PIPELINE_FRAME_VERSION) throw new PipelineFrameError(`pipeline frame version ${buf[4]} is not ${PIPELINE_FRAME_VERSION}`);
  if ((buf[5] & ~END_FLAG) !== 0 || buf.readUInt16LE(6) !== 0) throw new PipelineFrameError('a pipeline frame sets no flag but end (bit 0) and no reserved bit');
  return {
    leaseId: `lse_${buf.toString('hex', 8, 24)}`,
    fence: buf.readUInt32LE(24),
    seq: buf.readUInt32LE(28),
    end: (buf[5] & END_FLAG) !== 0,
    payload: buf.subarray(PIPELINE_HEADER_BYTES),
  };
}
