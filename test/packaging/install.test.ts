// A quiet install: `npm install` in a clone prints no warning of the project's making. npm warns about
// every key of a project `.npmrc` it does not know (on every command that reads it: install, run, test)
// and about every dependency with install scripts that `package.json`'s `allowScripts` does not cover.
// Checked without the network: the keys against npm's own list, the scripts against the lockfile.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/child.js';

const scratch = mkdtempSync(join(tmpdir(), 'gear-install-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** npm in `cwd` with no user or global configuration and none of a parent npm's `npm_config_*`. */
function npm(args: string[], cwd: string) {
  const env = cleanEnv();
  for (const k of Object.keys(env)) if (/^npm_/i.test(k)) delete env[k];
  const [user, global] = [join(scratch, 'user-npmrc'), join(scratch, 'global-npmrc')];
  for (const f of [user, global]) writeFileSync(f, '');
  const r = spawnSync('npm', [...args, `--userconfig=${user}`, `--globalconfig=${global}`], { cwd, env, encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return { stdout: r.stdout, stderr: r.stderr };
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, unknown> };

describe('npm install prints no warning of the project\'s making', () => {
  it('the project .npmrc (if any) sets only keys npm knows, and npm reads it without a warning', () => {
    const known = new Set(Object.keys(JSON.parse(npm(['config', 'ls', '-l', '--json'], scratch).stdout) as object));
    expect(known.has('registry') && known.has('ignore-scripts')).toBe(true); // the list is npm's own
    const file = join(ROOT, '.npmrc');
    const keys = existsSync(file)
      ? readFileSync(file, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^[#;]/.test(l))
        .map((l) => l.split('=')[0]!.trim())
      : [];
    expect(keys.filter((k) => !known.has(k) && !/^(@[^:]+:registry|\/\/.+)$/.test(k))).toEqual([]);
    expect(npm(['config', 'ls'], ROOT).stderr).not.toMatch(/warn/i);
  });

  it('package.json allowScripts decides every dependency install script of the lockfile, and denies onnxruntime-node\'s download', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean; version?: string }>;
    };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.hasInstallScript === true)
      .map(([path, p]) => ({ name: path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length), version: p.version }));
    expect(withScripts.map((p) => p.name)).toContain('onnxruntime-node');
    const allow = pkg.allowScripts ?? {};
    const decided = (name: string, version?: string) => typeof (allow[name] ?? allow[`${name}@${version}`]) === 'boolean';
    expect(withScripts.filter((p) => !decided(p.name, p.version))).toEqual([]);
    // its postinstall fetches the CUDA provider libraries from outside the npm registry; the CPU
    // binaries that the adapters' tests load ship in the package
    expect(allow['onnxruntime-node']).toBe(false);
  });
});
