// Every `@example` in the TSDoc of ts/ is a complete program in a ```ts block that imports from 'gear-rl'
// (or one of its subpaths): each one must type-check against the public API and run without throwing.
// Every exported function (and every public method of an exported class) must have one, read from the
// export lists of the package's entry points (ts/index.ts and the subpaths of package.json's `exports`),
// so a new export without an example fails here. Every export also needs a sidebar @category of
// typedoc.json, and every option whose doc names a default a @defaultValue (some checked against the
// code's values).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it, vi } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const INDEX = join(ROOT, 'ts/index.ts');
/** Each specifier of package.json's `exports` ('gear-rl', 'gear-rl/diagnostics', ...) and its source module. */
const PKG_EXPORTS = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
const ENTRIES: [string, string][] = Object.keys(PKG_EXPORTS.exports).filter((k) => k !== './package.json')
  .map((k) => [k === '.' ? PKG_EXPORTS.name : `${PKG_EXPORTS.name}/${k.slice(2)}`, join(ROOT, 'ts', `${k === '.' ? 'index' : k.slice(2)}.ts`)]);
const SPECIFIER = /from '(gear-rl(?:\/[a-z]+)?)'/g;

interface Example { id: string; file: string; line: number; code: string }

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** `@example` tags that are not followed by a ```ts block (they would not be run). */
const malformed: string[] = [];

/** The ```ts block of each `@example` tag of each doc comment in ts/. */
function collectExamples(): Example[] {
  const out: Example[] = [];
  for (const file of sourceFiles(join(ROOT, 'ts'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/\/\*\*[\s\S]*?\*\//g)) {
      const body = m[0].split('\n').map((l) => l.replace(/^\s*\*(?: |$)/, '')).join('\n');
      const tags = body.match(/@example\b/g)?.length ?? 0;
      const blocks = [...body.matchAll(/@example[^\n]*\n+```ts\n([\s\S]*?)\n```/g)];
      if (blocks.length !== tags) malformed.push(`${relative(ROOT, file)}:${text.slice(0, m.index).split('\n').length}`);
      for (const ex of blocks) {
        const line = text.slice(0, m.index).split('\n').length + body.slice(0, ex.index).split('\n').length - 1;
        const rel = relative(ROOT, file);
        out.push({ id: `${rel}:${line}`, file: rel, line, code: ex[1] });
      }
    }
  }
  return out;
}

const examples = collectExamples();
const dir = mkdtempSync(join(tmpdir(), 'gear-doc-examples-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Snippet file name: .mts so both tsc and Node treat it as an ES module (top-level await allowed). */
const snippetPath = (ex: Example): string => join(dir, `${ex.id.replace(/[^A-Za-z0-9]+/g, '_')}.mts`);
for (const ex of examples) writeFileSync(snippetPath(ex), ex.code);

function program(roots: string[]): ts.Program {
  const cfg = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, {
    ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); },
  })!;
  const options: ts.CompilerOptions = {
    ...cfg.options, noEmit: true, declaration: false, declarationMap: false, sourceMap: false,
    rootDir: undefined, typeRoots: [join(ROOT, 'node_modules/@types')], paths: Object.fromEntries(ENTRIES.map(([k, f]) => [k, [f]])),
  };
  return ts.createProgram({ rootNames: [...ENTRIES.map(([, f]) => f), ...roots], options });
}

let shared: ts.Program | undefined;
/** One program for every check: the entry points and the example snippets. */
const getProgram = (): ts.Program => (shared ??= program(examples.map(snippetPath)));

interface Exported { name: string; kind: 'function' | 'class'; file: string; hasExample: boolean; missingMethods: string[] }

const hasExampleTag = (d: ts.Node): boolean => ts.getJSDocTags(d).some((t) => t.tagName.text === 'example');

/** Every export of every entry point, with the checker (a name exported twice is listed once). */
function entryExports(p: ts.Program): ts.Symbol[] {
  const checker = p.getTypeChecker();
  const seen = new Set<string>();
  return ENTRIES.flatMap(([, f]) => checker.getExportsOfModule(checker.getSymbolAtLocation(p.getSourceFile(f)!)!))
    .filter((e) => !seen.has(e.name) && seen.add(e.name) !== undefined);
}

