// The beanstalk protocol's server-wide state: its connections, the counters `stats` reports that
// are not the shards' (commands, jobs, producers, workers, connections, waiting reserves), and
// drain mode. The counters live in shared memory (ServerCounters), a row per thread, so that
// connections served on several threads count into one `stats`.

import type { HeldJobs } from './held.ts';
import type { FanAttempt } from '../../route/fanin.ts';
import type { JobHolder, Router } from '../../route/router.ts';
import type { Multiset, Tube } from '../../route/tubes.ts';
import { CMD_COUNT } from './commands.ts';

// A row's counters (Float64 indices; the command counts come first, at their CMD_* codes).
/** Jobs made (stats total-jobs): puts, and the API's copies. */
export const ROW_TOTAL_JOBS = CMD_COUNT;
/** Connections that have put (current-producers). */
export const ROW_PRODUCERS = CMD_COUNT + 1;
/** Connections that have reserved (current-workers). */
export const ROW_WORKERS = CMD_COUNT + 2;
/** Connections this thread accepted (total-connections). */
export const ROW_TOTAL_CONNECTIONS = CMD_COUNT + 3;
/**
 * Connections this thread accepted less those it closed (current-connections, summed). A
 * connection counts where it is accepted and is uncounted where it closes, so a connection
 * thread's own is below 0 (the main thread accepts what it serves): only the sum is a count.
 */
export const ROW_CONNECTIONS = CMD_COUNT + 4;
/** Reserves waiting in shards (current-waiting, with ROW_FAN_WAITING). */
export const ROW_PARKED = CMD_COUNT + 5;
/** Reserves over several shards waiting, counted by their connection's thread (current-waiting). */
export const ROW_FAN_WAITING = CMD_COUNT + 6;
/** Connections this thread serves now: accepted or handed to it, less those it handed on or closed (not in stats). */
export const ROW_SERVING = CMD_COUNT + 7;
const ROW_FIELDS = CMD_COUNT + 8;
/** A row's length in Float64s: a whole number of 64-byte lines, so rows share no cache line. */
const ROW_LEN = Math.ceil(ROW_FIELDS / 8) * 8;
/** The shared word before the rows: 0, or 1 in drain mode. */
const HEAD_BYTES = 64;
const W_DRAINING = 0;

/**
 * The server-wide counters in a SharedArrayBuffer: one row of Float64 counters per thread
 * (`threads` rows, 64 by default; row 0 is the main thread's), and the drain flag as one shared
 * Int32 word. A thread writes only its own row (`row`, plain typed-array writes: nobody else
 * writes it); readers add up every row (sum). On another thread: ServerCounters.attach(shared, n).
 */
export class ServerCounters {
  static readonly MAX_THREADS = 64;
  /** The memory to hand to another thread. */
  readonly shared: SharedArrayBuffer;
  /** This thread's row index. */
  readonly thread: number;
  readonly threads: number;
  /** This thread's row: ROW_* counters (only this thread writes it). */
  readonly row: Float64Array;
  /** The first CMD_COUNT counters of this thread's row, by CMD_* code (one increment per command). */
  readonly cmdCounts: Float64Array;
  private readonly rows: Float64Array;
  private readonly words: Int32Array;

  private constructor(shared: SharedArrayBuffer, thread: number) {
    const threads = (shared.byteLength - HEAD_BYTES) / (ROW_LEN * 8);
    if (!Number.isInteger(threads) || threads < 1) throw new TypeError('ServerCounters: not the memory of a ServerCounters');
    if (!(Number.isInteger(thread) && thread >= 0 && thread < threads)) {
      throw new RangeError(`ServerCounters: thread ${thread} is not in 0..${threads - 1}`);
    }
    this.shared = shared;
    this.thread = thread;
    this.threads = threads;
    this.words = new Int32Array(shared, 0, HEAD_BYTES / 4);
    this.rows = new Float64Array(shared, HEAD_BYTES, threads * ROW_LEN);
    this.row = this.rows.subarray(thread * ROW_LEN, (thread + 1) * ROW_LEN);
    this.cmdCounts = this.row.subarray(0, CMD_COUNT);
  }

  /** New counters, all 0, with `threads` rows; this thread has row 0. */
  static create(threads: number = ServerCounters.MAX_THREADS): ServerCounters {
    if (!(Number.isInteger(threads) && threads >= 1 && threads <= ServerCounters.MAX_THREADS)) {
      throw new RangeError(`ServerCounters: ${threads} threads (1..${ServerCounters.MAX_THREADS})`);
    }
    return new ServerCounters(new SharedArrayBuffer(HEAD_BYTES + threads * ROW_LEN * 8), 0);
  }

