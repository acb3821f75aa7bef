/**
 * A configuration that cannot start the process, naming every problem. In a module of its own,
 * without the schema and its validator, so the CLI can recognise it without loading them
 * (`switchyard --help` loads no more than it prints).
 */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}
