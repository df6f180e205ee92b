/**
 * From inference-server responses to token advantages, without ever seeing logits.
 *
 *     node dist-examples/server-logprobs.js [--json]
 *
 * The rollouts were sampled from a vLLM server (OpenAI-compatible chat, `logprobs` with
 * `top_logprobs: 3`, `return_token_ids`, `return_tokens_as_token_ids`); a tool answered between the
 * two assistant turns. The teacher's scores come from a second request per turn: the privileged
 * context (it knows the answer) followed by the student's tokens as the prompt, with
 * `prompt_logprobs: 3` and `max_tokens: 1`. The recorded responses are in
 * `examples/fixtures/server-logprobs/rollouts.json`; SGLang (`parseSglang`,
 * `parseSglangInputLogprobs`), llama.cpp (`parseLlamaCpp`) and plain OpenAI (`parseOpenAIChat` with a
 * token map) responses go through the same steps.
 *
 * Steps: parse -> pack (one row per agent step, tool tokens out) -> GRPO and GiGPO advantages ->
 * GEAR (the teacher's sparse top-k against the student's: where they disagree, the credit goes) ->
 * per-token advantages and old log-probs, ready for a policy loss.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as rl from 'gear-rl';

/** The recorded file: raw server responses per turn, and the tool tokens in between. */
interface Recorded {
  vocab: number;
  group: string;
  trajectories: {
    id: string;
    reward: number;
    turns: ({ role: 'assistant'; anchor: string; response: unknown; teacher: unknown } | { role: 'tool'; tokens: number[] })[];
  }[];
}

const here = dirname(fileURLToPath(import.meta.url));
const file = resolve(here, '..', 'examples', 'fixtures', 'server-logprobs', 'rollouts.json');
const recorded = JSON.parse(readFileSync(file, 'utf8')) as Recorded;

// 1. Parse: ids exactly as sampled, the chosen log-probs and the top-k, for the student and the teacher.
const trajectories: rl.ServerTrajectory[] = recorded.trajectories.map((t) => ({
  id: t.id,
  group: recorded.group,
  episodeReward: t.reward,
  turns: t.turns.map((u, i): rl.ServerTurn => {
    if (u.role === 'tool') return { role: 'tool', tokens: u.tokens };
    const [response] = rl.parseVllm(u.response);
    // the teacher scored the student's tokens: the last `length` positions of its prompt
    const teacher = rl.parseVllmPromptLogprobs(u.teacher, { length: response!.tokenIds.length });
    // the outcome reward arrives with the last turn
    return { role: 'assistant', response: response!, teacher, anchor: u.anchor, reward: i === t.turns.length - 1 ? t.reward : 0 };
  }),
}));

// 2. Pack: one row per assistant turn (GiGPO's step layout); the tool's tokens belong to the next prompt.
const batch = rl.packServerRollouts({ trajectories, layout: 'step' });

// 3. Advantages, one value per row. GRPO: one value per trajectory (normalised within its group), given
// to each of its rows. GiGPO: the episode level plus a step level that compares steps taken from the
// same anchor state (here: the three rollouts the tool told 18°C), with verl-agent's gamma 0.95.
const trajGrpo = rl.grpo({ rewards: recorded.trajectories.map((t) => t.reward), groups: recorded.trajectories.map(() => recorded.group) });
const grpo = Float64Array.from(batch.trajectoryIndex, (ti) => trajGrpo[ti]!);
const gigpo = rl.gigpo({
  episodeRewards: batch.episodeRewards, stepRewards: batch.stepRewards, trajectories: batch.trajectories,
  groups: batch.groups, anchors: batch.anchors, gamma: 0.95,
});

// 4. GEAR from the sparse top-k of both sides: reweights each row's GRPO advantage over its tokens.
const gear = rl.gearFromSparse({
  student: batch.topK, teacher: batch.teacherTopK!, studentLogprob: batch.logprobs, teacherLogprob: batch.teacherLogprobs!,
  advantages: grpo, offsets: batch.offsets, mask: batch.mask, vocab: recorded.vocab,
});

// 5. Per-token advantages for a trainer: the row advantages broadcast over each row's tokens (GiGPO),
// or GEAR's token advantages; `batch.logprobs` are the old (behaviour) log-probs.
const tokenGigpo = rl.segmentBroadcast(gigpo.advantages, batch.offsets, batch.mask);
const forTrainer = {
  tokenIds: batch.tokenIds, offsets: batch.offsets, mask: batch.mask, oldLogprob: batch.logprobs, advantages: gear.advantages,
};
// With the current policy equal to the behaviour policy (first update step), the clipped loss is -mean(A).
const loss = rl.policyLoss({
  logprob: forTrainer.oldLogprob, oldLogprob: forTrainer.oldLogprob, advantages: forTrainer.advantages,
  offsets: forTrainer.offsets, mask: forTrainer.mask,
});

const fmt = (x: number) => (x >= 0 ? ' ' : '') + x.toFixed(3);
if (process.argv.includes('--json')) {
  console.log(JSON.stringify({
    rows: batch.rows, tokens: batch.tokens, k: batch.topK.k, teacherK: batch.teacherTopK!.k,
    offsets: Array.from(batch.offsets), tokenIds: Array.from(batch.tokenIds), rewards: Array.from(batch.episodeRewards),
    grpo: Array.from(grpo), gigpo: Array.from(gigpo.advantages), gigpoStep: Array.from(gigpo.step),
    gear: Array.from(gear.advantages), divergence: Array.from(gear.signals.divergence),
    tokenGigpo: Array.from(tokenGigpo), logprobs: Array.from(batch.logprobs), teacherLogprobs: Array.from(batch.teacherLogprobs!),
    loss: loss.loss,
  }));
} else {
  console.log(`${batch.rows} rows (agent steps), ${batch.tokens} tokens, student top-${batch.topK.k}, teacher top-${batch.teacherTopK!.k}\n`);
  console.log('row  trajectory  step  reward   GRPO    GiGPO   GEAR per token [sparse reverse KL student || teacher]');
  for (let r = 0; r < batch.rows; r++) {
    const toks: string[] = [];
    for (let i = batch.offsets[r]!; i < batch.offsets[r + 1]!; i++) {
      toks.push(`${fmt(gear.advantages[i]!)}[${gear.signals.divergence[i]!.toFixed(2)}]`);
    }
    console.log(`${String(r).padStart(3)}  ${String(batch.trajectories[r]).padEnd(10)}  ${batch.step[r]}     ${batch.episodeRewards[r]}     ` +
      `${fmt(grpo[r]!)}  ${fmt(gigpo.advantages[r]!)}  ${toks.join(' ')}`);
  }
  console.log(`\npolicy loss at the behaviour policy: ${loss.loss.toFixed(4)}; ${forTrainer.advantages.length} token advantages ready`);
}