/** The functions and classes the entry points export, resolved through re-exports. */
function exportedCallables(p: ts.Program): Exported[] {
  const checker = p.getTypeChecker();
  const out: Exported[] = [];
  for (const exp of entryExports(p)) {
    const sym = exp.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exp) : exp;
    const decls = sym.declarations ?? [];
    const file = decls[0] ? relative(ROOT, decls[0].getSourceFile().fileName) : '?';
    // a const holding a function (`export const f = () => ...`) is a function to its users
    const callableConst = sym.flags & ts.SymbolFlags.Variable && decls[0] !== undefined
      && checker.getTypeOfSymbolAtLocation(sym, decls[0]).getCallSignatures().length > 0;
    if (sym.flags & ts.SymbolFlags.Function || callableConst) {
      const docs = decls.map((d) => (ts.isVariableDeclaration(d) ? d.parent.parent : d));
      out.push({ name: exp.name, kind: 'function', file, hasExample: docs.some(hasExampleTag), missingMethods: [] });
    } else if (sym.flags & ts.SymbolFlags.Class) {
      const cls = decls.find(ts.isClassDeclaration)!;
      const classExamples = ts.getJSDocTags(cls).filter((t) => t.tagName.text === 'example')
        .map((t) => ts.getTextOfJSDocComment(t.comment) ?? '').join('\n');
      // A public method is covered by its own example or by a call to it in the class's example.
      const methods = cls.members.filter((m): m is ts.MethodDeclaration => ts.isMethodDeclaration(m) && ts.isIdentifier(m.name)
        && !(ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected))
        && !ts.getJSDocTags(m).some((t) => t.tagName.text === 'internal'));
      const names = [...new Set(methods.map((m) => (m.name as ts.Identifier).text))];
      const missingMethods = names.filter((n) => !methods.some((m) => (m.name as ts.Identifier).text === n && hasExampleTag(m))
        && !new RegExp(`\\.${n}\\(`).test(classExamples));
      out.push({ name: exp.name, kind: 'class', file, hasExample: hasExampleTag(cls), missingMethods });
    }
  }
  return out;
}

/** Exports of the entry points whose doc comment has no `@category` of typedoc.json's `categoryOrder`. */
function uncategorised(p: ts.Program): string[] {
  const cfg = JSON.parse(readFileSync(join(ROOT, 'typedoc.json'), 'utf8')) as { categoryOrder: string[] };
  const allowed = new Set(cfg.categoryOrder.filter((c) => c !== '*' && c !== 'Other'));
  const checker = p.getTypeChecker();
  return entryExports(p).flatMap((exp) => {
    const sym = exp.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exp) : exp;
    const decls = sym.declarations ?? [];
    // a namespace (`export * as cuda`) takes the tags of its module comment, on its first statement
    const tagged = (d: ts.Declaration): ts.Node | undefined =>
      ts.isSourceFile(d) ? d.statements[0] : ts.isVariableDeclaration(d) ? d.parent.parent : d;
    const cats = decls.flatMap((d) => { const n = tagged(d); return n ? ts.getJSDocTags(n) : []; })
      .filter((t) => t.tagName.text === 'category').map((t) => (ts.getTextOfJSDocComment(t.comment) ?? '').trim());
    const file = decls[0] ? relative(ROOT, decls[0].getSourceFile().fileName) : '?';
    return cats.length > 0 && cats.every((c) => allowed.has(c)) ? [] : [`${exp.name} (${file}): ${cats.join(', ') || 'no @category'}`];
  });
}

/** The exported interfaces of the entry points (declared in ts/), by name. */
function exportedInterfaces(p: ts.Program): Map<string, ts.InterfaceDeclaration> {
  const checker = p.getTypeChecker();
  const out = new Map<string, ts.InterfaceDeclaration>();
  for (const exp of entryExports(p)) {
    const sym = exp.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exp) : exp;
    const d = sym.declarations?.find(ts.isInterfaceDeclaration);
    if (d) out.set(exp.name, d);
  }
  return out;
}

const tagText = (m: ts.Node, tag: string): string | undefined => {
  const t = ts.getJSDocTags(m).find((x) => x.tagName.text === tag);
  return t === undefined ? undefined : (ts.getTextOfJSDocComment(t.comment) ?? '').trim();
};

/** The property signatures of an interface, those it inherits included (an options interface may extend others). */
function members(decl: ts.InterfaceDeclaration): ts.PropertySignature[] {
  const checker = getProgram().getTypeChecker();
  const type = checker.getDeclaredTypeOfSymbol(checker.getSymbolAtLocation(decl.name)!);
  return type.getProperties().flatMap((s) => (s.declarations ?? []).filter(ts.isPropertySignature).slice(0, 1));
}

