/**
 * `gear-rl/similarity`: the text similarity and anchor-state keys behind GiGPO's step groups
 * (`gigpo({ similarity })`, `stepGroups`): Python `difflib.SequenceMatcher` ratios computed exactly as
 * CPython does, the greedy similarity clustering of verl-agent, and the canonical keys that make two
 * equal anchor states one group.
 *
 * ```ts
 * import { sequenceMatcherRatio, similarityClusters } from 'gear-rl/similarity';
 * ```
 *
 * @module gear-rl/similarity
 */
export { sequenceMatcherRatio, quickRatio, realQuickRatio, similarityClusters, PreparedText } from './advantages/difflib.js';
export { anchorKey, anchorIds } from './advantages/anchors.js';
export type { AnchorState } from './advantages/anchors.js';
