/**
 * Inference-server responses (OpenAI-compatible, vLLM, SGLang, llama.cpp) into the packed rollout
 * layout with per-token log-probs and sparse top-k.
 *
 * @module
 */
export type { SparseTopK, ServerSequence, TokenMap, TokenKeys, ParseOptions } from './common.js';
export { byteLevelKey } from './common.js';
export { logprobModesMatch, isSamplerLogprob } from './mode.js';
export type { LogprobMode, LogprobModeInput } from './mode.js';
export { createParseArena } from './arena.js';
export type { ParseArena, ParseArenaOptions } from './arena.js';
export { parseOpenAIChat, parseOpenAICompletion, parseOpenAIPromptLogprobs } from './openai.js';
export type { OpenAIPromptOptions } from './openai.js';
export { parseVllm, parseVllmOutputs, parseVllmPromptLogprobs } from './vllm.js';
export type { VllmPromptOptions } from './vllm.js';
export { parseSglang, parseSglangInputLogprobs } from './sglang.js';
export type { SglangInputOptions, SglangOptions } from './sglang.js';
export { parseLlamaCpp } from './llamacpp.js';
export type { LlamaCppOptions } from './llamacpp.js';
export { packServerRollouts } from './pack.js';
export type {
  PackServerRolloutsInput, ServerRolloutBatch, ServerTrajectory, ServerTurn, ServerAssistantTurn, ServerContextTurn,
} from './pack.js';
