// Runs a load test: spreads the connections over piscina worker threads (one task per slice),
// starts them together, samples throughput every 250 ms, then merges what the threads measured
// and checks the exactly-once ledger.
//
// Phases: `reserve` mode first pre-fills the queue (a put phase sized by -n); every mode that
// consumes jobs (and `put` with --drain) ends with a drain phase that reserves and deletes what is
// left, so the ledger can account for every acknowledged put.

import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { Histogram, type LatencySummary } from './histogram.ts';
import { verifyLedgers, type LedgerColumns, type Verdict } from './ledger.ts';
import {
  planConnection,
  planWarnings,
  producerCount,
  resolveOptions,
  ROLE_CYCLE,
  ROLE_PRODUCER,
  WINDOW_GROWTH_MAX,
  type LoadMode,
  type LoadOptions,
} from './options.ts';
import { makeNonce } from './protocol.ts';
import { discoverServerPid, machineCpuS, parseStats, processCpuS, processRssBytes, queryServer, steadyRssBytes } from './procfs.ts';
import {
  createControlBlock,
  epochNowMs,
  kExtraMs,
  kFailedThreads,
  kGo,
  kGoEpochMs,
  kReadyThreads,
  kStop,
  kThreadCommands,
  kThreadErrors,
  kThreadJobs,
  sumThreadCounter,
  type ControlBlock,
} from './shared.ts';
import type { SliceResult, SliceTask } from './slice.ts';

export const SAMPLE_INTERVAL_MS = 250;

/** The connections could not be opened or set up (server down, refused, wrong protocol). */
export class SetupFailure extends Error {
  readonly code = 'ERR_BENCH_SETUP';
}
/** Connections of the final drain. Why 4 × 16: enough to keep a server busy, few enough to set up instantly. */
const DRAIN_CONNECTIONS = 4;
const DRAIN_PIPELINE = 16;

const WORKER_FILE = fileURLToPath(new URL('./worker.ts', import.meta.url));

export interface Progress {
  phase: PhaseName;
  elapsedS: number;
  /** Planned length of the phase (warm-up included), null for -n runs. */
  plannedS: number | null;
  jobs: number;
  jobsTarget: number | null;
  jobsPerSec: number;
  commandsPerSec: number;
  errors: number;
}

export interface TimelineSample {
  /** Seconds since the start signal (the measured window starts after the warm-up). */
  tS: number;
  jobsPerSec: number;
  commandsPerSec: number;
}

export interface LoadHooks {
  onProgress?: (p: Progress) => void;
  /** Aborting ends the run gracefully (like the deadline), and it is reported as aborted. */
  signal?: AbortSignal;
}

export type PhaseName = 'prefill' | 'load' | 'drain';

export interface CpuFigures {
  /** CPU seconds used in the measured window. */
  cpuS: number;
  /** cpuS / wall seconds: 1.0 is one core fully busy. */
  shareOfOneCore: number;
}

export interface PhaseReport {
  phase: PhaseName;
  mode: LoadMode | 'drain';
  connections: number;
  /** Length of the measured window. */
  elapsedS: number;
  /** Seconds added to -d so that the window holds minWaves waves of in-flight jobs. */
  windowExtendedS: number;
  jobs: number;
  commands: number;
  puts: number;
  reserves: number;
  deletes: number;
  jobsPerSec: number;
  commandsPerSec: number;
  latencyUs: { put: LatencySummary; reserve: LatencySummary; delete: LatencySummary };
  generatorCpu: CpuFigures & { userS: number; systemS: number };
  serverCpu: CpuFigures | null;
  /** The server's RSS when the measured window opened and closed; a long run is a soak
   *  (`cycle -d 600`), where growth that never levels off points to a leak. */
  serverRss: { startBytes: number; endBytes: number } | null;
  /**
   * CPU used on this machine by everything else (neither the generator nor the server), and
   * time stolen by the hypervisor: a busy neighbour makes a run untrustworthy.
   */
  otherCpu: (CpuFigures & { stealS: number }) | null;
  timeline: TimelineSample[];
  /** Everything, measured window or not (warm-up and the graceful end included). */
  totals: { jobs: number; commands: number; puts: number; reserves: number; deletes: number; timedOut: number; reads: number; writes: number };
  errors: number;
  errorsByKind: Record<string, number>;
  errorSamples: string[];
  rateMissed: number;
  connectionsFailed: number;
  corruptBodies: number;
  /** workq: leased jobs whose id did not belong to their payload. */
  idMismatches: number;
  aborted: boolean;
}

