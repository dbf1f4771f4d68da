// Scripted sessions: the same script against beanstalkd and each shardstalk target; the
// transcripts (normalised only as runner.ts lists) must be identical.

import { describe, expect, it } from 'vitest';
import { referenceTarget, shardstalkTargets } from '../support/servers.ts';
import { describeTranscriptDiff, runScript, type Transcript } from './runner.ts';
import { SCRIPTS } from './scripts.ts';

/** The reference transcript of each script, computed once and shared by all targets. */
const referenceRuns = new Map<string, Promise<Transcript>>();
function reference(name: string): Promise<Transcript> {
  let run = referenceRuns.get(name);
  if (!run) {
    const script = SCRIPTS.find((s) => s.name === name)!;
    run = runScript(referenceTarget(), script);
    referenceRuns.set(name, run);
  }
  return run;
}

// Sessions run one at a time (reference and target side by side at most): under heavier
// concurrency the servers lag enough to shift the truncated seconds that stats report.
describe('scripted sessions on beanstalkd', () => {
  it.for(SCRIPTS.map((s) => s.name))('%s: every reply arrives (the script itself is sound)', async (name) => {
    const t = await reference(name);
    const missing = t.lines.filter((l) => l.includes('(no reply:') || l.includes('UNEXPECTED') || l.endsWith('still open'));
    // (a gather that got a different number of replies than scripted shows as UNEXPECTED too)
    expect(missing, t.lines.join('\n')).toEqual([]);
  });
});

describe.each(shardstalkTargets())('$name: scripted sessions match beanstalkd', (target) => {
  it.for(SCRIPTS.map((s) => s.name))('%s', async (name) => {
    const script = SCRIPTS.find((s) => s.name === name)!;
    // run the target while the reference run (if not done yet) goes on
    const [want, got] = await Promise.all([reference(name), runScript(target, script)]);
    const diff = describeTranscriptDiff(want, got);
    if (diff !== null) expect.fail(`${diff}\n\nfull ${got.target} transcript:\n${got.lines.join('\n')}`);
  });
});
