// The trapdoor maze's rules: task layouts, prompts (student and privileged teacher aligned token for
// token), every tool outcome, the turn budget, anchor states, credit roles and the demonstrator.
import { describe, expect, it } from 'vitest';
import { EXIT, Maze, MazeEpisode, TRAP, WALL, type MazeTask } from '../../examples/env/maze.js';
import { Rng } from '../../examples/env/rng.js';
import { demoTranscript, detokenizeWith, type Environment } from '../../examples/env/types.js';
import { Policy } from '../../examples/model/policy.js';
import { policyConfig } from '../../examples/trainer/train.js';

const maze = new Maze({ rooms: 4, fillers: 0 });
const text = (ids: number[]) => detokenizeWith(maze.vocab, ids);
const turn = (m: Maze, verb: 'go' | 'peek', room: number, door: number, fillers: string[] = []) =>
  [...fillers.map((w) => m.id(w)), m.id(verb), m.doorToken(room, door), m.id(';')];
// Room 1: A1 exit, A2 trap, A3 wall; room 2: B1 wall, B2 exit, B3 trap; room 3: C1 trap, C2 wall, C3 exit; room 4: D1 exit, D2 wall, D3 trap.
const TASK: MazeTask = { seed: 0, doors: [[EXIT, TRAP, WALL], [WALL, EXIT, TRAP], [TRAP, WALL, EXIT], [EXIT, WALL, TRAP]] };

describe('trapdoor maze: vocabulary, tasks and prompts', () => {
  it('has the specified vocabulary, turn and episode sizes', () => {
    expect(maze.vocab.length).toBe(27);
    expect(maze.vocab.slice(0, 15).join(' ')).toBe('<pad> <bos> escape trap map ? go peek ; obs pass wall fall exit err');
    expect(maze.vocab.slice(15).join(' ')).toBe('A1 A2 A3 B1 B2 B3 C1 C2 C3 D1 D2 D3');
    expect([maze.turnLength, maze.maxTurns, maze.promptLength, maze.maxLength]).toEqual([3, 9, 12, 55]);
    const f2 = new Maze({ rooms: 4, fillers: 2 });
    expect(f2.vocab.length).toBe(31);
    expect([f2.turnLength, f2.maxLength]).toEqual([5, 73]);
    expect(() => new Maze({ rooms: 0, fillers: 0 })).toThrow(/rooms/);
    expect(() => new Maze({ rooms: 4, fillers: -1 })).toThrow(/fillers/);
    // The demo's policy for it: 50,363 parameters (with the shared token embedding).
    expect(new Policy(policyConfig(maze as unknown as Environment)).size).toBe(50_363);
  });

  it('draws every room as an independent uniform permutation of exit, trap, wall', () => {
    const counts = new Map<string, number>();
    const pairs = new Set<string>();
    for (let s = 0; s < 3000; s++) {
      const t = maze.makeTask(s);
      expect(maze.makeTask(s)).toEqual(t);
      expect(t.doors.length).toBe(4);
      for (const room of t.doors) expect([...room].sort()).toEqual([EXIT, TRAP, WALL]);
      const k = t.doors[0]!.join('');
      counts.set(k, (counts.get(k) ?? 0) + 1);
      pairs.add(`${t.doors[0]!.join('')}|${t.doors[1]!.join('')}`);
    }
    expect(counts.size).toBe(6);
    for (const c of counts.values()) expect(c).toBeGreaterThan(400); // 500 expected each
    expect(pairs.size).toBe(36); // rooms are independent
  });

  it('warns of every trap; the teacher sees the exits in the map slots, aligned token for token with the student', () => {
    const s = maze.prompt(TASK, false), t = maze.prompt(TASK, true);
    expect(text(s)).toBe('<bos> escape trap A2 B3 C1 D3 map ? ? ? ?');
    expect(text(t)).toBe('<bos> escape trap A2 B3 C1 D3 map A1 B2 C3 D1');
    expect(s.length).toBe(maze.promptLength);
    expect(t.length).toBe(s.length);
    // Identical everywhere but the R map slots, which hold the exits (the privileged information, not an answer).
    const differ = s.flatMap((x, i) => (x !== t[i] ? [i] : []));
    expect(differ).toEqual([8, 9, 10, 11]);
    expect(maze.mapPos).toBe(8);
  });
});

