import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readmeSettingsTable, settingsTable } from '../api/main/config-doc.js';
import { ConfigError, envSettings, loadConfig } from '../api/main/config.js';

describe('configuration', () => {
  it('has working defaults with an empty environment', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.redisUrl, 'redis://127.0.0.1:6379');
    assert.equal(c.redisUrlDefaulted, true);
    assert.equal(c.dataDir, './.data');
    assert.equal(c.mongoUrl, undefined);
    assert.equal(c.adminToken, undefined);
    assert.equal(c.jsonBodyLimitBytes, 3 * 1024 * 1024);
    assert.equal(c.publicUrl, 'http://127.0.0.1:8080');
    assert.equal(c.prices['inference:image:generate'], 4);
  });

  it('reads every variable', () => {
    const c = loadConfig({
      PORT: '9000', HOST: '0.0.0.0', PUBLIC_URL: 'https://api.example.com/', REDIS_URL: 'redis://redis:6379/2', REDIS_PREFIX: 'prod',
      MONGO_URL: 'mongodb://mongo:27017/?replicaSet=rs0', MONGO_DB: 'sy', ADMIN_TOKEN: 'a'.repeat(32), DATA_DIR: '/var/lib/sy',
      PRICES: '{"inference:rig": 7}', RUN_RETENTION_DAYS: '7', JOB_MAX_ATTEMPTS: '5', JSON_BODY_LIMIT: '256kb', JSON_MAX_DEPTH: '20',
      RATE_LIMIT_PER_SEC: '10', RATE_LIMIT_BURST: '20', TRUST_PROXY: 'true', LOG_LEVEL: 'debug',
    });
    assert.equal(c.port, 9000);
    assert.equal(c.publicUrl, 'https://api.example.com');
    assert.equal(c.redisUrlDefaulted, false);
    assert.equal(c.mongoUrl, 'mongodb://mongo:27017/?replicaSet=rs0');
    assert.equal(c.prices['inference:rig'], 7);
    assert.equal(c.prices['inference:image:generate'], 4, 'other kinds keep their price');
    assert.equal(c.runRetentionSeconds, 7 * 86400);
    assert.equal(c.jsonBodyLimitBytes, 256 * 1024);
    assert.equal(c.trustProxy, true);
  });

  it('names every problem at once', () => {
    try {
      loadConfig({ PORT: 'eighty', REDIS_URL: 'localhost:6379', ADMIN_TOKEN: 'short', PRICES: '{"inference:nope": 1, "inference:rig": -2}', LOG_LEVEL: 'loud' });
      assert.fail('should have thrown');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      const text = err.message;
      for (const name of ['PORT', 'REDIS_URL', 'ADMIN_TOKEN', 'inference:nope', 'inference:rig', 'LOG_LEVEL']) assert.match(text, new RegExp(name));
      assert.equal(err.problems.length, 6);
    }
  });

  it('reads a Redis Cluster from REDIS_CLUSTER_NODES or a redis+cluster:// REDIS_URL, and hash-tags the key prefix on one', () => {
    const single = loadConfig({ REDIS_URL: 'redis://:pw@redis:6379/2' });
    assert.deepEqual(single.redis, { kind: 'single', url: 'redis://:pw@redis:6379/2' });
    assert.equal(single.redisPrefix, 'sy', 'one server keeps the prefix as given');

    const nodes = loadConfig({ REDIS_URL: 'rediss://user:p%40ss@ignored:6379', REDIS_CLUSTER_NODES: 'r1:7000, r2:7001,[::1]:7002' });
    assert.deepEqual(nodes.redis, {
      kind: 'cluster',
      nodes: [{ host: 'r1', port: 7000 }, { host: 'r2', port: 7001 }, { host: '::1', port: 7002 }],
      username: 'user',
      password: 'p@ss',
      tls: true,
    });
    assert.equal(nodes.redisPrefix, '{sy}');
    assert.equal(nodes.redisUrlDefaulted, false, 'the dev launcher starts no Redis of its own');

    const url = loadConfig({ REDIS_URL: 'redis+cluster://:secret@10.0.0.1:6379,10.0.0.2:6379', REDIS_PREFIX: 'prod' });
    assert.deepEqual(url.redis, { kind: 'cluster', nodes: [{ host: '10.0.0.1', port: 6379 }, { host: '10.0.0.2', port: 6379 }], password: 'secret', tls: false });
    assert.equal(url.redisPrefix, '{prod}');
    assert.equal(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000', REDIS_PREFIX: 'a:{b}' }).redisPrefix, 'a:{b}', 'a prefix with a hash tag is the operator\'s placement');

    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return '';
      } catch (err) {
        return (err as ConfigError).problems.join('; ');
      }
    };
    assert.match(problems({ REDIS_CLUSTER_NODES: 'r1:7000,r2' }), /REDIS_CLUSTER_NODES has "r2", not host:port/);
    assert.match(problems({ REDIS_CLUSTER_NODES: 'r1:70000' }), /REDIS_CLUSTER_NODES has "r1:70000"/);
    assert.match(problems({ REDIS_URL: 'redis+cluster://r1:7000', REDIS_CLUSTER_NODES: 'r1:7000' }), /not both/);
    assert.match(problems({ REDIS_URL: 'redis+cluster://r1:7000/3' }), /only database 0/);
    assert.match(problems({ REDIS_URL: 'redis+cluster://' }), /REDIS_URL names no node/);
  });

  it('reads per-unit PRICES and names what is wrong with one', () => {
    const c = loadConfig({ PRICES: '{"inference:video:generate": {"base": 2, "per_second": 3, "max_seconds": 120}, "inference:rig": 7}' });
    assert.deepEqual(c.prices['inference:video:generate'], { base: 2, per_second: 3, max_seconds: 120 });
    assert.equal(c.prices['inference:rig'], 7);
    const problems = (prices: unknown) => {
      try {
        loadConfig({ PRICES: JSON.stringify(prices) });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    assert.match(problems({ 'inference:video:generate': { base: 1, per_second: 3 } }).join(), /PRICES\[inference:video:generate\] needs "max" or "max_seconds"/);
    assert.match(problems({ 'inference:rig': { base: 1, per_image: 1.5, max: 9 } }).join(), /\.per_image must be a whole number >= 0/);
    assert.match(problems({ 'inference:rig': { base: 1, per_minute: 2 } }).join(), /unknown field "per_minute"/);
    assert.match(problems({ 'inference:rig': { base: 1 } }).join(), /names no per-unit rate/);
    assert.match(problems({ 'inference:rig': 'ten' }).join(), /must be a whole number of credits or an object/);
  });

  it('treats empty variables as unset', () => {
    assert.equal(loadConfig({ ADMIN_TOKEN: '', MONGO_URL: '' }).adminToken, undefined);
  });
});

