import { Ajv } from 'ajv';
import { ConfigError } from './config-error.js';
import { isSetting, settings, type ConfigOf, type ReadContext, type Setting, type SettingsGroup } from './config-schema.js';

/**
 * Gateway configuration, read from the environment once at boot and validated as a whole:
 * a bad value stops the process with one message that names every problem. Its shape, types,
 * defaults and documentation are the settings table of api/main/config-schema.ts.
 */
export type Config = ConfigOf<typeof settings>;

export { ConfigError } from './config-error.js';

/** Every setting read from a variable, in table order, with its path in `Config`. */
export function envSettings(group: SettingsGroup = settings, path: string[] = []): Array<Setting<unknown> & { env: string; path: string[] }> {
  return Object.entries(group).flatMap(([key, node]) => {
    if (!isSetting(node)) return envSettings(node, [...path, key]);
    return node.env === undefined ? [] : [{ ...node, env: node.env, path: [...path, key] }];
  });
}

const fromEnv = envSettings();
const envSchema = {
  type: 'object',
  properties: Object.fromEntries(fromEnv.map((s) => [s.env, s.default === undefined ? s.schema : { ...s.schema, default: s.default }])),
};
const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: true });
const validateEnv = ajv.compile(envSchema);

/** Reads the configuration from `env`; throws a `ConfigError` listing every problem found. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, so `FOO= npm start` behaves like leaving FOO out.
  const raw: Record<string, unknown> = {};
  for (const { env: name } of fromEnv) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[name] = value;
  }
  const given = new Set(Object.keys(raw));
  const problems: string[] = [];
  const rejected = new Set<string>();
  if (!validateEnv(raw)) {
    for (const e of validateEnv.errors ?? []) {
      const name = e.instancePath.replace(/^\//, '') || 'environment';
      rejected.add(name);
      problems.push(`${name} ${e.message}${e.params && 'allowedValues' in e.params ? ` (${(e.params.allowedValues as string[]).join(', ')})` : ''}`);
    }
  }
  const ctx: ReadContext = { env: raw, given, problem: (message) => problems.push(message) };
  // Reads run even after schema errors, so PRICES and the lists report their problems in the same message.
  const build = (group: SettingsGroup): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(group).map(([key, node]) => {
        if (!isSetting(node)) return [key, build(node)];
        return [key, node.env !== undefined && rejected.has(node.env) ? undefined : node.read(node.env === undefined ? undefined : raw[node.env], ctx)];
      }),
    );
  const config = build(settings);
  if (problems.length) throw new ConfigError(problems);
  return config as Config;
}
