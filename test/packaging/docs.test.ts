// `npm run docs` must build the API reference without a single warning (typedoc.json sets
// treatWarningsAsErrors): every exported symbol documented, no links to unexported names.
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

describe('API reference', () => {
  it('typedoc validates ts/index.ts with no warnings', () => {
    const r = spawnSync('npx', ['typedoc', '--emit', 'none'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
    const log = `${r.stdout}\n${r.stderr}`;
    expect(log, log).not.toMatch(/\[warning\]|\[error\]/);
    expect(r.status, log).toBe(0);
  }, 300_000);
});
