// One load thread's share of a run: a slice of the connections (connection.ts), driven by one
// event loop. The slice opens them, starts them on the main thread's signal, paces an open-loop
// rate, publishes counters for the main thread, watches the deadline and stalls, and gathers
// what its connections measured.
//
// Ending a run cleanly matters as much as running it: the ledger must be exact. After the
// deadline a connection starts no new job but still deletes every job it has reserved, and waits
// for every reply; consumers use reserve-with-timeout so a blocked reserve returns within
// `reserveTimeoutS`. Jobs put but not yet reserved stay queued for the final drain.

import { Histogram } from './histogram.ts';
import { Ledger, type LedgerColumns } from './ledger.ts';
import { planConnection, ROLE_CYCLE, ROLE_PRODUCER, type LoadMode, type LoadOptions } from './options.ts';
import { makePutTemplate, reserveWithTimeout, type PutTemplate } from './protocol.ts';
import { JobIds } from './workq.ts';
import {
  attachControlBlock,
  kDeletedTotal,
  kExtraMs,
  kFailedThreads,
  kGo,
  kGoEpochMs,
  kInsertedTotal,
  kProducersDone,
  kReadyThreads,
  kSeqNext,
  kStop,
  kThreadCommands,
  kThreadConnsDone,
  kThreadConnsOpen,
  kThreadDeletes,
  kThreadErrors,
  kThreadJobs,
  kThreadPuts,
  kThreadReserves,
  SEQ_BLOCK,
  threadSlot,
  type ControlBlock,
} from './shared.ts';
import { commandNames, LoadConnection } from './connection.ts';

/** Read buffer shared by all connections of the thread. Why 256 KiB: 16 pipelined 4 KiB replies fit twice. */
const READ_BUFFER_BYTES = 256 * 1024;
/** Connections opened at once; more would overflow the server's accept backlog for nothing. */
const CONNECT_BATCH = 64;
/** How often counters are published for the main thread, and stop conditions polled. */
const PUBLISH_INTERVAL_MS = 20;
const ERROR_SAMPLES_MAX = 10;
/**
 * A thread that gets no reply at all for this long while it has commands in flight gives up on
 * its connections, so a hung server fails the run instead of hanging it. Consumers' reserves
 * return within reserveTimeoutS on a healthy server, so the limit stays well above that.
 */
const STALL_MS_MIN = 10_000;

export interface SliceTask {
  /** What the connections do: a load mode, or 'drain' (the final reserve + delete sweep). */
  mode: LoadMode | 'drain';
  options: LoadOptions;
  nonce: string;
  sab: SharedArrayBuffer;
  thread: number;
  threads: number;
  /**
   * Global indices of this slice's connections. Interleaved (thread t gets t, t+threads, ...) so
   * that producers and consumers of mixed mode spread evenly over the threads.
   */
  indices: number[];
  /** Jobs to put over all threads; null: until the deadline. */
  jobsBudget: number | null;
  producersTotal: number;
  /** Producers of this slice's thread and all threads, to split an open-loop rate. */
  producersInSlice: number;
  warmupMs: number;
  durationMs: number | null;
  pipeline: number;
}

export interface SliceCounters {
  jobs: number;
  commands: number;
  puts: number;
  reserves: number;
  deletes: number;
  timedOut: number;
  errors: number;
  /** Socket reads: replies per read shows how much the server batches its writes. */
  reads: number;
  /** socket.write calls. */
  writes: number;
}

export interface SliceResult {
  thread: number;
  total: SliceCounters;
  /** Counted inside the measured window only. */
  measured: SliceCounters;
  histograms: { put: Float64Array; reserve: Float64Array; delete: Float64Array };
  ledger: LedgerColumns;
  corruptBodies: number;
  errorsByKind: Record<string, number>;
  errorSamples: string[];
  /** Wall-clock time of the last completed job, ms since epoch; 0 if none. */
  lastCompletionEpochMs: number;
  rateMissed: number;
  connectionsFailed: number;
  /** workq: leased jobs whose id is not the one their payload's sequence number was added under. */
  idMismatches: number;
}

