import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

/** Readers for the deployment files (Dockerfile, .dockerignore, compose), for test/deploy-files.test.ts. */

export interface DockerInstruction {
  name: string;
  args: string;
}

/** A Dockerfile's instructions, continuation lines joined, comments and parser directives dropped. */
export function parseDockerfile(text: string): DockerInstruction[] {
  const out: DockerInstruction[] = [];
  let pending = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    pending += line.replace(/\\\s*$/, ' ');
    if (/\\\s*$/.test(line)) continue;
    const m = /^\s*(\w+)\s+([\s\S]*?)\s*$/.exec(pending);
    if (m) out.push({ name: m[1].toUpperCase(), args: m[2] });
    pending = '';
  }
  return out;
}

/** Instructions of the last stage (after the last FROM). */
export function finalStage(instructions: DockerInstruction[]): DockerInstruction[] {
  const lastFrom = instructions.map((i) => i.name).lastIndexOf('FROM');
  return instructions.slice(lastFrom + 1);
}

/** Instructions of the stage named `name` (`FROM image AS name`), up to the next FROM. */
export function namedStage(instructions: DockerInstruction[], name: string): DockerInstruction[] {
  const start = instructions.findIndex((i) => i.name === 'FROM' && new RegExp(`\\s+AS\\s+${name}$`, 'i').test(i.args));
  if (start < 0) return [];
  const next = instructions.findIndex((i, n) => n > start && i.name === 'FROM');
  return instructions.slice(start + 1, next < 0 ? undefined : next);
}

/** `ENV A=1 B=2` pairs (the key=value form; values may be double-quoted). */
export function envOf(instructions: DockerInstruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of instructions.filter((x) => x.name === 'ENV')) {
    for (const m of i.args.matchAll(/(\w+)=("[^"]*"|\S*)/g)) env[m[1]] = m[2].replace(/^"|"$/g, '');
  }
  return env;
}

/** Sources and destination of a COPY, flags (--from, --chown) separated out. */
export function copyParts(args: string): { flags: string[]; sources: string[]; dest: string } {
  const words = args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith('--'));
  const rest = words.filter((w) => !w.startsWith('--'));
  return { flags, sources: rest.slice(0, -1), dest: rest[rest.length - 1] };
}

/** True when .dockerignore keeps `rel` (a path relative to the context) out of the build context. */
export function dockerIgnores(patterns: string[], rel: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const glob = (negate ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    const re = new RegExp(`^${glob.split('**').map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')).join('.*')}(/.*)?$`);
    if (re.test(rel)) ignored = !negate;
  }
  return ignored;
}

export function readDockerignore(file: string): string[] {
  return readFileSync(file, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
}

/**
 * Compose's variable interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?message}`, `${VAR?message}`, `${VAR:+alt}`. A missing required variable throws its message.
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$\$|\$\{(\w+)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|\$(\w+)/g, (whole, name?: string, op?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$';
    if (bare) return env[bare] ?? '';
    const v = env[name!];
    const unset = op?.startsWith(':') ? v === undefined || v === '' : v === undefined;
    switch (op) {
      case ':-': case '-': return unset ? interpolate(arg ?? '', env) : v!;
      case ':?': case '?': if (unset) throw new Error(`${name}: ${arg}`); return v!;
      case ':+': case '+': return unset ? '' : interpolate(arg ?? '', env);
      default: return v ?? '';
    }
  });
}

/** Names of the variables a compose file requires (`${VAR:?...}` / `${VAR?...}`). */
export function requiredVariables(text: string): string[] {
  return [...new Set([...text.matchAll(/\$\{(\w+):?\?/g)].map((m) => m[1]))];
}

/** A service's environment as a map, whichever form the file uses (map or `KEY=value` list). */
export function environmentOf(service: { environment?: Record<string, unknown> | string[] }): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) return Object.fromEntries(env.map((e) => [e.split('=')[0], e.slice(e.indexOf('=') + 1)]));
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

export interface Mount {
  source: string;
  target: string;
  bind: boolean;
}

/** A service's volumes in one shape; a source starting with `.`, `/` or `~` is a host path (bind mount). */
export function mountsOf(service: { volumes?: Array<string | { type?: string; source?: string; target: string }> }): Mount[] {
  return (service.volumes ?? []).map((v) => {
    if (typeof v !== 'string') return { source: v.source ?? '', target: v.target, bind: v.type === 'bind' };
    const [source, target] = v.split(':');
    return { source, target, bind: /^[./~]/.test(source) };
  });
}

/**
 * Every module a program loads, following relative static and dynamic imports from `entry`
 * (`.js` specifiers resolve to `.ts` sources, as tsx does), plus the packages it imports.
 * `import type` is erased at run time, so it is not followed.
 */
export function moduleGraph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const builtins = new Set(builtinModules);
  const pending = [path.resolve(entry)];
  while (pending.length) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    if (!existsSync(file)) continue; // the caller reports it
    const source = readFileSync(file, 'utf8');
    const specifiers = [
      ...[...source.matchAll(/^\s*(?:import|export)\s+(?!type\s)(?:[\w*${}\s,]+?\s+from\s+)?['"]([^'"]+)['"]/gm)].map((m) => m[1]),
      ...[...source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]),
    ];
    for (const spec of specifiers) {
      if (spec.startsWith('.')) {
        const target = path.resolve(path.dirname(file), spec);
        pending.push(!existsSync(target) && target.endsWith('.js') ? target.replace(/\.js$/, '.ts') : target);
      } else if (!spec.startsWith('node:') && !builtins.has(spec)) {
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
  }
  return { files, packages };
}