/**
 * README "Configuration" is the manual of the settings: its table must be what the settings
 * table renders, and, read on its own, name exactly the variables loadConfig reads, each with
 * the default the schema gives it. The docs' other tables may only name real settings.
 */
describe('Config schema', () => {
  const ROOT = path.resolve(import.meta.dirname, '..');
  const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
  /** The rows of the Markdown table that follows `heading` (first column -> cells). */
  const tableAfter = (text: string, heading: string) => {
    const lines = text.slice(text.indexOf(heading)).split('\n');
    const start = lines.findIndex((l) => l.startsWith('|'));
    const rows = lines.slice(start + 2, lines.findIndex((l, i) => i > start && !l.startsWith('|')));
    return rows.map((row) => row.slice(1, -1).split(/(?<!\\) \| /).map((c) => c.trim()));
  };
  const names = (cell: string) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]);
  /** What loadConfig reads, observed through a Proxy rather than taken from the table it is built from. */
  const readByLoadConfig = () => {
    const seen: string[] = [];
    loadConfig(new Proxy({}, { get: (_t, key) => (typeof key === 'string' && seen.push(key), undefined) }));
    return seen;
  };

  it('README holds the settings table the schema renders', () => {
    assert.ok(readmeSettingsTable(read('README.md')), 'README.md has lost its settings markers');
    assert.equal(readmeSettingsTable(read('README.md')), settingsTable(), 'README is out of date: run `node --import tsx api/main/config-doc.ts`');
  });

  it('documents every variable loadConfig reads in README, with its default, and no other', () => {
    const rows = tableAfter(read('README.md'), '## Configuration');
    const documented = rows.map(([variable]) => names(variable)).flat();
    assert.deepEqual([...documented].sort(), [...readByLoadConfig()].sort());
    for (const s of envSettings()) {
      const row = rows.find(([variable]) => names(variable).includes(s.env))!;
      const expected = s.default === undefined ? (s.docDefault ?? 'unset') : `\`${s.default}\``;
      assert.equal(row[1], expected, `${s.env}'s default in README`);
    }
  });

  it('gives each variable to one setting', () => {
    const seen = readByLoadConfig();
    assert.deepEqual(seen.filter((name, i) => seen.indexOf(name) !== i), []);
  });

  it('accepts its own defaults', () => {
    for (const s of envSettings()) if (s.default !== undefined) loadConfig({ [s.env]: String(s.default) });
  });

  it('is the only source of the settings docs/api.md and docs/deploy.md name in their tables', () => {
    const known = new Set(readByLoadConfig());
    const limits = tableAfter(read('docs/api.md'), '## Limits').flatMap((row) => names(row[2]));
    // NODE_ENV is Node's own, set by the image; not a gateway setting.
    const compose = tableAfter(read('docs/deploy.md'), '## Configuration').flatMap((row) => names(row[0])).filter((n) => n !== 'NODE_ENV');
    assert.ok(limits.length > 10 && compose.length > 5, 'the tables were not found');
    assert.deepEqual([...limits, ...compose].filter((n) => !known.has(n)), []);
  });
});
