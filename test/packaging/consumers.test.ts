// The package as a consumer reaches it by name: ESM `import` and CommonJS `require` (Node >= 20.19 loads
// the ES module through the `default` export condition), with the package linked into a scratch project.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/child.js';

const project = mkdtempSync(join(tmpdir(), 'gear-consumer-'));
mkdirSync(join(project, 'node_modules'));
symlinkSync(ROOT, join(project, 'node_modules', 'gear-rl'), 'dir');

// log softmax of [1, 2, 3] at 2, in float64
const WANT = 3 - Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));

function runFile(name: string, code: string): number {
  writeFileSync(join(project, name), code);
  const r = spawnSync(process.execPath, [join(project, name)], { cwd: project, env: cleanEnv(), encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr.slice(-1500)).toBe(0);
  return Number(r.stdout.trim().split('\n').pop());
}

const BODY = `const s = rl.tokenStats({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, Int32Array.of(2));
console.log(s.logprob[0]);`;

describe('consumers of the package by name', () => {
  it('ESM: import * as rl from "gear-rl"', () => {
    expect(Math.abs(runFile('esm.mjs', `import * as rl from 'gear-rl';\n${BODY}`) - WANT)).toBeLessThan(1e-6);
  });

  it('CommonJS: require("gear-rl") (Node\'s require of an ES module through the default condition)', () => {
    expect(Math.abs(runFile('cjs.cjs', `const rl = require('gear-rl');\n${BODY}`) - WANT)).toBeLessThan(1e-6);
  });
});
