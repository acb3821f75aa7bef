import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../api/main/config.js';
import {
  copyParts, dockerIgnores, envOf, environmentOf, finalStage, interpolate, moduleGraph, mountsOf, namedStage, parseDockerfile,
  readDockerignore, requiredVariables, type DockerInstruction,
} from './helpers/deploy-files.js';

// No Docker engine runs where the tests do: these checks read the files the way Docker and
// Compose would, and hold them to the code (config variables, module graph, dashboards).
const ROOT = path.resolve(import.meta.dirname, '..');
const read = (rel: string) => readFileSync(path.join(ROOT, rel), 'utf8');

interface Service {
  image?: string;
  build?: string | { context: string; dockerfile?: string };
  command?: string | string[];
  environment?: Record<string, unknown> | string[];
  env_file?: string | string[];
  volumes?: Array<string | { type?: string; source?: string; target: string }>;
  ports?: string[];
  configs?: Array<string | { source: string; target?: string }>;
  secrets?: Array<string | { source: string; target?: string }>;
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test: string | string[] };
  stop_grace_period?: string;
}
interface Compose {
  services: Record<string, Service>;
  configs?: Record<string, { file?: string; content?: string }>;
  secrets?: Record<string, { file?: string }>;
  volumes?: Record<string, unknown>;
}

const composeText = read('docker-compose.yml');
// merge: the gateways share one definition through a YAML merge key (<<: *gateway).
const compose = parseYaml(composeText, { merge: true }) as Compose;
/** What an operator's .env holds (docs/deploy.md); METRICS_TOKEN left out, as by default. */
const SAMPLE_ENV = { ADMIN_TOKEN: randomBytes(24).toString('hex'), TOOL_SECRET_KEY: randomBytes(32).toString('base64'), GRAFANA_ADMIN_PASSWORD: 'correct horse' };
const dockerfile = parseDockerfile(read('Dockerfile'));
const runtime = finalStage(dockerfile);
const contextOf = (s: Service) => (typeof s.build === 'string' ? s.build : s.build?.context);
const gateways = Object.entries(compose.services).filter(([, s]) => contextOf(s) === '.');
const commandOf = (s: Service) => (Array.isArray(s.command) ? s.command : (s.command ?? '').split(/\s+/)).map((w) => interpolate(w, SAMPLE_ENV));
const only = (name: string) => compose.services[name] ?? assert.fail(`no service ${name}`);
const caddyfile = () => compose.configs?.caddyfile?.content ?? assert.fail('no inline caddyfile config');
const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1] ?? NaN);

/** The names loadConfig reads: exactly the keys of its schema, observed through a Proxy. */
function configVariables(): Set<string> {
  const names = new Set<string>();
  loadConfig(new Proxy({}, { get: (_t, key) => (typeof key === 'string' && names.add(key), undefined) }));
  return names;
}