interface PhaseOutcome {
  report: PhaseReport;
  ledgers: LedgerColumns[];
}

export interface Verification extends Verdict {
  /** False for a put run without --drain: nothing is reserved, so there is nothing to check. */
  checked: boolean;
  /** Jobs the final drain found left over. */
  drained: number;
  corruptBodies: number;
  idMismatches: number;
}

export interface LoadResult {
  tool: 'shardstalk-bench';
  schema: 1;
  startedAt: string;
  /** host:port, with " (workq)" for that protocol. */
  target: string;
  nonce: string;
  options: LoadOptions;
  machine: { cores: number; cpuModel: string; node: string };
  serverPid: number | null;
  /** The measured phase, flattened here for scripts. */
  mode: LoadMode;
  elapsedS: number;
  jobs: number;
  jobsPerSec: number;
  commands: number;
  commandsPerSec: number;
  latencyUs: PhaseReport['latencyUs'];
  generatorCpu: PhaseReport['generatorCpu'];
  serverCpu: CpuFigures | null;
  serverRss: PhaseReport['serverRss'];
  otherCpu: PhaseReport['otherCpu'];
  timeline: TimelineSample[];
  phases: PhaseReport[];
  verify: Verification;
  memory: { jobs: number; rssBeforeBytes: number; rssAfterBytes: number; bytesPerJob: number } | null;
  warnings: string[];
  /** Reasons the run failed; empty when it passed. */
  failures: string[];
  ok: boolean;
}

interface PhasePlan {
  phase: PhaseName;
  mode: LoadMode | 'drain';
  options: LoadOptions;
  threads: number;
  jobsBudget: number | null;
  warmupMs: number;
  durationMs: number | null;
}