  /** The counters in `shared` (another ServerCounters' shared), writing row `thread`. */
  static attach(shared: SharedArrayBuffer, thread: number): ServerCounters {
    if (!(shared instanceof SharedArrayBuffer)) throw new TypeError('ServerCounters.attach: not a SharedArrayBuffer');
    return new ServerCounters(shared, thread);
  }

  /** Counter `field` (ROW_* or a CMD_* code) added up over every thread's row. */
  sum(field: number): number {
    const rows = this.rows;
    let n = 0;
    for (let at = field; at < rows.length; at += ROW_LEN) n += rows[at];
    return n;
  }

  /** Row `thread` (to read; a test may write another thread's row by hand). */
  rowOf(thread: number): Float64Array {
    return this.rows.subarray(thread * ROW_LEN, (thread + 1) * ROW_LEN);
  }

  /** Drain mode (SIGUSR1: puts answer DRAINING), one word shared by every thread. */
  get draining(): boolean {
    return Atomics.load(this.words, W_DRAINING) !== 0;
  }

  set draining(on: boolean) {
    Atomics.store(this.words, W_DRAINING, on ? 1 : 0);
  }
}

/** What the server keeps of a connection (the Session). */
export interface BeanstalkConn extends JobHolder {
  readonly connId: number;
  readonly isProducer: boolean;
  readonly isWorker: boolean;
  readonly reserveAttempt: FanAttempt<Tube> | null;
  readonly watch: Multiset<Tube>;
  readonly use: Tube;
  /** The jobs it holds, in the order it reserved them. */
  readonly held: HeldJobs;
  close(): void;
}

/** What `stats` says of the server as a whole, whichever thread answers. */
export interface ServerIdentity {
  readonly startedMs: number;
  readonly instanceId: string;
}

export class BeanstalkServer {
  readonly router: Router;
  /** This thread's connections. */
  readonly sessions = new Map<number, BeanstalkConn>();
  /** Every thread's counters; this thread writes `row` (and `cmdCounts`, a view of it). */
  readonly counters: ServerCounters;
  /** This thread's row of counters (ROW_*): `server.row[ROW_PRODUCERS]++`. */
  readonly row: Float64Array;
  /** This thread's command counts, by CMD_* code (part of `row`). */
  readonly cmdCounts: Float64Array;
  /** When the server started (`stats` uptime) and its `stats` id: the same on every thread of one server. */
  readonly startedMs: number;
  readonly instanceId: string;
  /** Connections this thread accepted, took over from another and closed (workDone). */
  private connWork = 0;

  /**
   * Work this thread has done, for the memory reclaim's burst test: the commands it read (every
   * kind) and the connections it accepted, took over and closed (5,000 connections that send
   * nothing are a burst too: each leaves garbage and heap growth, and accepting them barely shows
   * on the event loop; closing them leaves garbage again: +6 MiB for 5,000, measured).
   */
  workDone(): number {
    let n = this.connWork;
    for (let i = 0; i < this.cmdCounts.length; i++) n += this.cmdCounts[i];
    return n;
  }

  /**
   * `counters`: the shared counters (default: new ones, this thread on row 0). `identity`: the
   * main thread's (a connection thread's server is the same server; default: a new one).
   */
  constructor(router: Router, counters: ServerCounters = ServerCounters.create(), identity?: ServerIdentity) {
    this.router = router;
    this.startedMs = identity?.startedMs ?? Date.now();
    this.instanceId = identity?.instanceId ?? process.getBuiltinModule('node:crypto').randomBytes(8).toString('hex');
    this.counters = counters;
    this.row = counters.row;
    this.cmdCounts = counters.cmdCounts;
    // The fan-in counts its waiting reserves in its own field: make that field this row's counter.
    const row = this.row;
    const fan = router.reserves.fan;
    row[ROW_FAN_WAITING] += fan.waitingCount;
    Object.defineProperty(fan, 'waitingCount', {
      get: () => row[ROW_FAN_WAITING],
      set: (n: number) => {
        row[ROW_FAN_WAITING] = n;
      },
      configurable: true,
      enumerable: true,
    });
  }

  // Every thread's sums (stats).

  get totalJobs(): number {
    return this.counters.sum(ROW_TOTAL_JOBS);
  }

  get producers(): number {
    return this.counters.sum(ROW_PRODUCERS);
  }

