/**
 * Runs openapi-typescript on TypeScript 5: it builds its output with the compiler API
 * (ts.factory), which the project's TypeScript 7 no longer ships. package.json installs 5 as the
 * `typescript5` alias and tells npm that openapi-typescript's peer is satisfied by the root's
 * TypeScript; this hook then sends openapi-typescript's `import 'typescript'`, and only that, to 5.
 * Use: node --import ./test/helpers/typescript5-hook.mjs node_modules/openapi-typescript/bin/cli.js
 */
import { register } from 'node:module';

register(new URL('./typescript5-resolve.mjs', import.meta.url));
