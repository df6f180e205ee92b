import { defineConfig } from 'vitest/config';
import { PLATFORM_SUITES, shared } from './vitest.config.js';

// `npm run test:platforms`: the emulated platform suites that `npm test` leaves out (see vitest.config.ts).
export default defineConfig({ test: { ...shared, include: PLATFORM_SUITES } });
