import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * `npm run bench -- <name> [options]`: runs bench/<name>.ts, whose default export takes the
 * remaining arguments and resolves with an exit code. Helpers live in lib/ and servers/, so
 * every other .ts file beside this one is a benchmark.
 */
export type Benchmark = (args: string[]) => Promise<number>;

const here = path.dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
  .map((f) => f.slice(0, -3))
  .sort();

const [name, ...args] = process.argv.slice(2);
if (!name || !available.includes(name)) {
  if (name) console.error(`unknown benchmark ${JSON.stringify(name)}`);
  console.error(`usage: npm run bench -- <name> [options]\navailable: ${available.join(', ')}`);
  process.exit(2);
}

const mod = (await import(pathToFileURL(path.join(here, `${name}.ts`)).href)) as { default: Benchmark };
process.exit(await mod.default(args));
