/**
 * "Vault": the study's long-horizon task with four heterogeneous phases.
 *
 * 1. **Key.** The key lies in one of {@link BOXES} boxes. `box i` answers `empty`, or `key` followed by
 *    the {@link CODE_LEN}-digit code of the vault door (digits 0–3).
 * 2. **Door.** The agent types the code one digit per turn (`dig d`). A right digit answers `ok`; a
 *    wrong one answers `buzz` and the entry starts over from the first digit. After the last digit the
 *    door answers `open`.
 * 3. **Corridor.** Behind the door, {@link JUNCTIONS} junctions, each with a sign (`sL` or `sR`) shown
 *    on arrival. Turning with the sign (`left`/`right`) moves on; against it answers `wall` and the
 *    sign again (a wasted turn).
 * 4. **Chest.** At the end of the corridor are four chests; the treasure is in the chest numbered by
 *    the code's FIRST digit, seen many turns earlier. `ans c` ends the episode: reward 1 if c is right.
 *
 * An action that does not fit the phase answers `buzz` and only wastes a turn. The episode fails
 * (reward 0) after {@link BUDGET} actions. A good episode takes about 3.5 + 4 + 8 + 1 ≈ 16.5 decisions. The teacher's privileged context is the box holding the key (the
 * hidden map); the student must explore for it.
 *
 * Every decision is one token, so an agent step is one token of the conversation.
 *
 * @module
 */
import { Rng } from '../env/rng.js';

/** Boxes in the key phase. */
export const BOXES = 6;
/** Digits of the door code. */
export const CODE_LEN = 4;
/** Junctions in the corridor. */
export const JUNCTIONS = 8;
/** Most actions per episode. */
export const BUDGET = 30;

/** The vocabulary: actions, observations and the teacher's privileged tokens. */
export const VOCAB = [
  'bos', 'sep',
  ...Array.from({ length: BOXES }, (_, i) => `box${i}`),
  'dig0', 'dig1', 'dig2', 'dig3',
  'left', 'right',
  'ans0', 'ans1', 'ans2', 'ans3',
  'empty', 'key', 'd0', 'd1', 'd2', 'd3', 'ok', 'buzz', 'open', 'sL', 'sR', 'wall', 'hall',
  ...Array.from({ length: BOXES }, (_, i) => `at${i}`),
] as const;

/** Token id of a vocabulary word. */
export function tok(word: (typeof VOCAB)[number]): number {
  const i = (VOCAB as readonly string[]).indexOf(word);
  if (i < 0) throw new Error(`vault: unknown token ${word}`);
  return i;
}

const BOX0 = tok('box0'), DIG0 = tok('dig0'), ANS0 = tok('ans0'), D0 = tok('d0'), AT0 = tok('at0'), LEFT = tok('left'), SL = tok('sL');

/** A task: where the key is, the door code and the corridor's signs. */
export interface VaultTask {
  /** Box holding the key. */
  keyBox: number;
  /** The door code (digits 0–3); the treasure is in chest `code[0]`. */
  code: number[];
  /** The sign at each junction: 0 left, 1 right. */
  turns: number[];
}

/** Draws a task from a seed. */
export function makeTask(seed: number): VaultTask {
  const rng = new Rng(seed);
  return {
    keyBox: rng.int(BOXES), code: Array.from({ length: CODE_LEN }, () => rng.int(4)),
    turns: Array.from({ length: JUNCTIONS }, () => rng.int(2)),
  };
}

/** The student's prompt. */
export function studentPrompt(): number[] {
  return [tok('bos')];
}

/** The teacher's prompt: the hidden map (where the key is), then the student's prompt. */
export function teacherPrompt(task: VaultTask): number[] {
  return [AT0 + task.keyBox, tok('sep'), ...studentPrompt()];
}

/** What a decision was, for credit-assignment diagnostics. */
export type DecisionKind = 'box' | 'digit' | 'turn' | 'answer' | 'invalid';

/** The environment's state during an episode. */
export class Vault {
  /** 0 key, 1 door, 2 corridor, 3 chest, 4 done. */
  phase = 0;
  /** Boxes opened so far (bit set). */
  opened = 0;
  /** Code digits entered correctly so far (door), or junctions passed (corridor). */
  progress = 0;
  /** Actions taken. */
  actions = 0;
  /** 1 after a right answer. */
  reward = 0;

  constructor(readonly task: VaultTask) {}

  /** True when the episode is over. */
  get done(): boolean {
    return this.phase === 4;
  }

