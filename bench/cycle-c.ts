#!/usr/bin/env node
// Side by side with the C generator (tools/bench-c-cycle.c): put → reserve → delete, unpipelined and
// pipelined, closed loop and at a fixed rate, against Debian's beanstalkd and shardstalk.
//
//   node_modules/.bin/node bench/cycle-c.ts [--rounds 5] [--seconds 5] [--points LIST] [--shards N] [-- extra shardstalk args]
//
// Why a C generator: the Node one (bench/cli.ts) costs about as much CPU per job as the server, and
// on a 2-core VM it then shares the cores with the server it measures. The C one costs a few µs per
// job and reports its own CPU, so a figure it gives is the server's unless its CPU share says
// otherwise.
//
// Each round: a fresh beanstalkd on a free port runs every point, then a fresh shardstalk runs the
// same points (the order of the two alternates round by round, since this VM changes speed within
// minutes and only neighbours in time are comparable). Ratios are medians of per-round ratios.
// Per run it records the generator's JSON, the server's CPU over the measured window (from
// /proc/PID/stat, sampled when the generator says the window opens and closes), and the CPU the
// rest of the machine used meanwhile. Writes bench/out/cycle-c-<date>.json; exit code 1 if any
// run had errors or a server did not start.

import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { machineCpuS, processCpuS } from './loadgen/procfs.ts';
import { addBuckets, pooledQuantile, pooledRatio, type Buckets } from './report/pooled.ts';
import { fmtInt, fmtUs } from './report/text.ts';
import { shardOf } from '../src/route/hash.ts';
import { beanstalkdSpec, beanstalkdVersion, nodeFloorSpec, parseVariant, REPO_ROOT, shardstalkSpec, startServer, type RunningServer, type ServerSpec, type Variant } from './suite/servers.ts';

const USAGE = `Usage: node bench/cycle-c.ts [options] [-- extra shardstalk args]

  --rounds N       rounds (default 5; quick 1); each round runs every point on each server
  --seconds S      measured seconds per point (default 5; quick 2)
  --warmup S       warm-up seconds per closed-loop point, not measured (default 1; quick 0.5)
  --rate-warmup S  warm-up seconds per fixed-rate point (default 6; quick 2): a rate point runs
                     after the pipelined one, and V8 recompiles for the new load for a few
                     seconds (measured: r10k after c100x16, p99 1.8 ms after 1 s, 177 µs after 6 s;
                     beanstalkd 155 / 140 µs)
  --points LIST    comma-separated, default c1x1,c10x1,c100x1,c1000x1,c100x16,r10k,r20k
                     cNxP      closed loop: N connections × P jobs in flight each
                     cNxPtT    the same over T tubes (N/T connections each, one generator per
                                 tube; tube i lands on shard i mod S): rates add up, each
                                 latency is the worst generator's
                     rRATE     fixed rate (jobs/s, "20k" = 20000), 10 producers, 10 consumers
                     rRATEpNcM the same with N producers and M consumers
                     rRATEtT   the same from T generators (processes), each on a tube of its
                                 own at RATE/T with N/T producers and M/T consumers: at 20,000
                                 jobs/s one sleeping generator needs most of a core; the
                                 latencies are pooled over the generators (r20kt2, r20kp10c10t2).
                                 For hosts with cores to spare: on 2 cores two generators
                                 beside the server fall behind (bench/RESULTS.md, session 23)
  --shards N       start shardstalk with --shards N (default: its default shard count)
  --servers LIST   beanstalkd,shardstalk (default both; beanstalkd only if installed); node-floor
                     adds tools/node-floor.ts: Node's socket path as shardstalk uses it and one
                     FIFO, nothing else: what Node itself costs per command at each point
  --variant N=ARGS also run shardstalk with these extra arguments, named shardstalk-N (repeatable),
                   e.g. --variant 'threads=--all-shards-on-threads'; an argument written node:FLAG
                   goes to Node (and V8) instead, e.g. 'young=node:--min-semi-space-size=16'
  --pin S/G        run every server on CPUs S and the generators on CPUs G (taskset lists, e.g.
                     "1/0" on 2 cores): neither takes the other's core, so a server that polls
                     (shardstalk's --busy-poll-us) or a scheduler that puts both on one core
                     does not decide the tail latency; default: no pinning
  --spin           the generators poll without sleeping (tools/bench-c-cycle.c -s; needs --pin):
                     a sleeping generator pays a wake-up per reply, which at 20,000 jobs/s takes
                     most of its core; spinning, its load is the time it spends on replies
                     and puts (shown as its CPU, marked ~)
  --quick          1 round, 2 s + 0.5 s warm-up per point
  --out DIR        where the binary and the JSON go (default bench/out)
  -h, --help

Arguments after -- go to shardstalk (src/main.ts -l 127.0.0.1 -p PORT --no-workq [--shards N] ...).`;

