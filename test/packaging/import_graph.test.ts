// The import graph of ts/: no cycle, and no import against the layers that docs/extending.md declares
// ("Where TypeScript code goes"; the table is read from there). Every import counts, whichever way it is
// written (`import`, `export ... from`, `import type`, `import()` in code or in a type, a module
// augmentation), read three ways: from the sources (type-only imports the compiler erases included),
// and from a fresh compile, its JavaScript (what loads) and its declarations (what a consumer's compiler
// reads, with the type references the declaration emit adds). A failure prints the offending path.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/child.js';

/** Module id → the module ids it imports (ids: paths under ts/ without extension, e.g. `ops/segment`). */
type Graph = Map<string, Set<string>>;

const walk = (d: string): string[] => readdirSync(d, { withFileTypes: true })
  .flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
const idOf = (base: string, file: string) => relative(base, file).split('\\').join('/').replace(/(\.d\.ts|\.ts|\.js)$/, '');

/** Every relative module specifier of a file, in any import form. */
export function specifiers(file: string, text: string): string[] {
  const kind = file.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
  const out: string[] = [];
  const lit = (n: ts.Node | undefined) => { if (n && ts.isStringLiteralLike(n)) out.push(n.text); };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) lit(n.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference)) lit(n.moduleReference.expression);
    else if (ts.isModuleDeclaration(n) && ts.isStringLiteral(n.name)) lit(n.name);                 // declare module '...'
    else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument)) lit(n.argument.literal);  // import('...').T
    else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) lit(n.arguments[0]);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out.filter((s) => s.startsWith('.'));
}

/** The graph of the files under `base` whose names end with one of `exts`. */
function graphOf(base: string, exts: readonly string[]): Graph {
  const files = walk(base).filter((f) => exts.some((x) => f.endsWith(x)));
  const g: Graph = new Map();
  for (const f of files) {
    const deps = new Set<string>();
    for (const s of specifiers(f, readFileSync(f, 'utf8'))) deps.add(idOf(base, resolve(dirname(f), s)));
    g.set(idOf(base, f), deps);
  }
  return g;
}

