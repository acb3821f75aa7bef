import type { Logger } from 'pino';
import type { ArtifactMeta, ArtifactStore } from '../models/artifact-store.js';
import type { JobOutputFile } from '../sdk/client/types.js';
import { parseArtifactUrl } from '../sdk/protocol/index.js';

export interface OutputFilesOptions {
  artifacts: ArtifactStore;
  /** Read at each settlement: with PORT=0 the public URL is only known once the server listens. */
  publicUrl: () => string;
  log: Logger;
}

/** The last path segment of a URL that is not one of this gateway's artifacts, decoded when it can be. */
function lastSegment(url: string): string {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    // The complete frame's schema lets only http(s) URLs through; still, never fail a completion over a name.
    path = url.split(/[?#]/)[0];
  }
  const segment = path.slice(path.lastIndexOf('/') + 1);
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const unvouched = (url: string, name: string): JobOutputFile => ({ url, name, content_type: null, size: null, sha256: null });

/**
 * `output.files` of a succeeded run (docs/api.md, "The job object"): for each URL of `urls`, in
 * order, what the gateway itself recorded when the artifact was uploaded, so a worker cannot
 * misstate a file's type, size or hash. No byte read (the store hashed the bytes on the way
 * in), and no metadata read for an upload this instance took (the store hands its record
 * over); one read per URL uploaded elsewhere (a gateway sharing the data dir). A URL that is not an artifact of this gateway (open and
 * trusted workers may report external ones), or no longer is, gets null fields.
 */
export class OutputFiles {
  constructor(private readonly opts: OutputFilesOptions) {}

  /**
   * Never throws: a store that fails to read a record gives that URL null fields and a warning,
   * as settlement must not lose (or hang) a completion over a description of its files.
   * `known`: records already read for this run (a private run's receipt check), by URL.
   */
  async describe(runId: string, urls: readonly string[], known?: ReadonlyMap<string, ArtifactMeta>): Promise<JobOutputFile[]> {
    const publicUrl = this.opts.publicUrl();
    return Promise.all(
      urls.map(async (url) => {
        const ref = parseArtifactUrl(publicUrl, url);
        if (!ref) return unvouched(url, lastSegment(url));
        let meta = known?.get(url) ?? this.opts.artifacts.takeUploaded?.(ref.id) ?? null;
        if (!meta) {
          try {
            meta = await this.opts.artifacts.get(ref.id);
          } catch (err) {
            this.opts.log.warn({ err, runId, url }, 'could not read an output artifact\'s record: its entry of output.files has null fields');
          }
        }
        // The URL's name must be the stored one, as the download route requires.
        if (!meta || meta.name !== ref.name) return unvouched(url, ref.name);
        return { url, name: meta.name, content_type: meta.content_type, size: meta.size, sha256: meta.sha256 };
      }),
    );
  }
}
