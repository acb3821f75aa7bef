import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * The source folders are layers, and imports only go down: sdk <- models <- queues <- dispatch
 * <- api (the SDKs ship alone; stores know nothing of queues; dispatch nothing of HTTP). No file
 * imports itself back through others either. The imports are read from the source text, so a
 * new upward arrow or cycle fails here before it spreads.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const LAYERS = ['sdk', 'models', 'queues', 'dispatch', 'api'] as const;
const rank = (file: string) => LAYERS.indexOf(file.split('/')[0] as (typeof LAYERS)[number]);

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sourceFiles(rel);
    return /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** Relative specifiers of static imports and re-exports (type-only ones too) and of `import()`. */
function importsOf(source: string): string[] {
  const specs: string[] = [];
  const text = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm)) specs.push(m[1]);
  for (const m of text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm)) specs.push(m[1]);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) specs.push(m[1]);
  return specs.filter((s) => s.startsWith('.'));
}

/** The import graph of the layers: file -> files it imports (paths from the repository root). */
function graph(): Map<string, string[]> {
  const files = LAYERS.flatMap((layer) => sourceFiles(layer));
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsOf(readFileSync(path.join(ROOT, file), 'utf8')).map((spec) => {
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      const ts = resolved.replace(/\.js$/, '.ts');
      return known.has(ts) ? ts : resolved;
    });
    edges.set(file, targets);
  }
  return edges;
}

