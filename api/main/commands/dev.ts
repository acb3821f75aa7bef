import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { loadConfig } from '../config.js';
import { redisAnswers, startLocalRedis } from '../dev/dev-redis.js';
import { startDevFleet, type DevFleet } from '../dev/dev-fleet.js';
import { devAdminToken } from '../dev/dev-admin-token.js';
import type { Gateway } from '../../composition/gateway.js';
import { hashSecret, lookupIdOf, sameHash } from '../../../models/credentials.js';
import { serve } from './serve.js';
/** A path relative to the working directory when it lies below it, else as given. */
const shortPath = (file: string) => (path.relative('.', file).startsWith('..') ? file : path.relative('.', file));
/** The dev account's key, kept under DATA_DIR so restarts print the same one. */
async function devKey(gateway: Gateway): Promise<{ key: string; accountId: string }> {
  const file = path.resolve(gateway.config.dataDir, 'dev-account.json');
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { account_id: string; api_key: string };
    const lookupId = lookupIdOf('sy', saved.api_key);
    const record = lookupId ? await gateway.stores.apiKeys.findByLookupId(lookupId) : null;
    if (record && !record.revoked_at && sameHash(hashSecret(saved.api_key), record.hash)) return { key: saved.api_key, accountId: record.account_id };
  } catch {
    // No saved key yet, or its Redis was wiped: make a new one.
  }
  const account = await gateway.stores.accounts.create({ name: 'dev', credits: 1000 });
  const { key } = await gateway.services.auth.createKey(account.id, 'dev');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify({ account_id: account.id, api_key: key }, null, 2), { mode: 0o600 });
  return { key, accountId: account.id };
}

/** `switchyard dev` (npm run dev): the gateway with a local Redis, the demo fleet and a ready key, printed. */
export async function dev(env: NodeJS.ProcessEnv): Promise<void> {
  // The private tier end to end: a local TEST verifier the gateway trusts, unless one is configured.
  let attestationKeyFile: string | undefined;
  if (!env.ATTESTATION_JWKS) {
    const { DEV_VERIFIER_ISSUER, devVerifier } = await import('../dev/dev-attestation.js');
    const verifier = await devVerifier(loadConfig(env).dataDir);
    attestationKeyFile = verifier.keyFile;
    env = { ...env, ATTESTATION_JWKS: verifier.jwksFile, ATTESTATION_ISSUER: env.ATTESTATION_ISSUER || DEV_VERIFIER_ISSUER };
  }
  // The queue board on: a dev admin token unless one is configured (printed below).
  let devAdmin: ReturnType<typeof devAdminToken> | undefined;
  if (!env.ADMIN_TOKEN) {
    devAdmin = devAdminToken(loadConfig(env).dataDir);
    env = { ...env, ADMIN_TOKEN: devAdmin.token };
  }
  let config = loadConfig(env);
  const localPorts = config.outbound.devLocalPorts;
  const localWarning = localPorts.length
    ? `UNSAFE OUTSIDE DEVELOPMENT: outbound calls (tools, webhooks) may use plain http and reach loopback on port${localPorts.length > 1 ? 's' : ''} ${localPorts.join(', ')} (--allow-local / DEV_ALLOW_LOCAL_PORTS); serve refuses this setting`
    : '';
  if (localWarning) console.error(`switchyard dev: ${localWarning}`);
  let redisChild: ChildProcess | undefined;
  if (config.redisUrlDefaulted && !(await redisAnswers(config.redisUrl))) {
    redisChild = await startLocalRedis(config.dataDir);
    console.error(`started redis-server with its data in ${path.resolve(config.dataDir, 'redis')}`);
    config = loadConfig(env);
  }
  const { demoDelayMs } = config;
  let fleet: DevFleet | undefined;
  await serve(config, {
    beforeStop: async () => fleet?.stop(),
    cleanup: () => redisChild?.kill(),
    onReady: async (gateway, url) => {
    const { key, accountId } = await devKey(gateway);
    // The console's one-time sign-in link: the code rides in the fragment, which browsers never send.
    const signIn = gateway.config.console.enabled ? await gateway.services.consoleSignIn.createCode(accountId) : undefined;
    fleet = await startDevFleet(gateway, url, demoDelayMs, attestationKeyFile);
    const { served, missing } = fleet.local;
    const engines = served.length
      ? `A dev worker serves all 11 kinds (trusted tier, 4 slots): ${served.length} with real programs of this machine
(local engine: ${served.map((s) => `${s.kind} with ${path.basename(s.program)}`).join(', ')}),
the other ${11 - served.length} with the demo engine (about ${demoDelayMs} ms a job).`
      : `A dev worker serves all 11 kinds (trusted tier, 4 slots) with the demo engine (about ${demoDelayMs} ms a job).`;
    const install = missing.length ? `\nFor real ${missing.map((m) => m.kind).join(', ')} on the local engine: ${[...new Set(missing.map((m) => m.program.install))].join(' && ')}` : '';
    const att = gateway.config.attestation;
    const privateDemo = attestationKeyFile
      ? `
A private demo worker attests with TEST evidence from a local verifier key (${shortPath(attestationKeyFile)});
it proves nothing about this machine, but shows the whole private flow. Submit a private job:
  curl -s -X POST ${url}/v1/jobs -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" \\
    -d '{"kind":"inference:image:generate","confidentiality":"private","input":{"prompt":"a sealed letter"}}'
and once it has succeeded, check its attestation, receipt and artifacts yourself:
  npx switchyard verify <run_id> --jwks ${att.jwks} --issuer ${att.issuer} --gateway ${url} --key ${key}
`
      : '';
    console.log(`
Switchyard is running at ${url}
${engines}${install}
${signIn ? `
  Console:  ${url}/sign-in#code=${signIn.code}
            (open it to try every kind in your browser; the link works once, until ${signIn.expires_at})
` : ''}
  API key:  ${key}

Submit a job:
  curl -s -X POST ${url}/v1/jobs -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" \\
    -d '{"kind":"inference:image:generate","input":{"prompt":"a lighthouse at dusk"}}'

Then poll it:  curl -s ${url}/v1/jobs/<run_id> -H "Authorization: Bearer ${key}"
(output.urls has the image; open it in a browser.)

Or with the switchyard command, from another shell:
  export SWITCHYARD_URL=${url} SWITCHYARD_API_KEY=${key}
  npx switchyard run inference:image:generate --input '{"prompt":"a lighthouse at dusk"}' --wait

Queue board (Bull Board, read-only): ${url}/admin/queues
  log in as user admin with password ${devAdmin ? `${devAdmin.token}  (the dev admin token, kept in ${shortPath(devAdmin.file)})` : 'your ADMIN_TOKEN'}
${privateDemo}${localWarning ? `\n!! ${localWarning}\n` : ''}API description: ${url}/v1/openapi.json
`);
    },
  });
}