  get workers(): number {
    return this.counters.sum(ROW_WORKERS);
  }

  get totalConnections(): number {
    return this.counters.sum(ROW_TOTAL_CONNECTIONS);
  }

  /** Open connections (stats current-connections). */
  get connections(): number {
    return this.counters.sum(ROW_CONNECTIONS);
  }

  /** Connections blocked in a reserve, in a shard or in the fan-in (stats current-waiting). */
  get waiting(): number {
    return this.counters.sum(ROW_PARKED) + this.counters.sum(ROW_FAN_WAITING);
  }

  /** Command `cmd`'s count over every thread. */
  cmdCount(cmd: number): number {
    return this.counters.sum(cmd);
  }

  /** SIGUSR1: puts answer DRAINING (one shared word). */
  get draining(): boolean {
    return this.counters.draining;
  }

  set draining(on: boolean) {
    this.counters.draining = on;
  }

  // A connection's counts. It is counted once, by the thread that accepts it (as beanstalkd counts
  // at accept), and uncounted once, by the thread that closes it: with connection threads the main
  // thread accepts every connection and hands it to the thread that serves it (src/net/threads.ts).
  // A handover writes no count. A sum over rows each written by its own thread is exact only if
  // each event writes one row: an uncount by the handing thread and a count by the taking one are
  // two events, with a moment between them when the connection counts twice or not at all (and
  // the taking thread may answer its first line, a `stats` say, in that moment). Without
  // connection threads, the main thread accepts and closes every connection itself.

  /** A connection this thread accepted: counted here, and served here until handed over. */
  accepted(): void {
    this.row[ROW_TOTAL_CONNECTIONS]++;
    this.row[ROW_CONNECTIONS]++;
    this.row[ROW_SERVING]++;
    this.connWork++;
  }

  /** A connection this thread accepted, handed to another thread: still counted; that thread uncounts it at its close. */
  handedOver(): void {
    this.row[ROW_SERVING]--;
  }

  /** A connection another thread accepted (and counted) handed to this one: served here, not counted again. */
  tookOver(): void {
    this.row[ROW_SERVING]++;
    this.connWork++;
  }

  /** A connection this thread serves has closed (`closed` calls this for one with a session): uncounted here. */
  gone(): void {
    this.row[ROW_CONNECTIONS]--;
    this.row[ROW_SERVING]--;
    this.connWork++;
  }

  /** A new connection this thread accepted (made with a connection id from Router.newConnId). */
  opened(s: BeanstalkConn): void {
    this.accepted();
    this.sessions.set(s.connId, s);
    this.router.conns.set(s.connId, s);
  }

  /** A new connection another thread accepted (and counted) and handed to this one (src/net/site.ts). */
  adopted(s: BeanstalkConn): void {
    this.tookOver();
    this.sessions.set(s.connId, s);
    this.router.conns.set(s.connId, s);
  }

  /** Connections the thread with counters row `row` serves now: those it accepted or was handed, less those it handed on or closed. */
  servedBy(row: number): number {
    return this.counters.rowOf(row)[ROW_SERVING];
  }

  /** Connections the thread with counters row `row` has closed since the start (those it accepted less its own count of them). */
  closedBy(row: number): number {
    const r = this.counters.rowOf(row);
    return r[ROW_TOTAL_CONNECTIONS] - r[ROW_CONNECTIONS];
  }

  /** The connection has gone: give back what it held, as beanstalkd's connclose does. */
  closed(s: BeanstalkConn): void {
    const router = this.router;
    this.sessions.delete(s.connId);
    this.gone();
    if (s.reserveAttempt !== null) {
      router.reserves.fan.cancel(s.reserveAttempt);
      router.reserves.forget(s.reserveAttempt);
    }
    if (s.isProducer) this.row[ROW_PRODUCERS]--;
    if (s.isWorker) {
      this.row[ROW_WORKERS]--;
      // Give back every job it holds and end a reserve it left waiting in a shard; the request
      // queues behind everything it sent. It stays in router.conns until every shard answered.
      router.releaseHeld(s.connId, s.held.ids());
    } else {
      router.conns.delete(s.connId);
    }
    // beanstalkd's connclose order: the watch set (ms_clear), then the used tube. Tubes freed
    // on the way leave list-tubes in that order.
    s.watch.clear((t) => router.tubes.release(t, 'watching'));
    router.tubes.release(s.use, 'using');
  }

  /** Closes every connection (shutdown). */
  closeAll(): void {
    for (const s of [...this.sessions.values()]) s.close();
  }
}
