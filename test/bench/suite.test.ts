// The suite's arithmetic and charts, and a tiny end-to-end suite run so the benchmark can't rot.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fullMatrix, quickMatrix } from '../../bench/suite/matrix.ts';
import { GENERATED_BEGIN, GENERATED_END, median, mergeResults, pairedRatio, WORKQ_GENERATED_BEGIN, WORKQ_GENERATED_END, type RunRecord } from '../../bench/suite/results.ts';
import { barChart, escapeXml, lineChart, niceStep } from '../../bench/report/svg.ts';
import { queryServer } from '../../bench/loadgen/procfs.ts';
import { BEANSTALKD_PATH, beanstalkdSpec, parseVariant, REPO_ROOT, ServerStartFailure, shardstalkSpec, startServer } from '../../bench/suite/servers.ts';
import { beanstalkdMissingAt } from '../support/servers.ts';

function rec(server: string, round: number, jobsPerSec: number, ok = true): RunRecord {
  const z = { put: 0, reserve: 0, delete: 0 };
  return {
    point: 'p',
    server,
    round,
    order: 0,
    ok,
    failures: [],
    jobsPerSec,
    commandsPerSec: 0,
    windowS: 2,
    p50Us: z,
    p99Us: z,
    p999Us: z,
    generatorCpuShare: 0,
    serverCpuShare: null,
    otherCpuShare: null,
    timeline: [],
    lost: 0,
    duplicated: 0,
  };
}

describe('cycle-c variants', () => {
  it('NAME=ARGS: the server arguments, and Node\'s written node:FLAG, kept in order', () => {
    expect(parseVariant('lowtail=node:--min-semi-space-size=16 --busy-poll-us 500 --busy-poll-spin-us 10')).toEqual({
      name: 'shardstalk-lowtail',
      args: ['--busy-poll-us', '500', '--busy-poll-spin-us', '10'],
      nodeArgs: ['--min-semi-space-size=16'],
    });
    expect(parseVariant('threads=--all-shards-on-threads')).toEqual({ name: 'shardstalk-threads', args: ['--all-shards-on-threads'], nodeArgs: [] });
    expect(() => parseVariant('--busy-poll-us 0')).toThrow('--variant wants NAME=ARGS');
  });
});