export async function runLoad(partial: Partial<LoadOptions>, hooks: LoadHooks = {}): Promise<LoadResult> {
  const o = resolveOptions(partial);
  const nonce = makeNonce();
  const startedAt = new Date().toISOString();
  const serverPid = o.serverPid ?? (await discoverServerPid(o.host, o.port, o.protocol));
  const pool = new Piscina({
    filename: WORKER_FILE,
    minThreads: o.threads,
    maxThreads: o.threads,
    // Tasks are long and few; piscina's Atomics.wait idle loop would freeze a thread's sockets.
    atomics: 'disabled',
    idleTimeout: 60_000,
  });
  const phases: PhaseOutcome[] = [];
  let memory: LoadResult['memory'] = null;
  try {
    const run = async (plan: PhasePlan): Promise<PhaseOutcome> => {
      const outcome = await runPhase(pool, plan, nonce, serverPid, hooks);
      phases.push(outcome);
      return outcome;
    };
    const timed = { warmupMs: o.warmupS * 1000, durationMs: o.durationS === null ? null : o.durationS * 1000 };
    let main: PhaseOutcome;
    if (o.mode === 'reserve') {
      await run({ phase: 'prefill', mode: 'put', options: o, threads: o.threads, jobsBudget: o.jobs, warmupMs: 0, durationMs: null });
      main = await run({ phase: 'load', mode: 'reserve', options: o, threads: o.threads, jobsBudget: null, ...timed });
    } else if (o.mode === 'mem') {
      // After the server's start has settled: a server just started gives back what its start
      // left about a second later, which would otherwise come off the jobs' figure.
      const before = serverPid === null ? null : await steadyRssBytes(serverPid);
      main = await run({ phase: 'load', mode: 'put', options: o, threads: o.threads, jobsBudget: o.jobs, warmupMs: 0, durationMs: null });
      const after = serverPid === null ? null : await settledRss(o.host, o.port, o.protocol, serverPid, main.report.totals.puts);
      if (before !== null && after !== null) {
        const jobs = main.report.totals.puts;
        memory = { jobs, rssBeforeBytes: before, rssAfterBytes: after, bytesPerJob: jobs > 0 ? (after - before) / jobs : 0 };
      }
    } else {
      main = await run({ phase: 'load', mode: o.mode, options: o, threads: o.threads, jobsBudget: o.jobs, ...timed });
    }
    const consumes = o.mode === 'cycle' || o.mode === 'mixed' || o.mode === 'reserve';
    const checked = consumes || o.drain;
    let drained = 0;
    if (checked && !main.report.aborted) {
      const drainOptions: LoadOptions = { ...o, connections: DRAIN_CONNECTIONS, pipeline: DRAIN_PIPELINE };
      const drain = await run({ phase: 'drain', mode: 'drain', options: drainOptions, threads: 1, jobsBudget: null, warmupMs: 0, durationMs: null });
      drained = drain.report.totals.deletes;
    }
    const verdict = verifyLedgers(phases.flatMap((p) => p.ledgers));
    const corruptBodies = phases.reduce((n, p) => n + p.report.corruptBodies, 0);
    const idMismatches = phases.reduce((n, p) => n + p.report.idMismatches, 0);
    const verify: Verification = { ...verdict, checked, drained, corruptBodies, idMismatches };
    const failures: string[] = [];
    for (const p of phases) {
      if (p.report.errors > 0) failures.push(`${p.report.phase}: ${p.report.errors} errors (${Object.entries(p.report.errorsByKind).map(([k, v]) => `${k} ×${v}`).join(', ')})`);
      if (p.report.aborted) failures.push(`${p.report.phase}: aborted`);
    }
    if (checked) {
      if (verify.lost > 0) failures.push(`${verify.lost} acknowledged jobs lost (never deleted)`);
      if (verify.duplicated > 0) failures.push(`${verify.duplicated} jobs reserved or deleted more than once`);
      if (verify.unacknowledged > 0) failures.push(`${verify.unacknowledged} jobs reserved whose put was never acknowledged`);
      if (verify.foreign > 0) failures.push(`${verify.foreign} foreign jobs (wrong nonce) in this run's tubes`);
      if (corruptBodies > 0) failures.push(`${corruptBodies} job bodies came back with the wrong size`);
      if (idMismatches > 0) failures.push(`${idMismatches} jobs leased under another job's id`);
    }
    if (main.report.jobs === 0 && !main.report.aborted) failures.push('no job completed in the measured window');
    const r = main.report;
    return {
      tool: 'shardstalk-bench',
      schema: 1,
      startedAt,
      target: `${o.host}:${o.port}${o.protocol === 'workq' ? ' (workq)' : ''}`,
      nonce,
      options: o,
      machine: machineInfo(),
      serverPid,
      mode: o.mode,
      elapsedS: r.elapsedS,
      jobs: r.jobs,
      jobsPerSec: r.jobsPerSec,
      commands: r.commands,
      commandsPerSec: r.commandsPerSec,
      latencyUs: r.latencyUs,
      generatorCpu: r.generatorCpu,
      serverCpu: r.serverCpu,
      serverRss: r.serverRss,
      otherCpu: r.otherCpu,
      timeline: r.timeline,
      phases: phases.map((p) => p.report),
      verify,
      memory,
      warnings: planWarnings(o),
      failures,
      ok: failures.length === 0,
    };
  } finally {
    await pool.destroy();
  }
}

export function machineInfo(): LoadResult['machine'] {
  const cpus = os.cpus();
  return { cores: os.availableParallelism(), cpuModel: cpus[0]?.model.trim() ?? 'unknown', node: process.version };
}