describe('trapdoor maze: tools, rewards, budget, anchors and roles', () => {
  it('go exit passes to the next room; leaving the last room wins with reward 1', () => {
    const ep = new MazeEpisode(maze, TASK);
    expect(ep.anchor()).toBe('r1|');
    expect(ep.step(turn(maze, 'go', 0, 0))).toEqual({ observation: [maze.id('obs'), maze.id('pass')], reward: 0, done: false, valid: true, roles: [0, 1, 0] });
    expect(ep.room).toBe(1);
    expect(ep.anchor()).toBe('r2|');
    ep.step(turn(maze, 'go', 1, 1));
    ep.step(turn(maze, 'go', 2, 2));
    const last = ep.step(turn(maze, 'go', 3, 0));
    expect(last).toEqual({ observation: [], reward: 1, done: true, valid: true, roles: [0, 1, 0] });
    expect([ep.done, ep.reward, ep.outcome(), ep.turn]).toEqual([true, 1, 'win', 4]);
    expect(() => ep.step(turn(maze, 'go', 3, 0))).toThrow(/over/);
    expect(() => new MazeEpisode(maze, TASK).step([maze.id('go')])).toThrow(/expected 3 tokens/);
  });

  it('go wall answers "obs wall" and stays; bumping a known wall again is a wrong decision', () => {
    const ep = new MazeEpisode(maze, TASK);
    expect(ep.step(turn(maze, 'go', 0, 2))).toEqual({ observation: [maze.id('obs'), maze.id('wall')], reward: 0, done: false, valid: true, roles: [0, 0, 0] });
    expect(ep.room).toBe(0);
    expect(ep.anchor()).toBe('r1|A3=wall');
    expect(ep.step(turn(maze, 'go', 0, 2)).roles).toEqual([0, -1, 0]);
  });

  it('go trap ends the episode with reward 0 and no observation', () => {
    const ep = new MazeEpisode(maze, TASK);
    ep.step(turn(maze, 'go', 0, 0));
    expect(ep.step(turn(maze, 'go', 1, 2))).toEqual({ observation: [], reward: 0, done: true, valid: true, roles: [0, -1, 0] });
    expect([ep.reward, ep.outcome()]).toEqual([0, 'trap']);
  });

  it('peek tells a door\'s type (exit, wall, fall) at the cost of a turn; peeks are neutral', () => {
    const ep = new MazeEpisode(maze, TASK);
    const obs = (d: number) => ep.step(turn(maze, 'peek', 0, d));
    expect(obs(1)).toEqual({ observation: [maze.id('obs'), maze.id('fall')], reward: 0, done: false, valid: true, roles: [0, 0, 0] });
    expect(obs(2).observation).toEqual([maze.id('obs'), maze.id('wall')]);
    expect(obs(0).observation).toEqual([maze.id('obs'), maze.id('exit')]);
    expect(ep.turn).toBe(3);
    expect(ep.room).toBe(0);
    expect(ep.anchor()).toBe('r1|A1=exit,A2=trap,A3=wall');
    // A wall known from a peek is as wasted as one known from a bump.
    expect(ep.step(turn(maze, 'go', 0, 2)).roles).toEqual([0, -1, 0]);
  });

  it('answers malformed turns with "obs err", spends the turn and blames the first bad token', () => {
    const ep = new MazeEpisode(maze, TASK);
    const err = [maze.id('obs'), maze.id('err')];
    expect(ep.step(turn(maze, 'go', 1, 1))).toEqual({ observation: err, reward: 0, done: false, valid: false, roles: [0, -1, 0] }); // a door of another room
    expect(ep.step([maze.id(';'), maze.doorToken(0, 0), maze.id(';')]).roles).toEqual([-1, 0, 0]); // no verb
    expect(ep.step([maze.id('go'), maze.doorToken(0, 0), maze.id('go')]).roles).toEqual([0, 0, -1]); // no ';'
    expect(ep.step([maze.id('go'), maze.id('exit'), maze.id(';')]).valid).toBe(false); // not a door
    expect([ep.turn, ep.room, ep.anchor()]).toEqual([4, 0, 'r1|']);
    const f = new Maze({ rooms: 4, fillers: 2 });
    const fe = new MazeEpisode(f, TASK);
    expect(fe.step(turn(f, 'go', 0, 0, ['w1', 'w4'])).observation).toEqual([f.id('obs'), f.id('pass')]);
    expect(fe.step([f.id('w2'), f.id('go'), f.id('go'), f.doorToken(1, 1), f.id(';')]).roles).toEqual([0, -1, 0, 0, 0]);
    expect(fe.step([f.id('w2'), f.id('w3'), f.id('peek'), f.doorToken(1, 1), f.id(';')]).valid).toBe(true);
  });

  it('ends with reward 0 after 2R + 1 turns; the longest episode has exactly maxLength tokens', () => {
    const ep = new MazeEpisode(maze, TASK);
    const tr = { tokens: maze.prompt(TASK, false) };
    for (let k = 0; k < 9; k++) {
      expect(ep.done).toBe(false);
      const t = turn(maze, 'peek', 0, 2);
      const r = ep.step(t);
      tr.tokens.push(...t, ...r.observation);
      if (k < 8) expect(r.observation.length).toBe(2);
      else expect(r).toEqual({ observation: [], reward: 0, done: true, valid: true, roles: [0, 0, 0] });
    }
    expect([ep.reward, ep.outcome()]).toEqual([0, 'out_of_turns']);
    expect(tr.tokens.length).toBe(maze.maxLength);
    // Going through the exit on the very last turn still wins.
    const late = new MazeEpisode(maze, TASK);
    for (let k = 0; k < 5; k++) late.step(turn(maze, 'peek', 0, 1));
    for (let r = 0; r < 4; r++) late.step(turn(maze, 'go', r, TASK.doors[r]!.indexOf(EXIT)));
    expect([late.turn, late.reward, late.outcome()]).toEqual([9, 1, 'win']);
  });

  it('anchors have no turn counter: different orders reach the same state, and states recur', () => {
    const a = new MazeEpisode(maze, TASK), b = new MazeEpisode(maze, TASK);
    a.step(turn(maze, 'peek', 0, 2)); a.step(turn(maze, 'peek', 0, 1));
    b.step(turn(maze, 'peek', 0, 1)); b.step(turn(maze, 'go', 0, 2));
    expect(a.anchor()).toBe(b.anchor());
    expect(a.anchor()).toBe('r1|A2=trap,A3=wall');
    const c = new MazeEpisode(maze, TASK);
    c.step(turn(maze, 'go', 1, 0)); // invalid: nothing learned
    expect(c.anchor()).toBe('r1|');
    c.step(turn(maze, 'go', 0, 0));
    expect(c.anchor()).toBe('r2|'); // a new room forgets the old room's doors
  });

  it('the optimal policy (avoid the warned trap, on a wall take the third door) always wins within 2R turns', () => {
    const rng = new Rng(7);
    for (let s = 0; s < 500; s++) {
      const task = maze.makeTask(s);
      const ep = new MazeEpisode(maze, task);
      const p = maze.prompt(task, false);
      while (!ep.done) {
        const trap = p[3 + ep.room]! - maze.doorToken(ep.room, 0);
        const options = [0, 1, 2].filter((d) => d !== trap && ep.known[d] !== WALL);
        ep.step(turn(maze, 'go', ep.room, options[rng.int(options.length)]!));
      }
      expect(ep.reward).toBe(1);
      expect(ep.turn).toBeLessThanOrEqual(8);
    }
  });
});

