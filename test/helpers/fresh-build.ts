import { build, isStale } from '../../api/bin/build.mjs';

/**
 * Mocha root hook plugin (.mocharc.json `require`): the tests spawn the compiled CLI
 * (api/bin/switchyard.mjs runs dist/), so before any test runs the build must match the sources.
 * `npm test` and `npx mocha test/<name>.test.ts` alike rebuild (api/bin/build.mjs, a few seconds)
 * when a source, asset, tsconfig or package.json is newer than the last build, and never run an
 * old one.
 */
export function mochaGlobalSetup(): void {
  // Type errors are reported, not fatal: the tests run the sources through tsx, as before the build.
  if (isStale()) build({ typeErrors: 'warn' });
}
