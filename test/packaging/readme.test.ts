// The README's first snippet, as a reader copies it: the first ```ts block after `npm install gear-rl`,
// in a scratch project that reaches the package by name (linked to this tree), type-checked by tsc
// (strict, module nodenext) and run. It is one training step, so it must also train: the step raises
// the log-probs of the rewarded responses and lowers those of the others.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/child.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const project = mkdtempSync(join(tmpdir(), 'gear-readme-'));
afterAll(() => rmSync(project, { recursive: true, force: true }));

/** The first ```ts block after the install command. */
function firstSnippet(): string {
  const install = README.indexOf('\nnpm install gear-rl\n');
  expect(install, 'an `npm install gear-rl` line').toBeGreaterThan(0);
  const m = /\n```ts\n([\s\S]*?)\n```\n/.exec(README.slice(install));
  expect(m, 'a ```ts block after it').not.toBe(null);
  return m![1]!;
}

describe('README', () => {
  it('starts with the install command and the snippet, then the platform matrix, then the rest', () => {
    const at = (s: string) => README.indexOf(s);
    expect(at('```bash\nnpm install gear-rl\n```')).toBeGreaterThan(0);
    expect(at('\n## ')).toBe(at('\n## Install and a first training step'));
    expect(at('\n## Platforms')).toBeGreaterThan(at('\n## Install and a first training step'));
    for (const later of ['\n## Contents', '\n## Semantics', '\n## Performance']) expect(at(later), later).toBeGreaterThan(at('\n## Platforms'));
  });

  it('the first snippet type-checks, runs as written, and its training step moves the log-probs the right way', () => {
    const code = firstSnippet();
    expect(code).toMatch(/^import \* as rl from 'gear-rl';/);
    mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
    symlinkSync(ROOT, join(project, 'node_modules', 'gear-rl'), 'dir');
    symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'), 'dir');
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'readme-snippet', private: true, type: 'module' }));
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noUnusedLocals: true, outDir: 'out', types: ['node'] },
      files: ['step.mts'],
    }));
    writeFileSync(join(project, 'step.mts'), code);
    const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project, encoding: 'utf8' });
    expect(tsc.status, `${tsc.stdout}${tsc.stderr}`).toBe(0);
    const r = spawnSync(process.execPath, [join(project, 'out', 'step.mjs')], { cwd: project, env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const pair = (label: string) => {
      const m = new RegExp(`${label}\\s+(-?\\d+\\.\\d+) -> (-?\\d+\\.\\d+)`).exec(r.stdout);
      expect(m, `${label} in:\n${r.stdout}`).not.toBe(null);
      return [Number(m![1]), Number(m![2])] as const;
    };
    const [upBefore, upAfter] = pair('log-prob of the rewarded responses');
    const [downBefore, downAfter] = pair('log-prob of the others');
    expect(upAfter).toBeGreaterThan(upBefore);
    expect(downAfter).toBeLessThan(downBefore);
    expect(Number(/gradient norm (\d+\.\d+)/.exec(r.stdout)?.[1])).toBeGreaterThan(0);
  });
});
