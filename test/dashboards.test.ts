import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { PROMETHEUS_SYNTHETIC, dashboardQueries, exportedTypes, familyOf, metricNames } from './helpers/promql-names.js';
import { PROMETHEUS, PROMTOOL, requireProgram } from './helpers/optional-program.js';
import { PrometheusServer } from './helpers/prometheus-server.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const DASHBOARD = path.join(ROOT, 'dashboards/grafana/switchyard.json');
const PROMETHEUS_YML = path.join(ROOT, 'dashboards/prometheus/prometheus.yml');
const ALERTS_YML = path.join(ROOT, 'dashboards/prometheus/alerts.yml');
const IMAGE = 'inference:image:generate';
// A kind the tests' worker does not serve, so its job stays queued.
const UNSERVED = 'inference:audio:sfx-generate';

const dashboard = async () => JSON.parse(await readFile(DASHBOARD, 'utf8'));
const alertRules = async (): Promise<{ alert: string; expr: string }[]> =>
  (parseYaml(await readFile(ALERTS_YML, 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
const alertQueries = async () => (await alertRules()).map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }));

/** A gateway with an account and a demo worker serving image jobs. */
async function startFleet(prefix: string, env: Record<string, string> = {}) {
  const gw = await new TestGateway(prefix, env).start();
  const { key } = await gw.account(1000);
  const op = await gw.request('POST', '/v1/admin/operators', { body: { name: 'dash', trust: 'open' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const worker = new SwitchyardWorker({ gateway: gw.url, token: op.body.worker_token, kinds: [IMAGE], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
  await worker.start();
  return { gw, key, worker };
}

async function runToSuccess(gw: TestGateway, key: string): Promise<void> {
  const sub = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse' } });
  assert.equal(sub.status, 202, sub.text);
  await until('the job to succeed', async () => (await gw.request('GET', `/v1/jobs/${sub.body.run_id}`, { key })).body.status === 'succeeded');
}

/** Names each query refers to that the exposition has no family for. */
function unexported(queries: { where: string; expr: string }[], types: Map<string, string>): string[] {
  return queries.flatMap(({ where, expr }) =>
    metricNames(expr)
      .filter((n) => !PROMETHEUS_SYNTHETIC.has(n) && !familyOf(n, types))
      .map((n) => `${n} (${where})`),
  );
}

describe('Operations dashboards (dashboards/)', function () {
  describe('finding metric names in PromQL', () => {
    it('takes selectors and skips functions, aggregations, label names, strings and durations', () => {
      assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route!~"x|y_z"}[$__rate_interval])))'), ['a_bucket']);
      assert.deepEqual(metricNames('max by (kind) (a{tier="open"}) > 0 unless on (kind) (sum by (kind) (b) > 0)'), ['a', 'b']);
      assert.deepEqual(metricNames('rate(c_total[5m] offset 1h) * 60 / ignoring(x) group_left(y) d'), ['c_total', 'd']);
    });

    it('maps a histogram\'s _bucket, _sum and _count series to the histogram', () => {
      const types = exportedTypes('# TYPE h histogram\n# TYPE c_total counter\n');
      assert.equal(familyOf('h_bucket', types), 'h');
      assert.equal(familyOf('h_count', types), 'h');
      assert.equal(familyOf('c_total', types), 'c_total');
      assert.equal(familyOf('c_total_bucket', types), undefined);
    });
  });

  describe('against a running gateway', () => {
    const prefix = uniquePrefix('dashboards');
    let fleet: Awaited<ReturnType<typeof startFleet>>;
    let types: Map<string, string>;

    before(async () => {
      fleet = await startFleet(prefix);
      await runToSuccess(fleet.gw, fleet.key);
      const res = await fetch(`${fleet.gw.url}/metrics`);
      assert.equal(res.status, 200);
      types = exportedTypes(await res.text());
    });
    after(async () => {
      await fleet?.worker.stop();
      await fleet?.gw.stop();
      await cleanupPrefix(prefix);
    });

    it('every dashboard query, in nested rows and variables too, names only metrics the gateway exports', async () => {
      const queries = dashboardQueries(await dashboard());
      assert.ok(queries.length > 20, 'the walk finds the panels');
      assert.deepEqual(unexported(queries, types), []);
    });

    it('every alert expression names only metrics the gateway exports', async () => {
      assert.deepEqual(unexported(await alertQueries(), types), []);
    });

    it('the dashboard shows every switchyard_ metric the gateway exports', async () => {
      const used = new Set(dashboardQueries(await dashboard()).flatMap(({ expr }) => metricNames(expr).map((n) => familyOf(n, types))));
      const missing = [...types.keys()].filter((n) => n.startsWith('switchyard_') && !used.has(n));
      assert.deepEqual(missing, []);
    });
  });

  describe('the Grafana files', () => {
    it('every panel reads from the prometheus datasource variable and has its own id', async () => {
      const d = await dashboard();
      const all = d.panels.flatMap((p: any) => [p, ...(p.panels ?? [])]);
      assert.equal(new Set(all.map((p: any) => p.id)).size, all.length);
      for (const p of all.filter((p: any) => p.type !== 'row')) {
        assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, p.title);
        for (const t of p.targets) assert.equal(t.datasource.uid, '${datasource}', p.title);
      }
      const variable = d.templating.list.find((v: any) => v.name === 'datasource');
      assert.deepEqual([variable.type, variable.query], ['datasource', 'prometheus']);
    });

    it('provisioning points Grafana at http://prometheus:9090 and at /var/lib/grafana/dashboards', async () => {
      const ds = parseYaml(await readFile(path.join(ROOT, 'dashboards/grafana/provisioning/datasources/prometheus.yml'), 'utf8'));
      assert.deepEqual([ds.datasources[0].type, ds.datasources[0].url], ['prometheus', 'http://prometheus:9090']);
      const dash = parseYaml(await readFile(path.join(ROOT, 'dashboards/grafana/provisioning/dashboards/switchyard.yml'), 'utf8'));
      assert.equal(dash.providers[0].options.path, '/var/lib/grafana/dashboards');
    });
  });

  describe('promtool', () => {
    let promtool: string;
    before(function () {
      promtool = requireProgram(this, PROMTOOL);
    });

    it('accepts the alert rules', async () => {
      await run(promtool, ['check', 'rules', ALERTS_YML]);
    });

    it('passes the alert rules\' unit tests (test/prometheus/alerts.promtool.yml)', async () => {
      await run(promtool, ['test', 'rules', path.join(ROOT, 'test/prometheus/alerts.promtool.yml')]);
    });

    it('accepts prometheus.yml, its commented bearer_token option included, with the rules path pointing at the repo file', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-promtool-'));
      try {
        const text = (await readFile(PROMETHEUS_YML, 'utf8')).replace('/etc/prometheus/alerts.yml', ALERTS_YML).replace(/# (bearer_token: .*)/, '$1');
        assert.match(text, /^\s+bearer_token: /m, 'the bearer_token option is there to uncomment');
        await writeFile(path.join(dir, 'prometheus.yml'), text);
        await run(promtool, ['check', 'config', path.join(dir, 'prometheus.yml')]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('in a real Prometheus', function () {
    this.timeout(60_000);
    const prefix = uniquePrefix('dashboards-prom');
    const METRICS_TOKEN = 'test-metrics-token-0123456789';
    let fleet: Awaited<ReturnType<typeof startFleet>>;
    let prom: PrometheusServer | undefined;
    const IMAGE_JOBS = 3;

    before(async function () {
      const prometheus = requireProgram(this, PROMETHEUS);
      fleet = await startFleet(prefix, { METRICS_TOKEN });
      // The repo's config, pointed at this gateway, scraping and evaluating every second.
      const config = parseYaml(await readFile(PROMETHEUS_YML, 'utf8'));
      config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
      config.rule_files = [ALERTS_YML];
      const job = config.scrape_configs.find((s: { job_name: string }) => s.job_name === 'switchyard');
      Object.assign(job, { scrape_interval: '1s', bearer_token: METRICS_TOKEN, static_configs: [{ targets: [new URL(fleet.gw.url).host] }] });
      prom = await PrometheusServer.start(prometheus, stringifyYaml(config));
    });
    after(async () => {
      await prom?.stop();
      await fleet?.worker.stop();
      await fleet?.gw.stop();
      await cleanupPrefix(prefix);
    });

    it('scrapes the gateway with the bearer token and counts every submitted job', async () => {
      for (let i = 0; i < IMAGE_JOBS; i++) await runToSuccess(fleet.gw, fleet.key);
      assert.equal((await fleet.gw.submit(fleet.key, { kind: UNSERVED, input: { prompt: 'thunder' } })).status, 202);
      const n = IMAGE_JOBS + 1;
      await until(`sum(switchyard_jobs_submitted_total) to answer ${n}`, async () => (await prom!.query('sum(switchyard_jobs_submitted_total)'))[0]?.value[1] === String(n), 30_000);
    });

    it('evaluates every alert rule without error, and the no-capable-worker expression names the queue no worker serves', async () => {
      await until('every rule to be evaluated', async () => {
        const rules = await prom!.rules();
        const bad = rules.filter((r) => r.health === 'err');
        assert.deepEqual(bad, [], 'no rule fails to evaluate');
        return rules.length === (await alertRules()).length && rules.every((r) => r.health === 'ok');
      }, 30_000);
      const rule = (await alertRules()).find((r) => r.alert === 'SwitchyardQueueWithoutCapableWorker')!;
      const series = await until('the unserved queue to show', async () => {
        const r = await prom!.query(rule.expr);
        return r.length ? r : undefined;
      }, 30_000);
      assert.deepEqual(series.map((s) => [s.metric.kind, s.metric.tier, s.value[1]]), [[UNSERVED, 'open', '1']]);
    });

    it('answers every dashboard query without a PromQL error', async () => {
      // Grafana's variables as Grafana would expand them for "All" and a 1 s scrape.
      const expand = (e: string) => e.replaceAll('$__rate_interval', '1m').replaceAll('$kind', '.*').replaceAll('$tier', '.*');
      for (const { where, expr } of dashboardQueries(await dashboard())) {
        await assert.doesNotReject(prom!.query(expand(expr)), where);
      }
      const depth = dashboardQueries(await dashboard()).find((q) => q.where === 'panel "Queue depth by kind, tier and state"')!;
      const queued = (await prom!.query(expand(depth.expr))).filter((s) => s.metric.kind === UNSERVED && s.value[1] !== '0');
      assert.equal(queued.length, 1, 'the queue depth panel shows the job no worker serves');
    });
  });
});
