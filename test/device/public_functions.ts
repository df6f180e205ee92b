// The public functions of the package that take or give a DeviceLogits, listed from its declarations with
// the TypeScript compiler: every function, namespace member (`cuda.upload`) and class method (`AdamW.step`,
// `DeviceLogits.download`) exported by the package's entry points whose parameters (or `this`, or its
// result) can hold a DeviceLogits, seen through unions, intersections, aliases (`AnyLogits`), generic
// constraints (`L extends AnyLogits`), overloads, promises and the properties of option objects
// (`gearFromLogits`'s `student`, `tokenStatsBackward`'s `out`). `@internal` declarations are not public.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The package's entry points (package.json `exports`: `.` and the subpaths) and their public prefixes. */
export const ENTRIES: [file: string, prefix: string][] = [
  ['ts/index.ts', ''], ['ts/diagnostics.ts', 'diagnostics:'], ['ts/similarity.ts', 'similarity:'], ['ts/report.ts', 'report:'],
];

// Option objects nest shallowly (an op's options, a result's statistics): deeper walks only meet the
// same types again.
const MAX_DEPTH = 4;

/**
 * The public names of those functions, sorted. A function exported under two names (the class
 * `DeviceLogits` is also `cuda.DeviceLogits`) is listed once, under the shorter. `entries`: other
 * modules to list (test fixtures).
 */
export function deviceFunctions(entries: [file: string, prefix: string][] = ENTRIES): string[] {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const program = ts.createProgram(entries.map(([f]) => join(ROOT, f)), { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const deviceFile = program.getSourceFile(join(ROOT, 'ts/core/device.ts'));
  if (!deviceFile) throw new Error('ts/core/device.ts is not part of the program');
  const deviceClass = deviceFile.statements.find((s): s is ts.ClassDeclaration => ts.isClassDeclaration(s) && s.name?.text === 'DeviceLogits');
  if (!deviceClass) throw new Error('class DeviceLogits not found in ts/core/device.ts');
  const deviceSymbol = checker.getSymbolAtLocation(deviceClass.name!)!;

  const internal = (d: ts.Declaration | undefined) => d !== undefined && ts.getJSDocTags(d).some((t) => t.tagName.text === 'internal');
  const fromLib = (s: ts.Symbol | undefined) => (s?.declarations ?? []).some((d) => program.isSourceFileDefaultLibrary(d.getSourceFile()) ||
    d.getSourceFile().fileName.includes('/node_modules/'));

  function holdsDevice(type: ts.Type, depth: number, seen: Set<ts.Type>): boolean {
    if (seen.has(type)) return false;
    seen.add(type);
    const sym = type.getSymbol();
    if (sym === deviceSymbol || type.aliasSymbol === deviceSymbol) return true;
    if (type.isUnionOrIntersection()) return type.types.some((t) => holdsDevice(t, depth, seen));
    if (type.flags & ts.TypeFlags.TypeParameter) {
      const c = checker.getBaseConstraintOfType(type);
      return c !== undefined && c !== type && holdsDevice(c, depth, seen);
    }
    if (!(type.flags & ts.TypeFlags.Object)) return false;
    // Promise<T>, arrays, Map<K, V>, ...: their type arguments
    const args = (type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference ? checker.getTypeArguments(type as ts.TypeReference) : [];
    if (args.some((t) => holdsDevice(t, depth, seen))) return true;
    if (fromLib(sym) || depth >= MAX_DEPTH) return false;
    // an object's properties (functions among them are callbacks: what they accept is not an argument)
    for (const p of checker.getPropertiesOfType(type)) {
      const decl = p.valueDeclaration ?? p.declarations?.[0];
      if (internal(decl) || p.getName().startsWith('__#')) continue;
      const t = decl ? checker.getTypeOfSymbolAtLocation(p, decl) : undefined;
      if (t === undefined || checker.getSignaturesOfType(t, ts.SignatureKind.Call).length > 0) continue;
      if (holdsDevice(t, depth + 1, seen)) return true;
    }
    return false;
  }

  /** Whether a signature takes or gives a DeviceLogits (`self`: the class whose method it is). */
  function signatureHolds(sig: ts.Signature, decl: ts.Node, self: ts.Symbol | undefined): boolean {
    if (self === deviceSymbol) return true;
    for (const p of sig.getParameters()) {
      if (holdsDevice(checker.getTypeOfSymbolAtLocation(p, decl), 0, new Set())) return true;
    }
    return holdsDevice(checker.getReturnTypeOfSignature(sig), 0, new Set());
  }

  const found = new Map<ts.Symbol, string>();  // the function (or method) and its shortest public name
  function callable(name: string, sym: ts.Symbol, self: ts.Symbol | undefined): void {
    const decl = sym.valueDeclaration ?? sym.declarations?.[0];
    if (!decl || internal(decl)) return;
    const known = found.get(sym);
    if (known !== undefined && known.length <= name.length) return;
    const type = checker.getTypeOfSymbolAtLocation(sym, decl);
    if (checker.getSignaturesOfType(type, ts.SignatureKind.Call).some((s) => signatureHolds(s, decl, self))) found.set(sym, name);
  }
  function memberName(sym: ts.Symbol): string {
    const d = sym.declarations?.[0];
    const n = d && ts.getNameOfDeclaration(d);
    return n && ts.isComputedPropertyName(n) ? n.getText() : sym.getName();  // `[Symbol.dispose]`
  }
  function walkExports(moduleSymbol: ts.Symbol, prefix: string, seen: Set<ts.Symbol>): void {
    if (seen.has(moduleSymbol)) return;
    seen.add(moduleSymbol);
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const sym = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const name = prefix + exported.getName();
      if (sym.flags & ts.SymbolFlags.ValueModule) {
        walkExports(sym, `${name}.`, seen);  // export * as cuda
      } else if (sym.flags & ts.SymbolFlags.Class) {
        const decl = sym.valueDeclaration;
        if (!decl || internal(decl)) continue;
        const instance = checker.getDeclaredTypeOfSymbol(sym);
        const statics = checker.getTypeOfSymbolAtLocation(sym, decl);
        for (const [type, self] of [[instance, sym], [statics, undefined]] as const) {
          for (const m of checker.getPropertiesOfType(type)) {
            if (m.flags & ts.SymbolFlags.Method && !m.getName().startsWith('__#')) callable(`${name}.${memberName(m)}`, m, self);
          }
        }
      } else if (sym.flags & (ts.SymbolFlags.Function | ts.SymbolFlags.Variable)) {
        callable(name, sym, undefined);
      }
    }
  }
  for (const [file, prefix] of entries) {
    const source = program.getSourceFile(join(ROOT, file));
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    if (!moduleSymbol) throw new Error(`${file}: no module symbol`);
    walkExports(moduleSymbol, prefix, new Set());
  }
  return [...found.values()].sort();
}
