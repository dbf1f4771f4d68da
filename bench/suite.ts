#!/usr/bin/env node
// The side-by-side suite: shardstalk (1 shard and its default shard count) against Debian's
// beanstalkd on this machine, in the same run, servers alternating run by run.
//
//   node bench/suite.ts [--quick] [--runs N] [--duration S] [--servers a,b] [--only REGEX] ...
//
// Writes RESULTS.md (medians, ranges, back-to-back ratios, machine and date, the command to
// reproduce), suite.json with every run, and SVG charts into --out. With --protocol workq it
// measures shardstalk's workq listener instead (no reference server, so no ratios) and writes its
// own section of RESULTS.md. Exit code 1 if any run failed
// its checks or any server did not start: a column that silently measured nothing is a bug.

import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { machineCpuS } from './loadgen/procfs.ts';
import { machineInfo, runLoad, type LoadResult } from './loadgen/run.ts';
import { ProgressBar, fmtBytes, fmtInt } from './report/text.ts';
import { PROTOCOLS, type Protocol } from './loadgen/options.ts';
import { fullMatrix, quickMatrix, workqMatrix, type Point } from './suite/matrix.ts';
import {
  failedRecord,
  memChart,
  mergeResults,
  ratioChart,
  recordOf,
  summaryChart,
  timelineChart,
  writeResultsMarkdown,
  type MemRecord,
  type RunRecord,
  type SuiteContext,
} from './suite/results.ts';
import { beanstalkdSpec, REPO_ROOT, shardstalkSpec, startServer, ServerStartFailure, type ServerSpec } from './suite/servers.ts';

const USAGE = `Usage: node bench/suite.ts [options]

  --protocol workq     measure shardstalk's workq listener (add → lease → complete): shardstalk-1
                       and shardstalk only, points put/cycle 100×16 and cycle 100×1 (100 B),
                       written as the "workq" section of RESULTS.md (quick: RESULTS-workq-quick.md)
  --quick              a handful of points, 1 run of 1 s each, 100k-job memory check (CI)
  --runs N             runs per point and server (default 3; quick 1)
  --duration S         measured seconds per run (default 2; quick 1)
  --warmup S           warm-up seconds per run (default 0.5; quick 0.25)
  --threads N          generator threads (default 1)
  --servers LIST       comma-separated: beanstalkd, shardstalk-1, shardstalk (default: all;
                       beanstalkd only if installed)
  --shards N           also run shardstalk with N shards (repeatable as a list: 2,4)
  --only REGEX         only points whose id matches (ids look like cycle-c100-p16-s100-t1)
  --wait-quiet S       before each round, wait up to S seconds for other processes to use
                       less than 15% of a core (default 30, at most 10 min in all; quick 0)
  --mem-jobs N         jobs for the memory check (default 1,000,000; quick 100,000); 0 skips it
  --out DIR            charts and suite.json (default bench/out; workq: bench/out/workq)
  --render FILE        don't measure: rewrite the results and charts from a suite.json
  --results FILE       the Markdown summary (default bench/RESULTS.md; quick: DIR/RESULTS-quick.md)
  -h, --help`;

interface SuiteArgs {
  protocol: Protocol;
  quick: boolean;
  runs: number;
  durationS: number;
  warmupS: number;
  threads: number;
  servers: string[] | null;
  shards: number[];
  only: RegExp | null;
  memJobs: number;
  waitQuietS: number;
  outDir: string;
  resultsFile: string;
  render: string | null;
}