/** Every cycle's files (strongly connected components of more than one file, or a self-import). */
function cycles(edges: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!edges.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('source layering', () => {
  const edges = graph();

  it('reads the imports of every layer (the check below is not vacuous)', () => {
    assert.deepEqual(importsOf(`import a from './a.js';\nimport type { B } from "../b.js";\nexport { c } from './c.js';\nconst d = await import('./d.js');\n// import x from './commented.js'\nimport 'node:fs';`), ['./a.js', '../b.js', './c.js', './d.js']);
    assert.ok(edges.get('api/composition/fleet.ts')?.includes('dispatch/dispatcher.ts'), 'the composition imports the dispatcher');
    const total = [...edges.values()].reduce((n, targets) => n + targets.length, 0);
    assert.ok(total > 300, `only ${total} imports found`);
  });

  it('imports only from its own layer or the layers below it: sdk <- models <- queues <- dispatch <- api', () => {
    const upward = [...edges].flatMap(([file, targets]) => targets.filter((t) => rank(t) > rank(file)).map((t) => `${file} -> ${t}`));
    assert.deepEqual(upward, []);
  });

  it('has no import cycle', () => {
    assert.deepEqual(cycles(edges), []);
  });

  it('inside api/, domain services and the contract know nothing of transports or composition', () => {
    const under = (file: string, dir: string) => file.startsWith(`${dir}/`);
    const misplaced = [...edges].flatMap(([file, targets]) =>
      targets
        .filter((t) => {
          // Services read their settings' types from the configuration, nothing else of the process.
          if (under(file, 'api/services')) return ['api/http', 'api/sockets', 'api/composition'].some((d) => under(t, d)) || (under(t, 'api/main') && t !== 'api/main/config.ts');
          if (under(file, 'api/contract')) return ['api/http', 'api/sockets', 'api/composition', 'api/main', 'api/services'].some((d) => under(t, d));
          if (under(file, 'api/http') || under(file, 'api/sockets')) return ['api/composition'].some((d) => under(t, d)) || (under(t, 'api/main') && t !== 'api/main/config.ts');
          return false;
        })
        .map((t) => `${file} -> ${t}`),
    );
    assert.deepEqual(misplaced, []);
  });
});

/**
 * Routes are transport (docs/architecture.md, "One gateway process"): a route module given the
 * whole bag of services, or a store, grows domain rules the services then do not enforce for
 * the sockets or the CLI. Read from the source text, like the layers above.
 */
describe('route modules (api/http/routes/)', () => {
  const edges = graph();
  const modules = sourceFiles('api/http/routes');
  const code = (file: string) => readFileSync(path.join(ROOT, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');

  it('are read (the checks below are not vacuous)', () => {
    assert.ok(modules.length >= 15, `only ${modules.length} route modules`);
    assert.ok(edges.get('api/http/routes/jobs.ts')?.includes('api/services/jobs/job-service.ts'), 'the job routes import the type of the service they are given');
  });

  it('take the services they call, never the bag of them all: the composition hands each its own (api/composition/routes.ts)', () => {
    const bag = modules.flatMap((file) => edges.get(file)!.filter((t) => /(^|\/)services\.[jt]s$/.test(t) || t.startsWith('api/composition/')).map((t) => `${file} -> ${t}`));
    assert.deepEqual(bag, []);
    assert.deepEqual(modules.filter((file) => /\bServices\b/.test(code(file))), [], 'a route module names the Services bag');
  });

  it('reach no store: a store is behind the service that owns its resource', () => {
    const stores = modules.flatMap((file) =>
      edges.get(file)!.filter((t) => t === 'models/stores.ts' || /^models\/(redis|mongo)\//.test(t) || (/(^|\/)[a-z-]*-store\.ts$/.test(t) && t !== 'models/artifact-store.ts')).map((t) => `${file} -> ${t}`),
    );
    assert.deepEqual(stores, []);
    // Named in code: `stores.x`, or a store type (ArtifactStore, LeaseStore, RunStore...).
    const calls = modules.flatMap((file) => [...code(file).matchAll(/\bstores\.\w+|\b[A-Z]\w*Store\b/g)].map((m) => `${file}: ${m[0]}`));
    assert.deepEqual(calls, []);
  });
});

describe('Redis key names', () => {
  it('are built in RedisKeys only (models/redis/keys.ts); BullMQ builds its own below keys.queuePrefixOf', () => {
    const files = LAYERS.flatMap((layer) => sourceFiles(layer)).filter((f) => f !== 'models/redis/keys.ts');
    // A key is a template that puts a prefix before a colon: `${prefix}:run:...`.
    const builders = files.filter((f) => /\$\{[\w.]*[pP]refix\}:/.test(readFileSync(path.join(ROOT, f), 'utf8')));
    assert.deepEqual(builders, []);
  });
});

describe('docs/architecture.md map', () => {
  it('names every source folder, and only folders that exist', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Map'), doc.indexOf('\n## ', doc.indexOf('## Map') + 1));
    const mapped = new Set([...section.matchAll(/^\| `([a-z0-9_/-]+)\/` \|/gm)].map((m) => m[1]));
    // What `pip install ./sdk/python` leaves beside a pyproject.toml (git ignores it) is no source.
    const pipBuild = (dir: string, name: string) =>
      name.endsWith('.egg-info') || (name === 'build' && existsSync(path.join(ROOT, dir, 'pyproject.toml')));
    const folders = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true })
        .filter((e) => e.isDirectory() && e.name !== 'node_modules' && e.name !== 'dist' && e.name !== '__pycache__' && !e.name.startsWith('.') && !pipBuild(dir, e.name))
        .flatMap((e) => [`${dir}/${e.name}`, ...folders(`${dir}/${e.name}`)]);
    const withSources = [...LAYERS, 'dashboards', 'bench', 'test']
      .flatMap((top) => [top, ...folders(top)])
      .filter((dir) => readdirSync(path.join(ROOT, dir), { withFileTypes: true }).some((e) => e.isFile()));
    // Subfolders of tests, benchmarks and dashboards are theirs to arrange.
    const expected = withSources.filter((dir) => LAYERS.some((l) => dir === l || dir.startsWith(`${l}/`)) || !dir.includes('/'));
    assert.deepEqual(expected.filter((dir) => !mapped.has(dir)), [], 'folders missing from the map');
    assert.deepEqual([...mapped].filter((dir) => !withSources.includes(dir)), [], 'the map names folders that do not exist');
  });
});
