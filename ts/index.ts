/**
 * gear-rl: critic-free reinforcement learning for LLM agents in Node.js.
 *
 * `import * as rl from 'gear-rl'` exposes every public name at the top level.
 *
 * @packageDocumentation
 */
export { GearError } from './errors.js';
export type { GearErrorCode } from './errors.js';

// Native ops
export { backend, setNumThreads, setIsa } from './ops/backend.js';
export type { BackendInfo } from './ops/backend.js';
export { segmentReduce, segmentReduceAsync, segmentBroadcast, segmentBroadcastAsync } from './ops/segment.js';
export type { SegmentOp, AsyncOptions } from './ops/segment.js';

// Benchmark utilities (bandwidth)
export { memoryBandwidth } from './ops/bandwidth.js';
export type { BandwidthMode, MemoryBandwidthOptions, MemoryBandwidthResult } from './ops/bandwidth.js';
