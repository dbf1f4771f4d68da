// The main thread's routing layer: which shard holds each tube, workq queue and job, the pool of
// shard threads, the fan-ins of reserve and lease, job ids, and one socket write per
// connection per turn. It speaks no protocol: connections (src/proto/) send requests through it
// and read the replies addressed to them (ReplyTarget); what a shard says happened to queues and
// jobs (a job made ready, a reservation that ran out) it applies here and passes on through small
// interfaces (JobHolder, the fan-ins' clients).

import type { RecoveredJob } from '../../workers/wal/reader.ts';
import type { WalConfig } from '../../workers/wal/wal.ts';
import {
  E_DEFERRED, E_RESERVED, E_TIMED_OUT, E_WAIT_END, E_WQ_DONE, E_WQ_GONE, E_WQ_READY, eventConn, eventReserves,
  eventTube, OP_DROP_TUBE, OP_EXPIRE, OP_RELEASE_CONN, OP_RESTORE, OP_TUBE_NAME, OP_WAL_SYNC, R_OK, replyId, replyKind,
} from '../shared/records.ts';
import { Claims, type ClaimsShared } from '../shared/claims.ts';
import { JobIds, type JobIdsShared } from '../shared/jobids.ts';
import { PollWindow } from '../shared/pollwindow.ts';
import { Preemptions } from '../shared/preempted.ts';
import { Spinner } from '../shared/spin.ts';
import { JobShardMap, OneShard, type JobRouting, type JobShardMapShared } from './jobmap.ts';
import { Reserves } from './reserve.ts';
import { type Mesh, NO_REPLY, type ReplyTarget, ShardPool } from './shards.ts';
import { TubeRegistry } from './tubes.ts';
import { TubeTable, type TubeTableShared } from './tubetable.ts';
import { WorkqRouter } from './workq.ts';

/**
 * How long a connection-serving thread keeps polling its sockets after its last read before it
 * sleeps in the kernel (microseconds; --busy-poll-us), and a shard thread its ring after its last
 * request (workers/shard.ts). A thread asleep in epoll_wait takes tens of
 * microseconds to wake on a virtual machine (measured here: ~45 µs of a 66 µs round trip), more than
 * a command's whole work; a client that sends its next command within this window finds the thread
 * awake. Costs CPU only while reads keep coming: at most this long per read, never when idle.
 */
export const BUSY_POLL_US_DEFAULT = 50;
/** The largest --busy-poll-us and --busy-poll-long-us. */
export const BUSY_POLL_US_MAX = 10_000;
/**
 * The window a connection-serving thread polls with while that costs at most half a core
 * more than the short one and no other task keeps wanting its core (microseconds;
 * --busy-poll-long-us; src/shared/pollwindow.ts): at a steady load, no wake-ups. 0, or no more
 * than --busy-poll-us: the short window always.
 */
export const BUSY_POLL_LONG_US_DEFAULT = 500;
/**
 * The longest a polling thread waits on the CPU between two turns of its loop that read nothing
 * (microseconds; --busy-poll-spin-us; 0: no wait). Each turn allocates an immediate and Node's
 * bookkeeping for it (~300 bytes), and a polling thread turns its loop every microsecond or so: at
 * 10,000 jobs/s 126 MB/s, most of what the server allocates, and a young-generation collection
 * (~0.2 ms) every ~15 ms. Waiting between idle turns cuts the turns. A flat 10 µs wait halved 1×1's
 * rate (a command that comes during a wait waits for it), so the wait grows with the time the
 * thread has been idle: half of it (BUSY_POLL_SPIN_SHARE), at least BUSY_POLL_SPIN_US_FLOOR, at
 * most --busy-poll-spin-us. With 10 µs at 10,000 jobs/s: 52–56 MB/s, collections every ~30 ms,
 * 1×1 unchanged with both on one pinned core each. Unpinned, it costs 1×1 a sixth to a third of its
 * rate (8.4k against 10.0k jobs/s in one run, 7.9k against 12.0k in another; beanstalkd 4.5k). It
 * holds the tail at 10,000 jobs/s: p99 107 µs with it, 174 without, 184 with waits only past the
 * short window (medians of 20 rounds, with the long window and a 16 MB young generation;
 * bench/RESULTS.md, session 21). --busy-poll-spin-us 0 gives 1×1 its rate back.
 */
