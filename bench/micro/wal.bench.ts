// Micro-benchmark of the write-ahead log: FULL records encoded per second (into memory), and
// records and MB per second appended through a Wal with 'never' sync into a temp directory (one
// writeSync per batch of 100; the previous batch's jobs are deleted so dead segments are reclaimed
// and the disk use stays flat).
// Run: node_modules/.bin/node bench/micro/wal.bench.ts   (or via run({ quick }) from a test)

import { Bench } from 'tinybench';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { encodeFull, fullRecordBytes, STATE_READY, Writer } from '../../workers/wal/record.ts';
import { Wal } from '../../workers/wal/wal.ts';

export interface WalBenchResult {
  name: string;
  /** FULL records per second. */
  opsPerSec: number;
  /** Megabytes (10^6) of records per second. */
  mbPerSec: number;
  samples: number;
}

const BATCH = 100; // records per timed call = one shard-loop batch

export async function run({ quick }: { quick: boolean }): Promise<WalBenchResult[]> {
  const bench = new Bench({
    time: quick ? 25 : 1000,
    warmupTime: quick ? 5 : 250,
    iterations: quick ? 4 : 64,
    warmupIterations: quick ? 2 : 16,
  });
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-bench-'));
  const bytesPerCall = new Map<string, number>();
  const wals: Wal[] = [];
  try {
    const tube = 'default';
    for (const size of [100, 4096]) {
      const body = new Uint8Array(size).fill(120);
      const rec = fullRecordBytes(tube.length, size);

      const w = new Writer(1 << 20);
      let id = 1;
      const encName = `wal encode FULL (${size} B body)`;
      bytesPerCall.set(encName, BATCH * rec);
      bench.add(encName, () => {
        w.reset();
        for (let i = 0; i < BATCH; i++) {
          encodeFull(w, id++, tube, 100, 0, 60, STATE_READY, 0, 1_700_000_000_000, 0, 0, 0, 0, 0, body, 0, size);
        }
      });

      const wal = new Wal({ dir, shard: wals.length, generation: 1, sync: 'never' });
      wals.push(wal);
      const prevIds = new Float64Array(BATCH);
      const prevSeqs = new Float64Array(BATCH);
      let have = false;
      let now = 1_700_000_000_000;
      const appName = `wal append FULL + commit, sync never (${size} B body, ${BATCH}/batch)`;
      bytesPerCall.set(appName, BATCH * rec);
      bench.add(appName, () => {
        for (let i = 0; i < BATCH; i++) {
          if (have) wal.appendDelete(prevIds[i], prevSeqs[i], rec);
          prevIds[i] = id;
          prevSeqs[i] = wal.appendFull(id++, tube, 100, 0, 60, STATE_READY, 0, now, 0, 0, 0, 0, 0, body, 0, size);
        }
        have = true;
        wal.commit(now++);
        wal.removeDeadSegments();
      });
    }

    await bench.run();
    const results: WalBenchResult[] = [];
    for (const task of bench.tasks) {
      const r = task.result;
      if (r.state !== 'completed') throw new Error(`bench task ${task.name}: ${r.state}${'error' in r ? `: ${r.error}` : ''}`);
      results.push({
        name: task.name,
        opsPerSec: r.throughput.mean * BATCH,
        mbPerSec: (r.throughput.mean * bytesPerCall.get(task.name)!) / 1e6,
        samples: r.latency.samplesCount,
      });
    }
    return results;
  } finally {
    for (const wal of wals) wal.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const quick = process.argv.includes('--quick');
  const results = await run({ quick });
  console.table(results.map((r) => ({
    name: r.name,
    'records/s': Math.round(r.opsPerSec).toLocaleString('en-US'),
    'MB/s': r.mbPerSec.toFixed(1),
    samples: r.samples,
  })));
}
