/**
 * GEAR as a built-in advantage estimator (`computeAdvantages('gear', ...)`). It is registered here, in
 * GEAR's layer above `ts/advantages`, after the estimators of that folder: `listAdvantageEstimators()`
 * lists it last. The package's entry imports this module.
 *
 * @internal
 * @module
 */
import '../advantages/builtins.js';
import { registerBuiltinEstimator } from '../advantages/registry.js';
import { gearEstimator } from './gear.js';

registerBuiltinEstimator(gearEstimator);
