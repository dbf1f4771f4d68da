// Ring throughput, same thread: 32-byte records written one per write() call vs 64 per call.
// The cross-thread cost (cache-line transfer, wake-ups) is in MEASURED.md; this isolates the
// per-call overhead that batching removes. Run: node bench/micro/ring.bench.ts [--quick]

import { Bench, type Task } from 'tinybench';
import { Ring } from '../../src/shared/ring.ts';

const RECORD_BYTES = 32;
const RECORDS_PER_ITERATION = 1024;
const RECORDS_PER_BATCH = 64;
const RING_BYTES = 64 * 1024; // holds one iteration (32 KiB) with room to spare

export interface RingBenchRow {
  task: string;
  'records/s': number;
  'MB/s': number;
  'ns/record': number;
  samples: number;
}

function row(task: Task, recordsPerIteration: number): RingBenchRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`ring bench: task ${task.name} ended ${r.state}`);
  const recordsPerSec = (recordsPerIteration * 1000) / r.period;
  return {
    task: task.name,
    'records/s': Math.round(recordsPerSec),
    'MB/s': Math.round((recordsPerSec * RECORD_BYTES) / 1e6),
    'ns/record': Math.round((1e9 / recordsPerSec) * 100) / 100,
    samples: r.latency.samplesCount,
  };
}

export async function run({ quick }: { quick: boolean }): Promise<RingBenchRow[]> {
  const ring = Ring.create(RING_BYTES);
  const record = new Uint8Array(RECORD_BYTES).fill(7);
  const batch = new Uint8Array(RECORD_BYTES * RECORDS_PER_BATCH).fill(7);
  const sink = new Uint8Array(RECORD_BYTES * RECORDS_PER_ITERATION);
  const check = (n: number, want: number): void => {
    if (n !== want) throw new Error(`ring bench: moved ${n} bytes, expected ${want}`);
  };

  // Quick mode runs with the unit tests (so the bench cannot rot): ~100 ms for the whole file.
  const bench = new Bench({
    name: 'ring',
    time: quick ? 25 : 1000,
    warmupTime: quick ? 5 : 250,
    iterations: quick ? 8 : 64,
    throws: true,
  });
  bench
    .add('32 B records, one write() each, one read() per 1024', () => {
      for (let i = 0; i < RECORDS_PER_ITERATION; i++) check(ring.write(record, 0, RECORD_BYTES), RECORD_BYTES);
      check(ring.read(sink, 0, sink.length), sink.length);
    })
    .add(`32 B records, ${RECORDS_PER_BATCH} per write(), one read() per 1024`, () => {
      for (let i = 0; i < RECORDS_PER_ITERATION / RECORDS_PER_BATCH; i++) {
        check(ring.write(batch, 0, batch.length), batch.length);
      }
      check(ring.read(sink, 0, sink.length), sink.length);
    })
    .add('32 B records, one write() and one read() each', () => {
      for (let i = 0; i < RECORDS_PER_ITERATION; i++) {
        check(ring.write(record, 0, RECORD_BYTES), RECORD_BYTES);
        check(ring.read(sink, 0, RECORD_BYTES), RECORD_BYTES);
      }
    });
  await bench.run();
  return bench.tasks.map((t) => row(t, RECORDS_PER_ITERATION));
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