function zeroCounters(): SliceCounters {
  return { jobs: 0, commands: 0, puts: 0, reserves: 0, deletes: 0, timedOut: 0, errors: 0, reads: 0, writes: 0 };
}

export class Slice {
  readonly task: SliceTask;
  readonly options: LoadOptions;
  readonly cb: ControlBlock;
  readonly workq: boolean;
  /** workq: the run's job ids. */
  readonly ids: JobIds | null;
  /** beanstalk: every connection's put (workq's add names its job: one per connection). */
  readonly putTemplate: PutTemplate | null;
  readonly nonceBytes: Uint8Array;
  readonly reserveNowCmd: Buffer;
  readonly reserveWaitCmd: Buffer;
  /** put, reserve, delete, setup, reserve-wait in the protocol's words, by CMD_* (connection.ts). */
  readonly commandNames: string[];
  /** Put runs count INSERTED as the job; every other mode counts DELETED. */
  readonly putIsJob: boolean;
  readonly readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  readonly hPut = new Histogram();
  readonly hReserve = new Histogram();
  readonly hDelete = new Histogram();
  readonly ledger = new Ledger();
  readonly total = zeroCounters();
  readonly measured = zeroCounters();
  corruptBodies = 0;
  idMismatches = 0;
  rateMissed = 0;
  connectionsFailed = 0;
  readonly errorsByKind: Record<string, number> = {};
  readonly errorSamples: string[] = [];

  /** performance.now() of the read being handled. */
  nowMs = 0;
  goMs = 0;
  measureStartMs = 0;
  deadlineMs = Infinity;
  /** The deadline before any extension by the main thread (kExtraMs). */
  private baseDeadlineMs = Infinity;
  lastCompletionMs = -1;
  /** performance.now() of the last socket read, for the stall detector. */
  lastReadMs = 0;
  running = false;
  stopping = false;
  /** Mixed mode: every producer is done and every inserted job has been deleted. */
  consumersMayStop = false;
  readonly rateLimited: boolean;

  private conns: LoadConnection[] = [];
  private active = 0;
  private seqNext = 0;
  private seqEnd = 0;
  private seqExhausted = false;
  private publishedPuts = 0;
  private publishedDeletes = 0;
  private publishTimer: NodeJS.Timeout | null = null;
  private rateTimer: NodeJS.Timeout | null = null;
  private rateIssued = 0;
  private rateRoundRobin = 0;
  private ratePerMs = 0;
  private producers: LoadConnection[] = [];
  private resolveDone: (() => void) | null = null;

  constructor(task: SliceTask) {
    this.task = task;
    this.options = task.options;
    this.cb = attachControlBlock(task.sab, task.threads);
    this.workq = this.options.protocol === 'workq';
    this.ids = this.workq ? new JobIds(task.nonce) : null;
    this.commandNames = commandNames(this.options.protocol);
    this.putTemplate = this.workq ? null : makePutTemplate(task.nonce, this.options.bodyBytes, this.options.pri, this.options.ttrS);
    this.nonceBytes = Buffer.from(task.nonce, 'latin1');
    // Pipelined reserves never block: a blocking reserve holds up every command behind it on
    // its connection (beanstalkd answers a connection's commands in order), deletes included.
    // Only a consumer that found its tubes empty sends one blocking reserve, alone.
    this.reserveNowCmd = reserveWithTimeout(0);
    this.reserveWaitCmd = reserveWithTimeout(this.options.reserveTimeoutS);
    this.putIsJob = task.mode === 'put' || task.mode === 'mem';
    this.rateLimited = this.options.rate !== null && task.producersInSlice > 0;
  }

