/**
 * The **trapdoor maze**: the demo's default task.
 *
 * R rooms in a chain, three doors per room. Per task the doors of each room are a uniformly random
 * permutation of {exit, trap, wall}, independently per room. The prompt warns of every room's trap door;
 * the map slots (which door is the exit) are hidden from the student (`map ? ? ? ?`) and filled in for
 * the teacher (`map A2 B1 C3 D2`): the teacher's privileged information is the hidden map, not an answer.
 *
 * An agent turn is `f` filler words, a verb (`go` / `peek`), a door of the current room and `;`:
 *
 * * `go <exit>` → `obs pass` and the next room; leaving the last room ends the episode with reward 1;
 * * `go <wall>` → `obs wall`, the agent stays;
 * * `go <trap>` → the episode ends with reward 0 (no observation);
 * * `peek <door>` → `obs exit|wall|fall`, the door's type (costs a turn; never needed);
 * * anything else (a door of another room, a missing `;`, a bad filler) → `obs err`, the turn is spent.
 *
 * After 2R + 1 turns the episode ends with reward 0. The optimal policy (avoid the warned trap, try one
 * of the two other doors, take the third after a wall) always wins in at most 2R turns.
 *
 * Door tokens are per room (`A1 A2 A3` for room 1, `B1 B2 B3` for room 2, ...), so "this door was
 * bumped" is a token feature that does not depend on its position in the conversation.
 *
 * @module
 */
import { Rng, deriveSeed } from './rng.js';
import type { EnvEpisode, EnvTask, Environment, StepResult, TokenRole } from './types.js';

/** Door types. */
export const EXIT = 0, TRAP = 1, WALL = 2;
const TYPE_NAME = ['exit', 'trap', 'wall'] as const;
/** The tokens before the door and filler tokens, in id order. */
export const MAZE_BASE_VOCAB = ['<pad>', '<bos>', 'escape', 'trap', 'map', '?', 'go', 'peek', ';', 'obs', 'pass', 'wall', 'fall', 'exit', 'err'] as const;
/** Filler words (used when `fillers > 0`). */
export const FILLER_WORDS = ['w1', 'w2', 'w3', 'w4'] as const;
/** The 6 permutations of {exit, trap, wall}: a room's door types in door order. */
const PERMS = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] as const;

/** Settings of a maze. */
export interface MazeConfig {
  /** Rooms in the chain (1..26). */
  rooms: number;
  /** Filler tokens before the verb of every turn (0..8). */
  fillers: number;
}

/** One maze task. */
export interface MazeTask extends EnvTask {
  /** Per room, per door (0..2): its type ({@link EXIT}, {@link TRAP}, {@link WALL}). */
  doors: number[][];
}

/** A maze episode (see the module comment for the rules). */
export class MazeEpisode implements EnvEpisode {
  /** Turns taken so far. */
  turn = 0;
  /** Current room (0-based; `rooms` once escaped). */
  room = 0;
  /** Per door of the current room: its type once bumped or peeked, else -1. */
  known: number[] = [-1, -1, -1];
  /** True once the episode is over. */
  done = false;
  /** Outcome reward. */
  reward = 0;
  private end = '';

  /**
   * @param env the maze
   * @param task the task being played
   */
  constructor(readonly env: Maze, readonly task: MazeTask) {}

  /** `r<room>|<door>=<type>,...` over the doors known in the current room; no turn counter, so states recur. */
  anchor(): string {
    const L = String.fromCharCode(65 + this.room);
    const seen = this.known.flatMap((k, d) => (k < 0 ? [] : [`${L}${d + 1}=${TYPE_NAME[k]}`]));
    return `r${this.room + 1}|${seen.join(',')}`;
  }

  /** `win`, `trap` or `out_of_turns`; valid once done. */
  outcome(): string {
    return this.end;
  }

