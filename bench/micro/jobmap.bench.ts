// Routing-table costs per operation: JobShardMap set/get/delete and tube-name hashing.
// Run: node bench/micro/jobmap.bench.ts [--quick]

import { Bench, type Task } from 'tinybench';
import { JobShardMap } from '../../src/route/jobmap.ts';
import { fnv1a32, shardOf } from '../../src/route/hash.ts';

const OPS_PER_ITERATION = 4096;
const LIVE_IDS = 100_000; // a steady queue: each put adds an id, each delete drops the oldest
const SHARDS = 16;

export interface JobMapBenchRow {
  task: string;
  'ops/s': number;
  'ns/op': number;
  samples: number;
}

function row(task: Task): JobMapBenchRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`jobmap bench: task ${task.name} ended ${r.state}`);
  const opsPerSec = (OPS_PER_ITERATION * 1000) / r.period;
  return {
    task: task.name,
    'ops/s': Math.round(opsPerSec),
    'ns/op': Math.round((1e9 / opsPerSec) * 100) / 100,
    samples: r.latency.samplesCount,
  };
}

export async function run({ quick }: { quick: boolean }): Promise<JobMapBenchRow[]> {
  const map = new JobShardMap();
  let nextId = 1;
  for (; nextId <= LIVE_IDS; nextId++) map.set(nextId, nextId % SHARDS);
  let sink = 0; // keeps results observable so the work is not optimised away

  const names: string[] = [];
  for (let i = 0; i < 64; i++) names.push(i % 2 === 0 ? `tube-${i}` : `emails.outbound.priority-${i}`);
  // A read buffer holding "use <name>\r\n" lines, hashed in place as the parser would.
  const lines = new TextEncoder().encode(names.map((n) => `use ${n}\r\n`).join(''));
  const spans: number[] = [];
  for (let at = 0; at < lines.length; ) {
    const end = lines.indexOf(13, at);
    spans.push(at + 4, end);
    at = end + 2;
  }

  // Quick mode runs with the unit tests (so the bench cannot rot): ~100 ms for the whole file.
  const bench = new Bench({
    name: 'jobmap',
    time: quick ? 15 : 1000,
    warmupTime: quick ? 3 : 250,
    iterations: quick ? 8 : 64,
    throws: true,
  });
  bench
    .add('JobShardMap set new id + delete oldest', () => {
      for (let i = 0; i < OPS_PER_ITERATION; i++) {
        map.set(nextId, nextId % SHARDS);
        map.delete(nextId - LIVE_IDS);
        nextId++;
      }
    })
    .add('JobShardMap get (live id, random)', () => {
      let x = nextId;
      for (let i = 0; i < OPS_PER_ITERATION; i++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        sink += map.get(nextId - 1 - (x % LIVE_IDS));
      }
    })
    .add('JobShardMap get (unknown id)', () => {
      for (let i = 0; i < OPS_PER_ITERATION; i++) sink += map.get(nextId + 1_000_000 + i * 70_000);
    })
    .add('shardOf(string)', () => {
      for (let i = 0; i < OPS_PER_ITERATION; i++) sink += shardOf(names[i & 63]!, SHARDS);
    })
    .add('fnv1a32 in place over a read buffer', () => {
      for (let i = 0; i < OPS_PER_ITERATION; i++) {
        const k = (i & 63) * 2;
        sink += fnv1a32(lines, spans[k]!, spans[k + 1]!) % SHARDS;
      }
    });
  await bench.run();
  if (sink === -1) console.log(sink);
  return bench.tasks.map(row);
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