export const BUSY_POLL_SPIN_US_DEFAULT = 10;
/** The largest --busy-poll-spin-us. */
export const BUSY_POLL_SPIN_US_MAX = 1_000;
/** The share of its idle time so far that a polling thread waits before its next turn. */
export const BUSY_POLL_SPIN_SHARE = 0.5;
/** The shortest wait between idle turns (µs; less if --busy-poll-spin-us is less). */
export const BUSY_POLL_SPIN_US_FLOOR = 2;
/** A wait shorter than this (ms) is not worth a clock read: the turn goes on at once. */
const SPIN_MIN_MS = 0.001;

/**
 * How long a polling thread waits (ms) before its next turn, after `idleMs` without a read, with
 * `leftMs` of its polling window left and --busy-poll-spin-us at `maxMs`: BUSY_POLL_SPIN_SHARE of
 * the idle time, at least BUSY_POLL_SPIN_US_FLOOR, never past `maxMs` or the window; 0 for a wait
 * too short to be worth one.
 */
export function idleWaitMs(idleMs: number, leftMs: number, maxMs: number): number {
  const wait = Math.min(Math.max(idleMs * BUSY_POLL_SPIN_SHARE, BUSY_POLL_SPIN_US_FLOOR / 1000), maxMs, leftMs);
  return wait >= SPIN_MIN_MS ? wait : 0;
}

export interface RouterConfig {
  shards: number;
  /** The shard that runs on this thread, applying its requests in the same turn (default 0); null: every shard on a thread of its own. */
  here?: number | null;
  jobSizeMax: number;
  ringBytes?: number;
  backlogBytes?: number;
  wal?: WalConfig;
  /** For the shard threads' own loggers. */
  logLevel?: string;
  /** Test hook passed to the shards (see workers/shard.ts). */
  walFaults?: SharedArrayBuffer;
  /**
   * Connections on several threads: the mesh of rings between them and which thread this is
   * (see ShardPool), and the server-wide state every thread shares (made by the main thread's
   * Router: its `shared`).
   */
  mesh?: { mesh: Mesh; site: number };
  shared?: RouterShared;
  /** Microseconds this thread keeps polling after a read (default BUSY_POLL_US_DEFAULT; 0: sleep at once). */
  busyPollUs?: number;
  /** The polling window while it costs little more than busyPollUs, microseconds (default BUSY_POLL_LONG_US_DEFAULT; 0: never). */
  busyPollLongUs?: number;
  /** More preemptions than this in a period hold the short window (default LONG_WINDOW_PREEMPTIONS; Infinity: never). */
  busyPollLongPreemptions?: number;
  /** The longest wait between two idle turns of the poll, microseconds (default BUSY_POLL_SPIN_US_DEFAULT; 0: none). */
  busyPollSpinUs?: number;
  /** Microseconds its shard threads keep polling their rings after a request (default 0: sleep at once). */
  shardBusyPollUs?: number;
}

/** The routing state every thread of a server shares, all in SharedArrayBuffers (for workerData). */
export interface RouterShared {
  readonly ids: JobIdsShared;
  readonly claims: ClaimsShared | null; // null with one shard
  readonly jobMap: JobShardMapShared | null; // null with one shard (OneShard)
  readonly tubes: TubeTableShared;
}

