/**
 * The built-in loss kinds, in the order they are listed (verl's names first, each alias after its
 * kind, then TRL's loss types, `trl.<lossType>`, from `../trl/kinds.ts`). Each verl kind is one file of
 * this folder that declares its options (types, bounds and defaults, in one schema) and its terms;
 * adding a kind is that file plus one entry here.
 *
 * @module
 */
import { cispo } from './cispo.js';
import { clipCov } from './clip_cov.js';
import { dppoKl, dppoTv } from './dppo.js';
import { dro } from './dro.js';
import { gmpo } from './gmpo.js';
import { gpg } from './gpg.js';
import { gspo } from './gspo.js';
import { klCov } from './kl_cov.js';
import { ppo } from './ppo.js';
import { type BuiltinPolicyLoss, registerBuiltinPolicyLoss } from './registry.js';
import { sapo } from './sapo.js';
import { TRL_KINDS } from '../trl/kinds.js';
import type { PolicyLossArgs, PolicyLossKind } from './types.js';

const BUILTINS = [ppo, gspo, sapo, gpg, cispo, gmpo, clipCov, klCov, dppoTv, dppoKl, dro] as const;
for (const def of BUILTINS) registerBuiltinPolicyLoss(def);
// TRL's loss types after them (`trl.grpo`, ...), which read TRL's arguments (compat: 'trl').
for (const def of TRL_KINDS) registerBuiltinPolicyLoss(def);

/**
 * Every built-in {@link PolicyLossKind} name, aliases included.
 *
 * @category Losses
 */
export const POLICY_LOSS_KINDS: readonly PolicyLossKind[] = Object.freeze(BUILTINS.flatMap((d) => [d.name, ...(d.aliases ?? [])]));

// Compile-time checks that the public types name every built-in kind and every option it declares.
type Builtin = (typeof BUILTINS)[number];
type NamesOf<D> = D extends BuiltinPolicyLoss<unknown, infer N, infer A> ? N | A : never;
type OptionsOf<D> = D extends BuiltinPolicyLoss<infer O, string, string> ? keyof O : never;
type Missing<X, Of> = [Exclude<X, Of>] extends [never] ? true : { missing: Exclude<X, Of> };
const kindsNamed: Missing<NamesOf<Builtin>, PolicyLossKind> = true;
const optionsTyped: Missing<OptionsOf<Builtin>, keyof PolicyLossArgs> = true;
void kindsNamed;
void optionsTyped;
