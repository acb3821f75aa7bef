import { leaseFileUrl, type LeaseInputFile } from '../sdk/protocol/index.js';
import type { RunRecord } from '../models/types.js';

/** A run's input files as the worker of `leaseId` fetches them: through its lease, never from the caller's URL. */
export function leaseInputFiles(publicUrl: string, run: Pick<RunRecord, 'input_files'>, leaseId: string): Record<string, LeaseInputFile> {
  const out: Record<string, LeaseInputFile> = {};
  for (const [field, f] of Object.entries(run.input_files)) {
    out[field] = { url: leaseFileUrl(publicUrl, leaseId, field), size: f.size, content_type: f.content_type, sha256: f.sha256 };
  }
  return out;
}