/** A connection that holds reserved jobs, and whose reserves may wait in shards. */
export interface JobHolder {
  /**
   * What a shard says about this connection's reserve waiting there (E_RESERVED, E_WAIT_END) or
   * the requests it kept behind it (E_DEFERRED). Connections that never wait in a shard (the
   * API's) leave it out.
   */
  onShardEvent?(shard: number, buf: Buffer, at: number): void;
  /**
   * Job `id`'s reservation ran out (its TTR): the connection no longer holds it. Returns true if
   * the holder keeps it all the same (the API's move, which deletes or releases every job it takes
   * itself): then no OP_EXPIRE is sent and the shard keeps it reserved by that connection.
   */
  jobExpired(id: number): boolean | void;
}

// Job states as the engine numbers them (workers/engine/engine.ts).
const READY = 1;
const RESERVED = 2;

export class Router {
  readonly config: RouterConfig;
  readonly pool: ShardPool;
  readonly tubes: TubeRegistry;
  readonly jobMap: JobRouting;
  /** Reserves over watched tubes on several shards (the fan-in; a reserve over one shard's tubes waits there). */
  readonly reserves: Reserves;
  /** workq: UUIDs, queues, leases across shards, run / result waiters. */
  readonly workq: WorkqRouter;
  /**
   * Connections that may hold reserved jobs or wait in a shard, by connection id; one that closed
   * stays until every shard has released what it held (releaseHeld), so it still reads what
   * those shards say about it until then.
   */
  readonly conns = new Map<number, JobHolder>();
  /** In memory only: puts, and deletes/releases/buries of a held job, are answered before the shard replies. */
  readonly earlyAck: boolean;
  /** Job ids: one server-wide sequence, shared with the shards (they number puts kept behind a waiting reserve). */
  readonly ids: JobIds;
  /** The claims of reserves waiting over several shards, shared with the shards (null: one shard). */
  readonly claims: Claims | null;
  /** Connection ids are numbered per thread: id % sites is the thread (site) that serves it. */
  private nextConnId: number;
  private readonly sites: number;

  // Connections with output this turn: the first dirtyN entries (see flushOutputs).
  private dirty: ({ flush(): void } | null)[] = [];
  private dirtyN = 0;
  private spareDirty: ({ flush(): void } | null)[] = [];
  private flushScheduled = false;

  constructor(config: RouterConfig) {
    this.config = config;
    this.earlyAck = config.wal === undefined;
    this.busyPollMs = (config.busyPollUs ?? BUSY_POLL_US_DEFAULT) / 1000;
    this.spinMaxMs = (config.busyPollSpinUs ?? BUSY_POLL_SPIN_US_DEFAULT) / 1000;
    const longMs = (config.busyPollLongUs ?? BUSY_POLL_LONG_US_DEFAULT) / 1000;
    // This thread's preemptions, which keep the long window off a core other tasks want: opened
    // here, on the thread that serves the connections.
    const preemptions = this.busyPollMs > 0 && longMs > this.busyPollMs ? Preemptions.open() : null;
    this.preemptions = preemptions;
    this.window = new PollWindow(this.busyPollMs, longMs, preemptions === null ? null : () => preemptions.count(), config.busyPollLongPreemptions);
    this.ids = config.shared !== undefined ? JobIds.attach(config.shared.ids) : new JobIds();
    this.claims = config.shards === 1 ? null : config.shared?.claims != null ? Claims.attach(config.shared.claims) : Claims.create();
    this.jobMap =
      config.shards === 1 ? new OneShard() : config.shared?.jobMap != null ? JobShardMap.attach(config.shared.jobMap) : new JobShardMap();
    this.sites = config.mesh !== undefined ? config.mesh.mesh.shards + 1 : 1;
    this.nextConnId = config.mesh !== undefined ? this.sites + config.mesh.site : 1;
    this.pool = new ShardPool(
      {
        shards: config.shards,
        here: config.here === undefined ? 0 : config.here,
        ringBytes: config.ringBytes,
        backlogBytes: config.backlogBytes,
        config: { wal: config.wal, logLevel: config.logLevel, walFaults: config.walFaults, ids: this.ids.shared, claims: this.claims?.shared, busyPollUs: config.shardBusyPollUs ?? 0 },
        tubeName: (tube) => this.tubes.table.name(tube),
        schedule: () => this.flushSoon(),
        mesh: config.mesh,
      },
      {
        event: (shard, buf, at) => this.onEvent(shard, buf, at),
        batchDone: () => this.flushOutputs(),
        fatal: (shard, err) => this.onFatal(shard, err),
      },
    );
    this.workq = new WorkqRouter(this.pool, config.shards, () => this.flushSoon(), this.earlyAck);
    // The tube registry's shared state (this.tubes.shared for another thread).
    this.tubes = new TubeRegistry(config.shared !== undefined ? TubeTable.attach(config.shared.tubes) : TubeTable.create({ shards: config.shards }));
    this.reserves = new Reserves(this.pool, this.claims, () => this.flushSoon());
    this.pool.stepsMatter = () => this.reserves.fan.waitingCount > 0;
    this.tubes.onCreate = (t) => {
      const name = Buffer.from(t.name, 'latin1');
      const w = this.pool.request(t.shard, 0, NO_REPLY, 0);
      w.header(OP_TUBE_NAME, name.length, 0, t.id, 0, 0, 0);
      w.bytes(name, 0, name.length);
    };
    // The id is reused only once the shard's reply says it has dropped the tube: every request
    // naming the old tube was sent before, so none can reach the shard after a reuse.
    const dropped: ReplyTarget = { onShardReply: (_shard, _kind, id) => this.tubes.dropped(id) };
    this.tubes.onFree = (t) => {
      this.pool.request(t.shard, 0, dropped, t.id).header(OP_DROP_TUBE, 0, 0, t.id, 0, 0, 0);
    };
    this.tubes.acquire('default', 'pinned'); // beanstalkd holds the default tube for ever
  }

