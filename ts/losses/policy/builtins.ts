/**
 * Registers the built-in loss kinds, in the order their names are listed (verl's names first, each
 * alias after its kind).
 *
 * @module
 */
import './ppo.js';
import './gspo.js';
import './sapo.js';
import './gpg.js';
import './cispo.js';
import './gmpo.js';
import './clip_cov.js';
import './kl_cov.js';
import './dppo.js';
import './dro.js';
