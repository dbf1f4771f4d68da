// The C generator behind bench/cycle-c.ts (tools/bench-c-cycle.c), built with gcc as the bench
// builds it and run briefly against a shardstalk server: no timing thresholds, only that a run
// completes without an error, accounts for every job it put, and reports a tail whose
// percentiles are in order. Without gcc the build fails, saying so (it never skips). The same
// runs against tools/node-floor.ts (cycle-c's node-floor), whose figures mean something only if
// it answers the generator as a server does.

import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pooledQuantile, type Buckets } from '../../bench/report/pooled.ts';
import { nodeFloorSpec, startServer as startBenchServer, type RunningServer as RunningBenchServer } from '../../bench/suite/servers.ts';
import { startServer, type RunningServer } from '../../src/server.ts';

const SOURCE = fileURLToPath(new URL('../../tools/bench-c-cycle.c', import.meta.url));

let dir = '';
let bin = '';
let server: RunningServer;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardstalk-cgen-'));
  bin = path.join(dir, 'bench-c-cycle');
  try {
    execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-o', bin, SOURCE], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    throw new Error(`could not build tools/bench-c-cycle.c with gcc (apt-get install -y gcc libc6-dev): ${(err as Error).message}`);
  }
  server = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', workq: null });
}, 60_000);

afterAll(async () => {
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the generator; its JSON line and exit code. */
function run(args: string[]): Promise<{ code: number; out: Record<string, any>; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : -1;
      try {
        resolve({ code, out: JSON.parse(stdout.trim()), stderr });
      } catch {
        reject(new Error(`generator printed no JSON (exit ${code}): ${stdout}\n${stderr}`));
      }
    });
  });
}

describe('tools/bench-c-cycle.c', () => {
  it('rate: every job put is reserved once, and the tail percentiles come in order', async () => {
    const { code, out, stderr } = await run(['-w', '0.3', 'rate', String(server.port), '2', '2', '2000', '1', 'cgen-rate']);
    expect(stderr).toContain('@window-start');
    expect(code).toBe(0);
    expect(out.errors).toBe(0);
    expect(out.timedOut).toBe(0);
    expect(out.putsTotal).toBeGreaterThan(0);
    expect(out.reservedTotal).toBe(out.putsTotal);
    const l = out.latency;
    expect(l.n).toBeGreaterThan(0);
    const order = ['p50us', 'p90us', 'p95us', 'p98us', 'p99us', 'p995us', 'p999us', 'maxUs'].map((k) => l[k] as number);
    for (const v of order) expect(Number.isFinite(v) && v > 0).toBe(true);
    for (let i = 1; i < order.length; i++) expect(order[i]).toBeGreaterThanOrEqual(order[i - 1] as number);
    // No latency longer than the run: a reply timed before its command was sent wraps around
    // (2^64 ns), which happened to a put answered within the batch that sent it.
    for (const h of [out.put, out.delete, out.lag, l]) expect(h.maxUs).toBeLessThan((out.warmupSec + out.wallSec) * 1e6);
    // The buckets it lists hold every sample, and pooling one round gives back its own percentiles.
    const buckets = l.buckets as Buckets;
    expect(buckets.reduce((a, [, c]) => a + c, 0)).toBe(l.n);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]![0]).toBeGreaterThan(buckets[i - 1]![0]);
    for (const [q, k] of [[0.5, 'p50us'], [0.9, 'p90us'], [0.99, 'p99us'], [0.999, 'p999us']] as const) {
      expect(pooledQuantile([buckets], q)).toBeCloseTo(l[k] as number, 1);
    }
  });

  it('rate, spinning (-s): paced by the clock, every job put is reserved once, and its load is a share of the window', async () => {
    const { code, out } = await run(['-w', '0.3', '-s', 'rate', String(server.port), '2', '2', '2000', '1', 'cgen-spin']);
    expect(code).toBe(0);
    expect(out.errors).toBe(0);
    expect(out.spin).toBe(true);
    // Paced by the clock (no timer): never a put before its due time, so at most the rate times the
    // window; and puts at all (a loaded machine may delay the window's last ones past its end).
    expect(out.putsSent).toBeLessThanOrEqual(Math.ceil(2000 * out.wallSec) + 1);
    expect(out.putsSent).toBeGreaterThan(500);
    expect(out.reservedTotal).toBe(out.putsTotal);
    expect(out.busyShare).toBeGreaterThan(0);
    expect(out.busyShare).toBeLessThan(out.cpuShare + 0.05);
  });

  it('cycle, pipelined: jobs go round without an error', async () => {
    const { code, out } = await run(['-w', '0.3', 'cycle', String(server.port), '4', '4', '1', 'cgen-cycle']);
    expect(code).toBe(0);
    expect(out.errors).toBe(0);
    expect(out.jobs).toBeGreaterThan(0);
    expect(out.put.n).toBeGreaterThan(0);
  });
});

describe('tools/node-floor.ts (cycle-c --servers node-floor), driven by the same generator', () => {
  let floor: RunningBenchServer;
  beforeAll(async () => {
    floor = await startBenchServer(nodeFloorSpec());
  }, 60_000);
  afterAll(async () => {
    await floor?.stop();
  });

  it('rate: every job put is reserved once, without an error', async () => {
    const { code, out } = await run(['-w', '0.3', 'rate', String(floor.port), '2', '2', '2000', '1', 'floor-rate']);
    expect(code).toBe(0);
    expect(out.errors).toBe(0);
    expect(out.putsTotal).toBeGreaterThan(0);
    expect(out.reservedTotal).toBe(out.putsTotal);
  });

  it('cycle, one in flight and pipelined: jobs go round without an error', async () => {
    for (const inflight of ['1', '4']) {
      const { code, out } = await run(['-w', '0.3', 'cycle', String(floor.port), '4', inflight, '1', 'floor-cycle']);
      expect(code).toBe(0);
      expect(out.errors).toBe(0);
      expect(out.jobs).toBeGreaterThan(0);
    }
  });
});