describe('suite arithmetic', () => {
  it('takes medians of odd and even counts', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it('pairs runs by round, skipping rounds where either run failed', () => {
    const records = [
      rec('beanstalkd', 0, 100),
      rec('shardstalk', 0, 200),
      rec('beanstalkd', 1, 50), // the VM slowed down: both halves of the round see it
      rec('shardstalk', 1, 100),
      rec('beanstalkd', 2, 100),
      rec('shardstalk', 2, 900, false),
    ];
    expect(pairedRatio(records, 'shardstalk', 'beanstalkd')).toEqual({ runs: 2, failed: 0, median: 2, min: 2, max: 2 });
  });

  it('covers the matrix the issue asks for', () => {
    const ids = fullMatrix().map((p) => p.id);
    for (const mode of ['put', 'cycle']) {
      for (const c of [1, 100, 1000]) {
        for (const p of [1, 16]) {
          for (const s of [100, 4096]) expect(ids).toContain(`${mode}-c${c}-p${p}-s${s}-t1`);
        }
      }
      expect(ids).toContain(`${mode}-c100-p16-s100-t64`);
    }
    expect(quickMatrix().length).toBeLessThanOrEqual(6);
  });
});

describe('RESULTS.md', () => {
  const gen1 = '# shardstalk vs beanstalkd\n\n## Throughput (jobs/s)\n\n| a | 1 |\n\n## Trust\n\n- ok\n';
  const gen2 = gen1.replace('| a | 1 |', '| a | 2 |');
  const theirs = '## With the write-ahead log (-b)\n\nsomeone else wrote this\n';

  it('replaces only the generated block and keeps what others wrote around it', () => {
    const first = mergeResults(null, gen1);
    expect(first.startsWith(GENERATED_BEGIN)).toBe(true);
    const edited = `intro by hand\n${first}\n${theirs}`;
    const second = mergeResults(edited, gen2);
    expect(second).toContain('intro by hand');
    expect(second).toContain('someone else wrote this');
    expect(second).toContain('| a | 2 |');
    expect(second).not.toContain('| a | 1 |');
    expect(second.split(GENERATED_END).length).toBe(2);
    expect(mergeResults(second, gen2)).toBe(second); // idempotent
  });

  it('keeps the workq block apart: appended once, then replaced in place, the beanstalk block untouched', () => {
    const wq1 = '## workq: shardstalk\n\n### Throughput (jobs/s)\n\n| w | 1 |\n';
    const wq2 = wq1.replace('| w | 1 |', '| w | 2 |');
    const page = `${mergeResults(null, gen1)}\n${theirs}`;
    const withWorkq = mergeResults(page, wq1, 'workq');
    expect(withWorkq.startsWith(page.trimEnd())).toBe(true);
    expect(withWorkq.trimEnd().endsWith(WORKQ_GENERATED_END)).toBe(true);
    const again = mergeResults(withWorkq, wq2, 'workq');
    expect(again).toContain('| w | 2 |');
    expect(again).not.toContain('| w | 1 |');
    expect(again.split(WORKQ_GENERATED_BEGIN).length).toBe(2);
    // A beanstalk suite run afterwards replaces only its own block.
    const both = mergeResults(again, gen2);
    expect(both).toContain('| a | 2 |');
    expect(both).toContain('| w | 2 |');
    expect(both).toContain('someone else wrote this');
  });

  it('keeps sections appended to a file written before the markers existed', () => {
    const merged = mergeResults(`${gen1}\n${theirs}`, gen2);
    expect(merged).toContain('someone else wrote this');
    expect(merged).toContain('| a | 2 |');
    expect(merged).not.toContain('| a | 1 |');
  });
});

describe('svg charts', () => {
  it('escapes text and picks round tick steps', () => {
    expect(escapeXml('a<b & "c"')).toBe('a&lt;b &amp; &quot;c&quot;');
    expect(niceStep(228_000)).toBe(50_000);
    expect(niceStep(1)).toBe(0.2);
  });

  it('draws bars with whiskers and lines as standalone SVG', () => {
    const bars = barChart({ title: 'T <1>', categories: ['a', 'b'], yLabel: 'jobs/s', series: [{ name: 's', values: [1, null], low: [0.5, null], high: [2, null] }] });
    expect(bars.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(bars).toContain('T &lt;1&gt;');
    expect(bars.match(/<rect /g)!.length).toBe(2); // background + one bar (null draws none)
    const lines = lineChart({ title: 't', xLabel: 's', yLabel: 'jobs/s', shade: [0.5, 2.5], series: [{ name: 'x', points: [[0, 1], [1, 2]] }] });
    expect(lines).toContain('<path d="M');
    expect(lines.trimEnd().endsWith('</svg>')).toBe(true);
  });
});

describe('server start', () => {
  // The shardstalk column must fail loudly, with the server's own words, never go quiet.
  it('reports a server that exits at once, with its output', async () => {
    const spec = { name: 'broken', description: '', command: process.execPath, args: () => ['-e', 'console.error("boom: no such flag"); process.exit(3)'] };
    const err = await startServer(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerStartFailure);
    expect((err as Error).message).toMatch(/broken did not start: exited with code 3/);
    expect((err as Error).message).toMatch(/boom: no such flag/);
  });

  it('starts shardstalk with its workq listener on a second port, answering workq there', async () => {
    const server = await startServer(shardstalkSpec(1, true), 15_000);
    try {
      expect(server.workqPort).not.toBeNull();
      expect(server.workqPort).not.toBe(server.port);
      expect((await queryServer('127.0.0.1', server.workqPort!, 'lease bench.test 0', 2000, 'workq')).kind).toBe('-TIMEOUT');
    } finally {
      await server.stop();
    }
  });

  it('reports a server that never answers', async () => {
    const spec = { name: 'mute', description: '', command: process.execPath, args: () => ['-e', 'setTimeout(() => {}, 60_000)'] };
    await expect(startServer(spec, 500)).rejects.toThrow(/mute did not start: not answering on 127\.0\.0\.1:\d+ after 500 ms/);
  });
});

describe('suite end to end', () => {
  it('runs one tiny point against beanstalkd and writes results and charts', () => {
    // A missing beanstalkd fails this test with this message (never a skip).
    if (beanstalkdSpec() === null) throw beanstalkdMissingAt(BEANSTALKD_PATH, 'the bench (bench/suite/servers.ts)');
    const out = mkdtempSync(path.join(os.tmpdir(), 'bench-suite-'));
    try {
      const r = spawnSync(
        process.execPath,
        [
          'bench/suite.ts',
          '--servers',
          'beanstalkd',
          '--only',
          '^cycle-c100-p16-s100-t1$',
          '--runs',
          '2',
          '--duration',
          '0.3',
          '--warmup',
          '0',
          '--mem-jobs',
          '2000',
          '--wait-quiet',
          '0',
          '--out',
          out,
          // Never the committed bench/RESULTS.md.
          '--results',
          path.join(out, 'RESULTS.md'),
        ],
        { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 },
      );
      expect(r.stderr).not.toMatch(/SUITE FAILED/);
      expect(r.status).toBe(0);
      const md = readFileSync(path.join(out, 'RESULTS.md'), 'utf8');
      expect(md).toContain('| cycle 100×16 100B |');
      expect(md).toContain('Reproduce:');
      expect(md).toMatch(/\| beanstalkd \| 2,000 \|/);
      for (const f of ['summary.svg', 'results-summary.svg', 'suite.json', 'memory.svg', 'timeline-cycle-c100-p16-s100-t1.svg']) {
        expect(existsSync(path.join(out, f)), f).toBe(true);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