  /** Applies one agent turn. */
  step(turn: ArrayLike<number>): StepResult {
    const env = this.env;
    if (this.done) throw new Error('MazeEpisode.step: the episode is over');
    if (turn.length !== env.turnLength) throw new Error(`MazeEpisode.step: expected ${env.turnLength} tokens, got ${turn.length}`);
    this.turn++;
    const f = env.cfg.fillers;
    const roles: TokenRole[] = Array(turn.length).fill(0);
    // The first token that breaks the turn is the (wrong) decisive one.
    let bad = -1;
    for (let i = 0; i < f && bad < 0; i++) if (!env.isFiller(turn[i]!)) bad = i;
    const verb = turn[f]!, doorTok = turn[f + 1]!;
    if (bad < 0 && verb !== env.id('go') && verb !== env.id('peek')) bad = f;
    const door = doorTok - env.doorToken(this.room, 0);
    if (bad < 0 && !(door >= 0 && door < 3)) bad = f + 1;
    if (bad < 0 && turn[f + 2] !== env.id(';')) bad = f + 2;
    let observation: number[];
    if (bad >= 0) {
      roles[bad] = -1;
      observation = [env.id('obs'), env.id('err')];
    } else {
      const type = this.task.doors[this.room]![door]!;
      if (verb === env.id('peek')) {
        observation = [env.id('obs'), env.id(type === EXIT ? 'exit' : type === WALL ? 'wall' : 'fall')];
        this.known[door] = type;
      } else if (type === TRAP) {
        roles[f + 1] = -1;
        return this.finish(0, 'trap', roles, true);
      } else if (type === WALL) {
        // Bumping a wall already known is a wasted turn; an untested wall is what the optimal policy also tries.
        roles[f + 1] = this.known[door] === WALL ? -1 : 0;
        this.known[door] = WALL;
        observation = [env.id('obs'), env.id('wall')];
      } else {
        roles[f + 1] = 1;
        this.room++;
        this.known = [-1, -1, -1];
        if (this.room === env.cfg.rooms) return this.finish(1, 'win', roles, true);
        observation = [env.id('obs'), env.id('pass')];
      }
    }
    if (this.turn >= env.maxTurns) return this.finish(0, 'out_of_turns', roles, bad < 0);
    return { observation, reward: 0, done: false, valid: bad < 0, roles };
  }

  private finish(reward: number, end: string, roles: TokenRole[], valid: boolean): StepResult {
    this.done = true;
    this.reward = reward;
    this.end = end;
    return { observation: [], reward, done: true, valid, roles };
  }
}

/** The trapdoor maze environment (see the module comment). */
export class Maze implements Environment<MazeTask, MazeEpisode> {
  readonly name = 'maze';
  readonly title: string;
  readonly vocab: readonly string[];
  readonly turnLength: number;
  readonly maxTurns: number;
  readonly promptLength: number;
  readonly maxLength: number;
  readonly settings: Readonly<Record<string, number>>;
  readonly outcomes = ['win', 'trap', 'out_of_turns'] as const;
  private readonly ids = new Map<string, number>();
  private readonly door0: number;
  private readonly filler0: number;

  /** @param cfg rooms and fillers (default 4 rooms, no fillers) */
  constructor(readonly cfg: MazeConfig = { rooms: 4, fillers: 0 }) {
    const { rooms: R, fillers: f } = cfg;
    if (!(Number.isInteger(R) && R >= 1 && R <= 26)) throw new Error(`Maze: rooms must be an integer in [1, 26], got ${R}`);
    if (!(Number.isInteger(f) && f >= 0 && f <= 8)) throw new Error(`Maze: fillers must be an integer in [0, 8], got ${f}`);
    const doors: string[] = [];
    for (let r = 0; r < R; r++) for (let d = 1; d <= 3; d++) doors.push(`${String.fromCharCode(65 + r)}${d}`);
    this.vocab = [...MAZE_BASE_VOCAB, ...doors, ...(f > 0 ? FILLER_WORDS : [])];
    this.vocab.forEach((w, i) => this.ids.set(w, i));
    this.door0 = MAZE_BASE_VOCAB.length;
    this.filler0 = this.door0 + 3 * R;
    this.turnLength = f + 3;
    this.maxTurns = 2 * R + 1;
    this.promptLength = 3 + 2 * R + 1;
    this.maxLength = this.promptLength + this.maxTurns * this.turnLength + (this.maxTurns - 1) * 2;
    this.settings = { rooms: R, fillers: f };
    this.title = `trapdoor maze (${R} rooms${f ? `, ${f} fillers per turn` : ''}, ${this.maxTurns} turns, vocab ${this.vocab.length})`;
  }

