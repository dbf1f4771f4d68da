// The shared job routing state on one thread: JobShardMap (over SharedArrayBuffer memory) set + get
// + delete per id, and JobIds.next(), against what they replace.
// Run: node bench/micro/jobmap-shared.bench.ts [--quick]
// To compare with an earlier JobShardMap (same API), e.g. the single-thread one before the shared
// one, run it in place of the shared map (in a process of its own: with both classes in one process
// the map calls in the benched loops would see two classes, which slows both down):
//   git show 099405a:src/route/jobmap.ts > /tmp/jobmap-old.ts
//   JOBMAP_BASELINE=/tmp/jobmap-old.ts node bench/micro/jobmap-shared.bench.ts

import { Bench, type Task } from 'tinybench';
import { JobShardMap } from '../../src/route/jobmap.ts';
import { JobIds } from '../../src/shared/jobids.ts';

const IDS_PER_ITERATION = 4096;
const LIVE_IDS = 100_000; // a steady queue: each put adds an id, each delete drops the oldest
const SHARDS = 16;

export interface JobMapSharedBenchRow {
  task: string;
  'ns/id': number;
  samples: number;
}

interface MapLike {
  set(id: number, shard: number): void;
  get(id: number): number;
  delete(id: number): void;
}

function row(task: Task): JobMapSharedBenchRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`jobmap-shared bench: task ${task.name} ended ${r.state}`);
  return {
    task: task.name,
    'ns/id': Math.round(((r.period * 1e6) / IDS_PER_ITERATION) * 100) / 100,
    samples: r.latency.samplesCount,
  };
}

export async function run({ quick }: { quick: boolean }): Promise<JobMapSharedBenchRow[]> {
  const baseline = quick ? undefined : process.env.JOBMAP_BASELINE;
  let maps: { name: string; map: MapLike }[] = [{ name: 'shared', map: new JobShardMap() }];
  if (baseline !== undefined && baseline !== '') {
    const mod = (await import(baseline)) as { JobShardMap: new () => MapLike };
    maps = [{ name: 'baseline', map: new mod.JobShardMap() }];
  }
  let sink = 0; // keeps results observable so the work is not optimised away

  const bench = new Bench({
    name: 'jobmap-shared',
    time: quick ? 15 : 1000,
    warmupTime: quick ? 3 : 250,
    iterations: quick ? 8 : 64,
    throws: true,
  });
  for (const { name, map } of maps) {
    // A steady queue of LIVE_IDS jobs: put (set), a command on it (get), delete the oldest.
    let nextId = 1;
    for (; nextId <= LIVE_IDS; nextId++) map.set(nextId, nextId % SHARDS);
    // A queue holding one job or none at a time, ids far from the steady queue's.
    let churnId = 2 ** 40;
    bench
      .add(`${name}: set + get + delete oldest (${LIVE_IDS} live)`, () => {
        for (let i = 0; i < IDS_PER_ITERATION; i++) {
          map.set(nextId, nextId % SHARDS);
          sink += map.get(nextId - (i & 1023));
          map.delete(nextId - LIVE_IDS);
          nextId++;
        }
      })
      .add(`${name}: set + get + delete same id (0-1 live)`, () => {
        for (let i = 0; i < IDS_PER_ITERATION; i++) {
          map.set(churnId, churnId % SHARDS);
          sink += map.get(churnId);
          map.delete(churnId);
          churnId++;
        }
      })
      .add(`${name}: get (live id, random)`, () => {
        let x = nextId;
        for (let i = 0; i < IDS_PER_ITERATION; i++) {
          x = (Math.imul(x, 1103515245) + 12345) >>> 0;
          sink += map.get(nextId - 1 - (x % LIVE_IDS));
        }
      });
  }
  let counter = 1;
  const ids = new JobIds();
  bench
    .add('job ids: counter++ (today)', () => {
      for (let i = 0; i < IDS_PER_ITERATION; i++) sink += counter++;
    })
    .add('job ids: JobIds.next()', () => {
      for (let i = 0; i < IDS_PER_ITERATION; i++) sink += ids.next();
    });
  await bench.run();
  if (sink === -1) console.log(sink);
  return bench.tasks.map(row);
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