function parseSuiteArgs(argv: string[]): SuiteArgs | null {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      protocol: { type: 'string' },
      quick: { type: 'boolean' },
      runs: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      threads: { type: 'string' },
      servers: { type: 'string' },
      shards: { type: 'string' },
      only: { type: 'string' },
      'mem-jobs': { type: 'string' },
      'wait-quiet': { type: 'string' },
      out: { type: 'string' },
      results: { type: 'string' },
      render: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return null;
  const quick = v.quick === true;
  const protocol = (v.protocol ?? 'beanstalk') as Protocol;
  if (!PROTOCOLS.includes(protocol)) throw new Error(`unknown protocol "${protocol}" (${PROTOCOLS.join(', ')})`);
  const quickResults = protocol === 'workq' ? 'RESULTS-workq-quick.md' : 'RESULTS-quick.md';
  const outDir = path.resolve(v.out ?? path.join(REPO_ROOT, protocol === 'workq' ? 'bench/out/workq' : 'bench/out'));
  const n = (s: string | undefined, d: number): number => {
    if (s === undefined) return d;
    const x = Number(s.replace(/_/g, ''));
    if (!Number.isFinite(x) || x < 0) throw new Error(`not a number: ${s}`);
    return x;
  };
  return {
    protocol,
    quick,
    runs: n(v.runs, quick ? 1 : 3),
    durationS: n(v.duration, quick ? 1 : 2),
    warmupS: n(v.warmup, quick ? 0.25 : 0.5),
    threads: n(v.threads, 1),
    servers: v.servers ? v.servers.split(',').map((s) => s.trim()) : null,
    shards: v.shards ? v.shards.split(',').map(Number) : [],
    only: v.only ? new RegExp(v.only) : null,
    memJobs: n(v['mem-jobs'], quick ? 100_000 : 1_000_000),
    waitQuietS: n(v['wait-quiet'], quick ? 0 : 30),
    outDir,
    resultsFile: path.resolve(v.results ?? (quick ? path.join(outDir, quickResults) : path.join(REPO_ROOT, 'bench/RESULTS.md'))),
    render: v.render ?? null,
  };
}

