// One load thread's share of a run: a slice of the connections, driven by one event loop.
//
// Hot path, per read: one performance.now(), the reply scanner over the thread's shared read
// buffer (net's `onread`: no Buffer per read), a switch per reply that updates plain counters, a
// histogram and the ledger, and appends follow-up commands to the connection's output buffer;
// then one socket.write for everything the read produced. In-flight commands are kept per
// connection in typed-array rings (kind, send time, job sequence), because beanstalk answers
// each connection's commands in order.
//
// Ending a run cleanly matters as much as running it: the ledger must be exact. After the
// deadline a connection starts no new job but still deletes every job it has reserved, and waits
// for every reply; consumers use reserve-with-timeout so a blocked reserve returns within
// `reserveTimeoutS`. Jobs put but not yet reserved stay queued for the final drain.
//
// The same loop speaks workq (options.protocol): add for put, lease for reserve, complete for
// delete, with workq.ts's encoders and reply scanner; the code below says put/reserve/delete.

import net from 'node:net';
import { Histogram } from './histogram.ts';
import { Ledger, type LedgerColumns } from './ledger.ts';
import {
  planConnection,
  ROLE_CONSUMER,
  ROLE_CYCLE,
  ROLE_DRAIN,
  ROLE_PRODUCER,
  COMMAND_WORDS,
  type ConnectionPlan,
  type LoadMode,
  type LoadOptions,
} from './options.ts';
import {
  CMD_DELETE_PREFIX,
  makePutTemplate,
  readBodySeq,
  reserveWithTimeout,
  SEQ_DIGITS,
  tubeName,
  writeDecimal,
  writeFixedDigits,
  type PutTemplate,
} from './protocol.ts';
import {
  REPLY_DEADLINE_SOON,
  REPLY_DELETED,
  REPLY_GARBLED,
  REPLY_INSERTED,
  REPLY_NAMES,
  REPLY_RESERVED,
  REPLY_TIMED_OUT,
  REPLY_USING,
  REPLY_WATCHING,
  REPLY_WQ_CLIENT_ERROR,
  REPLY_WQ_JOB,
  REPLY_WQ_OK,
  REPLY_WQ_SERVER_ERROR,
  REPLY_WQ_TIMEOUT,
  ReplyScanner,
  type FrameScanner,
  type ReplySink,
} from './scanner.ts';
import { COMPLETE_ID_OFFSET, COMPLETE_TEMPLATE, JobIds, leaseCommand, makeAddTemplate, UUID_BYTES, WorkqReplyScanner } from './workq.ts';
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

// Kinds of in-flight commands.
const CMD_PUT = 1;
const CMD_RESERVE = 2; //      reserve-with-timeout 0: answered at once, RESERVED or TIMED_OUT
const CMD_RESERVE_WAIT = 5; // reserve-with-timeout T: a consumer waiting for its tube to refill
const CMD_DELETE = 3;
const CMD_SETUP = 4; // use / watch / ignore, before the run starts

/** Read buffer shared by all connections of the thread. Why 256 KiB: 16 pipelined 4 KiB replies fit twice. */
const READ_BUFFER_BYTES = 256 * 1024;
/** Connections opened at once; more would overflow the server's accept backlog for nothing. */
const CONNECT_BATCH = 64;
/** How often counters are published for the main thread, and stop conditions polled. */
const PUBLISH_INTERVAL_MS = 20;
/** Open-loop: due puts a connection may queue before further ones are counted as missed. */
const BACKLOG_MAX = 1 << 16;
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

/** What one connection sends: beanstalk's are shared by the slice, workq's name the connection's jobs. */
interface WireCommands {
  /** null for a connection that never puts. */
  put: PutTemplate | null;
  /** workq: offset of the job id inside put.bytes; -1 for beanstalk. */
  idOffset: number;
  reserveNow: Buffer;
  reserveWait: Buffer;
  /** Sent once before the run; each must be answered USING / WATCHING (workq: -TIMEOUT). */
  setup: string[];
}

function zeroCounters(): SliceCounters {
  return { jobs: 0, commands: 0, puts: 0, reserves: 0, deletes: 0, timedOut: 0, errors: 0, reads: 0, writes: 0 };
}

export class SliceFailure extends Error {
  readonly code = 'ERR_BENCH_SLICE';
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
  /** put, reserve, delete, setup, reserve-wait in the protocol's words, by CMD_*. */
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
    const words = COMMAND_WORDS[this.options.protocol];
    this.commandNames = ['', words.put, words.reserve, words.delete, 'setup', `${words.reserve}-wait`];
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

