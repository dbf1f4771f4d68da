#!/usr/bin/env node
// Memory side by side: Debian's beanstalkd and shardstalk (default flags, started as users start
// it: bin/shardstalk.js), each alone on the machine, a fresh server per point, RSS read from
// /proc/PID/status (VmRSS). The points are those of issue #15:
//   idle          RSS of a server that has served nothing
//   connections   5,000 connections opened and left idle: RSS growth per connection, from idle and
//                 from a warmed server (5,000 opened and closed first, RSS read, then the 5,000:
//                 both readings follow the same burst, so both see what a server keeps after one)
//   drain         200,000 1 KiB jobs put, then every one deleted: RSS at the peak and after
//   churn         20,000 connect / put / close cycles: RSS after
//   tubes         50,000 tubes, a job put in each, then deleted (the tubes go): RSS after
//   jobs          1,000,000 100-byte jobs put into one tube and kept: RSS per job (peak - idle) / 1M,
//                 and per job beyond a warmed server: first 100,000 such jobs put and deleted (what
//                 the first traffic costs once, V8's compiled code above all, is then paid), RSS read
//                 ("warm"), then the 1M: (peak - warm) / 1M
// "After" is read once the server's RSS has held steady for 3 s (at most 10 s), as a host would see it.
//
//   node_modules/.bin/node bench/memory.ts [--rounds 2] [--servers beanstalkd,shardstalk] [--points idle,connections,...]

import net from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { beanstalkdSpec, beanstalkdVersion, REPO_ROOT, startServer, type RunningServer, type ServerSpec } from './suite/servers.ts';
import { steadyRssBytes } from './loadgen/procfs.ts';
import { warmCompileCache } from '../tools/warm-compile-cache.ts';

const POINTS = ['idle', 'connections', 'drain', 'churn', 'tubes', 'jobs'] as const;
type PointName = (typeof POINTS)[number];

const CONNECTIONS = 5000;
const WARM_CONNECTIONS = CONNECTIONS;
const DRAIN_JOBS = 200_000;
const DRAIN_BODY = 1024;
const CHURN = 20_000;
const TUBES = 50_000;
const JOBS = 1_000_000;
const WARM_JOBS = 100_000;
const JOBS_BODY = 100;
const BATCH = 1000;