/** Every circle of imports (a strongly connected component, Tarjan's): one closed path through it, and its other modules. */
export function cycles(g: Graph): string[] {
  let next = 0;
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], on = new Set<string>();
  const found: string[] = [];
  const strong = (v: string): void => {
    index.set(v, next); low.set(v, next++); stack.push(v); on.add(v);
    for (const w of g.get(v) ?? []) {
      if (!g.has(w)) continue;
      if (!index.has(w)) { strong(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const comp = new Set<string>();
    let w: string;
    do { w = stack.pop()!; on.delete(w); comp.add(w); } while (w !== v);
    if (comp.size > 1 || g.get(v)!.has(v)) {
      const others = [...comp].sort().filter((x) => !closedPath(g, comp, v).includes(x));
      found.push(`${closedPath(g, comp, v).join(' → ')}${others.length ? ` (its circle also holds ${others.join(', ')})` : ''}`);
    }
  };
  for (const v of [...g.keys()].sort()) if (!index.has(v)) strong(v);
  return found;
}

/** A shortest path from `v` back to itself inside one strongly connected component. */
function closedPath(g: Graph, comp: Set<string>, v: string): string[] {
  const prev = new Map<string, string>();
  const queue = [v];
  for (let i = 0; i < queue.length; i++) {
    const u = queue[i]!;
    for (const w of [...(g.get(u) ?? [])].sort()) {
      if (!comp.has(w)) continue;
      if (w === v) {
        const path = [v];
        for (let x = u; x !== v; x = prev.get(x)!) path.splice(1, 0, x);
        return [...path, v];
      }
      if (!prev.has(w)) { prev.set(w, u); queue.push(w); }
    }
  }
  return [v];
}

/** The layers: folder (first path segment under ts/, or `.` for a file at its root) → layer number. */
export type Layers = Map<string, number>;
const folderOf = (id: string) => (id.includes('/') ? id.slice(0, id.indexOf('/')) : '.');

/** The imports against the layers: from a folder to another folder of the same or a higher layer. */
export function layerViolations(g: Graph, layers: Layers): string[] {
  const out: string[] = [];
  for (const [from, deps] of g) {
    const ff = folderOf(from);
    for (const to of deps) {
      const tf = folderOf(to);
      if (ff === tf || !g.has(to)) continue;
      const lf = layers.get(ff), lt = layers.get(tf);
      if (lf === undefined || lt === undefined || lt >= lf) {
        out.push(`${from} → ${to} (${ff}: layer ${lf ?? 'undeclared'}; ${tf}: layer ${lt ?? 'undeclared'})`);
      }
    }
  }
  return out.sort();
}

/** The layer table of docs/extending.md: `| n | `folder`, `file.ts`, ... | what |`. */
function declaredLayers(): Layers {
  const doc = readFileSync(join(ROOT, 'docs/extending.md'), 'utf8');
  const section = /^## Where TypeScript code goes\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(doc);
  expect(section, 'docs/extending.md: the section "Where TypeScript code goes"').not.toBeNull();
  const layers: Layers = new Map();
  for (const m of section![1]!.matchAll(/^\| (\d+) \| ([^|]+) \|/gm)) {
    for (const name of m[2]!.matchAll(/`([^`]+)`/g)) {
      const folder = name[1]!.endsWith('.ts') ? '.' : name[1]!;
      const n = Number(m[1]);
      if (folder === '.' && layers.has('.')) expect(layers.get('.'), 'every file at the root of ts/ in one layer').toBe(n);
      else expect(layers.has(folder), `${folder} in one layer`).toBe(false);
      layers.set(folder, n);
    }
  }
  return layers;
}

let out = '';
let compiled: { js: Graph; dts: Graph };
const source = graphOf(join(ROOT, 'ts'), ['.ts']);

beforeAll(() => {
  out = mkdtempSync(join(tmpdir(), 'gear-imports-'));
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--outDir', out,
    '--declarationMap', 'false', '--sourceMap', 'false'], { cwd: ROOT, encoding: 'utf8' });
  expect(r.status, r.stdout + r.stderr).toBe(0);
  compiled = { js: graphOf(out, ['.js']), dts: graphOf(out, ['.d.ts']) };
}, 180_000);
afterAll(() => { if (out) rmSync(out, { recursive: true, force: true }); });

describe('the import graph of ts/', () => {
  it('declares a layer for every folder and root file of ts/, and the compile has a module for each source', () => {
    const layers = declaredLayers();
    const folders = new Set([...source.keys()].map(folderOf));
    expect([...folders].filter((f) => !layers.has(f)), 'folders of ts/ without a layer').toEqual([]);
    expect([...layers.keys()].filter((f) => !folders.has(f)), 'layers naming no folder of ts/').toEqual([]);
    const roots = [...source.keys()].filter((id) => folderOf(id) === '.');
    expect(Math.max(...layers.values()), 'the files at the root of ts/ (the entries) are the top layer').toBe(layers.get('.'));
    expect(roots.length).toBeGreaterThanOrEqual(5);
    expect([...compiled.js.keys()].sort()).toEqual([...source.keys()].sort());
    expect([...compiled.dts.keys()].sort()).toEqual([...source.keys()].sort());
  });

  for (const view of ['sources', 'compiled JavaScript', 'compiled declarations'] as const) {
    it(`has no cycle (${view})`, () => {
      const g = view === 'sources' ? source : view === 'compiled JavaScript' ? compiled.js : compiled.dts;
      const found = cycles(g);
      expect(found, `import cycles in the ${view}:\n${found.join('\n')}`).toEqual([]);
    });
    it(`imports only downwards across layers (${view})`, () => {
      const g = view === 'sources' ? source : view === 'compiled JavaScript' ? compiled.js : compiled.dts;
      const bad = layerViolations(g, declaredLayers());
      expect(bad, `imports against the layers in the ${view}:\n${bad.join('\n')}`).toEqual([]);
    });
  }

  it('the checks find a cycle, an upward import, a sideways one and a type-only one', () => {
    const g: Graph = new Map([
      ['core/a', new Set(['core/b'])], ['core/b', new Set(['core/c'])], ['core/c', new Set(['core/a', 'ops/x'])],
      ['ops/x', new Set(['core/a'])], ['losses/y', new Set(['optim/z'])], ['optim/z', new Set<string>()],
    ]);
    expect(cycles(g)).toEqual(['core/a → core/b → core/c → core/a (its circle also holds ops/x)']);
    expect(layerViolations(g, new Map([['core', 0], ['ops', 1], ['losses', 2], ['optim', 2]]))).toEqual([
      'core/c → ops/x (core: layer 0; ops: layer 1)',
      'losses/y → optim/z (losses: layer 2; optim: layer 2)',
    ]);
    // every import form is seen, `import type {}` (erased by the compiler) included
    const text = [
      "import type {} from '../index.js';", "import { a } from './a.js';", "export * from './b.js';",
      "export type { T } from './t.js';", "type U = import('./u.js').U;", "const m = await import('./m.js');",
      "declare module '../core/addon_types.js' { interface NativeAddon { x(): void } }", "import x from 'node:fs';",
    ].join('\n');
    expect(specifiers('x.ts', text).sort()).toEqual(['../core/addon_types.js', '../index.js', './a.js', './b.js', './m.js', './t.js', './u.js']);
  });
});