  /** The commands of a connection with this plan. */
  commandsFor(plan: ConnectionPlan): WireCommands {
    const { nonce } = this.task;
    if (!this.workq) {
      const setup: string[] = [];
      if (plan.useTube >= 0) setup.push(`use ${tubeName(nonce, plan.useTube)}\r\n`);
      for (const t of plan.watchTubes) setup.push(`watch ${tubeName(nonce, t)}\r\n`);
      if (plan.watchTubes.length > 0) setup.push('ignore default\r\n');
      return { put: this.putTemplate!, idOffset: -1, reserveNow: this.reserveNowCmd, reserveWait: this.reserveWaitCmd, setup };
    }
    const o = this.options;
    const put = plan.useTube < 0 ? null : makeAddTemplate(this.ids!, nonce, tubeName(nonce, plan.useTube), o.bodyBytes, Math.round(o.ttrS * 1000), Math.round(o.ttlS * 1000));
    const names = plan.watchTubes.map((t) => tubeName(nonce, t));
    return {
      put,
      idOffset: put === null ? -1 : put.idOffset,
      reserveNow: names.length === 0 ? Buffer.alloc(0) : leaseCommand(names, 0),
      reserveWait: names.length === 0 ? Buffer.alloc(0) : leaseCommand(names, Math.round(o.reserveTimeoutS * 1000)),
      // workq has no set-up; one lease of a name nobody adds to checks that the server speaks it.
      setup: [`lease bench.${nonce}.probe 0\r\n`],
    };
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

class LoadConnection implements ReplySink {
  readonly slice: Slice;
  readonly index: number;
  readonly plan: ConnectionPlan;
  private readonly pipeline: number;
  private socket: net.Socket | null = null;
  private readonly scanner: FrameScanner;
  /** The same scanner when it reads workq (the leased job's id, error texts). */
  private readonly wq: WorkqReplyScanner | null;
  private readonly wire: WireCommands;
  // In-flight commands, oldest at `head`.
  private readonly kinds: Uint8Array;
  private readonly sentAtMs: Float64Array;
  private readonly seqs: Float64Array;
  private readonly mask: number;
  private head = 0;
  private count = 0;
  private out: Buffer;
  private outBytes = 0;
  // Open-loop backlog: intended send times of due puts not yet sent.
  private backlog = new Float64Array(0);
  private backlogHead = 0;
  private backlogCount = 0;
  private setupPending = 0;
  private setupDone: (() => void) | null = null;
  private setupFailed: ((err: Error) => void) | null = null;
  /** Producer side: no more puts will be started. */
  private producerDone = false;
  /** Drain: TIMED_OUT seen, every watched tube is empty. */
  private exhausted = false;
  /** Reserves of either kind in flight. */
  private reservesInFlight = 0;
  /** Consumer: its last reserve found the tubes empty; wait with one blocking reserve. */
  private wantWait = false;
  private done = false;

  constructor(slice: Slice, index: number, plan: ConnectionPlan) {
    this.slice = slice;
    this.index = index;
    this.plan = plan;
    this.pipeline = slice.task.pipeline;
    this.wq = slice.workq ? new WorkqReplyScanner(this) : null;
    this.scanner = this.wq ?? new ReplyScanner(this);
    this.wire = slice.commandsFor(plan);
    // Ring capacity: the pipeline plus setup commands.
    let capacity = 1;
    while (capacity < this.pipeline + this.wire.setup.length) capacity *= 2;
    this.kinds = new Uint8Array(capacity);
    this.sentAtMs = new Float64Array(capacity);
    this.seqs = new Float64Array(capacity);
    this.mask = capacity - 1;
    // Worst case between two flushes: a follow-up for each reply plus a refill of each slot.
    this.out = Buffer.allocUnsafeSlow(2 * this.pipeline * Math.max(this.wire.put?.bytes.length ?? 0, 64) + 4096);
  }

  open(): Promise<void> {
    const o = this.slice.options;
    return new Promise<void>((resolve, reject) => {
      this.setupDone = resolve;
      this.setupFailed = reject;
      const socket = net.connect({
        host: o.host,
        port: o.port,
        noDelay: true,
        onread: {
          buffer: this.slice.readBuffer,
          callback: (nread: number, buf: Uint8Array): boolean => {
            this.onRead(nread, buf);
            return true;
          },
        },
      });
      this.socket = socket;
      socket.setTimeout(o.connectTimeoutMs, () => {
        socket.destroy(new Error(`connect/setup to ${o.host}:${o.port} timed out after ${o.connectTimeoutMs} ms`));
      });
      socket.once('connect', () => this.sendSetup());
      socket.on('error', (err) => this.onSocketError(err));
      socket.on('close', () => this.onSocketClose());
    });
  }

  destroy(): void {
    this.done = true;
    this.socket?.destroy();
  }

  private sendSetup(): void {
    const lines = this.wire.setup;
    this.setupPending = lines.length;
    for (let i = 0; i < lines.length; i++) this.push(CMD_SETUP, 0, 0);
    if (lines.length === 0) {
      this.onSetupComplete();
      return;
    }
    this.socket!.write(lines.join(''));
  }

  private onSetupComplete(): void {
    this.socket!.setTimeout(0);
    const done = this.setupDone;
    this.setupDone = null;
    this.setupFailed = null;
    done?.();
  }

  private onSocketError(err: Error): void {
    if (this.setupFailed !== null) {
      const fail = this.setupFailed;
      this.setupFailed = null;
      this.setupDone = null;
      fail(new SliceFailure(`connection ${this.index} to ${this.slice.options.host}:${this.slice.options.port}: ${err.message}`));
      return;
    }
    if (!this.done) this.slice.error('socket', `connection ${this.index}: ${err.message}`);
  }

  private onSocketClose(): void {
    if (this.setupFailed !== null) {
      this.onSocketError(new Error('closed by the server during setup'));
      return;
    }
    if (this.done) return;
    this.slice.error('socket', `connection ${this.index}: closed by the server with ${this.count} commands in flight`);
    this.slice.connectionsFailed++;
    this.done = true;
    this.slice.connectionDone(this);
  }

  private onRead(nread: number, buf: Uint8Array): void {
    const s = this.slice;
    s.nowMs = performance.now();
    s.lastReadMs = s.nowMs;
    s.total.reads++;
    s.checkDeadline();
    this.scanner.feed(buf, 0, nread);
    if (this.done) return;
    this.fill();
    this.flush();
  }

  onReply(kind: number, arg: number, body: Uint8Array, bodyStart: number, bodyKeptBytes: number, bodyBytes: number): void {
    const s = this.slice;
    if (this.done) return; // failed earlier in this read; the rest of the read is moot
    if (kind === REPLY_GARBLED || this.count === 0) {
      this.fail(kind === REPLY_GARBLED ? 'the reply stream lost its framing' : `unexpected ${REPLY_NAMES[kind]} with nothing in flight`);
      return;
    }
    const slot = this.head;
    const cmd = this.kinds[slot]!;
    const sentAt = this.sentAtMs[slot]!;
    const seq = this.seqs[slot]!;
    this.head = (slot + 1) & this.mask;
    this.count--;
    if (cmd === CMD_SETUP) {
      // Each scanner reports only its own protocol's replies, so either protocol's is accepted.
      if (kind !== REPLY_USING && kind !== REPLY_WATCHING && kind !== REPLY_WQ_TIMEOUT) {
        this.fail(`setup command answered ${this.replyName(kind)}`);
        return;
      }
      if (--this.setupPending === 0) this.onSetupComplete();
      return;
    }
    s.total.commands++;
    if (s.inWindow()) s.measured.commands++;
    switch (cmd) {
      case CMD_PUT:
        if (kind === REPLY_INSERTED || kind === REPLY_WQ_OK) {
          s.ledger.markInserted(seq);
          s.total.puts++;
          if (s.inWindow()) s.measured.puts++;
          s.latency(s.hPut, sentAt);
          if (this.plan.role === ROLE_CYCLE) {
            // The job stays queued for the final drain once the run is over. While the run
            // goes on, this reserve always finds a job: every reserve of the tube group follows
            // an acknowledged put into it, so ready jobs >= reserves being processed.
            if (!s.stopping) this.push(CMD_RESERVE, 0, s.nowMs);
          } else if (s.putIsJob) {
            s.jobDone();
          }
        } else {
          this.unexpected(cmd, kind);
        }
        return;
      case CMD_RESERVE:
      case CMD_RESERVE_WAIT:
        this.reservesInFlight--;
        if (kind === REPLY_RESERVED || kind === REPLY_WQ_JOB) {
          s.total.reserves++;
          if (s.inWindow()) s.measured.reserves++;
          // A waiting reserve's time is the tube's emptiness, not the server's latency.
          if (cmd === CMD_RESERVE) s.latency(s.hReserve, sentAt);
          this.wantWait = false;
          const jobSeq = readBodySeq(body, bodyStart, bodyKeptBytes, this.slice.nonceBytes);
          if (jobSeq < 0) {
            s.ledger.foreign++;
          } else {
            s.ledger.markReserved(jobSeq);
            if (bodyBytes !== s.options.bodyBytes) s.corruptBodies++;
            if (this.wq !== null && !s.ids!.matches(this.wq.id, 0, jobSeq)) s.idMismatches++;
          }
          // Always delete what we reserved, even after the deadline: a reserved job left behind
          // would come back to the final drain and read as a duplicate.
          if (this.wq === null) this.pushDelete(arg, jobSeq);
          else this.pushComplete(this.wq.id, jobSeq);
        } else if (kind === REPLY_TIMED_OUT || kind === REPLY_DEADLINE_SOON || kind === REPLY_WQ_TIMEOUT) {
          s.total.timedOut++;
          // Drain: the tubes are empty. Consumer: wait for more (fill sends the waiting
          // reserve). Cycle: the chain ends and its slot starts a new put.
          if (this.plan.role === ROLE_DRAIN) this.exhausted = true;
          else if (this.plan.role === ROLE_CONSUMER) this.wantWait = true;
        } else {
          this.unexpected(cmd, kind);
        }
        return;
      case CMD_DELETE:
        if (kind === REPLY_DELETED || kind === REPLY_WQ_OK) {
          s.total.deletes++;
          if (s.inWindow()) s.measured.deletes++;
          s.latency(s.hDelete, sentAt);
          if (seq >= 0) s.ledger.markDeleted(seq);
          s.jobDone();
        } else {
          this.unexpected(cmd, kind);
        }
        return;
    }
  }

  /** Starts jobs in free pipeline slots, or finishes the connection when it has nothing left to do. */
  fill(): void {
    const s = this.slice;
    if (this.done || !s.running) return;
    const role = this.plan.role;
    if (role === ROLE_PRODUCER || role === ROLE_CYCLE) {
      while (this.count < this.pipeline && !this.producerDone) {
        if (s.stopping) {
          this.producerDone = true;
          break;
        }
        let sentAt = s.nowMs;
        if (s.rateLimited) {
          if (this.backlogCount === 0) break;
          sentAt = this.backlog[this.backlogHead]!;
          this.backlogHead = (this.backlogHead + 1) % this.backlog.length;
          this.backlogCount--;
        }
        const seq = s.nextSeq();
        if (seq < 0) {
          this.producerDone = true;
          break;
        }
        this.pushPut(seq, sentAt);
      }
      if (this.count === 0 && this.producerDone) this.finish();
    } else if (role === ROLE_CONSUMER) {
      const stop = s.stopping || s.consumersMayStop;
      if (!stop) {
        if (!this.wantWait) {
          while (this.count < this.pipeline) this.push(CMD_RESERVE, 0, s.nowMs);
        } else if (this.reservesInFlight === 0) {
          // Alone: every delete sent so far is ahead of it, and none is sent behind it until
          // it returns.
          this.push(CMD_RESERVE_WAIT, 0, s.nowMs);
        }
      }
      if (this.count === 0 && stop) this.finish();
    } else if (role === ROLE_DRAIN) {
      const stop = s.stopping || this.exhausted;
      while (this.count < this.pipeline && !stop) this.push(CMD_RESERVE, 0, s.nowMs);
      if (this.count === 0 && stop) this.finish();
    }
  }

  /** Open loop: queues one due put; false if the backlog is full (the put is dropped). */
  queueDue(intendedMs: number): boolean {
    if (this.producerDone || this.done) return true;
    if (this.backlogCount === this.backlog.length) {
      if (this.backlog.length >= BACKLOG_MAX) return false;
      const grown = new Float64Array(Math.max(1024, this.backlog.length * 2));
      for (let i = 0; i < this.backlogCount; i++) grown[i] = this.backlog[(this.backlogHead + i) % this.backlog.length]!;
      this.backlog = grown;
      this.backlogHead = 0;
    }
    this.backlog[(this.backlogHead + this.backlogCount) % this.backlog.length] = intendedMs;
    this.backlogCount++;
    return true;
  }

  flush(): void {
    if (this.outBytes === 0 || this.socket === null) return;
    const socket = this.socket;
    socket.write(this.out.subarray(0, this.outBytes));
    this.slice.total.writes++;
    this.outBytes = 0;
    // A write that completed synchronously leaves nothing queued and the buffer can be reused;
    // otherwise the socket still holds it, and the next batch goes into a fresh one.
    if (socket.writableLength !== 0) this.out = Buffer.allocUnsafeSlow(this.out.length);
  }

  private push(cmd: number, seq: number, sentAtMs: number): void {
    const slot = (this.head + this.count) & this.mask;
    this.kinds[slot] = cmd;
    this.seqs[slot] = seq;
    this.sentAtMs[slot] = sentAtMs;
    this.count++;
    if (cmd === CMD_RESERVE) {
      this.append(this.wire.reserveNow);
      this.reservesInFlight++;
    } else if (cmd === CMD_RESERVE_WAIT) {
      this.append(this.wire.reserveWait);
      this.reservesInFlight++;
    }
  }

  private pushPut(seq: number, sentAtMs: number): void {
    const t = this.wire.put!;
    const at = this.reserveOut(t.bytes.length);
    this.out.set(t.bytes, at);
    writeFixedDigits(this.out, at + t.seqOffset + SEQ_DIGITS, SEQ_DIGITS, seq);
    if (this.wire.idOffset >= 0) this.slice.ids!.writeVarying(this.out, at + this.wire.idOffset, seq);
    this.outBytes = at + t.bytes.length;
    this.push(CMD_PUT, seq, sentAtMs);
  }

  private pushDelete(id: number, seq: number): void {
    let at = this.reserveOut(CMD_DELETE_PREFIX.length + 22);
    this.out.set(CMD_DELETE_PREFIX, at);
    at = writeDecimal(this.out, at + CMD_DELETE_PREFIX.length, id);
    this.out[at++] = 13;
    this.out[at++] = 10;
    this.outBytes = at;
    this.push(CMD_DELETE, seq, this.slice.nowMs);
  }

  /** workq: `complete <id> 0` with the id the lease reply carried. */
  private pushComplete(id: Uint8Array, seq: number): void {
    const at = this.reserveOut(COMPLETE_TEMPLATE.length);
    this.out.set(COMPLETE_TEMPLATE, at);
    for (let i = 0; i < UUID_BYTES; i++) this.out[at + COMPLETE_ID_OFFSET + i] = id[i]!;
    this.outBytes = at + COMPLETE_TEMPLATE.length;
    this.push(CMD_DELETE, seq, this.slice.nowMs);
  }

  private append(bytes: Uint8Array): void {
    const at = this.reserveOut(bytes.length);
    this.out.set(bytes, at);
    this.outBytes = at + bytes.length;
  }

  /** Returns the offset where `bytes` more bytes can be written. */
  private reserveOut(bytes: number): number {
    if (this.outBytes + bytes > this.out.length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(this.out.length * 2, this.outBytes + bytes));
      grown.set(this.out.subarray(0, this.outBytes));
      this.out = grown;
    }
    return this.outBytes;
  }

  /** A reply's name; a workq error with its text. */
  private replyName(kind: number): string {
    if (this.wq !== null && (kind === REPLY_WQ_CLIENT_ERROR || kind === REPLY_WQ_SERVER_ERROR)) return this.wq.errorText;
    return REPLY_NAMES[kind]!;
  }

  private unexpected(cmd: number, kind: number): void {
    const command = this.slice.commandNames[cmd];
    this.slice.error(`${command}:${REPLY_NAMES[kind]}`, `connection ${this.index}: ${command} answered ${this.replyName(kind)}`);
  }

  /** Gives up on this connection if it is still waiting for replies. */
  failIfBusy(reason: string): void {
    if (!this.done && this.count > 0) this.fail(reason);
  }

  private fail(reason: string): void {
    if (this.setupFailed !== null) {
      this.socket?.destroy(new Error(reason));
      return;
    }
    this.slice.error('protocol', `connection ${this.index}: ${reason}`);
    this.slice.connectionsFailed++;
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.socket?.destroy();
    this.slice.connectionDone(this);
  }
}

export async function runSlice(task: SliceTask): Promise<SliceResult> {
  return new Slice(task).run();
}
