import { readFile } from 'node:fs/promises';
import type { EngineContext, InputFile } from '../types.js';
import { GlbError, readMeshGeometry, type MeshGeometry } from './glb-read.js';
import type { Rgb } from './palette.js';
import { decodePng, PngError, type DecodedImage } from './png.js';

/** The demo reads an input file whole; larger ones are refused. */
export const MAX_INPUT_BYTES = 64 * 1024 * 1024;

/** An input the demo cannot use: fails the run for good (another attempt would get the same bytes). */
export function badInput(message: string, cause?: unknown): Error {
  return Object.assign(new Error(message, cause === undefined ? undefined : { cause }), { code: 'bad_input', retryable: false });
}

export interface ReadFile {
  file: InputFile;
  data: Buffer;
}

/**
 * The bytes of the file held by input field `field`, through the worker (`ctx.inputFile`), or
 * null when the input has no such field (an optional one left out).
 */
export async function readInputFile(ctx: EngineContext, input: Record<string, unknown>, field: string): Promise<ReadFile | null> {
  const value = input[field];
  if (value === undefined || value === null || value === '') return null;
  const file = await ctx.inputFile(field);
  if (file.size > MAX_INPUT_BYTES) throw badInput(`input ${field} is ${file.size} bytes, more than the demo engine reads (${MAX_INPUT_BYTES})`);
  return { file, data: await readFile(file.path) };
}

/** What an output says about the input file it came from. */
export function describeInput(field: string, { file }: ReadFile): Record<string, unknown> {
  return { field, sha256: file.sha256, size: file.size, content_type: file.contentType };
}

/** The image of input field `field`, decoded; null when the input has none. PNG only: anything else is `bad_input`. */
export async function readInputImage(ctx: EngineContext, input: Record<string, unknown>, field: string): Promise<{ read: ReadFile; image: DecodedImage } | null> {
  const read = await readInputFile(ctx, input, field);
  if (!read) return null;
  const { data } = read;
  if (data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) throw badInput(`input ${field} is a JPEG; the demo engine reads PNG images only`);
  try {
    return { read, image: decodePng(data) };
  } catch (err) {
    if (err instanceof PngError) throw badInput(`input ${field}: ${err.message}`, err);
    throw err;
  }
}

/**
 * The mean colour of the pixels of a block, each counted by its opacity (plainly when they are
 * all transparent). `x1`, `y1` exclusive.
 */
export function meanColour({ width, rgba }: DecodedImage, x0: number, y0: number, x1: number, y1: number): Rgb {
  const sum = [0, 0, 0];
  const plain = [0, 0, 0];
  let weight = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const i = (y * width + x) * 4;
      const a = rgba[i + 3] / 255;
      for (let c = 0; c < 3; c++) {
        sum[c] += rgba[i + c] * a;
        plain[c] += rgba[i + c];
      }
      weight += a;
    }
  }
  const n = (x1 - x0) * (y1 - y0);
  return (weight > 0 ? sum.map((s) => Math.round(s / weight)) : plain.map((s) => Math.round(s / n))) as Rgb;
}

/** The image box-filtered (or, when smaller, nearest-sampled) to width x height RGB. */
export function resample(image: DecodedImage, width: number, height: number): Uint8Array {
  const out = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const y0 = Math.floor((y * image.height) / height);
    const y1 = Math.max(y0 + 1, Math.floor(((y + 1) * image.height) / height));
    for (let x = 0; x < width; x++) {
      const x0 = Math.floor((x * image.width) / width);
      const x1 = Math.max(x0 + 1, Math.floor(((x + 1) * image.width) / width));
      out.set(meanColour(image, x0, y0, x1, y1), (y * width + x) * 3);
    }
  }
  return out;
}

/** The mesh (.glb) of input field `field`, its first primitive read; null when the input has none. A damaged file is `bad_input`. */
export async function readInputMesh(ctx: EngineContext, input: Record<string, unknown>, field: string): Promise<{ read: ReadFile; geo: MeshGeometry } | null> {
  const read = await readInputFile(ctx, input, field);
  if (!read) return null;
  try {
    return { read, geo: readMeshGeometry(read.data) };
  } catch (err) {
    if (err instanceof GlbError) throw badInput(`input ${field}: ${err.message}`, err);
    throw err;
  }
}