/** A generator above this share of a core may have set the pace (marked †). */
const GENERATOR_LIMIT_SHARE = 0.9;
/** A fixed-rate point that delivered less than this share of the offered rate saturated the server (§). */
const SATURATED_SHARE = 0.97;
/** Other processes above this share of a core over the window: the figures are noisy (a warning). */
const NOISY_SHARE = 0.2;
const DEFAULT_POINTS = 'c1x1,c10x1,c100x1,c1000x1,c100x16,r10k,r20k';
const SOURCE = path.join(REPO_ROOT, 'tools/bench-c-cycle.c');
/** At most this many tubes in a point: tube i is named so that it lands on shard i mod S for every S dividing 16. */
const TUBES_MAX = 16;

/** The tube of generator `i` of a point: on shard i of 16 (so on shard i mod S with S shards, for S = 1, 2, 4, 8, 16). */
function tubeName(p: Point, round: number, i: number): string {
  const base = `cc-${p.id}-r${round}`;
  if (p.tubes === 1) return base;
  for (let k = 0; ; k++) if (shardOf(`${base}-${i}-${k}`, TUBES_MAX) === i) return `${base}-${i}-${k}`;
}

/**
 * Several generators' figures as one: counts and rates add up; each latency is the worst
 * generator's (n added up), but a fixed rate's put due → RESERVED, whose buckets every generator
 * lists, is theirs added up (the jobs of all of them in one distribution).
 */
function mergeResults(rs: GenResult[]): GenResult {
  if (rs.length === 1) return rs[0]!;
  const hist = (pick: (r: GenResult) => Hist | undefined): Hist | undefined => {
    const hs = rs.map(pick).filter((h): h is Hist => h !== undefined);
    if (hs.length === 0) return undefined;
    const worst = (f: 'p50us' | 'p99us' | 'p999us' | 'maxUs'): number | undefined => (hs.every((h) => h[f] !== undefined) ? Math.max(...hs.map((h) => h[f] as number)) : undefined);
    return { n: hs.reduce((a, h) => a + h.n, 0), p50us: worst('p50us'), p99us: worst('p99us'), p999us: worst('p999us'), maxUs: worst('maxUs') };
  };
  const pooled = (hs: Hist[]): Hist => {
    const buckets = addBuckets(hs.map((h) => h.buckets!));
    const q = (x: number): number => pooledQuantile([buckets], x);
    const n = hs.reduce((a, h) => a + h.n, 0);
    const maxUs = Math.max(...hs.map((h) => h.maxUs ?? 0));
    return { n, p50us: q(0.5), p90us: q(0.9), p95us: q(0.95), p98us: q(0.98), p99us: q(0.99), p995us: q(0.995), p999us: q(0.999), maxUs, buckets };
  };
  const latencies = rs.map((r) => r.latency);
  const latency = latencies.every((h): h is Hist => h?.buckets !== undefined) ? pooled(latencies) : hist((r) => r.latency);
  const optionalSum = (f: (r: GenResult) => number | undefined): number | undefined => (rs.every((r) => f(r) !== undefined) ? rs.reduce((a, r) => a + f(r)!, 0) : undefined);
  const sum = (f: (r: GenResult) => number): number => rs.reduce((a, r) => a + f(r), 0);
  return {
    ...rs[0]!,
    wallSec: Math.max(...rs.map((r) => r.wallSec)),
    jobs: sum((r) => r.jobs),
    jobsPerSec: sum((r) => r.jobsPerSec),
    put: hist((r) => r.put)!,
    reserve: hist((r) => r.reserve),
    delete: hist((r) => r.delete)!,
    latency,
    lag: hist((r) => r.lag),
    offeredPerSec: optionalSum((r) => r.offeredPerSec),
    putsPerSec: optionalSum((r) => r.putsPerSec),
    errors: sum((r) => r.errors),
    timedOut: sum((r) => r.timedOut),
    cpuSec: sum((r) => r.cpuSec),
    cpuShare: sum((r) => r.cpuShare),
    ...(rs.every((r) => r.busyShare !== undefined) ? { busyShare: sum((r) => r.busyShare!) } : {}),
  };
}

interface Point {
  id: string;
  label: string;
  mode: 'cycle' | 'rate';
  /** cycle: connections and jobs in flight per connection; rate: producers, consumers, jobs/s. */
  args: string[];
  /** The connections (cycle) or the producers and consumers (rate) spread over this many tubes, one generator each (1: one tube). */
  tubes: number;
}

