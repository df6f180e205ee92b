// Child processes of the platform tests (emulated suites): run a command and collect its output, and an
// environment that does not steer the child's choices.
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export type Run = { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Runs argv[0] with the rest as arguments, in the repository root. */
export function run(argv: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Run {
  const r = spawnSync(argv[0]!, argv.slice(1), { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 256 * 2 ** 20, timeout: timeoutMs });
  return { status: r.status, signal: r.signal, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/** This process's environment without what would steer a child's choices (ISA, threads, vitest's own). */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('VITEST') || k === 'NODE_OPTIONS' || k === 'GEAR_RL_ISA' || k === 'GEAR_RL_NUM_THREADS') delete env[k];
  return env;
}