  /** Token id of a vocabulary entry (throws on an unknown one). */
  id(word: string): number {
    const i = this.ids.get(word);
    if (i === undefined) throw new Error(`Maze: no token ${word}`);
    return i;
  }

  /** Token id of door `d` (0..2) of room `r` (0-based). */
  doorToken(r: number, d: number): number {
    return this.door0 + 3 * r + d;
  }

  /** True for the filler words. */
  isFiller(x: number): boolean {
    return this.cfg.fillers > 0 && x >= this.filler0 && x < this.filler0 + FILLER_WORDS.length;
  }

  /** Index of the prompt's first map slot. */
  get mapPos(): number {
    return 4 + this.cfg.rooms;
  }

  /** Draws the task of an environment seed: an independent uniform permutation of the door types per room. */
  makeTask(seed: number): MazeTask {
    const rng = new Rng(deriveSeed(seed, 0x3a2e));
    const doors = Array.from({ length: this.cfg.rooms }, () => [...PERMS[rng.int(6)]!]);
    return { seed, doors };
  }

  /** `<bos> escape trap T_1..T_R map ?..?`; privileged: `map E_1..E_R` (the exits). */
  prompt(task: MazeTask, privileged: boolean): number[] {
    const R = this.cfg.rooms;
    const p = [this.id('<bos>'), this.id('escape'), this.id('trap')];
    for (let r = 0; r < R; r++) p.push(this.doorToken(r, task.doors[r]!.indexOf(TRAP)));
    p.push(this.id('map'));
    for (let r = 0; r < R; r++) p.push(privileged ? this.doorToken(r, task.doors[r]!.indexOf(EXIT)) : this.id('?'));
    return p;
  }

  /** A fresh episode. */
  episode(task: MazeTask): MazeEpisode {
    return new MazeEpisode(this, task);
  }

  /**
   * The warm-start demonstrator: go through the known exit if a peek revealed it, else through a uniformly
   * random door that is neither the warned trap nor a known wall; with probability `eps` the verb is
   * redrawn (go / peek, 50/50) and, independently, with probability `eps` the door is redrawn among the
   * room's three. In the privileged view every `go` targets the exit, whatever the noise.
   */
  demoTurn(ep: MazeEpisode, rng: Rng, eps: number, privileged: boolean): number[] {
    const doors = ep.task.doors[ep.room]!;
    const exit = doors.indexOf(EXIT);
    let door: number;
    if (ep.known[exit] === EXIT) door = exit;
    else {
      const ok = [0, 1, 2].filter((d) => doors[d] !== TRAP && ep.known[d] !== WALL);
      door = ok[rng.int(ok.length)]!;
    }
    let verb = this.id('go');
    if (rng.next() < eps) verb = rng.next() < 0.5 ? this.id('go') : this.id('peek');
    if (rng.next() < eps) door = rng.int(3);
    if (privileged && verb === this.id('go')) door = exit;
    const turn: number[] = [];
    for (let i = 0; i < this.cfg.fillers; i++) turn.push(this.filler0 + rng.int(FILLER_WORDS.length));
    turn.push(verb, this.doorToken(ep.room, door), this.id(';'));
    return turn;
  }

  /** Door types per room, e.g. `A:x/t/w B:...` (x = exit, t = trap, w = wall). */
  describe(task: MazeTask): string {
    return task.doors.map((d, r) => `${String.fromCharCode(65 + r)}:${d.map((k) => 'xtw'[k]).join('')}`).join(' ');
  }
}
