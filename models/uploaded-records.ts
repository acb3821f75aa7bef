import type { ArtifactMeta } from './artifact-store.js';

/**
 * Records of run uploads kept for their settlement (`ArtifactStore.takeUploaded`), shared by
 * the stores. A lease settles within seconds of its uploads, so the bound only matters for
 * leases that never settle (lost workers): the oldest go.
 */
const MAX_UPLOADED = 4096;

export class UploadedRecords {
  private readonly records = new Map<string, ArtifactMeta>();

  remember(meta: ArtifactMeta): void {
    if (this.records.size >= MAX_UPLOADED) this.records.delete(this.records.keys().next().value!);
    this.records.set(meta.id, meta);
  }

  /** The record, once; null when unknown, already taken or expired. */
  take(id: string): ArtifactMeta | null {
    const meta = this.records.get(id);
    if (!meta) return null;
    this.records.delete(id);
    return Date.parse(meta.expires_at) > Date.now() ? meta : null;
  }

  forget(id: string): void {
    this.records.delete(id);
  }
}
