import { readFileSync, writeFileSync } from 'node:fs';
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
