import { parseArgs } from 'node:util';
import { ConfigError } from './config-error.js';
import { UsageError } from './usage-error.js';
import { worker } from './commands/worker.js';
import { ENGINE_FLAGS, ENGINES } from './commands/engines/index.js';

/**
 * The `switchyard` command: parses the command line and hands it to the module of its command
 * (commands/). The modules of the gateway (serve, dev, accounts, the configuration's schema) are
 * imported only by the commands that run them, so `switchyard --help`, `run` and `worker` start
 * without loading Koa, BullMQ or the stores (`npm run bench -- cli-start`).
 */
const loadConfig = async (env: NodeJS.ProcessEnv) => (await import('./config.js')).loadConfig(env);

const USAGE = `switchyard <command>

Commands:
  serve                                  run the gateway (what npm start runs)
  dev [--allow-local PORTS]              run the gateway for development: starts a local redis-server
                                         if none answers, prints a ready API key, a curl line, the
                                         switchyard run setup and the queue board's login;
                                         --allow-local 8080,9000: outbound calls (tools, webhooks) may
                                         use plain http and reach loopback on those ports (UNSAFE
                                         outside development; serve refuses it)
  accounts create --name N [--credits C] create an account; prints it and its first API key as JSON
  keys create --account ID [--name N]    create another API key for an account; prints it as JSON
${ENGINES.map((e) => `  ${e.usage}\n`).join('')}  run <kind> --input JSON [--wait] [--json] [--gateway URL] [--key KEY]
                                         submit a job with the client library; --wait follows it to
                                         the end (switchyard run --help for all options)
  run --batch FILE.jsonl                 submit one job per line as one batch, all or none, and
                                         follow it to the end, each job's outcome as it ends
  verify <run_id> --jwks FILE|URL        check a private run's attestation chain and artifacts
                                         with the client library (switchyard verify --help)

Configuration comes from the environment; see README.md.`;

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // `run` is a caller of the API with its own options (api/main/commands/run.ts): no server code runs.
  if (argv[0] === 'run') return (await import('./commands/run.js')).runCommand(argv.slice(1), env);
  if (argv[0] === 'verify') return (await import('./commands/verify.js')).verifyCommand(argv.slice(1), env);
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      credits: { type: 'string' },
      account: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      // worker
      gateway: { type: 'string' },
      token: { type: 'string' },
      kinds: { type: 'string' },
      tier: { type: 'string' },
      slots: { type: 'string' },
      engine: { type: 'string' },
      models: { type: 'string' },
      identity: { type: 'string' },
      'attestation-key': { type: 'string' },
      ...ENGINE_FLAGS,
      // dev
      'allow-local': { type: 'string' },
    },
  });
  const command = positionals.join(' ');
  if (values['allow-local'] !== undefined && command !== 'dev') throw new UsageError('--allow-local is for dev only');
  if (values.help || command === '' || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  switch (command) {
    case 'serve': {
      const config = await loadConfig(env);
      // A dev-only hole in the SSRF guard must never reach production by a leftover variable.
      if (config.outbound.devLocalPorts.length) throw new ConfigError(['DEV_ALLOW_LOCAL_PORTS is for `npm run dev` only: serve never lets outbound calls use plain http or reach loopback (use OUTBOUND_ALLOW_CIDRS, OUTBOUND_ALLOWED_PORTS and OUTBOUND_CA_FILE for internal https receivers)']);
      await (await import('./commands/serve.js')).serve(config);
      return -1;
    }
    case 'dev':
      await (await import('./commands/dev.js')).dev(values['allow-local'] === undefined ? env : { ...env, DEV_ALLOW_LOCAL_PORTS: values['allow-local'] });
      return -1;
    case 'accounts create': {
      const { createAccount } = await import('./commands/accounts.js');
      console.log(JSON.stringify(await createAccount(await loadConfig(env), values.name, values.credits), null, 2));
      return 0;
    }
    case 'keys create': {
      const { createKey } = await import('./commands/accounts.js');
      console.log(JSON.stringify(await createKey(await loadConfig(env), values.account, values.name), null, 2));
      return 0;
    }
    case 'worker':
      return worker(values, env);
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    if (err instanceof ConfigError || err instanceof UsageError) {
      console.error(`switchyard: ${err.message}`);
      if (err instanceof UsageError) console.error(`\n${USAGE}`);
    } else if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`switchyard: ${(err as Error).message}\n\n${USAGE}`);
    } else {
      console.error(`switchyard: ${(err as Error).message ?? err}`);
    }
    process.exit(err instanceof UsageError || err instanceof ConfigError ? 2 : 1);
  },
);