const { values: v } = parseArgs({
  options: {
    rounds: { type: 'string' },
    servers: { type: 'string' },
    points: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (v.help) {
  process.stdout.write('Usage: node bench/memory.ts [--rounds N] [--servers beanstalkd,shardstalk] [--points idle,connections,drain,churn,tubes,jobs]\n');
  process.exit(0);
}
const rounds = Number(v.rounds ?? 2);
const points = (v.points ?? POINTS.join(',')).split(',') as PointName[];
for (const p of points) if (!POINTS.includes(p)) throw new Error(`unknown point ${p}`);

function shardstalk(): ServerSpec {
  return {
    name: 'shardstalk',
    description: 'shardstalk, default flags (bin/shardstalk.js, compile cache warm)',
    command: process.execPath,
    args: (port) => ['bin/shardstalk.js', '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http'],
    cwd: REPO_ROOT,
  };
}

const specs: ServerSpec[] = [];
for (const name of (v.servers ?? 'beanstalkd,shardstalk').split(',')) {
  if (name === 'beanstalkd') {
    const b = beanstalkdSpec();
    if (b === null) throw new Error('beanstalkd is not installed (/usr/bin/beanstalkd): apt-get install -y beanstalkd');
    specs.push(b);
  } else if (name === 'shardstalk') specs.push(shardstalk());
  else throw new Error(`unknown server ${name}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** RSS in KiB once it has settled (steadyRssBytes: held within 1% for 3 s, at most 10 s). */
async function settledRss(pid: number): Promise<number> {
  return ((await steadyRssBytes(pid)) ?? NaN) / 1024;
}

/** One connection that sends a batch and waits for `lines` reply lines (no job bodies expected). */
class Pipe {
  private buf = '';
  private want = 0;
  private waiter: (() => void) | null = null;
  private lines = 0;
  readonly sock: net.Socket;
  constructor(sock: net.Socket) {
    this.sock = sock;
    sock.on('data', (d) => {
      this.buf += d.toString('latin1');
      let i;
      while ((i = this.buf.indexOf('\r\n')) >= 0) {
        this.replies.push(this.buf.slice(0, i));
        this.buf = this.buf.slice(i + 2);
        this.lines++;
      }
      if (this.lines >= this.want && this.waiter) {
        const w = this.waiter;
        this.waiter = null;
        w();
      }
    });
  }
  replies: string[] = [];
  static async open(port: number): Promise<Pipe> {
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r, j) => sock.once('connect', r).once('error', j));
    return new Pipe(sock);
  }
  async send(data: string, lines: number): Promise<string[]> {
    this.replies = [];
    this.lines = 0;
    this.want = lines;
    const p = new Promise<void>((r) => (this.waiter = r));
    this.sock.write(data);
    await p;
    return this.replies;
  }
  close(): void {
    this.sock.destroy();
  }
}

/** The body of a `stats` reply (OK <bytes> then the YAML). */
async function statsText(c: Pipe): Promise<string> {
  const sock = c.sock;
  sock.removeAllListeners('data');
  let buf = Buffer.alloc(0);
  const text = await new Promise<string>((res) => {
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const head = buf.indexOf('\r\n');
      const m = head > 0 ? /^OK (\d+)$/.exec(buf.subarray(0, head).toString('latin1')) : null;
      if (m && buf.length >= head + 2 + Number(m[1]) + 2) res(buf.subarray(head + 2, head + 2 + Number(m[1])).toString('latin1'));
    });
    sock.write('stats\r\n');
  });
  sock.removeAllListeners('data');
  return text;
}

interface Result {
  server: string;
  round: number;
  point: PointName;
  idleKiB: number;
  peakKiB?: number;
  afterKiB?: number;
  perConnBytes?: number;
  perConnWarmBytes?: number;
  perJobBytes?: number;
  warmKiB?: number;
  perJobWarmBytes?: number;
}

async function runPoint(server: RunningServer, point: PointName, round: number): Promise<Result> {
  await sleep(1000);
  const pid = server.pid;
  const idleKiB = await settledRss(pid);
  const r: Result = { server: server.spec.name, round, point, idleKiB };
  if (point === 'idle') return r;
  if (point === 'connections') {
    // First WARM_CONNECTIONS open and close: what the first connections cost once (the accept
    // path's compiled code) is then paid, and the figure per connection is what each one holds.
    // As many as are measured: a server gives back what a burst left once it is quiet (shardstalk:
    // src/shared/reclaim.ts), so the reading before and the one after follow the same burst
    // (measured with 1,000 first: 1.7-2.9 KB per connection, by whether the 1,000 counted as one).
    const warm: net.Socket[] = [];
    for (let i = 0; i < WARM_CONNECTIONS; i++) {
      const s = net.connect(server.port, '127.0.0.1');
      await new Promise((res, rej) => s.once('connect', res).once('error', rej));
      warm.push(s);
    }
    for (const s of warm) s.destroy();
    r.warmKiB = await settledRss(pid);
    const socks: net.Socket[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const s = net.connect(server.port, '127.0.0.1');
      await new Promise((res, rej) => s.once('connect', res).once('error', rej));
      socks.push(s);
    }
    r.peakKiB = await settledRss(pid);
    r.perConnBytes = Math.round(((r.peakKiB - idleKiB) * 1024) / CONNECTIONS);
    r.perConnWarmBytes = Math.round(((r.peakKiB - r.warmKiB) * 1024) / CONNECTIONS);
    for (const s of socks) s.destroy();
    r.afterKiB = await settledRss(pid);
    return r;
  }
  const c = await Pipe.open(server.port);
  if (point === 'drain') {
    const body = 'x'.repeat(DRAIN_BODY);
    const ids: string[] = [];
    for (let i = 0; i < DRAIN_JOBS / BATCH; i++) {
      const got = await c.send(`put 0 0 60 ${DRAIN_BODY}\r\n${body}\r\n`.repeat(BATCH), BATCH);
      for (const line of got) ids.push(line.slice('INSERTED '.length));
    }
    r.peakKiB = await settledRss(pid);
    for (let i = 0; i < ids.length; i += BATCH) await c.send(ids.slice(i, i + BATCH).map((id) => `delete ${id}\r\n`).join(''), Math.min(BATCH, ids.length - i));
  } else if (point === 'jobs') {
    const body = 'x'.repeat(JOBS_BODY);
    const warmIds: string[] = [];
    for (let i = 0; i < WARM_JOBS / BATCH; i++) {
      const got = await c.send(`put 0 0 60 ${JOBS_BODY}\r\n${body}\r\n`.repeat(BATCH), BATCH);
      for (const line of got) warmIds.push(line.slice('INSERTED '.length));
    }
    for (let i = 0; i < warmIds.length; i += BATCH) await c.send(warmIds.slice(i, i + BATCH).map((id) => `delete ${id}\r\n`).join(''), Math.min(BATCH, warmIds.length - i));
    r.warmKiB = await settledRss(pid);
    // Puts are answered before the shard holds them, so wait until `stats` counts every job.
    for (let i = 0; i < JOBS / BATCH; i++) await c.send(`put 0 0 60 ${JOBS_BODY}\r\n${body}\r\n`.repeat(BATCH), BATCH);
    for (let waited = 0; waited < 60_000; waited += 100) {
      const stats = await statsText(c);
      if (Number(/current-jobs-ready: (\d+)/.exec(stats)?.[1]) >= JOBS) break;
      await sleep(100);
    }
    r.peakKiB = await settledRss(pid);
    r.perJobBytes = Math.round(((r.peakKiB - idleKiB) * 1024) / JOBS);
    r.perJobWarmBytes = Math.round(((r.peakKiB - r.warmKiB) * 1024) / JOBS);
    c.close();
    return r;
  } else if (point === 'churn') {
    for (let i = 0; i < CHURN; i++) {
      const p = await Pipe.open(server.port);
      await p.send('put 0 0 10 1\r\nx\r\n', 1);
      p.close();
    }
  } else {
    const ids: string[] = [];
    for (let i = 0; i < TUBES; i += BATCH) {
      let cmd = '';
      for (let k = i; k < i + BATCH; k++) cmd += `use tube-${k}\r\nput 0 0 60 1\r\nx\r\n`;
      const got = await c.send(cmd, 2 * BATCH);
      for (const line of got) if (line.startsWith('INSERTED ')) ids.push(line.slice('INSERTED '.length));
    }
    r.peakKiB = await settledRss(pid);
    await c.send('use default\r\n', 1);
    for (let i = 0; i < ids.length; i += BATCH) await c.send(ids.slice(i, i + BATCH).map((id) => `delete ${id}\r\n`).join(''), Math.min(BATCH, ids.length - i));
  }
  c.close();
  r.afterKiB = await settledRss(pid);
  return r;
}

const results: Result[] = [];
// What an install leaves (npm's postinstall): the first round's idle server then reads what every
// later start reads, not a start that strips types (16 MiB more, measured).
if (specs.some((sp) => sp.name === 'shardstalk')) await warmCompileCache();
const started = new Date();
for (let round = 0; round < rounds; round++) {
  for (const spec of round % 2 === 0 ? specs : [...specs].reverse()) {
    for (const point of points) {
      const server = await startServer(spec);
      try {
        const r = await runPoint(server, point, round);
        results.push(r);
        process.stderr.write(`round ${round + 1} ${spec.name.padEnd(10)} ${point.padEnd(11)} ${JSON.stringify(r)}\n`);
      } finally {
        await server.stop();
      }
    }
  }
}

const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mib = (kib: number): string => (Number.isNaN(kib) ? '–' : `${(kib / 1024).toFixed(1)} MiB`);
const pick = (server: string, point: PointName, f: (r: Result) => number | undefined): number =>
  median(results.filter((r) => r.server === server && r.point === point).map((r) => f(r) ?? NaN));

const names = specs.map((s) => s.name);
const rows: string[] = [`| what | ${names.join(' | ')} |`, `|---|${names.map(() => '---:').join('|')}|`];
const row = (label: string, cell: (n: string) => string) => rows.push(`| ${label} | ${names.map(cell).join(' | ')} |`);
if (points.includes('idle')) row('idle server', (n) => mib(pick(n, 'idle', (r) => r.idleKiB)));
if (points.includes('connections')) {
  row(`per idle connection (${CONNECTIONS.toLocaleString('en')} open): growth from idle / ${CONNECTIONS.toLocaleString('en')}`, (n) => `${pick(n, 'connections', (r) => r.perConnBytes)} B`);
  row(`the same, from a warmed server (${WARM_CONNECTIONS.toLocaleString('en')} opened and closed first)`, (n) => `${pick(n, 'connections', (r) => r.perConnWarmBytes)} B`);
}
if (points.includes('connections')) row('… after they close', (n) => mib(pick(n, 'connections', (r) => r.afterKiB)));
if (points.includes('drain')) row(`${DRAIN_JOBS.toLocaleString('en')} 1 KiB jobs: idle → peak → after all deleted`, (n) => `${mib(pick(n, 'drain', (r) => r.idleKiB))} → ${mib(pick(n, 'drain', (r) => r.peakKiB))} → ${mib(pick(n, 'drain', (r) => r.afterKiB))}`);
if (points.includes('churn')) row(`${CHURN.toLocaleString('en')} connect / put / close: idle → after`, (n) => `${mib(pick(n, 'churn', (r) => r.idleKiB))} → ${mib(pick(n, 'churn', (r) => r.afterKiB))}`);
if (points.includes('jobs')) {
  row(`${JOBS.toLocaleString('en')} ${JOBS_BODY}-byte jobs held: RSS per job (idle → peak)`, (n) => `${pick(n, 'jobs', (r) => r.perJobBytes)} B (${mib(pick(n, 'jobs', (r) => r.idleKiB))} → ${mib(pick(n, 'jobs', (r) => r.peakKiB))})`);
  row(`the same, from a warmed server (${WARM_JOBS.toLocaleString('en')} put and deleted first): warm → peak`, (n) => `${pick(n, 'jobs', (r) => r.perJobWarmBytes)} B (${mib(pick(n, 'jobs', (r) => r.warmKiB))} → ${mib(pick(n, 'jobs', (r) => r.peakKiB))})`);
}
if (points.includes('tubes')) row(`${TUBES.toLocaleString('en')} tubes made, then emptied: idle → peak → after`, (n) => `${mib(pick(n, 'tubes', (r) => r.idleKiB))} → ${mib(pick(n, 'tubes', (r) => r.peakKiB))} → ${mib(pick(n, 'tubes', (r) => r.afterKiB))}`);

process.stdout.write(
  `\nMemory, ${rounds} round(s), medians; ${os.availableParallelism()} cores, Node ${process.version}, ${beanstalkdVersion()}, started ${started.toISOString()}.\n` +
    `Command: node_modules/.bin/node bench/memory.ts ${process.argv.slice(2).join(' ')}\n\n${rows.join('\n')}\n`,
);
