// Micro-benchmark of the shard engine: put+reserveBest+deleteJob cycles/s (empty queue and with a
// 10k-job backlog so the heaps have depth), a cycle through the delayed and buried states, and raw
// IndexHeap push+pop/s.
// Run: node_modules/.bin/node bench/micro/engine.bench.ts   (or via run({ quick }) from a test)

import { Bench } from 'tinybench';
import { Engine } from '../../workers/engine/engine.ts';
import { IndexHeap } from '../../workers/engine/heap.ts';

export interface EngineBenchResult {
  name: string;
  /** Operations (cycles, or heap push+pop pairs) per second. */
  opsPerSec: number;
  samples: number;
}

const BATCH = 1000; // operations per timed task call, so timer overhead stays negligible
const BACKLOG = 10_000;

export async function run({ quick }: { quick: boolean }): Promise<EngineBenchResult[]> {
  const bench = new Bench({
    time: quick ? 25 : 1000,
    warmupTime: quick ? 5 : 250,
    iterations: quick ? 4 : 64,
    warmupIterations: quick ? 2 : 16,
  });
  const body = new Uint8Array(100).fill(120);
  const tubes = [0];
  let nextId = 1;

  const cycle = (e: Engine, pri: number) => {
    const now = Date.now();
    for (let i = 0; i < BATCH; i++) {
      e.put(0, nextId++, pri, 0, 60, body, now);
      const id = e.reserveBest(tubes, 1, 1, now);
      e.deleteJob(id, 1);
    }
  };

  const empty = new Engine();
  bench.add('engine put+reserve+delete (empty queue)', () => cycle(empty, 100));

  const loaded = new Engine();
  for (let i = 0; i < BACKLOG; i++) loaded.put(0, nextId++, 2000 + (i % 97), 0, 60, body, Date.now());
  bench.add(`engine put+reserve+delete (${BACKLOG / 1000}k backlog, same pri)`, () => cycle(loaded, 2000));

  // The other states' path: delayed, kicked, reserved, buried, kicked, reserved, deleted (the
  // delay heap, timer heap, buried FIFO and their records), beside a delayed and buried backlog.
  const moved = new Engine();
  for (let i = 0; i < BACKLOG; i++) moved.put(0, nextId++, 2000, 100, 60, body, Date.now());
  for (let i = 0; i < BACKLOG; i++) {
    const id = nextId++;
    moved.put(0, id, 2000, 0, 60, body, Date.now());
    moved.reserveJob(id, 2, Date.now());
    moved.bury(id, 2, 2000);
  }
  bench.add(`engine put delayed+kick+reserve+bury+kick+reserve+delete (${BACKLOG / 1000}k delayed, ${BACKLOG / 1000}k buried)`, () => {
    const now = Date.now();
    for (let i = 0; i < BATCH; i++) {
      const id = nextId++;
      moved.put(0, id, 100, 5, 60, body, now);
      moved.kickJob(id, now);
      moved.reserveJob(id, 1, now);
      moved.bury(id, 1, 100);
      moved.kickJob(id, now);
      moved.reserveJob(id, 1, now);
      moved.deleteJob(id, 1);
    }
  });

  // Heap alone: keys in a column, BACKLOG elements resident, push+pop BATCH random keys.
  const n = BACKLOG + BATCH;
  const key = new Float64Array(n);
  const pos = new Int32Array(n);
  let seed = 1;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  for (let i = 0; i < n; i++) key[i] = rand();
  const heap = new IndexHeap(
    (a, b) => key[a] < key[b] || (key[a] === key[b] && a < b),
    (s, p) => {
      pos[s] = p;
    },
  );
  for (let s = 0; s < BACKLOG; s++) heap.push(s);
  const free = Int32Array.from({ length: BATCH }, (_, i) => BACKLOG + i);
  bench.add(`heap push+pop (${BACKLOG / 1000}k resident)`, () => {
    for (let i = 0; i < BATCH; i++) {
      const s = free[i];
      key[s] = rand();
      heap.push(s);
    }
    for (let i = 0; i < BATCH; i++) free[i] = heap.pop();
  });

  await bench.run();
  const results: EngineBenchResult[] = [];
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') throw new Error(`bench task ${task.name}: ${r.state}${'error' in r ? `: ${r.error}` : ''}`);
    results.push({ name: task.name, opsPerSec: r.throughput.mean * BATCH, samples: r.latency.samplesCount });
  }
  return results;
}

if (import.meta.main) {
  const quick = process.argv.includes('--quick');
  const results = await run({ quick });
  console.table(results.map((r) => ({ name: r.name, 'ops/s': Math.round(r.opsPerSec).toLocaleString('en-US'), samples: r.samples })));
}
