#!/usr/bin/env node
// The `switchyard` command. The sources are TypeScript, run through tsx's loader, so the
// command works straight after `npm install` with no build step.
import { register } from 'tsx/esm/api';

register();
await import('../main/cli.ts');