describe('trapdoor maze: demonstrator', () => {
  it('noise-free demonstrations win; in the privileged view every go targets the exit; eps 0.35 wins about 44 %', () => {
    const rng = new Rng(3);
    const env = maze as unknown as Environment;
    for (let s = 0; s < 200; s++) expect(demoTranscript(env, maze.makeTask(s), rng, 0, false).reward).toBe(1);
    let wins = 0, gos = 0;
    const N = 3000;
    for (let s = 0; s < N; s++) {
      const task = maze.makeTask(s);
      wins += demoTranscript(env, task, rng, 0.35, false).reward;
      const t = demoTranscript(env, task, rng, 0.35, true);
      expect(t.tokens.slice(0, 12)).toEqual(maze.prompt(task, true));
      t.tokens.forEach((x, i) => {
        if (i >= 12 && x === maze.id('go')) {
          gos++;
          const door = t.tokens[i + 1]! - maze.doorToken(0, 0);
          expect(task.doors[Math.floor(door / 3)]![door % 3]).toBe(EXIT);
        }
      });
      // Agent mask: 1 on the turn tokens, 0 on the prompt and observations.
      expect(t.agentMask.slice(0, 12).every((m) => m === 0)).toBe(true);
    }
    expect(gos).toBeGreaterThan(N * 3);
    // Measured for the design: 0.444 at eps 0.35 (R = 4); binomial se at N = 3000 is about 0.009.
    expect(wins / N).toBeGreaterThan(0.41);
    expect(wins / N).toBeLessThan(0.48);
  });
});