  /**
   * The state an action is taken from, as a string (GiGPO's anchor): equal strings mean equal
   * situations for the agent.
   */
  anchor(): string {
    return this.phase === 0 ? `k${this.opened}` : this.phase === 1 ? `d${this.progress}` : this.phase === 2 ? `j${this.progress}` : 'c';
  }

  /** Applies `action`; returns the observation tokens and what kind of decision it was. */
  act(action: number): { obs: number[]; kind: DecisionKind; right: boolean } {
    if (this.done) throw new Error('vault: the episode is over');
    this.actions++;
    let obs: number[];
    let kind: DecisionKind = 'invalid', right = false;
    if (this.phase === 0 && action >= BOX0 && action < BOX0 + BOXES) {
      const b = action - BOX0;
      kind = 'box';
      right = b === this.task.keyBox;
      this.opened |= 1 << b;
      if (right) { obs = [tok('key'), ...this.task.code.map((d) => D0 + d)]; this.phase = 1; } else obs = [tok('empty')];
    } else if (this.phase === 1 && action >= DIG0 && action < DIG0 + 4) {
      kind = 'digit';
      right = action - DIG0 === this.task.code[this.progress];
      if (right) {
        this.progress++;
        if (this.progress === CODE_LEN) { obs = [tok('open'), SL + this.task.turns[0]!]; this.phase = 2; this.progress = 0; } else obs = [tok('ok')];
      } else { this.progress = 0; obs = [tok('buzz')]; }
    } else if (this.phase === 2 && (action === LEFT || action === LEFT + 1)) {
      kind = 'turn';
      right = action - LEFT === this.task.turns[this.progress];
      if (right) {
        this.progress++;
        if (this.progress === JUNCTIONS) { obs = [tok('hall')]; this.phase = 3; } else obs = [SL + this.task.turns[this.progress]!];
      } else obs = [tok('wall'), SL + this.task.turns[this.progress]!];
    } else if (this.phase === 3 && action >= ANS0 && action < ANS0 + 4) {
      kind = 'answer';
      right = action - ANS0 === this.task.code[0];
      this.reward = right ? 1 : 0;
      this.phase = 4;
      obs = [];
    } else obs = [tok('buzz')];
    if (!this.done && this.actions >= BUDGET) { this.phase = 4; this.reward = 0; }
    return { obs, kind, right };
  }

  /** The action a noisy demonstrator takes: the right one, except with probability `eps` a random valid one. */
  demoAction(rng: Rng, eps: number): number {
    if (this.phase === 0) {
      // Explores boxes in a random order (it does not know where the key is), never reopening one.
      const closed = [];
      for (let b = 0; b < BOXES; b++) if (!(this.opened & (1 << b))) closed.push(b);
      return BOX0 + closed[rng.int(closed.length)]!;
    }
    if (this.phase === 1) return DIG0 + (rng.next() < eps ? rng.int(4) : this.task.code[this.progress]!);
    if (this.phase === 2) return LEFT + (rng.next() < eps ? rng.int(2) : this.task.turns[this.progress]!);
    return ANS0 + (rng.next() < eps ? rng.int(4) : this.task.code[0]!);
  }
}

/** A played episode. */
export interface Episode {
  /** The task. */
  task: VaultTask;
  /** Prompt + actions + observations, as token ids. */
  tokens: number[];
  /** 1 on the agent's action tokens, 0 on the prompt and the observations. */
  agentMask: number[];
  /** Per action: its token position, GiGPO anchor, kind and whether it was right. */
  decisions: { pos: number; anchor: string; kind: DecisionKind; right: boolean }[];
  /** 1 for a right answer within the budget. */
  reward: number;
}

/** Plays an episode with `choose(tokens)` picking each action from the tokens so far. */
export function play(task: VaultTask, choose: (tokens: number[], env: Vault) => number): Episode {
  const env = new Vault(task);
  const tokens = studentPrompt();
  const agentMask = tokens.map(() => 0);
  const decisions: Episode['decisions'] = [];
  while (!env.done) {
    const anchor = env.anchor();
    const a = choose(tokens, env);
    const pos = tokens.length;
    tokens.push(a); agentMask.push(1);
    const { obs, kind, right } = env.act(a);
    decisions.push({ pos, anchor, kind, right });
    for (const o of obs) { tokens.push(o); agentMask.push(0); }
  }
  return { task, tokens, agentMask, decisions, reward: env.reward };
}
