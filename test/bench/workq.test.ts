// The load generator speaking workq to shardstalk's workq listener (an in-process server), with a
// small job count: no timing thresholds, only that jobs moved and every one was added, leased and
// completed exactly once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../bench/loadgen/run.ts';
import { startServer, type RunningServer } from '../../src/server.ts';

describe('load generator against shardstalk (workq)', () => {
  let server: RunningServer;

  beforeAll(async () => {
    server = await startServer({ host: '127.0.0.1', port: 0, shards: 2, logLevel: 'silent', workq: { host: '127.0.0.1', port: 0 } });
  });

  afterAll(async () => {
    await server?.close();
  });

  // cycle: add → lease → complete pipelined per connection; reserve: a pre-filled queue drained
  // over two threads and several names; mixed: adders against blocking leases.
  it.each([
    ['cycle', { mode: 'cycle', connections: 8, pipeline: 4, jobs: 3000 }],
    ['reserve', { mode: 'reserve', connections: 4, pipeline: 8, jobs: 2000, tubes: 3, threads: 2 }],
    ['mixed', { mode: 'mixed', connections: 4, pipeline: 4, jobs: 1500, tubes: 2 }],
  ] as const)('%s: every job added, leased and completed exactly once', async (_mode, load) => {
    const r = await runLoad({ protocol: 'workq', port: server.workqPort!, ...load });
    expect(r.failures).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.target).toContain('(workq)');
    expect(r.jobsPerSec).toBeGreaterThan(0);
    expect(r.verify).toMatchObject({ checked: true, inserted: load.jobs, deletedOnce: load.jobs, lost: 0, duplicated: 0, idMismatches: 0, foreign: 0 });
    expect(r.latencyUs.reserve.count).toBeGreaterThan(0);
    expect(r.latencyUs.delete.count).toBeGreaterThan(0);
  });

  // Canary: workq commands sent to a beanstalk port must fail the set-up, not run.
  it('refuses to run against a port that does not speak workq', async () => {
    await expect(runLoad({ protocol: 'workq', port: server.port, mode: 'cycle', connections: 2, jobs: 10 })).rejects.toThrow(/framing/);
  });
});

describe('shardstalk-bench --protocol', () => {
  it('selects workq, its default port and TTL, and refuses unknown protocols', async () => {
    const { parseCli } = await import('../../bench/cli.ts');
    const { resolveOptions, UsageError } = await import('../../bench/loadgen/options.ts');
    const args = parseCli(['cycle', '--protocol', 'workq', '--ttl', '30']);
    expect(args.options).toMatchObject({ mode: 'cycle', protocol: 'workq', ttlS: 30 });
    expect(resolveOptions(args.options).port).toBe(9922);
    expect(resolveOptions({ ...args.options, port: 1234 }).port).toBe(1234);
    expect(resolveOptions({}).port).toBe(11300);
    expect(() => parseCli(['--protocol', 'amqp'])).toThrow(UsageError);
    // workq's own limits: 1 MiB payloads (beanstalk's default is 65,535), TTR at most 24 h.
    expect(resolveOptions({ protocol: 'workq', bodyBytes: 1_048_576 }).bodyBytes).toBe(1_048_576);
    expect(() => resolveOptions({ bodyBytes: 1_048_576 })).toThrow(UsageError);
    expect(() => resolveOptions({ protocol: 'workq', ttrS: 86_401 })).toThrow(/ttr/);
  });
});
