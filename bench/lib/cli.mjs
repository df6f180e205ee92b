// What the before/after scripts share: their flags and the commit of a checkout.
import { execSync } from 'node:child_process';
import { resolve } from 'node:path';

/**
 * Flags `--name value` or `--name=value` into a copy of `defaults`: each flag of `kinds` is 'path'
 * (resolved), 'list' (comma-separated) or 'count' (a positive integer); `--help` prints `usage`.
 */
export function parseFlags(argv, defaults, kinds, usage) {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      console.log(usage);
      process.exit(0);
    }
    const name = a.startsWith('--') ? a.slice(2).split('=')[0] : undefined;
    if (!name || !(name in kinds)) throw new Error(`unknown argument ${a}\n${usage}`);
    const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
    if (v === undefined) throw new Error(`--${name}: expected a value`);
    if (kinds[name] === 'path') o[name] = resolve(v);
    else if (kinds[name] === 'list') o[name] = v.split(',').map((s) => s.trim()).filter(Boolean);
    else {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: expected a positive integer, got ${v}`);
      o[name] = n;
    }
  }
  if (!o.before) throw new Error(`--before DIR: expected a built checkout to compare against\n${usage}`);
  return o;
}

/** The short commit of a checkout ('nogit' outside one). */
export function commitOf(dir) {
  try {
    return execSync('git rev-parse --short HEAD', { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'nogit';
  }
}
