// A shard's waiting sets with reserves over several shards in them (workers/waits.ts): what a
// claim made elsewhere (another shard gave the waiter a job, or its own thread ended the wait)
// costs this shard at its next look, with 10, 100 and 1,000 such waiters listed. One iteration:
// the claim, the look (purge), and the connection waiting again (park).
// Run: node bench/micro/waits.bench.ts [--quick]

import { Bench, type Task } from 'tinybench';
import { Claims } from '../../src/shared/claims.ts';
import { ShardWaits } from '../../workers/waits.ts';

export interface WaitsBenchRow {
  task: string;
  'ns/claim elsewhere': number;
  samples: number;
}

function row(task: Task): WaitsBenchRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`waits bench: task ${task.name} ended ${r.state}`);
  return { task: task.name, 'ns/claim elsewhere': Math.round(r.period * 1e6), samples: r.latency.samplesCount };
}

/** R waiters over several shards parked on one tube, and a step that claims the next one elsewhere and parks it again. */
function setup(R: number): () => void {
  const claims = Claims.create();
  const waits = new ShardWaits(claims);
  const tubes = Int32Array.of(1);
  const slots = new Int32Array(R);
  const tickets = new Int32Array(R);
  for (let k = 0; k < R; k++) {
    slots[k] = claims.slot();
    tickets[k] = claims.open(slots[k]);
    waits.parkRemote(k + 1, slots[k], tickets[k], tubes, 1, k);
  }
  let k = 0;
  return () => {
    if (!claims.claim(slots[k], tickets[k])) throw new Error('waits bench: a claim lost');
    if (waits.waitingOn(1) !== R - 1) throw new Error('waits bench: the claimed waiter is still listed');
    tickets[k] = claims.open(slots[k]);
    waits.parkRemote(k + 1, slots[k], tickets[k], tubes, 1, k);
    k = (k + 1) % R;
  };
}

export async function run({ quick }: { quick: boolean }): Promise<WaitsBenchRow[]> {
  const bench = new Bench({ name: 'waits', time: quick ? 25 : 1000, warmupTime: quick ? 5 : 250, iterations: quick ? 8 : 64, throws: true });
  for (const R of [10, 100, 1000]) bench.add(`${R} waiters over several shards`, setup(R));
  await bench.run();
  return bench.tasks.map(row);
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