/** Each optional property's `@defaultValue` that is a literal in a code span (others name a rule, not a value). */
function documentedDefaults(decl: ts.InterfaceDeclaration): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const m of members(decl)) {
    if (!m.questionToken) continue;
    const text = tagText(m, 'defaultValue');
    // a literal alone, or followed by one parenthetical remark ("`536870912` (512 MiB)")
    const lit = text && /^`([^`]*)`(?:\s*\(.*\))?$/s.exec(text)?.[1];
    if (lit === undefined || lit === '') continue;
    if (lit === 'undefined') out[m.name.getText()] = undefined;
    else if (/^(?:'[^']*'|-?[\d.e+-]+|true|false|Infinity|\[[\d., e+-]*\])$/.test(lit)) {
      out[m.name.getText()] = JSON.parse(lit.replace(/'/g, '"').replace(/^Infinity$/, '1e999'));
    } // anything else names another option (`clipLow`, ...): not a literal
  }
  return out;
}

describe('TSDoc examples', () => {
  it('every export has a @category listed in typedoc.json (the sidebar groups)', () => {
    const missing = uncategorised(getProgram());
    expect(missing, `exports without a known @category:\n${missing.join('\n')}`).toEqual([]);
  }, 60_000);

  it('every exported function, class and public method has an @example', () => {
    const callables = exportedCallables(getProgram());
    expect(callables.length).toBeGreaterThan(90);
    const missing = callables.flatMap((c) => [
      ...(c.hasExample ? [] : [`${c.name} (${c.file})`]),
      ...c.missingMethods.map((m) => `${c.name}.${m} (${c.file})`),
    ]);
    expect(missing, `exports without an @example:\n${missing.join('\n')}`).toEqual([]);
    expect(examples.length).toBeGreaterThanOrEqual(callables.length);
  }, 60_000);

  it('every @example is a ```ts block', () => {
    expect(malformed).toEqual([]);
    expect(examples.length).toBeGreaterThan(100);
  });

  it('every example imports from gear-rl and type-checks against the public API', () => {
    const p = getProgram();
    const problems: string[] = [];
    for (const ex of examples) {
      if (!/from 'gear-rl(?:\/[a-z]+)?'/.test(ex.code)) problems.push(`${ex.id}: does not import from 'gear-rl'`);
      const sf = p.getSourceFile(snippetPath(ex))!;
      for (const d of [...p.getSyntacticDiagnostics(sf), ...p.getSemanticDiagnostics(sf)]) {
        const { line } = sf.getLineAndCharacterOfPosition(d.start ?? 0);
        problems.push(`${ex.id} (example line ${line + 1}): ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
  }, 120_000);

  describe('every example runs', () => {
    const runDir = join(dir, 'run');
    mkdirSync(runDir, { recursive: true });
    for (const ex of examples) {
      it(ex.id, async () => {
        // 'gear-rl' (and each subpath) is its ts/ entry here (dist/ may be stale); console.log output is silenced.
        const code = ex.code.replace(SPECIFIER, (_, spec: string) => `from ${JSON.stringify(pathToFileURL(ENTRIES.find(([k]) => k === spec)![1]).href)}`);
        const file = join(runDir, `${ex.id.replace(/[^A-Za-z0-9]+/g, '_')}.mts`);
        writeFileSync(file, code);
        const log = vi.spyOn(console, 'log').mockImplementation(() => {});
        try {
          await import(pathToFileURL(file).href);
        } finally {
          log.mockRestore();
        }
      });
    }
  });
});

describe('@defaultValue', () => {
  it('every optional property whose doc names a default carries @defaultValue', () => {
    const missing: string[] = [];
    for (const [name, decl] of exportedInterfaces(getProgram())) {
      for (const m of decl.members) {
        if (!ts.isPropertySignature(m) || !m.questionToken) continue;
        const doc = ts.getJSDocCommentsAndTags(m).map((d) => d.getText()).join('\n');
        if (/\bdefault\b/i.test(doc) && tagText(m, 'defaultValue') === undefined) {
          missing.push(`${name}.${m.name.getText()} (${relative(ROOT, decl.getSourceFile().fileName)})`);
        }
      }
    }
    expect(missing, `options without @defaultValue:\n${missing.join('\n')}`).toEqual([]);
  }, 60_000);

  // The documented defaults against the values the code resolves when an option is left out.
  it('GearOptions match GEAR_DEFAULTS', async () => {
    const rl = await import('../../ts/index.js');
    const documented = documentedDefaults(exportedInterfaces(getProgram()).get('GearOptions')!);
    expect(Object.keys(documented).sort()).toEqual([...rl.GEAR_OPTION_KEYS].sort());
    expect(documented).toEqual({ ...rl.GEAR_DEFAULTS });
  }, 60_000);

  it('AdamOptions and SGDOptions match the optimizers\' resolved state', async () => {
    const rl = await import('../../ts/index.js');
    const ifaces = exportedInterfaces(getProgram());
    const adam = documentedDefaults(ifaces.get('AdamOptions')!);
    const { lr, betas, eps, weightDecay, amsgrad, maximize } = new rl.AdamW([new Float32Array(1)]).state();
    expect(adam).toEqual({ lr, betas, eps, weightDecay, amsgrad, maximize });
    const sgd = documentedDefaults(ifaces.get('SGDOptions')!);
    const s = new rl.SGD([new Float32Array(1)], { lr: 0.1 }).state();
    expect(sgd).toEqual({ momentum: s.momentum, dampening: s.dampening, nesterov: s.nesterov, weightDecay: s.weightDecay, maximize: s.maximize });
  }, 60_000);

  it('PolicyLossArgs match the options a loss receives', async () => {
    const rl = await import('../../ts/index.js');
    const documented = documentedDefaults(exportedInterfaces(getProgram()).get('PolicyLossArgs')!);
    let seen: rl.ResolvedPolicyLossOptions | undefined;
    rl.registerPolicyLoss({ name: 'doc_defaults_probe', terms: (ctx) => {
      seen = ctx.options;
      return { loss: new Float64Array(ctx.logprob.length), dloss: new Float64Array(ctx.logprob.length) };
    } });
    try {
      const x = Float64Array.of(-1, -1);
      rl.policyLoss({ kind: 'doc_defaults_probe', logprob: x, oldLogprob: x, advantages: x, offsets: Int32Array.of(0, 2) });
    } finally {
      rl.unregisterPolicyLoss('doc_defaults_probe');
    }
    const o = seen!;
    expect({
      clipLow: documented.clipLow, clipC: documented.clipC, logRatioClamp: documented.logRatioClamp, tauPos: documented.tauPos,
      tauNeg: documented.tauNeg, clipCovRatio: documented.clipCovRatio, clipCovLb: documented.clipCovLb, clipCovUb: documented.clipCovUb,
      seed: documented.seed, klCovRatio: documented.klCovRatio, ppoKlCoef: documented.ppoKlCoef,
    }).toEqual({
      clipLow: o.lo, clipC: o.c, logRatioClamp: o.clamp, tauPos: o.tauPos, tauNeg: o.tauNeg, clipCovRatio: o.clipCovRatio,
      clipCovLb: o.clipCovLb, clipCovUb: o.clipCovUb, seed: o.seed, klCovRatio: o.klCovRatio, ppoKlCoef: o.ppoKlCoef,
    });
    expect(o.hi).toBe(o.lo); // clipHigh defaults to clipLow
    // each built-in kind declares its defaults in its schema: they are the documented ones (DPPO's
    // truncation, documented in the remark of clipC, aside)
    let checked = 0;
    for (const name of rl.listPolicyLosses()) {
      for (const [k, spec] of Object.entries(rl.getPolicyLoss(name).options ?? {})) {
        if (spec.default === undefined || (name.startsWith('dppo') && k === 'clipC')) continue;
        expect(spec.default, `${name}: ${k}`).toEqual(documented[k]);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(15);
    // leaving `kind` out runs the documented kind
    const args = { logprob: Float64Array.of(-1, -0.2, -3), oldLogprob: Float64Array.of(-0.5, -0.9, -2), advantages: Float64Array.of(1, -2, 0.5), offsets: Int32Array.of(0, 3) };
    expect(rl.policyLoss(args)).toEqual(rl.policyLoss({ ...args, kind: documented.kind as string }));
    expect(rl.policyLoss(args).loss).not.toBe(rl.policyLoss({ ...args, kind: 'gpg' }).loss);
  }, 60_000);

  // Passing every documented literal default explicitly must change nothing.
  it('spelling out the documented defaults gives the same results', async () => {
    const rl = await import('../../ts/index.js');
    const ifaces = exportedInterfaces(getProgram());
    const defaults = (name: string): Record<string, unknown> => {
      const d = documentedDefaults(ifaces.get(name)!);
      expect(Object.keys(d).length, name).toBeGreaterThan(0);
      return d;
    };
    const rand = (n: number, scale = 1) => Float32Array.from({ length: n }, (_, i) => scale * Math.sin(1.7 * i + 0.3));
    const offsets = Int32Array.of(0, 3, 7, 8);
    const mask = Uint8Array.of(1, 1, 0, 1, 1, 1, 1, 1);
    const rewards = [1, 0, 0.5, 1];
    const groups = [0, 0, 0, 1];
    const student = { data: rand(8 * 5, 2), rows: 8, vocab: 5 };
    const teacher = { data: rand(8 * 5, 3).reverse(), rows: 8, vocab: 5 };
    const targets = Int32Array.of(0, 1, 2, 3, 4, 0, 1, 2);
    const logprob = Float32Array.from(rand(8), (x) => -1 - 0.5 * x);
    const oldLogprob = Float32Array.from(rand(8).reverse(), (x) => -1 - 0.4 * x);
    const cases: [string, (extra: Record<string, unknown>) => unknown][] = [
      ['GrpoArgs', (x) => rl.grpo({ rewards, groups, ...x })],
      ['GrpoPassKArgs', (x) => rl.grpoPassK({ rewards: [1, 0, 0.5, 1, 0], groups: [0, 0, 0, 1, 1], ...x })],
      ['RlooArgs', (x) => rl.rloo({ rewards, groups, ...x })],
      ['OpoArgs', (x) => rl.opo({ rewards, groups, lengths: [2, 4, 1, 3], ...x })],
      ['GpgArgs', (x) => rl.gpg({ rewards, groups, ...x })],
      ['GdpoArgs', (x) => rl.gdpo({ rewards: [rewards, [0, 1, 1, 0]], groups, ...x })],
      ['TrlAdvantagesArgs', (x) => rl.trlAdvantages({ rewards: [rewards], numGenerations: 2, ...x })],
      ['ReinforcePlusPlusBaselineArgs', (x) => rl.reinforcePlusPlusBaseline({ rewards, groups, ...x })],
      ['ReinforcePlusPlusArgs', (x) => rl.reinforcePlusPlus({ tokenRewards: rand(8), offsets, mask, ...x })],
      ['RemaxArgs', (x) => rl.remax({ tokenRewards: rand(8), offsets, baselines: [0, 1, 0.5], ...x })],
      ['GigpoArgs', (x) => rl.gigpo({
        episodeRewards: [1, 1, 0, 0], stepRewards: [0, 1, 0, 0], trajectories: [0, 0, 1, 1], groups: [0, 0, 0, 0],
        anchors: ['a', 'b', 'a', 'c'], ...x,
      })],
      ['TokenStatsOptions', (x) => rl.tokenStats(student, targets, x)],
      ['DivergenceCommonOptions', (x) => rl.divergence(student, teacher, x)],
      ['DistillArgs', (x) => rl.distillLoss({ student, teacher, distillCoef: 0.5, ...x })],
      ['GearFromLogitsInput', (x) => rl.gearFromLogits({ student, teacher, targets, advantages: [1, -1, 0.5], offsets, mask, ...x })],
      ['AggregateOptions', (x) => rl.aggregate(logprob, offsets, mask, 'seq-mean-token-sum-norm', x)],
      ['KlPenaltyArgs', (x) => rl.klPenalty({ logprob, refLogprob: oldLogprob, estimator: 'k3', ...x })],
      ['KlLossArgs', (x) => rl.klLoss({ logprob, refLogprob: oldLogprob, offsets, mask, ...x })],
      ['ApplyKlPenaltyArgs', (x) => rl.applyKlPenalty({
        tokenRewards: rand(8), oldLogprob: logprob, refLogprob: oldLogprob, offsets, mask, controller: new rl.FixedKlController(0.1), ...x,
      })],
      ['PolicyLossArgs', (x) => rl.policyLoss({ logprob, oldLogprob, advantages: rand(8), offsets, mask, ...x })],
      ['RolloutCorrection', (x) => rl.rolloutCorrectionWeights(logprob, offsets, mask, { rolloutLogprob: oldLogprob, ...x })],
      ['TrlLossArgs', (x) => rl.trlLoss({ logprob, oldLogprob, advantages: [1, -1, 0.5], offsets, mask, ...x })],
      ['CosineScheduleOptions', (x) => [0, 3, 9, 20].map(rl.cosineSchedule({ peak: 1, totalSteps: 10, ...x }))],
      ['RolloutBatchInput', (x) => rl.buildRolloutBatch({ trajectories: [{ group: 0, steps: [{ tokens: [1, 2] }, { tokens: [3], reward: 1 }] }], ...x })],
    ];
    for (const [name, call] of cases) expect(call(defaults(name)), name).toEqual(call({}));
  }, 60_000);
});