  async run(): Promise<SliceResult> {
    const { indices } = this.task;
    for (let i = 0; i < indices.length; i += CONNECT_BATCH) {
      const batch: Array<Promise<void>> = [];
      for (const j of indices.slice(i, i + CONNECT_BATCH)) {
        const conn = new LoadConnection(this, j, planConnection(this.task.mode, j, this.options));
        this.conns.push(conn);
        batch.push(conn.open());
      }
      try {
        await Promise.all(batch);
      } catch (err) {
        for (const c of this.conns) c.destroy();
        Atomics.add(this.cb.i32, kFailedThreads, 1);
        Atomics.add(this.cb.i32, kReadyThreads, 1);
        Atomics.notify(this.cb.i32, kReadyThreads);
        throw err;
      }
      Atomics.store(this.cb.i32, threadSlot(this.task.thread, kThreadConnsOpen), this.conns.length);
    }
    this.producers = this.conns.filter((c) => c.plan.role === ROLE_PRODUCER || c.plan.role === ROLE_CYCLE);
    this.active = this.conns.length;

    Atomics.add(this.cb.i32, kReadyThreads, 1);
    Atomics.notify(this.cb.i32, kReadyThreads);
    const wait = Atomics.waitAsync(this.cb.i32, kGo, 0);
    if (wait.async) await wait.value;

    this.goMs = this.cb.f64[kGoEpochMs]! - performance.timeOrigin;
    this.measureStartMs = this.goMs + this.task.warmupMs;
    this.deadlineMs = this.task.durationMs === null ? Infinity : this.measureStartMs + this.task.durationMs;
    this.baseDeadlineMs = this.deadlineMs;
    this.nowMs = performance.now();
    this.lastReadMs = this.nowMs;
    this.running = true;
    const done = new Promise<void>((resolve) => {
      this.resolveDone = resolve;
    });
    this.publishTimer = setInterval(() => this.onPublishTick(), PUBLISH_INTERVAL_MS);
    if (this.rateLimited) {
      this.ratePerMs = (this.options.rate! * this.task.producersInSlice) / this.task.producersTotal / 1000;
      this.rateTimer = setInterval(() => this.onRateTick(), 1);
    }
    if (Atomics.load(this.cb.i32, kStop) === 1) this.beginStop();
    for (const c of this.conns) {
      c.fill();
      c.flush();
    }
    if (this.active > 0) await done;
    clearInterval(this.publishTimer);
    if (this.rateTimer !== null) clearInterval(this.rateTimer);
    this.publish();
    return this.result();
  }

  /** Next job sequence number, or -1 when the run's job budget is spent. */
  nextSeq(): number {
    if (this.seqNext === this.seqEnd) {
      if (this.seqExhausted) return -1;
      const budget = this.task.jobsBudget;
      const start = Atomics.add(this.cb.i32, kSeqNext, SEQ_BLOCK);
      let end = start + SEQ_BLOCK;
      if (budget !== null && end > budget) end = budget;
      if (end <= start) {
        this.seqExhausted = true;
        return -1;
      }
      this.seqNext = start;
      this.seqEnd = end;
    }
    return this.seqNext++;
  }

  inWindow(): boolean {
    return this.nowMs >= this.measureStartMs && this.nowMs < this.deadlineMs;
  }

  /** Records a latency if both the send and the reply fall inside the measured window. */
  latency(h: Histogram, sentAtMs: number): void {
    if (sentAtMs >= this.measureStartMs && this.nowMs < this.deadlineMs) h.record((this.nowMs - sentAtMs) * 1000);
  }

  jobDone(): void {
    this.total.jobs++;
    if (this.inWindow()) this.measured.jobs++;
    this.lastCompletionMs = this.nowMs;
  }

  checkDeadline(): void {
    if (this.nowMs >= this.deadlineMs && !this.stopping) this.beginStop();
  }