  // ---- recovery from the write-ahead log ----

  /** A job read back from the log goes to the shard that owns its tube now. */
  restoreJob(j: RecoveredJob): void {
    const t = this.tubes.acquire(j.tube, 'jobs');
    this.jobMap.set(j.id, t.shard);
    this.ids.raiseTo(j.id);
    // beanstalkd brings a job that was reserved back as ready.
    const state = j.state === RESERVED ? READY : j.state;
    const w = this.pool.request(t.shard, 0, NO_REPLY, 0);
    w.header(OP_RESTORE, 48 + j.body.length, 0, t.id, j.pri, j.delaySec, j.id);
    w.u32(j.ttrSec);
    w.u32(state);
    w.f64(j.deadlineMs);
    w.f64(j.createdMs);
    w.u32(j.reserves);
    w.u32(j.timeouts);
    w.u32(j.releases);
    w.u32(j.buries);
    w.u32(j.kicks);
    w.u32(0);
    w.bytes(j.body, 0, j.body.length);
  }

  /** Resolves once every shard has made all it logged so far durable; rejects if one could not. */
  syncShards(): Promise<void> {
    return new Promise((resolve, reject) => {
      let left = this.pool.links.length;
      let failed = false;
      const target: ReplyTarget = {
        onShardReply(_shard, _kind, _seq, buf, at) {
          failed ||= replyKind(buf, at) !== R_OK;
          if (--left > 0) return;
          if (failed) reject(new Error('the write-ahead log could not be written (disk full or I/O error?); see the shard log lines above'));
          else resolve();
        },
      };
      for (let shard = 0; shard < this.pool.links.length; shard++) {
        this.pool.request(shard, 0, target, 0).header(OP_WAL_SYNC, 0, 0, 0, 0, 0, 0);
      }
      this.pool.flush();
    });
  }

  /** What to do when a shard thread dies (the server sets it: log and exit). */
  onFatal: (shard: number, err: Error) => void = (shard, err) => {
    throw new Error(`shard ${shard} died: ${err.stack ?? err.message}`);
  };

  newConnId(): number {
    const id = this.nextConnId;
    this.nextConnId += this.sites;
    return id;
  }

