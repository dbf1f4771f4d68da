// Side by side with the write-ahead log on: beanstalkd -b vs shardstalk -b, same fsync flags,
// fresh directories and servers for every run, servers alternating run by run.
//
//   node bench/durability.ts [--runs 3] [--seconds 3] [--out bench/RESULTS-durability.md]
//
// Prints a markdown table (medians and ranges of jobs/s, ratio shardstalk/beanstalkd per round)
// and writes it to --out.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    out: { type: 'string', default: path.join(ROOT, 'bench', 'RESULTS-durability.md') },
  },
});
const RUNS = Number(values.runs);
const SECONDS = Number(values.seconds);

const MODES: Array<[string, string[]]> = [['-f 0', ['-f', '0']], ['-f 50', ['-f', '50']], ['-F', ['-F']]];
const POINTS: Array<[string, string[]]> = [
  ['put 100×16', ['put', '-c', '100', '-P', '16']],
  ['cycle 100×16', ['cycle', '-c', '100', '-P', '16']],
  ['cycle 100×1', ['cycle', '-c', '100', '-P', '1']],
];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function waitListening(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.destroy();
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listening on ${port}`);
}

async function startServer(kind: 'beanstalkd' | 'shardstalk', flags: string[], dir: string, port: number): Promise<ChildProcess> {
  const child =
    kind === 'beanstalkd'
      ? spawn('beanstalkd', ['-l', '127.0.0.1', '-p', String(port), '-b', dir, ...flags], { stdio: 'ignore' })
      : spawn(NODE, [path.join(ROOT, 'src/main.ts'), '-l', '127.0.0.1', '-p', String(port), '-b', dir, ...flags], { stdio: 'ignore' });
  await waitListening(port);
  return child;
}

function runLoad(port: number, args: string[]): number {
  const r = spawnSync(NODE, [path.join(ROOT, 'bench/cli.ts'), ...args, '-p', String(port), '-d', String(SECONDS), '--json', '--no-progress'], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`load generator failed (${r.status}): ${r.stderr.slice(0, 500)}`);
  return (JSON.parse(r.stdout) as { jobsPerSec: number }).jobsPerSec;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

const rows: string[] = [];
const started = new Date();
for (const [modeName, flags] of MODES) {
  for (const [pointName, args] of POINTS) {
    const b: number[] = [];
    const s: number[] = [];
    const ratios: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const order: Array<'beanstalkd' | 'shardstalk'> = run % 2 === 0 ? ['beanstalkd', 'shardstalk'] : ['shardstalk', 'beanstalkd'];
      const got: Record<string, number> = {};
      for (const kind of order) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bench-wal-${kind}-`));
        const port = await freePort();
        const child = await startServer(kind, flags, dir, port);
        try {
          got[kind] = runLoad(port, args);
        } finally {
          child.kill('SIGKILL');
          await new Promise((r) => child.once('exit', r));
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
      b.push(got.beanstalkd);
      s.push(got.shardstalk);
      ratios.push(got.shardstalk / got.beanstalkd);
      process.stderr.write(`${modeName} ${pointName} run ${run + 1}: beanstalkd ${fmt(got.beanstalkd)}, shardstalk ${fmt(got.shardstalk)}\n`);
    }
    rows.push(
      `| ${modeName} | ${pointName} | ${fmt(median(b))} [${fmt(Math.min(...b))}–${fmt(Math.max(...b))}] | ` +
        `${fmt(median(s))} [${fmt(Math.min(...s))}–${fmt(Math.max(...s))}] | **${median(ratios).toFixed(2)}×** |`,
    );
  }
}

const md = [
  `## With the write-ahead log (-b)`,
  '',
  `Measured ${started.toISOString()} on ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}; ` +
    `${RUNS} runs per point, ${SECONDS} s each, fresh directory and server per run, servers alternating; ` +
    'shardstalk with its default shard count. Reproduce: `node_modules/.bin/node bench/durability.ts`.',
  '',
  '| fsync | load | beanstalkd -b jobs/s | shardstalk -b jobs/s | shardstalk / beanstalkd |',
  '|---|---|---:|---:|---:|',
  ...rows,
  '',
].join('\n');
fs.writeFileSync(values.out as string, md);
process.stdout.write(md);
