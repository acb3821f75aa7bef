import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ArtifactMeta } from '../../models/artifact-store.js';

/**
 * An artifact file of FsArtifactStore (`<id>.art`): the bytes, then the record as JSON, its
 * length (uint32 BE) and a 4-byte magic. Tests read and damage stored files behind the store.
 */
export function readArtifactFile(file: string): { bytes: Buffer; meta: ArtifactMeta } {
  const whole = readFileSync(file);
  const jsonLen = whole.readUInt32BE(whole.length - 8);
  const meta = JSON.parse(whole.subarray(whole.length - 8 - jsonLen, whole.length - 8).toString('utf8')) as ArtifactMeta;
  return { bytes: whole.subarray(0, meta.size), meta };
}

/** Flips every byte of the artifact, keeping its length and record: only its hash can tell. */
export function flipArtifactBytes(file: string): void {
  const whole = readFileSync(file);
  const size = readArtifactFile(file).meta.size;
  writeFileSync(file, Buffer.concat([whole.subarray(0, size).map((b) => b ^ 0xff), whole.subarray(size)]));
}

/** Whether an artifact file ends with its record's magic: false while its upload is under way (written in place, the record last). */
export function hasRecord(file: string): boolean {
  const whole = readFileSync(file);
  return whole.length >= 8 && whole.subarray(whole.length - 4).toString('latin1') === 'SYA1';
}

/** Every `.art` file under the store's `root`, in its two-letter directories. */
export function artifactFilesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => readdirSync(path.join(root, d.name)).filter((f) => f.endsWith('.art')).map((f) => path.join(root, d.name, f)));
}

/** The files of uploads under way (or cut short) under `root`: those without their record yet. */
export const partialUploadsUnder = (root: string): string[] => artifactFilesUnder(root).filter((f) => !hasRecord(f));
