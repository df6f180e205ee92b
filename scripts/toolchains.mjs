#!/usr/bin/env node
// The Debian packages the test suites and `npm pack` need, checked in one place:
//   node scripts/toolchains.mjs test   what `npm test` / `npm run test:platforms` need (pretest)
//   node scripts/toolchains.mjs pack   what `npm pack` needs: the linux-arm64 and win32-x64 cross compilers
// Missing packages are apt-installed in one run when root; otherwise one line names them and the command
// to install them, and the exit status is 1.
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const onPath = (cmd) => (process.env.PATH ?? '').split(':').some((d) => d && existsSync(`${d}/${cmd}`));

// [Debian package, what shows it is installed, who needs it]
export const TOOLS = [
  ['chromium', () => existsSync('/usr/bin/chromium') || existsSync('/usr/bin/chromium-browser'), ['test']],
  ['clang', () => onPath('clang++'), ['test']],
  ['musl-tools', () => onPath('musl-gcc'), ['test']],
  ['g++-aarch64-linux-gnu', () => onPath('aarch64-linux-gnu-g++'), ['test', 'pack']],
  ['qemu-user', () => onPath('qemu-aarch64') && onPath('qemu-x86_64'), ['test']],
  ['g++-mingw-w64-x86-64-posix', () => onPath('x86_64-w64-mingw32-g++-posix'), ['test', 'pack']],
  ['wine64', () => onPath('wine64') || onPath('wine') || existsSync('/usr/lib/wine/wine64'), ['test']],
];

/** Installs (as root) or names the missing packages `purpose` needs; returns false when any is missing. */
export function ensureTools(purpose) {
  const missing = TOOLS.filter(([, present, who]) => who.includes(purpose) && !present()).map(([pkg]) => pkg);
  if (missing.length === 0) return true;
  if (process.getuid && process.getuid() === 0) {
    console.log(`[toolchains] installing Debian packages for ${purpose}: ${missing.join(' ')}`);
    // Chromium with its recommended fonts (the pictures are screenshot); the toolchains without theirs.
    const withRec = missing.filter((p) => p === 'chromium'), noRec = missing.filter((p) => p !== 'chromium');
    const apt = 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq';
    execSync(['apt-get update -qq', ...(withRec.length ? [`${apt} ${withRec.join(' ')} >/dev/null`] : []),
      ...(noRec.length ? [`${apt} --no-install-recommends ${noRec.join(' ')} >/dev/null`] : [])].join(' && '), { stdio: 'inherit' });
    return true;
  }
  console.error(`[toolchains] ${purpose === 'pack' ? 'npm pack' : 'the tests'} need: sudo apt-get install -y --no-install-recommends ${missing.join(' ')}`);
  return false;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const purpose = process.argv[2];
  if (purpose !== 'test' && purpose !== 'pack') {
    console.error('usage: node scripts/toolchains.mjs <test|pack>');
    process.exit(2);
  }
  process.exit(ensureTools(purpose) ? 0 : 1);
}
