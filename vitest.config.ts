import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Server and conformance tests bind real ports and spawn threads; on a 2-core machine a few
    // files at a time is faster than many.
    maxWorkers: 2,
  },
});
