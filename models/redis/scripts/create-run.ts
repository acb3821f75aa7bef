import { defineScript } from '../script-definition.js';
import { createRunFunction } from './includes/create-run.js';

/**
 * Creates a run, reserves its price from the account's credits and marks it unconfirmed, in
 * one atomic step: a crash leaves all of its writes or none. KEYS, ARGV and reply: `create_run`
 * (includes/create-run.ts).
 */
export const createRun = defineScript<[string, ...string[]]>({
  name: 'createRun',
  keys: 4,
  lua: `${createRunFunction}
return create_run()
`,
});
