#!/usr/bin/env node
// The `switchyard` command: the compiled CLI (api/main/cli.ts built into dist/ by `npm run build`,
// which `npm install` runs through `prepare`). Plain JavaScript, no TypeScript loader at run time.
try {
  await import('../../dist/api/main/cli.js');
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/api/main/cli.js')) {
    console.error('switchyard: the compiled CLI is missing (dist/): run `npm run build` (npm install runs it)');
    process.exit(1);
  }
  throw err;
}
