import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '..');
const read = (rel: string) => JSON.parse(readFileSync(path.join(ROOT, rel), 'utf8'));

interface LockedPackage {
  name?: string;
  version?: string;
  link?: boolean;
  hasInstallScript?: boolean;
}

/**
 * Every dependency with an install script (preinstall, install, postinstall) has its decision,
 * run or not, in package.json's `allowScripts` (docs/architecture.md, "Build and packages"):
 * npm 11 then installs without a warning about scripts "not yet covered by allowScripts", and a
 * dependency that brings a new one fails here until someone decides. npm 10 ignores the field.
 */
describe('dependency install scripts', () => {
  const allowScripts = (read('package.json').allowScripts ?? {}) as Record<string, unknown>;
  const locked = Object.entries(read('package-lock.json').packages as Record<string, LockedPackage>)
    // The project and its workspaces (api/bin) are not dependencies: their scripts are ours.
    .filter(([where, p]) => where.includes('node_modules/') && !p.link)
    .map(([where, p]) => ({ ...p, name: p.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length) }));
  // allowScripts keys: a bare name (any version), or name@version, versions joined by `||`.
  const entries = Object.entries(allowScripts).map(([key, value]) => {
    const [, name, versions] = /^(@?[^@]+)(?:@(.+))?$/.exec(key) ?? [, key];
    return { key, value, name, versions: versions?.split('||').map((v) => v.trim()) };
  });
  const covers = (e: (typeof entries)[number], p: LockedPackage) => e.name === p.name && (!e.versions || e.versions.includes(p.version!));

  it('the lock file has packages with install scripts (the checks below are not vacuous)', () => {
    assert.ok(locked.some((p) => p.hasInstallScript), 'no locked package has an install script');
  });

  it('each locked package with an install script has an allowScripts entry, true or false', () => {
    const undecided = locked.filter((p) => p.hasInstallScript && !entries.some((e) => covers(e, p))).map((p) => `${p.name}@${p.version}`);
    assert.deepEqual(undecided, [], 'add each to allowScripts in package.json (npm install-scripts approve or deny <name>)');
    assert.deepEqual(entries.filter((e) => typeof e.value !== 'boolean').map((e) => e.key), [], 'allowScripts values are true or false');
  });

  it('each allowScripts entry names a locked package with an install script', () => {
    const stale = entries.filter((e) => !locked.some((p) => p.hasInstallScript && covers(e, p))).map((e) => e.key);
    assert.deepEqual(stale, [], 'remove them from allowScripts (npm install-scripts prune)');
  });

  it("npm's own view of installed packages agrees: none pending (npm install-scripts ls, where npm has it)", async function () {
    this.timeout(60_000);
    const npm = await promisify(execFile)('npm', ['install-scripts', 'ls', '--json'], { cwd: ROOT, maxBuffer: 16 << 20 }).then(
      ({ stdout }) => ({ ok: true, output: stdout }),
      (err: { stdout: string; stderr: string }) => ({ ok: false, output: `${err.stdout}${err.stderr}` }),
    );
    // npm before 11.x has neither the command nor the policy; the checks above hold it to the lock file.
    if (!npm.ok && /EUNKNOWNCOMMAND/.test(npm.output)) return;
    assert.ok(npm.ok, npm.output);
    assert.deepEqual(JSON.parse(npm.output).allowScripts, [], npm.output);
  });
});