async function runPhase(pool: Piscina, plan: PhasePlan, nonce: string, serverPid: number | null, hooks: LoadHooks): Promise<PhaseOutcome> {
  const o = plan.options;
  const threads = Math.min(plan.threads, o.connections);
  const cb = createControlBlock(threads);
  const producersTotal = producerCount(plan.mode, o.connections);
  const tasks: Array<Promise<SliceResult>> = [];
  for (let t = 0; t < threads; t++) {
    const indices: number[] = [];
    for (let i = t; i < o.connections; i += threads) indices.push(i);
    const producersInSlice = indices.filter((i) => {
      const role = planConnection(plan.mode, i, o).role;
      return role === ROLE_PRODUCER || role === ROLE_CYCLE;
    }).length;
    const task: SliceTask = {
      mode: plan.mode,
      options: o,
      nonce,
      sab: cb.sab,
      thread: t,
      threads,
      indices,
      jobsBudget: plan.jobsBudget,
      producersTotal,
      producersInSlice,
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
      pipeline: o.pipeline,
    };
    tasks.push(pool.run(task) as Promise<SliceResult>);
  }
  // Track failures without leaving rejections unhandled while we wait for readiness.
  let firstError: unknown = null;
  const settled = Promise.allSettled(tasks);
  for (const t of tasks) t.catch((err: unknown) => (firstError ??= err));

  // Every thread opens and sets up its connections before anyone sends a job, so connection
  // set-up (1000 connections take a while) is never part of the measurement.
  while (Atomics.load(cb.i32, kReadyThreads) < threads && firstError === null) await sleep(5);
  if (Atomics.load(cb.i32, kFailedThreads) > 0 || firstError !== null) {
    release(cb, true);
    await settled;
    // Errors cross the thread boundary as plain Errors: re-type it here.
    throw new SetupFailure((firstError as Error | null)?.message ?? 'a load thread failed to set up its connections');
  }

  const onAbort = (): void => {
    Atomics.store(cb.i32, kStop, 1);
  };
  hooks.signal?.addEventListener('abort', onAbort);
  if (hooks.signal?.aborted) onAbort();

  const goEpochMs = epochNowMs();
  const measureStartEpochMs = goEpochMs + plan.warmupMs;
  const deadlineEpochMs = plan.durationMs === null ? Infinity : measureStartEpochMs + plan.durationMs;
  const cpuAtGo = process.cpuUsage();
  const serverCpuAtGo = serverPid === null ? null : processCpuS(serverPid);
  const machineAtGo = machineCpuS();
  cb.f64[kGoEpochMs] = goEpochMs;
  release(cb, false);

  // CPU is read when the measured window opens and closes, from timers on this thread.
  let cpuAtStart = cpuAtGo;
  let serverCpuAtStart = serverCpuAtGo;
  let serverRssAtStart = serverPid === null ? null : processRssBytes(serverPid);
  let machineAtStart = machineAtGo;
  interface EndMark {
    cpu: NodeJS.CpuUsage;
    serverCpuS: number | null;
    serverRss: number | null;
    machine: ReturnType<typeof machineCpuS>;
    epochMs: number;
  }
  let endMark: EndMark | null = null;
  const markEnd = (): EndMark => {
    endMark = {
      cpu: process.cpuUsage(),
      serverCpuS: serverPid === null ? null : processCpuS(serverPid),
      serverRss: serverPid === null ? null : processRssBytes(serverPid),
      machine: machineCpuS(),
      epochMs: epochNowMs(),
    };
    return endMark;
  };
  const timers: NodeJS.Timeout[] = [];
  if (plan.warmupMs > 0) {
    timers.push(
      setTimeout(() => {
        cpuAtStart = process.cpuUsage();
        serverCpuAtStart = serverPid === null ? null : processCpuS(serverPid);
        serverRssAtStart = serverPid === null ? null : processRssBytes(serverPid);
        machineAtStart = machineCpuS();
        jobsAtMeasureStart = sumThreadCounter(cb, kThreadJobs);
      }, plan.warmupMs),
    );
  }
  let endTimer: NodeJS.Timeout | null = plan.durationMs === null ? null : setTimeout(markEnd, plan.warmupMs + plan.durationMs);

  // Lengthen the window until it holds minWaves waves of in-flight jobs (options.ts, minWaves).
  // Decided shortly before each deadline from the rate so far; the threads read kExtraMs every
  // 20 ms and the decision lands well before they would stop.
  let extraMs = 0;
  let jobsAtMeasureStart = 0;
  const waveJobs = producerCount(plan.mode, o.connections) * o.pipeline;
  const extendable = plan.phase === 'load' && plan.durationMs !== null && o.minWaves > 0 && o.rate === null && waveJobs > 0;
  if (extendable) {
    const baseMs = plan.durationMs!;
    const leadMs = Math.min(300, baseMs / 2);
    const capMs = (WINDOW_GROWTH_MAX - 1) * baseMs;
    const decide = (): void => {
      const windowMs = baseMs + extraMs;
      const elapsedMs = epochNowMs() - measureStartEpochMs;
      const jobs = sumThreadCounter(cb, kThreadJobs) - jobsAtMeasureStart;
      if (elapsedMs <= 0 || extraMs >= capMs) return;
      const targetJobs = o.minWaves * waveJobs;
      if (jobs <= 0) {
        // Nothing done yet (a server stalled by a backlog, say): no rate to go by, take the most.
        extraMs = capMs;
      } else {
        const rate = jobs / elapsedMs;
        const predicted = jobs + rate * (windowMs - elapsedMs);
        if (predicted >= targetJobs) return;
        extraMs = Math.min(capMs, Math.ceil(extraMs + ((targetJobs - predicted) / rate) * 1.1));
      }
      Atomics.store(cb.i32, kExtraMs, extraMs);
      if (endTimer !== null) clearTimeout(endTimer);
      const untilEndMs = measureStartEpochMs + baseMs + extraMs - epochNowMs();
      endTimer = setTimeout(markEnd, untilEndMs);
      timers.push(setTimeout(decide, Math.max(0, untilEndMs - leadMs)));
    };
    timers.push(setTimeout(decide, plan.warmupMs + baseMs - leadMs));
  }

  const timeline: TimelineSample[] = [];
  let lastJobs = 0;
  let lastCommands = 0;
  let lastSampleMs = goEpochMs;
  const sample = (): void => {
    const now = epochNowMs();
    const jobs = sumThreadCounter(cb, kThreadJobs);
    const commands = sumThreadCounter(cb, kThreadCommands);
    const dtS = (now - lastSampleMs) / 1000;
    if (dtS <= 0) return;
    const s: TimelineSample = { tS: (now - goEpochMs) / 1000, jobsPerSec: (jobs - lastJobs) / dtS, commandsPerSec: (commands - lastCommands) / dtS };
    timeline.push(s);
    lastJobs = jobs;
    lastCommands = commands;
    lastSampleMs = now;
    hooks.onProgress?.({
      phase: plan.phase,
      elapsedS: s.tS,
      plannedS: plan.durationMs === null ? null : (plan.warmupMs + plan.durationMs + extraMs) / 1000,
      jobs,
      jobsTarget: plan.jobsBudget,
      jobsPerSec: s.jobsPerSec,
      commandsPerSec: s.commandsPerSec,
      errors: sumThreadCounter(cb, kThreadErrors),
    });
  };
  const sampler = setInterval(sample, SAMPLE_INTERVAL_MS);
  const results = await settled;
  clearInterval(sampler);
  for (const t of timers) clearTimeout(t);
  if (endTimer !== null) clearTimeout(endTimer);
  hooks.signal?.removeEventListener('abort', onAbort);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  const slices = results.map((r) => (r as PromiseFulfilledResult<SliceResult>).value);

  // The measured window: warm-up end to deadline, or start signal to the last completed job.
  const end: EndMark = endMark ?? markEnd();
  const endEpochMs = end.epochMs;
  let elapsedMs: number;
  if (plan.durationMs !== null) {
    elapsedMs = Math.min(plan.durationMs + extraMs, endEpochMs - measureStartEpochMs);
  } else {
    const last = Math.max(...slices.map((s) => s.lastCompletionEpochMs));
    elapsedMs = last > 0 ? last - goEpochMs : endEpochMs - goEpochMs;
  }
  const aborted = hooks.signal?.aborted === true;
  // An abort cuts a -d run short: measure up to when it actually ended.
  if (aborted && plan.durationMs !== null) elapsedMs = Math.max(1, Math.min(elapsedMs, endEpochMs - measureStartEpochMs));
  const elapsedS = elapsedMs / 1000;
  const cpuEnd = end.cpu;
  const userS = (cpuEnd.user - cpuAtStart.user) / 1e6;
  const systemS = (cpuEnd.system - cpuAtStart.system) / 1e6;
  // CPU windows are timer-based and so a little wider than elapsedS; divide by their own width.
  const cpuWindowS = plan.durationMs !== null ? (plan.durationMs + extraMs) / 1000 : Math.max(elapsedS, (endEpochMs - goEpochMs) / 1000);
  const serverCpuS = end.serverCpuS !== null && serverCpuAtStart !== null ? end.serverCpuS - serverCpuAtStart : null;
  const machineEnd = end.machine;
  let otherCpu: PhaseReport['otherCpu'] = null;
  if (machineEnd !== null && machineAtStart !== null) {
    const otherS = Math.max(0, machineEnd.busyS - machineAtStart.busyS - (userS + systemS) - (serverCpuS ?? 0));
    otherCpu = { cpuS: otherS, shareOfOneCore: otherS / cpuWindowS, stealS: machineEnd.stealS - machineAtStart.stealS };
  }

  const hPut = new Histogram();
  const hReserve = new Histogram();
  const hDelete = new Histogram();
  const sum = (f: (s: SliceResult) => number): number => slices.reduce((n, s) => n + f(s), 0);
  const errorsByKind: Record<string, number> = {};
  for (const s of slices) {
    hPut.add(new Histogram(s.histograms.put));
    hReserve.add(new Histogram(s.histograms.reserve));
    hDelete.add(new Histogram(s.histograms.delete));
    for (const [k, v] of Object.entries(s.errorsByKind)) errorsByKind[k] = (errorsByKind[k] ?? 0) + v;
  }
  const jobs = sum((s) => s.measured.jobs);
  const commands = sum((s) => s.measured.commands);
  const report: PhaseReport = {
    phase: plan.phase,
    mode: plan.mode,
    connections: o.connections,
    elapsedS,
    windowExtendedS: extraMs / 1000,
    jobs,
    commands,
    puts: sum((s) => s.measured.puts),
    reserves: sum((s) => s.measured.reserves),
    deletes: sum((s) => s.measured.deletes),
    jobsPerSec: elapsedS > 0 ? jobs / elapsedS : 0,
    commandsPerSec: elapsedS > 0 ? commands / elapsedS : 0,
    latencyUs: { put: hPut.summary(), reserve: hReserve.summary(), delete: hDelete.summary() },
    generatorCpu: { userS, systemS, cpuS: userS + systemS, shareOfOneCore: (userS + systemS) / cpuWindowS },
    serverCpu: serverCpuS === null ? null : { cpuS: serverCpuS, shareOfOneCore: serverCpuS / cpuWindowS },
    serverRss: serverRssAtStart !== null && end.serverRss !== null ? { startBytes: serverRssAtStart, endBytes: end.serverRss } : null,
    otherCpu,
    timeline,
    totals: {
      jobs: sum((s) => s.total.jobs),
      commands: sum((s) => s.total.commands),
      puts: sum((s) => s.total.puts),
      reserves: sum((s) => s.total.reserves),
      deletes: sum((s) => s.total.deletes),
      timedOut: sum((s) => s.total.timedOut),
      reads: sum((s) => s.total.reads),
      writes: sum((s) => s.total.writes),
    },
    errors: sum((s) => s.total.errors),
    errorsByKind,
    errorSamples: slices.flatMap((s) => s.errorSamples).slice(0, 10),
    rateMissed: sum((s) => s.rateMissed),
    connectionsFailed: sum((s) => s.connectionsFailed),
    corruptBodies: sum((s) => s.corruptBodies),
    idMismatches: sum((s) => s.idMismatches),
    aborted,
  };
  return { report, ledgers: slices.map((s) => s.ledger) };
}

