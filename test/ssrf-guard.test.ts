import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../api/main/config.js';
import { OutboundError, SsrfGuard } from '../api/services/outbound/ssrf-guard.js';
import { ApiError } from '../models/errors.js';

/** A self-signed certificate for localhost, 127.0.0.1 and ::1, made by the openssl CLI. */
function selfSigned(dir: string, name: string): { key: Buffer; cert: Buffer; certFile: string } {
  const keyFile = path.join(dir, `${name}.key`);
  const certFile = path.join(dir, `${name}.pem`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1',
  ], { stdio: 'ignore' });
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '::', resolve)); // dual stack: 127.0.0.1 and ::1
  return (server.address() as AddressInfo).port;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => assert.fail('expected a rejection'),
    (err: Error) => err,
  );
}

async function outboundCode(promise: Promise<unknown>): Promise<string> {
  const err = await rejection(promise);
  assert.ok(err instanceof OutboundError, `expected an OutboundError, got ${err.stack}`);
  return err.code;
}

async function checkCode(promise: Promise<unknown>): Promise<string> {
  const err = await rejection(promise);
  assert.ok(err instanceof ApiError, `expected a ApiError, got ${err.stack}`);
  assert.equal(err.status, 400);
  return err.code;
}

describe('SSRF guard', () => {
  const guards: SsrfGuard[] = [];
  /** A guard on the policy these OUTBOUND_* variables make; closed after each test. */
  const guard = (env: Record<string, string> = {}) => {
    const g = new SsrfGuard(loadConfig(env).outbound);
    guards.push(g);
    return g;
  };
  afterEach(() => guards.splice(0).forEach((g) => g.close()));

  describe('checkUrl', () => {
    const blocked = [
      'https://127.0.0.1/', 'https://127.0.0.1./', 'https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f.1/',
      'https://0x7f000001/', 'https://017700000001/', 'https://127.1/', 'https://localhost/', 'https://LOCALHOST./',
      'https://api.localhost/', 'https://169.254.169.254/latest/meta-data/', 'https://169.254.169.254./',
      'https://10.0.0.1/', 'https://172.16.5.4/', 'https://192.168.1.1/', 'https://100.64.0.1/', 'https://0.0.0.0/',
      'https://0/', 'https://224.0.0.1/', 'https://255.255.255.255/', 'https://240.0.0.1/', 'https://192.0.0.1/',
      'https://192.0.2.1/', 'https://198.18.0.1/', 'https://198.51.100.7/', 'https://203.0.113.9/',
      'https://[::1]/', 'https://[::]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/',
      'https://[0:0:0:0:0:FFFF:7F00:0001]/', 'https://[::ffff:a9fe:a9fe]/', 'https://[::ffff:1.1.1.1]/',
      'https://[::127.0.0.1]/', 'https://[64:ff9b::7f00:1]/', 'https://[64:ff9b::8.8.8.8]/', 'https://[64:ff9b:1::a00:1]/',
      'https://[2002:7f00:1::]/', 'https://[2002:808:808::1]/', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
      'https://[fe80::1]/', 'https://[fc00::1]/', 'https://[fd12:3456::1]/', 'https://[fec0::1]/', 'https://[ff02::1]/',
      'https://[2001:db8::1]/', 'https://[2001:2::1]/', 'https://[100::1]/',
    ];
    for (const url of blocked) {
      it(`refuses ${url} as url_blocked`, async () => {
        assert.equal(await checkCode(guard().checkUrl(url)), 'url_blocked');
      });
    }

    const invalid = [
      'http://1.1.1.1/', 'http://2130706433/', 'ftp://1.1.1.1/', 'https://user:pass@1.1.1.1/', 'https://user@1.1.1.1/',
      'https://:pass@1.1.1.1/', 'https://1.1.1.1:8443/', 'https://1.1.1.1:80/', 'not a url', '', 'https://[::1/',
    ];
    for (const url of invalid) {
      it(`refuses ${JSON.stringify(url)} as invalid_url`, async () => {
        assert.equal(await checkCode(guard().checkUrl(url)), 'invalid_url');
      });
    }

    it('refuses a host that does not resolve as invalid_url', async () => {
      assert.equal(await checkCode(guard().checkUrl('https://no-such-host.invalid/hook')), 'invalid_url');
    });

    it('accepts public literals and returns the parsed URL', async () => {
      const g = guard();
      assert.equal((await g.checkUrl('https://1.1.1.1/')).href, 'https://1.1.1.1/');
      assert.equal((await g.checkUrl('https://8.8.8.8:443/hook?a=1')).href, 'https://8.8.8.8/hook?a=1');
      assert.equal((await g.checkUrl('https://[2606:4700:4700::1111]/')).hostname, '[2606:4700:4700::1111]');
    });

    it('lets allowCidrs exempt a range, but not a port', async () => {
      const g = guard({ OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: '443,8443' });
      assert.equal((await g.checkUrl('https://127.0.0.1:8443/')).port, '8443');
      assert.equal((await g.checkUrl('https://0x7f.0.0.1/')).hostname, '127.0.0.1');
      assert.equal(await checkCode(g.checkUrl('https://127.0.0.2/')), 'url_blocked');
      // localhost stands for ::1 too, which is not exempt.
      assert.equal(await checkCode(g.checkUrl('https://localhost/')), 'url_blocked');
      assert.equal(await checkCode(g.checkUrl('https://127.0.0.1:9000/')), 'invalid_url');
    });
  });

  describe('isAllowedAddress', () => {
    it('passes only public unicast addresses by default', () => {
      const g = guard();
      for (const a of ['1.1.1.1', '8.8.8.8', '93.184.216.34', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e']) {
        assert.equal(g.isAllowedAddress(a), true, a);
      }
      const refused = [
        '127.0.0.1', '127.255.255.254', '2130706433', '0x7f.1', '0177.0.0.1', '10.1.2.3', '172.31.0.1', '192.168.0.1',
        '169.254.169.254', '100.64.0.1', '100.127.255.255', '0.0.0.0', '0.1.2.3', '224.0.0.251', '239.255.255.250',
        '240.0.0.1', '255.255.255.255', '192.0.0.8', '192.0.2.1', '198.19.255.255', '198.51.100.1', '203.0.113.1',
        '::', '::1', '::ffff:127.0.0.1', '::ffff:8.8.8.8', '::7f00:1', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fdff::1',
        'ff02::1', '64:ff9b::7f00:1', '64:ff9b::808:808', '64:ff9b:1::1', '2002:7f00:1::', '2002:808:808::',
        '2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:db8::1', '3fff::1', 'not-an-ip', '', 'example.com',
      ];
      for (const a of refused) assert.equal(g.isAllowedAddress(a), false, a);
    });

    it('exempts allowCidrs ranges, IPv4 ranges in their IPv4-mapped spelling too', () => {
      const g = guard({ OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32, 10.1.0.0/16, fd00::/8' });
      const table: [string, boolean][] = [
        ['127.0.0.1', true], ['127.0.0.2', false], ['10.1.2.3', true], ['10.2.0.1', false],
        ['::ffff:127.0.0.1', true], ['::ffff:10.2.0.1', false], ['fd00::5', true], ['fc00::5', false], ['::1', false],
        ['1.1.1.1', true],
      ];
      for (const [a, allowed] of table) assert.equal(g.isAllowedAddress(a), allowed, a);
    });
  });

  describe('request', function () {
    let dir: string;
    let trusted: ReturnType<typeof selfSigned>;
    let server: https.Server;
    let port: number;
    let connections = 0;
    const seen: string[] = [];

    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'ssrf-guard-'));
      trusted = selfSigned(dir, 'trusted');
      server = https.createServer({ key: trusted.key, cert: trusted.cert }, (req, res) => {
        seen.push(req.url!);
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const url = new URL(req.url!, 'https://x');
          if (url.pathname === '/echo') {
            res.setHeader('content-type', 'application/json');
            res.end(JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString() }));
          } else if (url.pathname === '/redirect') {
            res.writeHead(302, { location: url.searchParams.get('to') ?? `https://127.0.0.1:${port}/echo` }).end();
          } else if (url.pathname === '/bytes') {
            const body = Buffer.alloc(Number(url.searchParams.get('n')), 'x');
            if (url.searchParams.has('chunked')) {
              for (let i = 0; i < body.length; i += 512) res.write(body.subarray(i, i + 512));
              res.end();
            } else res.end(body);
          } else if (url.pathname === '/status') {
            res.writeHead(Number(url.searchParams.get('code'))).end('no');
          }
          // Any other path (/hang) never answers.
        });
      });
      server.on('connection', () => connections++);
      port = await listen(server);
    });

    after(() => {
      server.closeAllConnections();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    });

    beforeEach(() => {
      connections = 0;
      seen.length = 0;
    });

    /** A guard that may reach the local server: its port allowed, its CA trusted, loopback exempt unless told otherwise. */
    const local = (env: Record<string, string> = {}) =>
      guard({ OUTBOUND_ALLOWED_PORTS: String(port), OUTBOUND_CA_FILE: trusted.certFile, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32,::1/128', ...env });

    it('refuses loopback at connect time without allowCidrs, and before any connection is made', async () => {
      const strict = local({ OUTBOUND_ALLOW_CIDRS: '' });
      for (const host of ['127.0.0.1', '[::1]', '0x7f.1', 'localhost', 'LOCALHOST.']) {
        assert.equal(await outboundCode(strict.request(`https://${host}:${port}/echo`)), 'url_blocked', host);
      }
      assert.equal(connections, 0);
    });

    it('reaches the server by IPv4, IPv6 and name once loopback is exempt', async () => {
      const g = local();
      for (const host of ['127.0.0.1', '[::1]', 'localhost']) {
        const res = await g.request(`https://${host}:${port}/echo`, { body: '{"a":1}', headers: { 'content-type': 'application/json' } });
        assert.equal(res.status, 200, host);
        const echoed = JSON.parse(res.body.toString());
        assert.equal(echoed.method, 'POST');
        assert.equal(echoed.body, '{"a":1}');
        assert.equal(echoed.headers['content-length'], '7');
        assert.equal(echoed.headers['content-type'], 'application/json');
      }
      const get = await g.request(new URL(`https://127.0.0.1:${port}/echo?q=1`), { method: 'GET' });
      assert.equal(JSON.parse(get.body.toString()).method, 'GET');
      assert.equal(seen.at(-1), '/echo?q=1');
    });

    it('checks again at every call: passing checkUrl under one policy does not let a call through under another', async () => {
      const url = await local().checkUrl(`https://localhost:${port}/echo`);
      assert.equal(await outboundCode(local({ OUTBOUND_ALLOW_CIDRS: '' }).request(url)), 'url_blocked');
      assert.equal(connections, 0);
    });

    it('applies the URL rules to calls as well', async () => {
      const g = local();
      assert.equal(await outboundCode(g.request(`http://127.0.0.1:${port}/echo`)), 'invalid_url');
      assert.equal(await outboundCode(g.request(`https://u:p@127.0.0.1:${port}/echo`)), 'invalid_url');
      assert.equal(await outboundCode(local({ OUTBOUND_ALLOWED_PORTS: '443' }).request(`https://127.0.0.1:${port}/echo`)), 'invalid_url');
      assert.equal(connections, 0);
    });

    it('returns a redirect as it is, without following it', async () => {
      const res = await local().request(`https://127.0.0.1:${port}/redirect`);
      assert.equal(res.status, 302);
      assert.equal(res.headers.location, `https://127.0.0.1:${port}/echo`);
      assert.deepEqual(seen, ['/redirect']);
    });

    it('refuses names that resolve to private addresses (injected resolver), at registration and at call time', async () => {
      const internal: Record<string, string[]> = {
        'metadata.example': ['169.254.169.254'],
        'intranet.example': ['10.1.2.3'],
        'loop.example': ['127.0.0.1'],
        'mixed.example': ['93.184.215.14', '192.168.0.10'], // one bad answer is enough
        'mapped.example': ['::ffff:10.0.0.1'],
        'v6-local.example': ['fd00::1'],
        'cgnat.example': ['100.100.100.100'],
      };
      const resolve = async (host: string) => internal[host.replace(/\.$/, '').toLowerCase()] ?? [];
      const strict = new SsrfGuard(loadConfig({ OUTBOUND_ALLOWED_PORTS: String(port), OUTBOUND_CA_FILE: trusted.certFile }).outbound, { resolve });
      guards.push(strict);
      for (const host of Object.keys(internal)) {
        assert.equal(await checkCode(strict.checkUrl(`https://${host}:${port}/echo`)), 'url_blocked', host);
        assert.equal(await outboundCode(strict.request(`https://${host.toUpperCase()}.:${port}/echo`)), 'url_blocked', host);
      }
      assert.equal(connections, 0);
    });

    it('defeats DNS rebinding: a name that was public at registration and is loopback at connect is refused', async () => {
      let calls = 0;
      // First answer public (registration passes), every later one loopback (the rebind).
      const resolve = async () => (calls++ === 0 ? ['93.184.215.14'] : ['127.0.0.1']);
      const g = new SsrfGuard(loadConfig({ OUTBOUND_ALLOWED_PORTS: String(port), OUTBOUND_CA_FILE: trusted.certFile }).outbound, { resolve });
      guards.push(g);
      const url = await g.checkUrl(`https://rebind.example:${port}/echo`);
      assert.equal(await outboundCode(g.request(url)), 'url_blocked');
      assert.ok(calls >= 2, 'resolved again at connect time');
      assert.equal(connections, 0, 'no connection reached the internal server');
    });

    it('follows no hop of a redirect chain, whatever the next hop is', async () => {
      const g = local();
      for (const target of ['https://169.254.169.254/latest/meta-data/', `https://127.0.0.1:${port}/redirect`, 'https://10.0.0.1/']) {
        seen.length = 0;
        const res = await g.request(`https://127.0.0.1:${port}/redirect?to=${encodeURIComponent(target)}`);
        assert.equal(res.status, 302);
        assert.equal(res.headers.location, target);
        assert.equal(seen.length, 1, 'only the first URL was requested');
      }
    });

    it('returns error statuses rather than throwing', async () => {
      const res = await local().request(`https://127.0.0.1:${port}/status?code=503`);
      assert.equal(res.status, 503);
      assert.equal(res.body.toString(), 'no');
    });

    it('fails with timeout when the answer does not come within the total timeout', async () => {
      assert.equal(await outboundCode(local({ OUTBOUND_TOTAL_TIMEOUT_MS: '300' }).request(`https://127.0.0.1:${port}/hang`)), 'timeout');
    });

    it('fails with timeout when the TLS handshake does not finish within the connect timeout', async () => {
      const mute = net.createServer(() => {}); // accepts TCP, never speaks TLS
      const mutePort = await listen(mute);
      try {
        const g = local({ OUTBOUND_ALLOWED_PORTS: String(mutePort), OUTBOUND_CONNECT_TIMEOUT_MS: '200' });
        const err = await rejection(g.request(`https://127.0.0.1:${mutePort}/`));
        assert.ok(err instanceof OutboundError && err.code === 'timeout', String(err));
        assert.match(err.message, /connection/);
      } finally {
        mute.close();
      }
    });

    it('fails with connect_failed when nothing listens', async () => {
      const probe = net.createServer();
      const closedPort = await listen(probe);
      await new Promise((resolve) => probe.close(resolve));
      assert.equal(await outboundCode(local({ OUTBOUND_ALLOWED_PORTS: String(closedPort) }).request(`https://127.0.0.1:${closedPort}/`)), 'connect_failed');
    });

    it('caps the response body at maxResponseBytes, declared or streamed', async () => {
      const g = local({ OUTBOUND_MAX_RESPONSE: '1kb' });
      assert.equal((await g.request(`https://127.0.0.1:${port}/bytes?n=1024`)).body.length, 1024);
      assert.equal((await g.request(`https://127.0.0.1:${port}/bytes?n=1024&chunked`)).body.length, 1024);
      assert.equal(await outboundCode(g.request(`https://127.0.0.1:${port}/bytes?n=65536`)), 'response_too_large');
      assert.equal(await outboundCode(g.request(`https://127.0.0.1:${port}/bytes?n=65536&chunked`)), 'response_too_large');
    });

    it('ignores proxy environment variables', async () => {
      const names = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'NODE_USE_ENV_PROXY'];
      const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
      try {
        for (const n of names) process.env[n] = n === 'NODE_USE_ENV_PROXY' ? '1' : 'http://127.0.0.1:9'; // nothing listens on 9
        const res = await local().request(`https://127.0.0.1:${port}/echo`);
        assert.equal(res.status, 200);
        assert.deepEqual(seen, ['/echo']);
      } finally {
        for (const n of names) {
          if (saved[n] === undefined) delete process.env[n];
          else process.env[n] = saved[n];
        }
      }
    });

    it('fails with tls_failed on a certificate no trusted CA signed', async () => {
      const other = selfSigned(dir, 'untrusted');
      const impostor = https.createServer({ key: other.key, cert: other.cert }, (_req, res) => res.end('secret'));
      const impostorPort = await listen(impostor);
      try {
        const g = local({ OUTBOUND_ALLOWED_PORTS: String(impostorPort) });
        assert.equal(await outboundCode(g.request(`https://127.0.0.1:${impostorPort}/`)), 'tls_failed');
        // The system roots alone do not trust the test CA either.
        assert.equal(await outboundCode(local({ OUTBOUND_CA_FILE: '' }).request(`https://127.0.0.1:${port}/echo`)), 'tls_failed');
      } finally {
        impostor.close();
      }
    });

    it('fails with aborted when the caller aborts, before or during the call', async () => {
      const g = local();
      assert.equal(await outboundCode(g.request(`https://127.0.0.1:${port}/echo`, { signal: AbortSignal.abort() })), 'aborted');
      assert.equal(connections, 0);
      const controller = new AbortController();
      server.once('request', () => controller.abort());
      assert.equal(await outboundCode(g.request(`https://127.0.0.1:${port}/hang`, { signal: controller.signal })), 'aborted');
    });
  });

  describe('dev-local ports (DEV_ALLOW_LOCAL_PORTS, npm run dev only)', () => {
    it('lets plain http and loopback through on a dev-local port, and nowhere else', async () => {
      const g = guard({ DEV_ALLOW_LOCAL_PORTS: '8089, 9000' });
      for (const url of ['http://127.0.0.1:8089/hook', 'http://localhost:9000/', 'http://[::1]:8089/', 'https://127.0.0.1:8089/', 'http://127.0.0.2:8089/']) {
        assert.equal((await g.checkUrl(url)).href, new URL(url).href, url);
      }
      for (const url of ['http://127.0.0.1:8090/', 'http://127.0.0.1/', 'http://1.1.1.1/', 'http://1.1.1.1:443/']) {
        assert.equal(await checkCode(g.checkUrl(url)), 'invalid_url', url);
      }
      // Loopback only: the rest of the block list stands, on dev-local ports too.
      for (const url of ['http://10.0.0.1:8089/', 'http://169.254.169.254:8089/', 'http://192.168.1.1:9000/', 'https://127.0.0.1/']) {
        assert.equal(await checkCode(g.checkUrl(url)), 'url_blocked', url);
      }
    });

    it('is off by default: the same loopback http URL is invalid_url', async () => {
      assert.deepEqual(loadConfig({}).outbound.devLocalPorts, []);
      assert.equal(await checkCode(guard().checkUrl('http://127.0.0.1:8089/hook')), 'invalid_url');
      assert.equal(await outboundCode(guard().request('http://127.0.0.1:8089/hook')), 'invalid_url');
    });

    it('calls a plain-http receiver on loopback, and still re-checks names at connect time', async () => {
      const server = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`got ${req.method} ${req.url}`));
      const port = await listen(server);
      try {
        const g = guard({ DEV_ALLOW_LOCAL_PORTS: String(port) });
        const res = await g.request(`http://localhost:${port}/hook`, { body: '{}' });
        assert.equal(res.status, 200);
        assert.equal(res.body.toString(), 'got POST /hook');
        // A name that resolves to a private address is refused by the dev agent's own lookup.
        const rebinding = new SsrfGuard(loadConfig({ DEV_ALLOW_LOCAL_PORTS: String(port) }).outbound, { resolve: async () => ['10.0.0.1'] });
        guards.push(rebinding);
        assert.equal(await outboundCode(rebinding.request(`http://receiver.test:${port}/hook`)), 'url_blocked');
      } finally {
        server.close();
      }
    });
  });
});