  beginStop(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const c of this.conns) c.fill();
  }

  error(kind: string, detail: string): void {
    this.total.errors++;
    if (this.inWindow()) this.measured.errors++;
    this.errorsByKind[kind] = (this.errorsByKind[kind] ?? 0) + 1;
    if (this.errorSamples.length < ERROR_SAMPLES_MAX) this.errorSamples.push(detail);
  }

  connectionDone(conn: LoadConnection): void {
    if (conn.plan.role === ROLE_PRODUCER || conn.plan.role === ROLE_CYCLE) {
      // Publish this thread's INSERTED count before saying the producer is done, so a consumer
      // that sees every producer done also sees every insert (mixed mode's end condition).
      this.publishTotals();
      Atomics.add(this.cb.i32, kProducersDone, 1);
    }
    this.active--;
    Atomics.add(this.cb.i32, threadSlot(this.task.thread, kThreadConnsDone), 1);
    if (this.active === 0 && this.resolveDone !== null) this.resolveDone();
  }

  private onPublishTick(): void {
    this.nowMs = performance.now();
    this.publish();
    // The main thread may lengthen the window before it ends (see run.ts, minWaves).
    if (!this.stopping) this.deadlineMs = this.baseDeadlineMs + Atomics.load(this.cb.i32, kExtraMs);
    const stallMs = Math.max(STALL_MS_MIN, 2000 * this.options.reserveTimeoutS + 5000);
    if (this.active > 0 && this.nowMs - this.lastReadMs > stallMs) {
      for (const c of this.conns) c.failIfBusy(`no reply for ${(stallMs / 1000).toFixed(0)} s: the server stalled`);
    }
    if (Atomics.load(this.cb.i32, kStop) === 1) this.beginStop();
    this.checkDeadline();
    if (this.task.mode === 'mixed' && !this.consumersMayStop) {
      const i32 = this.cb.i32;
      if (
        Atomics.load(i32, kProducersDone) === this.task.producersTotal &&
        Atomics.load(i32, kDeletedTotal) >= Atomics.load(i32, kInsertedTotal)
      ) {
        this.consumersMayStop = true;
        for (const c of this.conns) c.fill();
      }
    }
  }

  private onRateTick(): void {
    this.nowMs = performance.now();
    this.checkDeadline();
    if (this.stopping || this.producers.length === 0) return;
    const due = Math.floor((this.nowMs - this.goMs) * this.ratePerMs);
    const intervalMs = 1 / this.ratePerMs;
    const n = this.producers.length;
    // Only the connections that got a due put are refilled: at 1 ms ticks, touching all of
    // 1000 connections every time would cost more than the puts.
    const touchedFirst = this.rateRoundRobin;
    const touched = Math.min(n, due - this.rateIssued);
    while (this.rateIssued < due) {
      const conn = this.producers[this.rateRoundRobin]!;
      this.rateRoundRobin = (this.rateRoundRobin + 1) % n;
      if (!conn.queueDue(this.goMs + this.rateIssued * intervalMs)) this.rateMissed++;
      this.rateIssued++;
    }
    for (let i = 0; i < touched; i++) {
      const c = this.producers[(touchedFirst + i) % n]!;
      c.fill();
      c.flush();
    }
  }

  private publishTotals(): void {
    const i32 = this.cb.i32;
    Atomics.add(i32, kInsertedTotal, this.total.puts - this.publishedPuts);
    this.publishedPuts = this.total.puts;
    Atomics.add(i32, kDeletedTotal, this.total.deletes - this.publishedDeletes);
    this.publishedDeletes = this.total.deletes;
  }

  private publish(): void {
    const i32 = this.cb.i32;
    const t = this.task.thread;
    Atomics.store(i32, threadSlot(t, kThreadJobs), this.total.jobs);
    Atomics.store(i32, threadSlot(t, kThreadCommands), this.total.commands);
    Atomics.store(i32, threadSlot(t, kThreadPuts), this.total.puts);
    Atomics.store(i32, threadSlot(t, kThreadReserves), this.total.reserves);
    Atomics.store(i32, threadSlot(t, kThreadDeletes), this.total.deletes);
    Atomics.store(i32, threadSlot(t, kThreadErrors), this.total.errors);
    this.publishTotals();
  }

  private result(): SliceResult {
    return {
      thread: this.task.thread,
      total: this.total,
      measured: this.measured,
      histograms: { put: this.hPut.slots, reserve: this.hReserve.slots, delete: this.hDelete.slots },
      ledger: this.ledger.export(),
      corruptBodies: this.corruptBodies,
      errorsByKind: this.errorsByKind,
      errorSamples: this.errorSamples,
      lastCompletionEpochMs: this.lastCompletionMs < 0 ? 0 : performance.timeOrigin + this.lastCompletionMs,
      rateMissed: this.rateMissed,
      connectionsFailed: this.connectionsFailed,
      idMismatches: this.idMismatches,
    };
  }
}

export async function runSlice(task: SliceTask): Promise<SliceResult> {
  return new Slice(task).run();
}