/** Lets the threads go: normally, or (abort) only so that they notice kStop and wind down. */
function release(cb: ControlBlock, abort: boolean): void {
  if (abort) Atomics.store(cb.i32, kStop, 1);
  Atomics.store(cb.i32, kGo, 1);
  Atomics.notify(cb.i32, kGo);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The server's RSS once it holds the `jobs` just acknowledged and its memory has settled. A
 * server may acknowledge a put before storing it (shardstalk answers puts before its shard has
 * applied them), so a beanstalk server is first asked (`stats`) until it reports them all; then
 * RSS is read once it has settled (steadyRssBytes), so the figure is not read while the server is
 * still storing or freeing what the fill left.
 */
async function settledRss(host: string, port: number, protocol: 'beanstalk' | 'workq', pid: number, jobs: number): Promise<number | null> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  if (protocol === 'beanstalk') {
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(100)) {
      try {
        const { kind, body } = await queryServer(host, port, 'stats');
        const st = parseStats(body);
        const held = Number(st['current-jobs-ready']) + Number(st['current-jobs-delayed']) + Number(st['current-jobs-buried']) + Number(st['current-jobs-reserved']);
        if (kind === 'OK' && held >= jobs) break;
      } catch {
        break; // no stats: fall back to sampling alone
      }
    }
  }
  return steadyRssBytes(pid);
}