  /** What another thread's Router attaches to (RouterConfig.shared). */
  get shared(): RouterShared {
    return { ids: this.ids.shared, claims: this.claims?.shared ?? null, jobMap: this.jobMap.shared, tubes: this.tubes.table.shared };
  }

  // ---- output batching: one socket write per connection per turn (ConnectionHost) ----

  markDirty(s: { flush(): void }): void {
    this.dirty[this.dirtyN++] = s;
    this.flushSoon();
  }

  flushRequests(): void {
    this.pool.flush();
  }

  backlogFull(): boolean {
    return this.pool.backlogFull();
  }

  waitForRoom(c: { roomAgain(): void }): void {
    this.pool.waitForRoom(c);
  }

  flushSoon(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flushNow);
  }

  /**
   * A read was parsed. Its replies usually go at the end of the turn, with those of every other
   * connection read in the same turn. But when the last turn read one socket and this is the
   * first read of this one, it most likely is the only one: its work goes out now, before libuv
   * looks at the other sockets and runs the check phase. For a client with one command in flight
   * that is the whole round trip (measured at one connection: +3% here; 8–64% for a Node server
   * that does nothing); with many connections busy, turns read several sockets and keep batching
   * (10 connections: unchanged). Which turn a reply leaves in changes nothing else: replies stay
   * in order per connection and requests in order per shard.
   */
  readDone(): void {
    if (++this.readsThisTurn === 1 && this.lastTurnReads <= 1) this.flushTurn();
    this.flushSoon();
    if (!this.readSeen && this.busyPollMs > 0) this.turnReadAt = performance.now();
    this.readSeen = true;
    if (!this.polling && this.busyPollMs > 0) {
      this.polling = true;
      this.busyPolls++;
      setImmediate(this.poll);
    }
  }

  /** Whether this thread is polling now rather than sleeping between reads (--busy-poll-us). */
  get busyPolling(): boolean {
    return this.polling;
  }

  /** The polling window in use now, ms: --busy-poll-us, or --busy-poll-long-us while it costs little more. */
  get busyPollWindowMs(): number {
    return this.window.ms;
  }

  /** How many periods of polling found this thread's core wanted by other tasks (src/shared/pollwindow.ts). */
  get busyPollWantedPeriods(): number {
    return this.window.wantedPeriods;
  }

  /** How many times this thread began to poll after a read it slept before (for tests). */
  busyPolls = 0;

  // ---- busy polling (--busy-poll-us, --busy-poll-spin-us) ----
  // While an immediate is pending, libuv polls the sockets with a zero timeout instead of sleeping,
  // so the next command is read the moment it arrives. The immediate renews itself until
  // the window has passed without a read: busyPollMs, or the long window while it costs little more
  // (src/shared/pollwindow.ts). Replies, timers and every other callback run as before: only the
  // sleep is put off. A turn that read nothing and has nothing to send first waits on the CPU
  // (--busy-poll-spin-us, BUSY_POLL_SPIN_US_DEFAULT): fewer turns, less garbage.

  private readonly busyPollMs: number;
  /** The window in use: busyPollMs, or the long one while it costs little more (src/shared/pollwindow.ts). */
  private readonly window: PollWindow;
  /** How many times this thread was preempted (src/shared/preempted.ts); null: not known, or no long window. */
  private readonly preemptions: Preemptions | null;
  private readonly spinMaxMs: number;
  private readonly spinner = new Spinner();
  private readSeen = false;
  private polling = false;
  /** When the poll last saw a read: it polls until the window after it. */
  private lastReadAt = 0;
  /** When the first read of this turn came: the time idle before it is what the window measures. */
  private turnReadAt = 0;
  private readonly poll = (): void => {
    const now = performance.now();
    if (this.readSeen) {
      this.readSeen = false;
      this.window.read(now, this.turnReadAt - this.lastReadAt);
      this.lastReadAt = now;
    }
    const idle = now - this.lastReadAt;
    const windowMs = this.window.ms;
    if (idle >= windowMs) {
      this.polling = false;
      return;
    }
    // Output of this turn waits for flushNow, an immediate behind this one: no wait then.
    const wait = this.flushScheduled ? 0 : idleWaitMs(idle, windowMs - idle, this.spinMaxMs);
    if (wait > 0) {
      this.spinner.spin(wait, now);
      this.busySpins++;
    }
    setImmediate(this.poll);
  };

  /** How many waits between idle turns of the poll this thread made (for tests). */
  busySpins = 0;

  private readsThisTurn = 0;
  private lastTurnReads = 0;

  private readonly flushNow = (): void => {
    this.flushScheduled = false;
    this.lastTurnReads = this.readsThisTurn;
    this.readsThisTurn = 0;
    this.flushTurn();
  };

  /** The end of a turn's work: the turn's requests to the shards and the replies, in the order the layout needs. */
  private flushTurn(): void {
    if (this.config.mesh !== undefined) {
      // Requests before replies: a reply written now may depend on a request of this turn (an
      // early INSERTED, RELEASED...), and the client it reaches may tell another one, whose
      // connection may be served on another thread: the request must be published first.
      this.pool.flush();
      this.flushOutputs();
      return;
    }
    // One thread serves every connection, and every request to a shard goes through its one
    // queue in the order it was made: the early replies can go first (their clients' next
    // commands come sooner), then the shards get the turn's requests, then what the shard here
    // answered goes out in this same turn.
    this.flushOutputs();
    this.pool.flush();
    this.flushOutputs();
  }

  flushOutputs(): void {
    const list = this.dirty;
    if (this.dirtyN === 0) return;
    // Connections on several threads: a reply may tell a client of a request (an early INSERTED)
    // that another client may then act on through another thread. While a ring to another
    // thread is too full to take this turn's requests, the replies wait for them.
    if (this.config.mesh !== undefined && this.pool.unpublished()) {
      if (this.outputsRetry === null && !this.closed) this.outputsRetry = setTimeout(this.retryOutputs, 1);
      return;
    }
    // Two lists in turn, kept at their size (a fresh array, or `length = 0`, was an allocation per
    // turn); flushing one connection may mark another dirty: it goes on the other list.
    const n = this.dirtyN;
    this.dirty = this.spareDirty;
    this.dirtyN = 0;
    for (let i = 0; i < n; i++) {
      const s = list[i] as { flush(): void };
      list[i] = null;
      s.flush();
    }
    this.spareDirty = list;
  }

  /** The timer that tries the replies again while a ring to another thread is full; stopped by close(). */
  private outputsRetry: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly retryOutputs = (): void => {
    this.outputsRetry = null;
    this.pool.flush();
    this.flushOutputs();
  };

  // ---- what shards say happened ----

  /** A put of tube `tubeId` was dropped unapplied (its connection closed behind a waiting reserve); `id` 0 if it had none yet. */
  putDropped(id: number, tubeId: number): void {
    if (id !== 0) {
      this.deleted(id, tubeId);
      return;
    }
    const t = this.tubes.get(tubeId);
    if (t !== undefined) this.tubes.release(t, 'jobs');
  }

  /** Job `id` of tube `tubeId` was deleted. */
  deleted(id: number, tubeId: number): void {
    this.jobMap.delete(id);
    const t = this.tubes.get(tubeId);
    if (t !== undefined) this.tubes.release(t, 'jobs');
  }

  /**
   * Connection `connId` has gone: every job it holds goes back to ready, behind what it sent; a
   * reserve it left waiting in a shard ends there. It is forgotten once every shard has answered.
   * `held` is the jobs it held as far as it knows, in the order it reserved them: beanstalkd
   * gives them back in that order, each to the next reserve waiting on its tube. So they go back
   * in runs, one shard each, in that order: every request is queued now, behind what the
   * connection sent and before anything anyone sends after the close, and each run is a step that
   * comes after the runs before it on other shards (ShardPool.readyStep), so a reserve waiting over
   * several shards gets the job beanstalkd would give it.
   * - Every shard hears of the close (its reserve waiting there ends, what it kept is dropped),
   *   the first run's shard giving that run back.
   * - Each further run but the last.
   * - Every shard gives back all it still has of it: the last run, and jobs reserved for it that
   *   it had not heard of yet.
   * With one run (or none) the first round gives back everything.
   */
  releaseHeld(connId: number, held: ArrayLike<number>): void {
    const runs: number[] = []; // [shard, count, shard, count, …]
    for (let i = 0; i < held.length; i++) {
      const shard = this.jobMap.get(held[i]);
      if (shard < 0) continue;
      if (runs.length !== 0 && runs[runs.length - 2] === shard) runs[runs.length - 1]++;
      else runs.push(shard, 1);
    }
    const shards = this.pool.links.length;
    const one = runs.length <= 2;
    const target = new Released(this, connId, one ? shards : 2 * shards + runs.length / 2 - 2);
    for (let shard = 0; shard < shards; shard++) {
      const count = runs.length !== 0 && runs[0] === shard ? runs[1] : 0;
      this.releaseRun(target, shard, connId, count, one);
    }
    if (one) return;
    for (let i = 2; i < runs.length - 2; i += 2) this.releaseRun(target, runs[i], connId, runs[i + 1], false);
    for (let shard = 0; shard < shards; shard++) this.releaseRun(target, shard, connId, 0, true);
  }

  /** Asks `shard` to give back the `count` jobs `connId` reserved longest ago there (all: every one). */
  private releaseRun(target: ReplyTarget, shard: number, connId: number, count: number, all: boolean): void {
    if (count > 0 || all) this.pool.readyStep(shard);
    this.pool.request(shard, 0, target, 0).header(OP_RELEASE_CONN, 0, connId, count, all ? 1 : 0, 0, 0);
  }

  private onEvent(shard: number, buf: Buffer, at: number): void {
    const kind = replyKind(buf, at);
    if (kind === E_RESERVED || kind === E_WAIT_END || kind === E_DEFERRED) {
      // E_DEFERRED a = 1: the reply to an OP_EXPIRE kept behind a parked reserve; nobody reads it.
      if (kind === E_DEFERRED && eventTube(buf, at) === 1) return;
      this.conns.get(eventConn(buf, at))?.onShardEvent?.(shard, buf, at);
    } else if (kind === E_WQ_READY || kind === E_WQ_DONE || kind === E_WQ_GONE) {
      this.workq.onEvent(buf, at, shard);
    } else if (kind === E_TIMED_OUT) {
      // The job stays held by the connection in its shard until OP_EXPIRE, sent once the
      // connection no longer holds it here: every delete/release/bury it was answered early
      // for reaches the shard first (Engine.expire). The job becomes ready then, and a reserve
      // waiting there gets it (workers/waits.ts).
      const conn = eventConn(buf, at);
      const id = replyId(buf, at);
      if (this.conns.get(conn)?.jobExpired(id) === true) return;
      this.pool.request(shard, 0, NO_REPLY, 0).header(OP_EXPIRE, 0, conn, 0, eventReserves(buf, at), 0, id);
    }
  }

  /**
   * Stops the shard threads (close the connections first). A ring to another thread may still be
   * full (that thread may have stopped reading it): the replies' retry stops here, or its timer
   * would keep this thread alive for ever.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.preemptions?.close();
    if (this.outputsRetry !== null) clearTimeout(this.outputsRetry);
    this.outputsRetry = null;
    await this.pool.close();
  }
}

/** The replies to one closed connection's OP_RELEASE_CONN requests (Router.releaseHeld). */
class Released implements ReplyTarget {
  private readonly router: Router;
  private readonly connId: number;
  private left: number;

  constructor(router: Router, connId: number, requests: number) {
    this.router = router;
    this.connId = connId;
    this.left = requests;
  }

  onShardReply(): void {
    if (--this.left === 0) this.router.conns.delete(this.connId);
  }
}