interface Options {
  rounds: number;
  seconds: number;
  warmup: number;
  rateWarmup: number;
  points: Point[];
  shards: number | null;
  servers: string[];
  quick: boolean;
  outDir: string;
  extra: string[];
  /** Further shardstalk servers: the same with extra arguments (`nodeArgs`: Node's, before the script). */
  variants: Variant[];
  /** --pin: taskset CPU lists for the servers and the generators (null: not pinned). */
  pin: { server: string; generator: string } | null;
  /** --spin: the generators poll without sleeping. */
  spin: boolean;
}

/** What tools/bench-c-cycle.c prints (the fields used here). */
interface Hist {
  n: number;
  p50us?: number;
  /** p90us … p995us: the fixed-rate latency only (tools/bench-c-cycle.c). */
  p90us?: number;
  p95us?: number;
  p98us?: number;
  p99us?: number;
  p995us?: number;
  p999us?: number;
  maxUs?: number;
  /** The fixed-rate latency's non-empty buckets: [µs, count] (tools/bench-c-cycle.c). */
  buckets?: Buckets;
}
interface GenResult {
  mode: 'cycle' | 'rate';
  wallSec: number;
  jobs: number;
  jobsPerSec: number;
  put: Hist;
  reserve?: Hist;
  delete: Hist;
  latency?: Hist;
  lag?: Hist;
  offeredPerSec?: number;
  putsPerSec?: number;
  errors: number;
  timedOut: number;
  cpuSec: number;
  cpuShare: number;
  /** With -s (spinning): the share of the window spent on replies and puts, the generator's load. */
  busyShare?: number;
}

interface RunRecord {
  round: number;
  server: string;
  point: string;
  ok: boolean;
  exitCode: number | null;
  /** Error lines the generator printed (at most 20 kept). */
  stderr: string[];
  gen: GenResult | null;
  serverCpuSec: number | null;
  serverCpuShare: number | null;
  /** CPU of everything else on the machine over the window, as a share of one core. */
  otherCpuShare: number | null;
  /**
   * CPU time the hypervisor gave to other guests while this machine's CPUs wanted to run, over
   * the window, as a share of one core (/proc/stat's steal; 10 ms ticks, so a 4 s window shows it
   * from 0.25%). A round with steal had stalls no server caused.
   */
  stealShare: number | null;
  stealSec: number | null;
}

function parsePoint(spec: string): Point {
  const s = spec.trim();
  let m = /^c(\d+)x(\d+)(?:t(\d+))?$/.exec(s);
  if (m) {
    const tubes = Number(m[3] ?? 1);
    if (!(tubes >= 1 && tubes <= TUBES_MAX) || Number(m[1]) % tubes !== 0) throw new Error(`point "${s}": 1 to ${TUBES_MAX} tubes that divide the connections`);
    return { id: s, label: `cycle ${m[1]}×${m[2]}${tubes > 1 ? ` over ${tubes} tubes` : ''}`, mode: 'cycle', args: [String(Number(m[1]) / tubes), m[2]!], tubes };
  }
  m = /^r(\d+(?:\.\d+)?)(k?)(?:p(\d+)c(\d+))?(?:t(\d+))?$/.exec(s);
  if (m) {
    const rate = Math.round(Number(m[1]) * (m[2] ? 1000 : 1));
    const producers = Number(m[3] ?? 10);
    const consumers = Number(m[4] ?? 10);
    const tubes = Number(m[5] ?? 1);
    if (!(tubes >= 1 && tubes <= TUBES_MAX) || producers % tubes !== 0 || consumers % tubes !== 0 || rate % tubes !== 0) {
      throw new Error(`point "${s}": 1 to ${TUBES_MAX} generators that divide the producers, the consumers and the rate`);
    }
    const from = tubes > 1 ? ` from ${tubes} generators` : '';
    const args = [String(producers / tubes), String(consumers / tubes), String(rate / tubes)];
    return { id: s, label: `rate ${fmtInt(rate)}/s (${producers}p/${consumers}c${from})`, mode: 'rate', args, tubes };
  }
  throw new Error(`unknown point "${s}" (cNxP[tT] or rRATE[pNcM][tT], e.g. c100x16, c100x1t2, r20k, r5000p4c4, r20kt2)`);
}

