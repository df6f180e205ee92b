/**
 * The environments the demo can train on (`--env <name>`). To add your own, implement
 * {@link Environment} (see `types.ts`) and add a factory here.
 *
 * @module
 */
import { AnswerChain } from './answer_chain.js';
import { lockerEnv } from './lockers.js';
import { Maze } from './maze.js';
import type { Environment } from './types.js';

/** The default task of the main job. */
export const DEFAULT_ENV = 'answer-chain';

/** Environment factories by name. */
export const ENVIRONMENTS: Record<string, () => Environment> = {
  'answer-chain': () => new AnswerChain() as unknown as Environment,
  maze: () => new Maze({ rooms: 4, fillers: 0 }) as unknown as Environment,
  'maze-filler': () => new Maze({ rooms: 4, fillers: 2 }) as unknown as Environment,
  locker: () => lockerEnv as unknown as Environment,
};
