/**
 * The warm-start checkpoint cache: a warm-start is deterministic given its settings, so its weights and
 * held-out numbers are stored under a hash of everything that determines them and reused by later runs.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Bumped whenever the demonstrator, the policy or the training loop change what a warm-start produces. */
export const WARM_CACHE_VERSION = 3;

/** What is cached about a warm-start. */
export interface WarmEntry {
  /** Final supervised loss. */
  nll: number;
  /** The checkpoint's parameters. */
  params: Float32Array[];
  /** How its held-out episodes end (student prompt). */
  outcomes: Record<string, number>;
  /** Its held-out success with the privileged prompt. */
  teacherSuccess: number;
}

/** The cache key: a SHA-256 of the canonical JSON of everything the warm-start depends on. */
export function warmKey(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify({ version: WARM_CACHE_VERSION, parts })).digest('hex').slice(0, 20);
}

/** Reads a cached entry; `undefined` when absent or unreadable (a broken file is recomputed, never trusted). */
export function readWarm(dir: string, name: string, key: string): WarmEntry | undefined {
  try {
    const j = JSON.parse(readFileSync(join(dir, `warm-${name}-${key}.json`), 'utf8'));
    if (j.key !== key || !Array.isArray(j.params)) return undefined;
    const params = (j.params as string[]).map((b) => {
      const buf = Buffer.from(b, 'base64');
      return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    });
    if (params.some((p) => p.some((x) => !Number.isFinite(x)))) return undefined;
    return { nll: j.nll, params, outcomes: j.outcomes, teacherSuccess: j.teacherSuccess };
  } catch {
    return undefined;
  }
}

/** Writes an entry (atomically: a temporary file renamed into place). Returns the path. */
export function writeWarm(dir: string, name: string, key: string, e: WarmEntry, settings: unknown): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `warm-${name}-${key}.json`);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({
    key, settings, nll: e.nll, outcomes: e.outcomes, teacherSuccess: e.teacherSuccess,
    params: e.params.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength).toString('base64')),
  }));
  renameSync(tmp, path);
  return path;
}