function parseOptions(argv: string[]): Options | null {
  const { values: v, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      'rate-warmup': { type: 'string' },
      points: { type: 'string' },
      shards: { type: 'string' },
      servers: { type: 'string' },
      variant: { type: 'string', multiple: true },
      quick: { type: 'boolean' },
      pin: { type: 'string' },
      spin: { type: 'boolean' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return null;
  const quick = v.quick === true;
  const num = (s: string | undefined, d: number, what: string): number => {
    if (s === undefined) return d;
    const x = Number(s.replace(/_/g, ''));
    if (!Number.isFinite(x) || x <= 0) throw new Error(`--${what}: not a positive number: ${s}`);
    return x;
  };
  let pin: Options['pin'] = null;
  if (v.pin !== undefined) {
    const m = /^([0-9,-]+)\/([0-9,-]+)$/.exec(v.pin);
    if (m === null) throw new Error(`--pin wants SERVER_CPUS/GENERATOR_CPUS (taskset lists), e.g. 1/0; got "${v.pin}"`);
    pin = { server: m[1] as string, generator: m[2] as string };
  }
  if (v.spin === true && pin === null) throw new Error('--spin needs --pin: two processes that never sleep on two unpinned cores take turns on one');
  const servers = (v.servers ?? 'beanstalkd,shardstalk').split(',').map((s) => s.trim());
  for (const s of servers) if (s !== 'beanstalkd' && s !== 'shardstalk' && s !== 'node-floor') throw new Error(`--servers: unknown server "${s}"`);
  return {
    rounds: Math.round(num(v.rounds, quick ? 1 : 5, 'rounds')),
    seconds: num(v.seconds, quick ? 2 : 5, 'seconds'),
    warmup: v.warmup === '0' ? 0 : num(v.warmup, quick ? 0.5 : 1, 'warmup'),
    rateWarmup: v['rate-warmup'] === '0' ? 0 : num(v['rate-warmup'], quick ? 2 : 6, 'rate-warmup'),
    points: (v.points ?? DEFAULT_POINTS).split(',').filter(Boolean).map(parsePoint),
    shards: v.shards === undefined ? null : Math.round(num(v.shards, 1, 'shards')),
    servers,
    quick,
    outDir: path.resolve(v.out ?? path.join(REPO_ROOT, 'bench/out')),
    extra: positionals,
    pin,
    spin: v.spin === true,
    variants: (v.variant ?? []).map(parseVariant),
  };
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function compile(outDir: string): string {
  const bin = path.join(outDir, 'bench-c-cycle');
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-o', bin, SOURCE], { stdio: ['ignore', 'inherit', 'inherit'] });
  return bin;
}

/**
 * One point against a running server: the generator's JSON, and the server's and the machine's CPU
 * between its `@window-start` and `@window-end` lines.
 */
function runPoint(bin: string, server: RunningServer, p: Point, o: Options, round: number): Promise<RunRecord> {
  const warmup = p.mode === 'rate' ? o.rateWarmup : o.warmup;
  const stderr: string[] = [];
  type Sample = { t: number; server: number | null; machine: number | null; steal: number | null };
  type Window = { elapsedS: number; server: number | null; machine: number | null; steal: number | null };
  let atStart: Sample | null = null;
  let window: Window | null = null;
  const sample = (): Sample => {
    const m = machineCpuS();
    return { t: performance.now(), server: processCpuS(server.pid), machine: m?.busyS ?? null, steal: m?.stealS ?? null };
  };
  /** One generator; the first one's window lines time the CPU samples (all start together). */
  const generator = (i: number): Promise<{ code: number | null; gen: GenResult | null }> =>
    new Promise((resolve) => {
      const args = ['-w', String(warmup), ...(o.spin ? ['-s'] : []), p.mode, String(server.port), ...p.args, String(o.seconds), tubeName(p, round, i)];
      const child = o.pin === null
        ? spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn('taskset', ['-c', o.pin.generator, bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let errBuf = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => {
        errBuf += c.toString('utf8');
        let nl: number;
        while ((nl = errBuf.indexOf('\n')) >= 0) {
          const line = errBuf.slice(0, nl);
          errBuf = errBuf.slice(nl + 1);
          if (line === '@window-start') {
            if (i === 0) atStart = sample();
          } else if (line === '@window-end') {
            if (i === 0 && atStart !== null) {
              const s0 = atStart as Sample;
              const s1 = sample();
              const delta = (k: 'server' | 'machine' | 'steal'): number | null => (s1[k] !== null && s0[k] !== null ? s1[k] - s0[k] : null);
              window = { elapsedS: (s1.t - s0.t) / 1000, server: delta('server'), machine: delta('machine'), steal: delta('steal') };
            }
          } else if (line.trim() !== '') {
            if (stderr.length < 20) stderr.push(line);
            log(`  ${server.spec.name} ${p.id}: ${line}`);
          }
        }
      });
      // The generator ends itself (drain at most 10 s); this only catches a hang.
      const killer = setTimeout(() => child.kill('SIGKILL'), (warmup + o.seconds + 60) * 1000);
      child.on('close', (code) => {
        clearTimeout(killer);
        let gen: GenResult | null = null;
        try {
          gen = JSON.parse(stdout.trim().split('\n').pop() ?? '') as GenResult;
        } catch {
          stderr.push(`no JSON from the generator (exit code ${code})`);
        }
        resolve({ code, gen });
      });
    });
  return Promise.all(Array.from({ length: p.tubes }, (_, i) => generator(i))).then((runs) => {
    const gens = runs.map((r) => r.gen);
    const gen = gens.every((g): g is GenResult => g !== null) ? mergeResults(gens) : null;
    const code = runs.find((r) => r.code !== 0)?.code ?? 0;
    const w = window as Window | null;
    const serverCpu = w?.server ?? null;
    const serverShare = w && serverCpu !== null && w.elapsedS > 0 ? serverCpu / w.elapsedS : null;
    const other =
      w && w.machine !== null && serverCpu !== null && gen && w.elapsedS > 0 ? Math.max(0, (w.machine - serverCpu - gen.cpuSec) / w.elapsedS) : null;
    return {
      round,
      server: server.spec.name,
      point: p.id,
      ok: code === 0 && gen !== null && gen.errors === 0 && server.alive(),
      exitCode: code,
      stderr,
      gen,
      serverCpuSec: serverCpu,
      serverCpuShare: serverShare,
      otherCpuShare: other,
      stealSec: w?.steal ?? null,
      stealShare: w && w.steal !== null && w.elapsedS > 0 ? w.steal / w.elapsedS : null,
    };
  });
}

function serverSpecs(o: Options): ServerSpec[] {
  const specs: ServerSpec[] = [];
  for (const name of o.servers) {
    if (name === 'beanstalkd') {
      const b = beanstalkdSpec();
      if (b === null) throw new Error('beanstalkd is not installed (/usr/bin/beanstalkd): apt-get install -y beanstalkd, or --servers shardstalk');
      specs.push(b);
    } else if (name === 'node-floor') {
      specs.push(nodeFloorSpec());
    } else {
      const base = shardstalkSpec(o.shards);
      // The suite's spec, named "shardstalk" whatever the shard count, plus any pass-through args.
      specs.push({ ...base, name: 'shardstalk', args: (port, wq) => [...base.args(port, wq), ...o.extra] });
    }
  }
  for (const v of o.variants) {
    const base = shardstalkSpec(o.shards);
    specs.push({ ...base, name: v.name, description: `${base.description}, ${[...v.nodeArgs, ...v.args].join(' ')}`, args: (port, wq) => [...v.nodeArgs, ...base.args(port, wq), ...o.extra, ...v.args] });
  }
  const pin = o.pin;
  if (pin === null) return specs;
  // taskset execs the server: the pid the CPU figures read is the server's.
  return specs.map((s) => ({
    ...s,
    description: `${s.description}, on CPUs ${pin.server}`,
    command: 'taskset',
    args: (port, wq) => ['-c', pin.server, s.command, ...s.args(port, wq)],
  }));
}

const pct = (x: number | null | undefined): string => (x === null || x === undefined || Number.isNaN(x) ? '–' : `${(x * 100).toFixed(0)}%`);
const us = (x: number): string => (Number.isNaN(x) ? '–' : fmtUs(x));

/** Median over the rounds that passed of one number of one server at one point. */
function med(records: RunRecord[], server: string, point: string, pick: (r: RunRecord) => number | null | undefined): number {
  const vals = records
    .filter((r) => r.server === server && r.point === point && r.ok)
    .map(pick)
    .filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return median(vals);
}

/** A generator's load over the window: its CPU, or when it spins (and so always uses its core) the share of the time it had work. */
function generatorLoad(g: GenResult | null | undefined): number | undefined {
  return g?.busyShare ?? g?.cpuShare;
}

/** The latency shown in the main table: put → INSERTED for a cycle, put due → RESERVED at a fixed rate. */
function mainLatency(r: RunRecord): Hist | undefined {
  return r.gen?.mode === 'rate' ? r.gen.latency : r.gen?.put;
}

function summaryTable(o: Options, specs: ServerSpec[], records: RunRecord[]): string {
  const names = specs.map((s) => s.name);
  const lines: string[] = [];
  const versus = names.includes('beanstalkd') ? names.filter((n) => n !== 'beanstalkd') : [];
  const head = ['point', ...names.map((n) => `${n} jobs/s`)];
  for (const n of versus) head.push(`${n} / beanstalkd`);
  head.push(...names.map((n) => `${n} p50 / p99`), ...names.map((n) => `${n} CPU`), 'generator CPU', 'others CPU');
  lines.push(`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`);
  for (const p of o.points) {
    const cells = [p.label];
    for (const n of names) {
      const fail = records.filter((r) => r.server === n && r.point === p.id && !r.ok).length;
      const v = med(records, n, p.id, (r) => r.gen?.jobsPerSec);
      const genShare = med(records, n, p.id, (r) => generatorLoad(r.gen));
      const offered = med(records, n, p.id, (r) => r.gen?.offeredPerSec);
      const marks = `${genShare > GENERATOR_LIMIT_SHARE ? ' †' : ''}${v < offered * SATURATED_SHARE ? ' §' : ''}`;
      cells.push(`${Number.isNaN(v) ? '–' : fmtInt(v)}${marks}${fail ? ` (${fail} failed)` : ''}`);
    }
    for (const n of versus) {
      const ratios: number[] = [];
      for (let round = 0; round < o.rounds; round++) {
        const b = records.find((r) => r.round === round && r.point === p.id && r.server === 'beanstalkd');
        const s = records.find((r) => r.round === round && r.point === p.id && r.server === n);
        if (b?.ok && s?.ok && b.gen && s.gen && b.gen.jobsPerSec > 0) ratios.push(s.gen.jobsPerSec / b.gen.jobsPerSec);
      }
      cells.push(ratios.length === 0 ? '–' : `${median(ratios).toFixed(2)}×${ratios.length > 1 ? ` (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})` : ''}`);
    }
    for (const n of names) {
      cells.push(`${us(med(records, n, p.id, (r) => mainLatency(r)?.p50us))} / ${us(med(records, n, p.id, (r) => mainLatency(r)?.p99us))}`);
    }
    for (const n of names) cells.push(pct(med(records, n, p.id, (r) => r.serverCpuShare)));
    cells.push(names.map((n) => `${pct(med(records, n, p.id, (r) => generatorLoad(r.gen)))}${o.spin ? '~' : ''}`).join(' / '));
    cells.push(names.map((n) => pct(med(records, n, p.id, (r) => r.otherCpuShare))).join(' / '));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function latencyTable(o: Options, specs: ServerSpec[], records: RunRecord[]): string {
  const lines = ['| point | server | put p50 / p99 | reserve p50 / p99 | delete p50 / p99 | put→reserve p50 / p99 / p99.9 | pacing lag p99 |', '|---|---|---|---|---|---|---|'];
  const pp = (n: string, id: string, pick: (r: RunRecord) => Hist | undefined, p999 = false): string => {
    const a = med(records, n, id, (r) => pick(r)?.p50us);
    if (Number.isNaN(a)) return '–';
    const parts = [a, med(records, n, id, (r) => pick(r)?.p99us)];
    if (p999) parts.push(med(records, n, id, (r) => pick(r)?.p999us));
    return parts.map(us).join(' / ');
  };
  for (const p of o.points) {
    for (const s of specs) {
      const n = s.name;
      const lag = med(records, n, p.id, (r) => r.gen?.lag?.p99us);
      lines.push(
        `| ${p.label} | ${n} | ${pp(n, p.id, (r) => r.gen?.put)} | ${pp(n, p.id, (r) => r.gen?.reserve)} | ${pp(n, p.id, (r) => r.gen?.delete)} | ${pp(n, p.id, (r) => r.gen?.latency, true)} | ${us(lag)} |`,
      );
    }
  }
  return lines.join('\n');
}

/**
 * The fixed-rate points' put due → RESERVED tail, percentile by percentile (medians over rounds),
 * and in how many rounds each server's p99 was at or below beanstalkd's in the same round: a
 * round's p99 swings several-fold on a shared VM, so the paired count says more than one median.
 */
function tailTable(o: Options, specs: ServerSpec[], records: RunRecord[]): string {
  const rate = o.points.filter((p) => p.mode === 'rate');
  if (rate.length === 0) return '';
  const hasRef = specs.some((s) => s.name === 'beanstalkd');
  const cols: [string, Exclude<keyof Hist, 'buckets'>][] = [['p50', 'p50us'], ['p90', 'p90us'], ['p95', 'p95us'], ['p98', 'p98us'], ['p99', 'p99us'], ['p99.5', 'p995us'], ['p99.9', 'p999us']];
  const head = ['point', 'server', ...cols.map(([c]) => c), ...(hasRef ? ["rounds with p99 ≤ beanstalkd's"] : [])];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const p of rate) {
    for (const s of specs) {
      const n = s.name;
      const cells = [p.label, n, ...cols.map(([, f]) => us(med(records, n, p.id, (r) => r.gen?.latency?.[f])))];
      if (hasRef) {
        let below = 0;
        let paired = 0;
        for (let round = 0; round < o.rounds; round++) {
          const b = records.find((r) => r.round === round && r.point === p.id && r.server === 'beanstalkd')?.gen?.latency?.p99us;
          const x = records.find((r) => r.round === round && r.point === p.id && r.server === n && r.ok)?.gen?.latency?.p99us;
          if (b === undefined || x === undefined) continue;
          paired++;
          if (x <= b) below++;
        }
        cells.push(n === 'beanstalkd' || paired === 0 ? '–' : `${below} of ${paired}`);
      }
      lines.push(`| ${cells.join(' | ')} |`);
    }
  }
  return lines.join('\n');
}

/** A run whose window lost at most this much CPU time to the hypervisor (one 10 ms tick) counts as without steal. */
const QUIET_STEAL_S = 0.011;

/**
 * The fixed-rate points' put due → RESERVED latency with every round's buckets pooled: one
 * distribution per server over all rounds, so a p99 rests on every job measured instead of on one
 * round of them. The ratio to beanstalkd's pooled p99 comes with a 90% interval from resampling the
 * rounds (paired: round k of both servers together), which says how much of it the rounds' swing
 * could make. The last column is the same over the rounds in which neither run lost CPU time to
 * the hypervisor (steal, at most one tick): there a tail is the servers' own.
 */
function pooledTable(o: Options, specs: ServerSpec[], records: RunRecord[]): string {
  const rate = o.points.filter((p) => p.mode === 'rate');
  const hasRef = specs.some((s) => s.name === 'beanstalkd');
  if (rate.length === 0) return '';
  const head = ['point', 'server', 'rounds', 'jobs', 'pooled p50', 'pooled p98', 'pooled p99', 'pooled p99.9', ...(hasRef ? ["pooled p99 / beanstalkd's (90% interval)", 'the same, rounds without steal'] : [])];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const runOf = (server: string, point: string, round: number): RunRecord | undefined =>
    records.find((r) => r.round === round && r.point === point && r.server === server && r.ok);
  const bucketsOf = (server: string, point: string, round: number): Buckets | undefined => runOf(server, point, round)?.gen?.latency?.buckets;
  const quiet = (server: string, point: string, round: number): boolean => (runOf(server, point, round)?.stealSec ?? Infinity) <= QUIET_STEAL_S;
  for (const p of rate) {
    for (const s of specs) {
      const own = Array.from({ length: o.rounds }, (_, k) => bucketsOf(s.name, p.id, k));
      const mine = own.filter((b): b is Buckets => b !== undefined);
      if (mine.length === 0) continue;
      const jobs = mine.reduce((a, b) => a + b.reduce((x, [, c]) => x + c, 0), 0);
      const cells = [p.label, s.name, String(mine.length), fmtInt(jobs), ...[0.5, 0.98, 0.99, 0.999].map((q) => us(pooledQuantile(mine, q)))];
      if (hasRef) {
        if (s.name === 'beanstalkd') cells.push('–', '–');
        else {
          // Round k of this server beside round k of beanstalkd, where both have buckets.
          const rounds = own.flatMap((b, k) => {
            const r = bucketsOf('beanstalkd', p.id, k);
            return b !== undefined && r !== undefined ? [{ k, pair: [b, r] as const }] : [];
          });
          const shown = (rs: typeof rounds): string => {
            if (rs.length === 0) return '–';
            const { ratio, low, high } = pooledRatio(rs.map((x) => x.pair), 0.99);
            return `${ratio.toFixed(2)} (${low.toFixed(2)}–${high.toFixed(2)})`;
          };
          const calm = rounds.filter(({ k }) => quiet(s.name, p.id, k) && quiet('beanstalkd', p.id, k));
          cells.push(shown(rounds), calm.length === 0 ? '–' : `${shown(calm)}, ${calm.length} round${calm.length === 1 ? '' : 's'}`);
        }
      }
      lines.push(`| ${cells.join(' | ')} |`);
    }
  }
  return lines.join('\n');
}

function gitCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'workers'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    return dirty ? `${head} (+ uncommitted changes in src/ or workers/)` : head;
  } catch {
    return 'unknown';
  }
}

async function main(argv: string[]): Promise<number> {
  let o: Options | null;
  try {
    o = parseOptions(argv);
  } catch (err) {
    log(`cycle-c: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (o === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const specs = serverSpecs(o);
  mkdirSync(o.outDir, { recursive: true });
  const bin = compile(o.outDir);
  const startedAt = new Date();
  const perRunS = o.warmup + o.seconds + 1;
  log(
    `cycle-c: ${o.rounds} rounds × ${specs.length} servers × ${o.points.length} points (${o.points.map((p) => p.id).join(', ')}), ${o.seconds} s + ${o.warmup} s warm-up each: ~${Math.ceil((o.rounds * specs.length * (o.points.length * perRunS + 2)) / 60)} min`,
  );
  const records: RunRecord[] = [];
  let failures = 0;
  let interrupted = false;
  process.once('SIGINT', () => {
    log('cycle-c: interrupted; finishing the current run and writing what was measured');
    interrupted = true;
  });
  rounds: for (let round = 0; round < o.rounds; round++) {
    const order = round % 2 === 0 ? specs : [...specs].reverse();
    for (const spec of order) {
      let server: RunningServer;
      try {
        server = await startServer(spec);
      } catch (err) {
        log(`cycle-c: ${(err as Error).message}`);
        failures++;
        continue;
      }
      try {
        for (const p of o.points) {
          if (interrupted) break rounds;
          const r = await runPoint(bin, server, p, o, round);
          records.push(r);
          if (!r.ok) failures++;
          const g = r.gen;
          log(
            `round ${round + 1}/${o.rounds} ${spec.name.padEnd(10)} ${p.id.padEnd(8)} ${g ? `${fmtInt(g.jobsPerSec).padStart(7)} jobs/s  generator ${pct(generatorLoad(g))}${o.spin ? '~' : ''}  server ${pct(r.serverCpuShare)}  others ${pct(r.otherCpuShare)}  steal ${r.stealShare === null ? '–' : `${(r.stealShare * 100).toFixed(1)}%`}` : 'no result'}${r.ok ? '' : `  FAILED (exit ${r.exitCode}${g ? `, ${g.errors} errors` : ''}${server.alive() ? '' : ', server died'})`}`,
          );
          if (!server.alive()) {
            log(`cycle-c: ${spec.name} died; its last output:\n${server.output()}`);
            break;
          }
        }
      } finally {
        await server.stop();
      }
    }
  }

  const summary = summaryTable(o, specs, records);
  const latencies = latencyTable(o, specs, records);
  const tails = [tailTable(o, specs, records), pooledTable(o, specs, records)].filter((t) => t !== '').join('\n\n');
  const others = median(records.map((r) => r.otherCpuShare).filter((x): x is number => x !== null));
  const notes = [
    '† the generator used > 90% of a core: the figure may be its limit. § a fixed-rate point delivered < 97% of the offered rate: the server was saturated and its latency is the backlog.',
  ];
  if (o.spin) notes.push('~ the generators spun (--spin): their CPU is the share of the window they spent on replies and puts; the rest of their core went to polling.');
  const stolen = records.filter((r) => (r.stealShare ?? 0) > 0).length;
  if (stolen > 0) notes.push(`Steal: in ${stolen} of ${records.length} runs the hypervisor took CPU time from this machine during the window (per run in the JSON, stealShare): their tails include stalls no server caused.`);
  if (others > NOISY_SHARE) notes.push(`Warning: other processes used ${pct(others)} of a core (median over the runs' windows): the figures are noisy.`);
  const stamp = startedAt.toISOString().slice(0, 19).replace(/:/g, '');
  const file = path.join(o.outDir, `cycle-c-${stamp}.json`);
  const cpus = os.cpus();
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        command: `node_modules/.bin/node bench/cycle-c.ts${argv.length ? ` ${argv.join(' ')}` : ''}`,
        commit: gitCommit(),
        machine: { cores: os.availableParallelism(), cpuModel: cpus[0]?.model.trim() ?? 'unknown', kernel: os.release(), loadAverage: os.loadavg() },
        servers: specs.map((s) => ({ name: s.name, description: s.name === 'beanstalkd' ? beanstalkdVersion() : s.description, args: s.args(0, 0) })),
        rounds: o.rounds,
        seconds: o.seconds,
        warmup: o.warmup,
        rateWarmup: o.rateWarmup,
        pin: o.pin,
        points: o.points,
        records,
        summaryMarkdown: `${summary}\n\n${notes.join('\n')}\n\n${latencies}\n${tails ? `\n${tails}\n` : ''}`,
      },
      null,
      2,
    )}\n`,
  );
  const pinned = o.pin === null ? '' : `; servers on CPUs ${o.pin.server}, generators on CPUs ${o.pin.generator}`;
  const title = `${o.quick ? 'quick: ' : ''}${o.rounds} round${o.rounds === 1 ? '' : 's'} × ${o.seconds} s per point; medians over rounds${pinned}`;
  process.stdout.write(
    `\n${title}. Latency: put → INSERTED for a cycle, put due → RESERVED at a fixed rate. CPU: share of one core over the window (generator: beanstalkd run / shardstalk run).\n\n${summary}\n\n${notes.join('\n')}\n\n${latencies}\n${tails ? `\n${tails}\n` : ''}\nwritten: ${path.relative(REPO_ROOT, file)}\n`,
  );
  if (failures) log(`cycle-c: ${failures} run${failures === 1 ? '' : 's'} failed`);
  return failures ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
