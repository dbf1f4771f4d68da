// Seeded random sessions compared between beanstalkd and shardstalk-4.
//
//   SEED=1234 npx vitest run test/conformance/random.test.ts     replay one seed
//   SEED=1,2,3 ...                                                several
// Without SEED, a few fresh random seeds run; each test name and failure message carries its
// seed. Set RANDOM_STEPS to change the session length (default 300).

import { describe, expect, it } from 'vitest';
import { referenceTarget, targets } from '../support/servers.ts';
import { generateSession } from './random.ts';
import { describeTranscriptDiff, runScript, type Transcript } from './runner.ts';

/** How many fresh seeds a run without SEED tries. */
const RANDOM_SEEDS_PER_RUN = 3;
const STEPS = Number(process.env.RANDOM_STEPS ?? 300);

function seeds(): number[] {
  const env = (process.env.SEED ?? '').trim();
  if (env !== '') return env.split(',').map((s) => Number(s.trim()) >>> 0);
  return Array.from({ length: RANDOM_SEEDS_PER_RUN }, () => Math.floor(Math.random() * 2 ** 32));
}

const SEEDS = seeds();
const replay = (seed: number) => `replay with: SEED=${seed} npx vitest run test/conformance/random.test.ts`;

/** The comparison target: shardstalk-4 (the sharded case), when TARGETS selects it. */
const compared = targets().filter((t) => t.name === 'shardstalk-4');

describe('random sessions: the generator', () => {
  it('is deterministic for a seed', () => {
    expect(generateSession(42, 100)).toEqual(generateSession(42, 100));
    expect(generateSession(42, 100)).not.toEqual(generateSession(43, 100));
  });

  it('canary: the transcript comparison does catch a one-byte difference', () => {
    const want: Transcript = { target: 'x', lines: ['a> stats\\r\\n', 'a< INSERTED 1\\r\\n'] };
    const got: Transcript = { target: 'y', lines: ['a> stats\\r\\n', 'a< INSERTED 2\\r\\n'] };
    expect(describeTranscriptDiff(want, got)).toMatch(/line 2/);
    expect(describeTranscriptDiff(want, want)).toBeNull();
  });

  it.for(SEEDS.slice(0, 1))('seed %i runs twice on beanstalkd with identical transcripts (no timing leaks)', async (seed) => {
    const script = generateSession(seed, STEPS);
    const [one, two] = await Promise.all([
      runScript(referenceTarget(), script, { normaliseTiming: true }),
      runScript(referenceTarget(), script, { normaliseTiming: true }),
    ]);
    const diff = describeTranscriptDiff(one, { ...two, target: 'beanstalkd (second run)' });
    if (diff !== null) expect.fail(`${diff}\n${replay(seed)}`);
    const stuck = one.lines.filter((l) => l.includes('(no reply:') || l.endsWith('still open'));
    expect(stuck, replay(seed)).toEqual([]);
  });
});

describe.each(compared)('$name: random sessions match beanstalkd', (target) => {
  it.for(SEEDS)('seed %i', async (seed) => {
    const script = generateSession(seed, STEPS);
    const [want, got] = await Promise.all([
      runScript(referenceTarget(), script, { normaliseTiming: true }),
      runScript(target, script, { normaliseTiming: true }),
    ]);
    const diff = describeTranscriptDiff(want, got);
    if (diff !== null) expect.fail(`seed ${seed}: ${diff}\n${replay(seed)}`);
  });
});
