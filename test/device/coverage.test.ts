// Every public function that takes or gives a DeviceLogits has its host-device case. The list comes from
// the package's declarations (test/device/public_functions.ts: the entry points of package.json, through
// unions, aliases, generics, overloads and option objects), the cases from test/device/cases.ts, which
// test/device/api.test.ts runs on the host device and checks to call their function with a device tensor.
import { describe, expect, it } from 'vitest';
import { DEVICE_CASES } from './cases.js';
import { deviceFunctions } from './public_functions.js';

describe('the host-device cases cover the public functions that take or give a DeviceLogits', () => {
  it('the declarations walk finds every route to a DeviceLogits, and only those', () => {
    const found = deviceFunctions([['test/device/fixtures/declarations.ts', '']]);
    expect(found).toEqual(['Holder.yesMethod', 'Holder.yesStatic', 'space.yesInSpace', 'yesAlias', 'yesArray', 'yesArrow',
      'yesDirect', 'yesGeneric', 'yesIntersection', 'yesNested', 'yesOptional', 'yesOverload', 'yesReturns', 'yesUnion']);
  });

  const functions = deviceFunctions();
  it(`lists the package's (${functions.length}): never none`, () => {
    console.log(`public functions that take or give a DeviceLogits: ${functions.join(', ')}`);
    expect(functions.length).toBeGreaterThan(0);
    for (const f of ['cuda.upload', 'DeviceLogits.download', 'DeviceLogits.[Symbol.dispose]', 'tokenStatsBackwardAsync', 'gearFromLogits', 'distillLoss']) {
      expect(functions).toContain(f);
    }
  });

  it('each has a case in test/device/cases.ts, and each case names one of them', () => {
    const cases = Object.keys(DEVICE_CASES).sort();
    expect(functions.filter((f) => !cases.includes(f)), 'public functions without a host-device case').toEqual([]);
    expect(cases.filter((c) => !functions.includes(c)), 'cases named after no such public function').toEqual([]);
  });
});
