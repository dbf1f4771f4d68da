// Crash tests: pipelining clients against `node src/main.ts -b DIR`, SIGKILL at a seeded random
// moment, restart on the same DIR with another shard count, check every acknowledged change (see
// crash.ts for the model). Five kills in all here; tools/crash-test.ts runs as many as you like.
// Rerun one case with its printed seed: CRASH_SEED=<seed> npx vitest run test/durability/crash.test.ts

import { describe, expect, it } from 'vitest';
import { crashRun, type CrashOptions } from './crash.ts';
import { cleanedAfterEach, makeDir } from './support.ts';

const { dirs } = cleanedAfterEach();

const override = process.env.CRASH_SEED !== undefined ? Number(process.env.CRASH_SEED) : undefined;

const CASES: Array<{ name: string; seed: number } & Omit<CrashOptions, 'seed' | 'dir'>> = [
  { name: '-f 0, shards 1 → 3 → 1, two kills', seed: 20250601, shards: [1, 3, 1], workMs: [300, 1000] },
  { name: '-f 0, 16 KiB segments (removal and compaction under load), shards 3 → 1 → 3, two kills', seed: 20250602, shards: [3, 1, 3], segmentBytes: 16384, workMs: [300, 1000] },
  { name: '-F (a process crash loses nothing written), shards 3 → 1, one kill', seed: 20250603, shards: [3, 1], fsync: ['-F'], workMs: [300, 1000] },
  { name: '-f 0, connections on a thread per shard, shards 3 → 2 → 3, two kills', seed: 20250604, shards: [3, 2, 3], connectionThreads: true, workMs: [300, 1000] },
];

describe('crash (SIGKILL) and restart', () => {
  for (const c of CASES) {
    it(c.name, { timeout: 60_000 }, async () => {
      const seed = override ?? c.seed;
      const dir = makeDir('crash');
      dirs.push(dir);
      const { name: _name, seed: _seed, ...opts } = c;
      const res = await crashRun({ ...opts, seed, dir });
      expect(res.problems, `seed ${seed} (rerun: CRASH_SEED=${seed}, or npx node tools/crash-test.ts --runs 1 --seed ${seed})`).toEqual([]);
      // The run did something worth checking.
      expect(res.acked.put ?? 0, `seed ${seed}: acknowledged ${JSON.stringify(res.acked)}`).toBeGreaterThan(20);
      expect(res.checked.length).toBe(c.shards.length - 1);
    });
  }
});
