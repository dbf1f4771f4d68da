// Every micro-benchmark runs in quick mode with the unit tests, so none can rot unnoticed.
// Files are discovered, not listed: a new bench/micro/*.bench.ts is covered automatically.
// No timing assertions: the machine is a noisy shared VM (MEASURED.md).

import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';

const benchDir = new URL('../../bench/micro/', import.meta.url);
const benchFiles = readdirSync(benchDir)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort();

describe('micro-benchmarks run in quick mode', () => {
  it('finds bench files', () => {
    expect(benchFiles.length).toBeGreaterThan(0);
  });

  for (const file of benchFiles) {
    it(file, async () => {
      const mod = (await import(new URL(file, benchDir).href)) as {
        run?: (opts: { quick: boolean }) => Promise<unknown>;
      };
      expect(typeof mod.run, `${file} must export run({ quick })`).toBe('function');
      const results = await mod.run!({ quick: true });
      if (Array.isArray(results)) {
        expect(results.length).toBeGreaterThan(0);
        for (const r of results) expect(r).toBeTruthy();
      } else {
        expect(results).toBeTruthy();
        expect(Object.keys(results as object).length).toBeGreaterThan(0);
      }
    });
  }
});