describe('deployment files', () => {
  it('compose references only files and directories that exist in the repository', () => {
    const refs: string[] = [];
    for (const s of Object.values(compose.services)) {
      const context = contextOf(s);
      if (context) refs.push(context, path.join(context, typeof s.build === 'object' ? (s.build.dockerfile ?? 'Dockerfile') : 'Dockerfile'));
      for (const m of mountsOf(s)) if (m.bind) refs.push(m.source);
      for (const f of [s.env_file ?? []].flat()) refs.push(f);
    }
    for (const c of [...Object.values(compose.configs ?? {}), ...Object.values(compose.secrets ?? {})]) if (c.file) refs.push(c.file);
    assert.ok(refs.length >= 6, 'the build, the Prometheus and the Grafana files are referenced');
    for (const ref of refs) assert.ok(existsSync(path.join(ROOT, ref)), `${ref} is referenced by docker-compose.yml but missing`);
  });

  it('redis keeps its data: append-only file, no eviction, on a volume', () => {
    const redis = only('redis');
    const cmd = commandOf(redis);
    assert.equal(cmd[cmd.indexOf('--appendonly') + 1], 'yes');
    assert.equal(cmd[cmd.indexOf('--maxmemory-policy') + 1], 'noeviction');
    assert.ok(mountsOf(redis).some((m) => m.target === '/data' && !m.bind), 'redis /data on a named volume');
  });

  it('mongo is a single-node replica set that its healthcheck initiates under the name the gateways use', () => {
    const mongo = only('mongo');
    const cmd = commandOf(mongo);
    assert.equal(cmd[cmd.indexOf('--replSet') + 1], 'rs0');
    const check = [mongo.healthcheck?.test ?? []].flat().join(' ');
    assert.match(check, /rs\.initiate\(/);
    assert.match(check, /host: 'mongo:27017'/);
    for (const [, g] of gateways) assert.equal(environmentOf(g).MONGO_URL, 'mongodb://mongo:27017/?replicaSet=rs0');
  });

  it('two gateways run the same build and share one artifacts volume at DATA_DIR', () => {
    assert.deepEqual(gateways.map(([n]) => n).sort(), ['gateway-1', 'gateway-2']);
    const [[, a], [, b]] = gateways;
    assert.deepEqual(a.build, b.build);
    assert.deepEqual(environmentOf(a), environmentOf(b));
    const dataDir = envOf(runtime).DATA_DIR;
    const volumeAt = (s: Service) => mountsOf(s).find((m) => m.target === dataDir);
    assert.ok(volumeAt(a) && !volumeAt(a)!.bind, `gateway-1 has a named volume at DATA_DIR (${dataDir})`);
    assert.equal(volumeAt(b)?.source, volumeAt(a)!.source, 'both gateways mount the same volume');
    assert.ok(compose.volumes && volumeAt(a)!.source in compose.volumes);
  });

  it('gateways start after healthy Redis and MongoDB and are given longer than their drain to stop', () => {
    const drainS = loadConfig({}).shutdownDrainMs / 1000;
    for (const [name, g] of gateways) {
      const deps = g.depends_on as Record<string, { condition?: string }>;
      assert.equal(deps.redis?.condition, 'service_healthy', name);
      assert.equal(deps.mongo?.condition, 'service_healthy', name);
      // The drain, a grace for requests in flight (Gateway.stop: at most 10 s), then margin.
      assert.ok(seconds(g.stop_grace_period ?? '10s') >= drainS + 10 + 5, `${name} stop_grace_period`);
    }
  });

  it('the gateways set only variables the configuration knows, with values it accepts', () => {
    const known = configVariables();
    assert.ok(known.has('REDIS_URL') && known.has('TOOL_SECRET_KEY'), 'loadConfig reads its variables by name');
    const imageEnv = envOf(runtime);
    for (const key of Object.keys(imageEnv)) assert.ok(known.has(key) || key === 'NODE_ENV', `Dockerfile ENV ${key} is not a Switchyard variable`);
    for (const [name, g] of gateways) {
      const env = Object.fromEntries(Object.entries(environmentOf(g)).map(([k, v]) => [k, interpolate(v, SAMPLE_ENV)]));
      for (const key of Object.keys(env)) assert.ok(known.has(key), `${name} sets ${key}, which api/main/config.ts does not read`);
      const config = loadConfig({ ...imageEnv, ...env });
      assert.equal(config.host, '0.0.0.0');
      assert.equal(config.dataDir, '/data');
      assert.equal(config.trustProxy, true, 'behind the proxy, client addresses come from X-Forwarded-For');
      assert.ok(config.mongoUrl && config.adminToken && config.agents.toolSecretKey?.length === 32);
      assert.equal(config.metricsToken, undefined, 'an empty METRICS_TOKEN counts as unset');
      loadConfig({ ...imageEnv, ...env, METRICS_TOKEN: randomBytes(16).toString('hex') });
    }
  });

  it('required secrets stop compose with a message naming them, and docs/deploy.md lists each', () => {
    const required = requiredVariables(composeText);
    assert.deepEqual(required.sort(), ['ADMIN_TOKEN', 'GRAFANA_ADMIN_PASSWORD', 'TOOL_SECRET_KEY']);
    const [[, gateway]] = gateways;
    assert.throws(() => interpolate(environmentOf(gateway).ADMIN_TOKEN, {}), /ADMIN_TOKEN: set ADMIN_TOKEN/);
    const docs = read('docs/deploy.md');
    for (const name of required) assert.ok(docs.includes(name), `docs/deploy.md explains ${name}`);
  });

  it('the proxy publishes the public port and spreads over both gateways without buffering streams', () => {
    const proxy = only('proxy');
    const published = (proxy.ports ?? []).map((p) => p.split(':').at(-2));
    const publicUrl = new URL(interpolate(environmentOf(gateways[0][1]).PUBLIC_URL, {}));
    assert.ok(published.includes(publicUrl.port), `PUBLIC_URL's port ${publicUrl.port} is published by the proxy`);
    assert.ok((proxy.configs ?? []).some((c) => typeof c === 'object' && c.source === 'caddyfile' && c.target === '/etc/caddy/Caddyfile'));
    const upstreams = /reverse_proxy\s+([^{\n]+)/.exec(caddyfile())?.[1].trim().split(/\s+/);
    assert.deepEqual(upstreams, gateways.map(([n]) => `${n}:8080`));
    assert.match(caddyfile(), /^\s*flush_interval -1$/m);
    assert.match(caddyfile(), /^\s*health_uri \/readyz$/m);
    assert.match(caddyfile(), /^\s*respond \/metrics 404$/m, 'the public side has no /metrics');
  });

  it('prometheus scrapes every gateway with the dashboards files mounted, grafana provisions them', () => {
    const prometheus = only('prometheus');
    const targets = mountsOf(prometheus).map((m) => m.target);
    assert.ok(targets.includes('/etc/prometheus/prometheus.yml') && targets.includes('/etc/prometheus/alerts.yml'));
    const prom = parseYaml(read('dashboards/prometheus/prometheus.yml')) as { rule_files?: string[]; scrape_configs: { static_configs?: { targets: string[] }[] }[] };
    assert.ok(prom.rule_files?.every((f) => targets.includes(f)), 'rule files are mounted where prometheus.yml looks');
    const scraped = prom.scrape_configs.flatMap((s) => (s.static_configs ?? []).flatMap((c) => c.targets));
    for (const [name] of gateways) assert.ok(scraped.includes(`${name}:8080`), `prometheus scrapes ${name}`);
    for (const t of scraped) assert.ok(t.split(':')[0] in compose.services, `scrape target ${t} is a compose service`);
    const grafana = only('grafana');
    const mounts = mountsOf(grafana);
    assert.ok(mounts.some((m) => m.source === './dashboards/grafana/provisioning' && m.target === '/etc/grafana/provisioning'));
    assert.ok(mounts.some((m) => m.source === './dashboards/grafana/switchyard.json' && m.target.startsWith('/var/lib/grafana/dashboards/')));
    assert.match(environmentOf(grafana).GF_SECURITY_ADMIN_PASSWORD, /^\$\{GRAFANA_ADMIN_PASSWORD:\?/);
  });

  it('the Dockerfile builds in stages and runs node as a non-root user with a healthcheck', () => {
    assert.ok(dockerfile.filter((i) => i.name === 'FROM').length >= 2, 'a dependencies stage and a runtime stage');
    const user = runtime.filter((i) => i.name === 'USER').at(-1)?.args;
    assert.ok(user && !/^(root|0)(:|$)/.test(user), `final stage runs as ${user}`);
    const health = runtime.find((i) => i.name === 'HEALTHCHECK');
    assert.match(health?.args ?? '', /CMD \[.*\/healthz/);
    const last = (name: string) => runtime.filter((i) => i.name === name).at(-1) as DockerInstruction;
    assert.ok(last('CMD').args.startsWith('['), 'CMD in exec form (a JSON array), so SIGTERM reaches node, not a shell');
    assert.deepEqual(JSON.parse(last('CMD').args), ['node', 'api/bin/switchyard.mjs', 'serve']);
    assert.equal(runtime.find((i) => i.name === 'ENTRYPOINT'), undefined, 'no shell entrypoint in front of node');
    assert.equal(envOf(runtime).NODE_ENV, 'production');
    assert.match(dockerfile.find((i) => i.name === 'RUN' && /npm ci/.test(i.args))?.args ?? '', /--omit=dev/);
  });

  it('every COPY source exists and the build context keeps it', () => {
    const ignore = readDockerignore(path.join(ROOT, '.dockerignore'));
    for (const i of dockerfile.filter((x) => x.name === 'COPY')) {
      const { flags, sources } = copyParts(i.args);
      if (flags.some((f) => f.startsWith('--from'))) continue;
      for (const src of sources) {
        assert.ok(existsSync(path.join(ROOT, src)), `COPY ${src}: missing`);
        assert.ok(!dockerIgnores(ignore, src), `COPY ${src}: excluded by .dockerignore`);
      }
    }
    assert.ok(dockerIgnores(ignore, '.env') && dockerIgnores(ignore, 'node_modules/x'), 'secrets and host modules stay out');
  });

  it('the image holds every module the gateway loads, and each package it imports is a production dependency', () => {
    // The runtime stage copies files of the build context, and the compiled code (dist/) from the
    // build stage, which makes it from the sources it copies (npm ci runs the build as prepare).
    const copies = runtime.filter((i) => i.name === 'COPY');
    const copied = copies.filter((i) => !copyParts(i.args).flags.length).flatMap((i) => copyParts(i.args).sources);
    const built = copies.filter((i) => copyParts(i.args).flags.includes('--from=build')).flatMap((i) => copyParts(i.args).sources.map((s) => path.posix.relative('/app', s)));
    assert.deepEqual(built, ['dist'], 'the compiled code comes from the build stage');
    const build = namedStage(dockerfile, 'build');
    const buildSources = build.filter((i) => i.name === 'COPY' && !copyParts(i.args).flags.length).flatMap((i) => copyParts(i.args).sources);
    for (const needed of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'api']) assert.ok(buildSources.includes(needed), `the build stage copies ${needed}`);
    assert.match(build.find((i) => i.name === 'RUN' && /npm ci/.test(i.args))?.args ?? '', /npm ci(?!.*--ignore-scripts)(?!.*--omit=dev)/, 'the build stage installs everything and runs prepare (the build)');
    const { files, packages } = moduleGraph(path.join(ROOT, JSON.parse(runtime.filter((i) => i.name === 'CMD').at(-1)!.args)[1]));
    assert.ok(files.size > 50, 'the graph reaches the gateway');
    assert.ok(![...files].some((f) => f.endsWith('.ts')), 'the gateway loads compiled JavaScript only');
    for (const file of files) {
      const rel = path.relative(ROOT, file);
      assert.ok(existsSync(file), `${rel} is imported but missing`);
      const under = (dirs: string[], p: string) => dirs.some((src) => p === src || p.startsWith(`${src}/`));
      if (under(built, rel)) {
        // dist/x/y.js is made from x/y.ts (or copied from x/y.js, the bot pages' scripts).
        const source = path.relative('dist', rel);
        assert.ok(existsSync(path.join(ROOT, source.replace(/\.js$/, '.ts'))) || existsSync(path.join(ROOT, source)), `${rel} has no source`);
        assert.ok(under(buildSources, source), `${rel} is built from ${source}, which the build stage does not copy`);
      } else {
        assert.ok(under(copied, rel), `${rel} is loaded by the gateway but not copied into the image`);
      }
    }
    const deps = (JSON.parse(read('package.json')) as { dependencies: Record<string, string> }).dependencies;
    for (const pkg of packages) assert.ok(pkg in deps, `${pkg} is imported at run time but is not in dependencies (npm ci --omit=dev leaves it out)`);
  });
});
