import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/**
 * The console's built files (api/bin/build.mjs bundles api/console/ into dist/console/ at
 * `npm install`): the app's script and stylesheet, its icon and the vendored viewers. Read
 * once, on first use, and served from memory with a content hash in every link, so a browser
 * may keep each for a year and a new build is fetched at once.
 */

/** dist/console/ whether this module runs compiled (dist/api/http/console/) or from its source (api/http/console/). */
function consoleDir(): string | null {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.resolve(here, '../../../console'), path.resolve(here, '../../../dist/console')];
  return candidates.find((d) => existsSync(path.join(d, 'app.js'))) ?? null;
}

export interface ConsoleAsset {
  body: Buffer;
  type: string;
  /** The first 16 hex digits of the sha256 of the bytes: the `v` of its links, and its ETag. */
  hash: string;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

/** The files a page may load, by their path under /console/. */
const SERVED = ['app.js', 'app.css', 'icon.svg', 'vendor/model-viewer.min.js'];

export class ConsoleAssets {
  private files: Map<string, ConsoleAsset> | null = null;

  /** Null when the console was never built (a checkout that skipped `npm install`'s build). */
  private load(): Map<string, ConsoleAsset> | null {
    if (this.files) return this.files;
    const dir = consoleDir();
    if (!dir) return null;
    const files = new Map<string, ConsoleAsset>();
    for (const name of SERVED) {
      const file = path.join(dir, name);
      if (!existsSync(file)) continue;
      const body = readFileSync(file);
      files.set(name, { body, type: TYPES[path.extname(name)] ?? 'application/octet-stream', hash: createHash('sha256').update(body).digest('hex').slice(0, 16) });
    }
    return (this.files = files);
  }

  get built(): boolean {
    return this.load() !== null;
  }

  get(name: string): ConsoleAsset | undefined {
    return this.load()?.get(name);
  }

  /** The link of an asset, relative to the page's base, with its content hash. */
  href(name: string): string {
    const asset = this.get(name);
    return `console/${name}${asset ? `?v=${asset.hash}` : ''}`;
  }
}