function serverSpecs(args: SuiteArgs): ServerSpec[] {
  const all: ServerSpec[] = [];
  const workq = args.protocol === 'workq';
  // No reference workq server is installed: shardstalk only.
  const bs = workq ? null : beanstalkdSpec();
  if (bs) all.push(bs);
  all.push(shardstalkSpec(1, workq));
  for (const n of args.shards) all.push(shardstalkSpec(n, workq));
  all.push(shardstalkSpec(null, workq));
  if (args.servers === null) {
    if (workq) log('no reference workq server is installed: no baseline, no ratios');
    else if (!bs) log('beanstalkd is not installed (/usr/bin/beanstalkd): no baseline, no ratios');
    return all;
  }
  const picked = args.servers.map((name) => {
    const s = all.find((x) => x.name === name);
    if (!s) throw new Error(`unknown server "${name}" (known: ${all.map((x) => x.name).join(', ')})`);
    return s;
  });
  return picked;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Loud, multi-line, impossible to miss in CI output. */
function shout(message: string): void {
  const bar = '!'.repeat(78);
  process.stderr.write(`\n${bar}\n${message}\n${bar}\n\n`);
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

/** Share of one core used by everything on the machine over `ms`: a busy machine makes runs noisy. */
async function machineBusyShare(ms: number): Promise<number | null> {
  const a = machineCpuS();
  await new Promise((r) => setTimeout(r, ms));
  const b = machineCpuS();
  return a && b ? (b.busyS - a.busyS) / (ms / 1000) : null;
}

/** Share of a core that the machine may use without us before a round is worth starting. */
const QUIET_SHARE_MAX = 0.15;

/** All the waiting a suite run may do: on a machine that never calms down, waiting buys nothing. */
const QUIET_WAIT_TOTAL_S = 600;
let quietWaitedS = 0;

/** Waits until the machine is quiet or `maxS` has passed; returns the last busy share seen. */
async function waitQuiet(maxS: number, signal: AbortSignal): Promise<number | null> {
  const budgetS = Math.min(maxS, QUIET_WAIT_TOTAL_S - quietWaitedS);
  if (budgetS <= 0) return null;
  const started = Date.now();
  const until = started + budgetS * 1000;
  let share = await machineBusyShare(300);
  let told = false;
  while (share !== null && share > QUIET_SHARE_MAX && Date.now() < until && !signal.aborted) {
    if (!told) log(`waiting up to ${budgetS.toFixed(0)} s for the machine to calm down (other processes use ${(share * 100).toFixed(0)}% of a core)`);
    told = true;
    await new Promise((r) => setTimeout(r, 700));
    share = await machineBusyShare(300);
  }
  quietWaitedS += (Date.now() - started) / 1000;
  if (quietWaitedS >= QUIET_WAIT_TOTAL_S && told) log(`the machine stayed busy: no more waiting in this suite run (${QUIET_WAIT_TOTAL_S} s spent)`);
  return share;
}

async function main(argv: string[]): Promise<number> {
  let args: SuiteArgs | null;
  try {
    args = parseSuiteArgs(argv);
  } catch (err) {
    log(`suite: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (args === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (args.render !== null) {
    const saved = JSON.parse(readFileSync(args.render, 'utf8')) as { context: SuiteContext; points: Point[]; records: RunRecord[]; memory: MemRecord[] };
    writeOutputs(args, saved.context, saved.points, saved.records, saved.memory);
    return 0;
  }
  const specs = serverSpecs(args);
  let points = args.protocol === 'workq' ? workqMatrix() : args.quick ? quickMatrix() : fullMatrix();
  if (args.only) points = points.filter((p) => args.only!.test(p.id));
  mkdirSync(args.outDir, { recursive: true });
  const startedAt = new Date().toISOString();
  const m = machineInfo();
  const ctx: SuiteContext = {
    startedAt,
    finishedAt: startedAt,
    command: `node_modules/.bin/node bench/suite.ts${argv.length ? ` ${argv.join(' ')}` : ''}`,
    machine: { ...m, kernel: os.release(), loadAverage: os.loadavg().map((x) => x.toFixed(2)).join(' ') },
    commit: gitCommit(),
    servers: specs.map((s) => ({ name: s.name, description: s.description })),
    broken: {},
    runs: args.runs,
    durationS: args.durationS,
    warmupS: args.warmupS,
    threads: args.threads,
    quick: args.quick,
    protocol: args.protocol,
  };
  const busy = await machineBusyShare(500);
  if (busy !== null && busy > 0.2) {
    log(`note: the machine is already busy (${(busy * 100).toFixed(0)}% of a core used by other processes); figures will be noisy`);
  }
  const total = points.length * args.runs * specs.length;
  // ~2 s per run on top of the load: server start and stop, connection set-up, final drain.
  log(`suite: ${points.length} points × ${args.runs} runs × ${specs.length} servers (${specs.map((s) => s.name).join(', ')}), ${args.durationS} s + ${args.warmupS} s warm-up each: ~${Math.ceil((total * (args.durationS + args.warmupS + 2)) / 60)} min`);

  const bar = process.stdout.isTTY ? new ProgressBar(process.stdout) : null;
  const records: RunRecord[] = [];
  const abort = new AbortController();
  process.once('SIGINT', () => {
    log('\nsuite: interrupted, finishing the current run and writing what was measured');
    abort.abort();
  });

  let done = 0;
  outer: for (const [pi, p] of points.entries()) {
    for (let round = 0; round < args.runs; round++) {
      // Wait between rounds, never inside one: a round's runs must stay back to back.
      if (args.waitQuietS > 0) await waitQuiet(args.waitQuietS, abort.signal);
      // Rotate the order every round (and point) so no server always runs first or last.
      const shift = (round + pi) % specs.length;
      const order = [...specs.slice(shift), ...specs.slice(0, shift)];
      for (const [oi, spec] of order.entries()) {
        if (abort.signal.aborted) break outer;
        done++;
        const tag = `[${done}/${total}] ${p.label.padEnd(22)} ${spec.name.padEnd(13)} round ${round + 1}/${args.runs}`;
        if (ctx.broken[spec.name] !== undefined) {
          records.push(failedRecord(p, spec.name, round, oi, `${spec.name} is broken: ${ctx.broken[spec.name]!.split('\n')[0]}`));
          continue;
        }
        const record = await measure(spec, p, round, oi, args, ctx, bar, tag, abort.signal);
        records.push(record);
        bar?.clear();
        const r = record;
        log(`${tag}  ${r.ok ? `${fmtInt(r.jobsPerSec).padStart(9)} jobs/s  generator ${(r.generatorCpuShare * 100).toFixed(0)}%  server ${r.serverCpuShare === null ? '?' : (r.serverCpuShare * 100).toFixed(0)}%${(r.otherCpuShare ?? 0) > 0.1 ? `  (others ${(r.otherCpuShare! * 100).toFixed(0)}%)` : ''}` : `FAILED: ${r.failures.join('; ').split('\n')[0]}`}`);
      }
    }
  }

  const mem: MemRecord[] = [];
  if (args.memJobs > 0 && !abort.signal.aborted) {
    for (const spec of specs) {
      if (ctx.broken[spec.name] !== undefined) {
        mem.push({ server: spec.name, jobs: args.memJobs, ok: false, failures: ['server broken'], rssBeforeBytes: null, rssAfterBytes: null, bytesPerJob: null, putsPerSec: 0 });
        continue;
      }
      const rec = await measureMemory(spec, args, ctx, bar);
      bar?.clear();
      mem.push(rec);
      log(`memory ${spec.name.padEnd(13)} ${rec.ok && rec.bytesPerJob !== null ? `${fmtInt(rec.jobs)} jobs: RSS ${fmtBytes(rec.rssBeforeBytes!)} → ${fmtBytes(rec.rssAfterBytes!)} = ${rec.bytesPerJob.toFixed(0)} bytes/job` : `FAILED: ${rec.failures.join('; ')}`}`);
    }
  }

  ctx.finishedAt = new Date().toISOString();
  writeOutputs(args, ctx, points, records, mem);

  const failed = records.filter((r) => !r.ok).length + mem.filter((x) => !x.ok).length;
  const broken = Object.keys(ctx.broken);
  if (broken.length > 0) shout(`SUITE FAILED: ${broken.join(', ')} did not run:\n${Object.entries(ctx.broken).map(([k, v]) => `  ${k}: ${v}`).join('\n')}`);
  else if (failed > 0) shout(`SUITE FAILED: ${failed} runs failed their checks (see ${path.basename(args.resultsFile)}, "Trust")`);
  if (abort.signal.aborted) return 130;
  return failed > 0 || broken.length > 0 ? 1 : 0;
}

/** Charts and raw data into --out; the Markdown summary, with a copy of its chart, where asked. */
function writeOutputs(args: SuiteArgs, ctx: SuiteContext, points: Point[], records: RunRecord[], mem: MemRecord[]): void {
  mkdirSync(args.outDir, { recursive: true });
  const resultsDir = path.dirname(args.resultsFile);
  mkdirSync(resultsDir, { recursive: true });
  const summarySvg = summaryChart(ctx, points, records);
  writeFileSync(path.join(args.outDir, 'summary.svg'), summarySvg);
  const summaryName = `results${ctx.protocol === 'workq' ? '-workq' : ''}${args.quick ? '-quick' : ''}-summary.svg`;
  copyFileSync(path.join(args.outDir, 'summary.svg'), path.join(resultsDir, summaryName));
  const ratio = ratioChart(ctx, points, records);
  if (ratio) writeFileSync(path.join(args.outDir, 'ratio.svg'), ratio);
  for (const p of points) writeFileSync(path.join(args.outDir, `timeline-${p.id}.svg`), timelineChart(ctx, p, records));
  if (mem.length > 0) writeFileSync(path.join(args.outDir, 'memory.svg'), memChart(ctx, mem));
  const json = path.join(args.outDir, 'suite.json');
  if (args.render === null || path.resolve(args.render) !== json) {
    writeFileSync(json, `${JSON.stringify({ context: ctx, points, records, memory: mem }, null, 1)}\n`);
  }
  const previous = existsSync(args.resultsFile) ? readFileSync(args.resultsFile, 'utf8') : null;
  writeFileSync(args.resultsFile, mergeResults(previous, writeResultsMarkdown(ctx, points, records, mem, summaryName), ctx.protocol));
  log(`\nwrote ${path.relative(process.cwd(), args.resultsFile)}, charts and suite.json in ${path.relative(process.cwd(), args.outDir) || '.'}`);
}

/**
 * Start failures per server in a row. Why not give up at the first: the server is developed in
 * this very checkout, and one bad moment (a half-saved file) should not blank a whole column;
 * two in a row mean it is broken.
 */
const START_FAILURES_MAX = 2;
const startFailures = new Map<string, number>();

/** The shard count a shardstalk server reports in its start-up log line, if any. */
function reportedShards(output: string): number | null {
  const m = /"shards":(\d+)/.exec(output);
  return m ? Number(m[1]) : null;
}

async function measure(
  spec: ServerSpec,
  p: Point,
  round: number,
  order: number,
  args: SuiteArgs,
  ctx: SuiteContext,
  bar: ProgressBar | null,
  tag: string,
  signal: AbortSignal,
): Promise<RunRecord> {
  let server;
  try {
    server = await startServer(spec);
    startFailures.set(spec.name, 0);
  } catch (err) {
    const reason = err instanceof ServerStartFailure ? err.message : `could not start: ${(err as Error).message}`;
    const failures = (startFailures.get(spec.name) ?? 0) + 1;
    startFailures.set(spec.name, failures);
    if (failures >= START_FAILURES_MAX) ctx.broken[spec.name] = reason;
    shout(failures >= START_FAILURES_MAX ? `${reason}\n(${failures} failed starts in a row: ${spec.name} is skipped from now on)` : reason);
    return failedRecord(p, spec.name, round, order, reason);
  }
  // Say what "default shard count" meant on this machine.
  const shards = reportedShards(server.output());
  const described = ctx.servers.find((s) => s.name === spec.name);
  if (shards !== null && described && !described.description.includes('reported')) described.description += ` (reported ${shards} shard${shards === 1 ? '' : 's'} at start)`;
  try {
    const result: LoadResult = await runLoad(
      {
        protocol: args.protocol,
        port: server.workqPort ?? server.port,
        serverPid: server.pid,
        mode: p.mode,
        connections: p.connections,
        pipeline: p.pipeline,
        bodyBytes: p.bodyBytes,
        tubes: p.tubes,
        watch: 1,
        durationS: args.durationS,
        warmupS: args.warmupS,
        threads: args.threads,
      },
      { signal, onProgress: bar ? (pr) => bar.update(pr, `${tag} `) : undefined },
    );
    const record = recordOf(p, spec.name, round, order, result);
    if (!server.alive()) {
      record.ok = false;
      record.failures.push(`${spec.name} exited during the run:\n${server.output()}`);
    }
    return record;
  } catch (err) {
    const crashed = !server.alive();
    const reason = `${(err as Error).message}${crashed ? `\n${spec.name} crashed; its last output:\n${server.output()}` : ''}`;
    if (crashed) ctx.broken[spec.name] = reason;
    return failedRecord(p, spec.name, round, order, reason);
  } finally {
    await server.stop();
  }
}

async function measureMemory(spec: ServerSpec, args: SuiteArgs, ctx: SuiteContext, bar: ProgressBar | null): Promise<MemRecord> {
  const fail = (reason: string): MemRecord => ({ server: spec.name, jobs: args.memJobs, ok: false, failures: [reason], rssBeforeBytes: null, rssAfterBytes: null, bytesPerJob: null, putsPerSec: 0 });
  let server;
  try {
    server = await startServer(spec);
  } catch (err) {
    ctx.broken[spec.name] = (err as Error).message;
    return fail((err as Error).message);
  }
  try {
    // Few connections, deep pipelines: the fill is fast and per-connection memory is negligible.
    const r = await runLoad(
      { protocol: args.protocol, port: server.workqPort ?? server.port, serverPid: server.pid, mode: 'mem', jobs: args.memJobs, connections: 10, pipeline: 64, bodyBytes: 100, threads: args.threads },
      { onProgress: bar ? (pr) => bar.update(pr, `memory ${spec.name} `) : undefined },
    );
    if (!r.memory) return fail('could not read the server RSS');
    return {
      server: spec.name,
      jobs: r.memory.jobs,
      ok: r.ok,
      failures: r.failures,
      rssBeforeBytes: r.memory.rssBeforeBytes,
      rssAfterBytes: r.memory.rssAfterBytes,
      bytesPerJob: r.memory.bytesPerJob,
      putsPerSec: r.jobsPerSec,
    };
  } catch (err) {
    return fail((err as Error).message);
  } finally {
    await server.stop();
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      log(`suite: ${(err as Error).stack ?? String(err)}`);
      process.exitCode = 1;
    },
  );
}
