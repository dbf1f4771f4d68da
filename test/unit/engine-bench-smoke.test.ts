// Runs the engine micro-benchmark in quick mode: it must complete and report every task.
// No timing assertions (CI machines vary); only that numbers came out.

import { expect, it } from 'vitest';
import { run } from '../../bench/micro/engine.bench.ts';

it('engine micro-benchmark runs in quick mode and reports results', async () => {
  const results = await run({ quick: true });
  expect(results.map((r) => r.name)).toEqual([
    expect.stringContaining('put+reserve+delete'),
    expect.stringContaining('put+reserve+delete'),
    expect.stringContaining('put delayed+kick+reserve+bury'),
    expect.stringContaining('heap push+pop'),
  ]);
  for (const r of results) {
    expect(r.samples).toBeGreaterThan(0);
    expect(Number.isFinite(r.opsPerSec) && r.opsPerSec > 0).toBe(true);
  }
});
