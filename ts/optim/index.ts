/**
 * Optimizers, gradient clipping and learning-rate schedules.
 *
 * @module
 */
export { Optimizer, zeroGrad } from './optimizer.js';
export type { StepAsyncOptions } from './optimizer.js';
export { AdamW, Adam } from './adamw.js';
export type { AdamOptions } from './adamw.js';
export { SGD } from './sgd.js';
export type { SGDOptions } from './sgd.js';
export { clipGradNorm, clipGradNormAsync, gradNorm } from './clip.js';
export type { ClipGradNormOptions, ClipGradNormAsyncOptions } from './clip.js';
export { constantSchedule, linearWarmupSchedule, cosineSchedule, linearSchedule, LRScheduler } from './schedule.js';
export type { Schedule, ScheduleOptions, DecayScheduleOptions, CosineScheduleOptions, LRSchedulerState } from './schedule.js';
export type { AdamState, SGDState, OptimizerState } from './state.js';
