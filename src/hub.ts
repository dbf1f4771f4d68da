// The main thread's server state: sessions, tubes, the job → shard map, the shard pool, the
// server-wide counters of `stats`, and what each shard reply means for them.

import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { CMD_COUNT, STATS_CMD_KEYS } from './proto/beanstalk/commands.ts';
import {
  K_ACK, K_BURY, K_DELETE, K_KICK, K_KICK_JOB, K_PAUSE, K_PEEK, K_PUT, K_RELEASE,
  K_RELEASE_CONN, K_RESERVE_JOB, K_RESERVE_SPEC, K_STATS_JOB, K_STATS_TUBE,
  K_SYNC, K_TOTALS, K_TOUCH,
} from './proto/beanstalk/kinds.ts';
import type { Session } from './proto/beanstalk/session.ts';
import { K_WQ_FIRST } from './proto/workq/kinds.ts';
import type { WorkqSession } from './proto/workq/session.ts';
import { WorkqRouter } from './route/workq.ts';
import type { FanAttempt } from './route/fanin.ts';
import { K_RESERVE_PEEK, K_RESERVE_TAKE, K_RESERVE_TAKE_BOUNDED, Reserves } from './route/reserve.ts';
import { ReadyCounts } from './route/readycount.ts';
import { JobShardMap } from './route/jobmap.ts';
import { ShardPool } from './route/shards.ts';
import { type Tube, TubeRegistry } from './route/tubes.ts';
import {
  E_READY, E_TIMED_OUT, E_WQ_READY, HEADER_BYTES, OP_DROP_TUBE, OP_EXPIRE, OP_RELEASE_CONN, OP_RESTORE, OP_TUBE_NAME,
  OP_WAL_SYNC, R_JOB, R_OK, R_TUBES, REPLY_FLAG_UNLOGGED,
} from './shared/records.ts';
import type { RecoveredJob } from '../workers/wal/reader.ts';

export const VERSION = '0.1.0';

/** The write-ahead log each shard keeps (beanstalkd's -b, -f, -F, -s). */
export interface WalConfig {
  dir: string;
  generation: number;
  /** 'always' = fsync before replying (-f 0); everyMs = at most that often (-f MS); 'never' (-F). */
  sync: 'always' | 'never' | { everyMs: number };
  segmentBytesMax: number;
  /** The largest job id any earlier run handed out (carried into the new generation). */
  idFloor: number;
}

export interface HubConfig {
  shards: number;
  jobSizeMax: number;
  ringBytes?: number;
  backlogBytes?: number;
  wal?: WalConfig;
  /** For the shard threads' own loggers. */
  logLevel?: string;
  /** Test hook passed to the shards (see workers/shard.ts). */
  walFaults?: SharedArrayBuffer;
}

// Job states as the engine numbers them.
const READY = 1;
const RESERVED_STATE = 2;

export class Hub {
  readonly config: HubConfig;
  readonly pool: ShardPool<unknown>;
  readonly workq: WorkqRouter;
  readonly tubes: TubeRegistry;
  readonly jobMap = new JobShardMap();
  /** Reserves over watched tubes, across shards (the fan-in). */
  readonly reserves: Reserves;
  /** Lower bounds of each tube's ready jobs: which reserves may go without holding the parser. */
  readonly readyCounts: ReadyCounts;
  /** Reserves sent as certain that found nothing (a bug in ReadyCounts if ever above 0). */
  certainMisses = 0;
  readonly sessions = new Map<number, Session>();

  nextJobId = 1;
  /** In memory only: puts, and deletes/releases/buries of a held job, are answered before the shard replies. */
  readonly earlyAck: boolean;
  private nextConnId = 1;
  draining = false;

  // stats counters kept on the main thread
  readonly cmdCounts = new Float64Array(CMD_COUNT);
  totalJobs = 0;
  producers = 0;
  workers = 0;
  totalConnections = 0;
  private readonly startedMs = Date.now();
  private readonly instanceId = randomBytes(8).toString('hex');

  private dirty: { flush(): void }[] = [];
  private flushScheduled = false;

  constructor(config: HubConfig) {
    this.config = config;
    this.earlyAck = config.wal === undefined;
    this.readyCounts = new ReadyCounts(config.shards);
    this.pool = new ShardPool<unknown>(
      { shards: config.shards, ringBytes: config.ringBytes, backlogBytes: config.backlogBytes, workerData: { wal: config.wal, logLevel: config.logLevel, walFaults: config.walFaults } },
      {
        reply: (shard, kind, session, seq, buf, at) =>
          kind >= K_WQ_FIRST
            ? this.workq.onReply(shard, kind, session as WorkqSession | null, seq, buf, at)
            : this.onReply(shard, kind, session as Session | null, seq, buf, at),
        event: (shard, buf, at) => this.onEvent(shard, buf, at),
        batchDone: () => this.flushOutputs(),
        fatal: (shard, err) => this.onFatal(shard, err),
      },
    );
    this.workq = new WorkqRouter(this.pool as ShardPool<unknown>, config.shards, () => this.flushSoon(), this.earlyAck);
    this.tubes = new TubeRegistry(config.shards);
    this.reserves = new Reserves(this.pool, this.readyCounts, this.tubes, () => this.flushSoon());
    this.tubes.onCreate = (t) => {
      const name = Buffer.from(t.name, 'latin1');
      const w = this.pool.request(t.shard, K_ACK, null, 0);
      w.header(OP_TUBE_NAME, name.length, 0, t.id, 0, 0, 0);
      w.bytes(name, 0, name.length);
    };
    this.tubes.onFree = (t) => {
      this.pool.request(t.shard, K_ACK, null, 0).header(OP_DROP_TUBE, 0, 0, t.id, 0, 0, 0);
    };
    this.tubes.findOrMake('default').pinned = true;
  }

  // ---- recovery from the write-ahead log ----

  /** A job read back from the log goes to the shard that owns its tube now. */
  restoreJob(j: RecoveredJob): void {
    const t = this.tubes.findOrMake(j.tube);
    t.jobs++;
    this.jobMap.set(j.id, t.shard);
    if (j.id >= this.nextJobId) this.nextJobId = j.id + 1;
    // beanstalkd brings a job that was reserved back as ready.
    const state = j.state === RESERVED_STATE ? READY : j.state;
    const w = this.pool.request(t.shard, K_ACK, null, 0);
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
      this.syncDone = (ok: boolean) => {
        failed ||= !ok;
        if (--left > 0) return;
        if (failed) reject(new Error('the write-ahead log could not be written (disk full or I/O error?); see the shard log lines above'));
        else resolve();
      };
      for (let shard = 0; shard < this.pool.links.length; shard++) {
        this.pool.request(shard, K_SYNC, null, 0).header(OP_WAL_SYNC, 0, 0, 0, 0, 0, 0);
      }
      this.pool.flush();
    });
  }

  private syncDone: (ok: boolean) => void = () => {};

  /** What to do when a shard thread dies (the server sets it: log and exit). */
  onFatal: (shard: number, err: Error) => void = (shard, err) => {
    throw new Error(`shard ${shard} died: ${err.stack ?? err.message}`);
  };

  newConnId(): number {
    this.totalConnections++;
    return this.nextConnId++;
  }

  // ---- output batching: one socket write per connection per turn ----

  markDirty(s: { flush(): void }): void {
    this.dirty.push(s);
    this.flushSoon();
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

  private readonly flushNow = (): void => {
    this.flushScheduled = false;
    this.flushOutputs();
    this.pool.flush();
  };

  flushOutputs(): void {
    const list = this.dirty;
    if (list.length === 0) return;
    this.dirty = [];
    for (const s of list) s.flush();
  }

  // ---- shard replies ----

  /** Connections blocked in a reserve (stats current-waiting). */
  get waitingCount(): number {
    return this.reserves.fan.waitingCount;
  }

  private onReply(shard: number, kind: number, s: Session | null, seq: number, buf: Buffer, at: number): void {
    const rk = buf[at + 4];
    if (kind === K_RESERVE_TAKE || kind === K_RESERVE_PEEK || kind === K_RESERVE_TAKE_BOUNDED) {
      // The fan-in's own requests: they do not count as the session's requests in flight.
      this.reserves.reply(shard, kind, s as unknown as FanAttempt<Tube>, buf, at);
      return;
    }
    this.applyReply(kind, s, seq, rk, buf, at);
    // Last: a command deferred behind this reply must see its effects (a delete freeing a tube).
    if (s !== null) s.replied();
  }

  private applyReply(kind: number, s: Session | null, seq: number, rk: number, buf: Buffer, at: number): void {
    // The change happened but is not on disk: the effects below still apply (the job exists or
    // is gone in memory), the client is told the command failed.
    if (s !== null) s.unlogged = buf[at + REPLY_FLAG_UNLOGGED] !== 0;
    const ok = rk === R_OK;
    const id = buf.readDoubleLE(at + 24);
    switch (kind) {
      case K_PUT: {
        (s as Session).onPut(seq, id);
        if (buf.readUInt32LE(at + 12) === READY) this.readyIn(buf.readUInt32LE(at + 16));
        return;
      }
      case K_RESERVE_SPEC: {
        const sess = s as Session;
        const t = this.tubes.get(buf.readUInt32LE(at + 12));
        if (rk === R_JOB) {
          sess.reserved(seq, buf, at);
          if (t !== undefined && buf.readUInt32LE(at + 16) !== 0) this.reserves.fan.ready(t);
        } else {
          // Cannot happen while ReadyCounts stays a lower bound (see its proof). Should it all
          // the same, the reserve goes on as an ordinary one; the shard echoes its timeout.
          this.certainMisses++;
          this.onCertainMiss(sess.connId);
          sess.certainMissed(seq, buf.readUInt32LE(at + 16) !== 0 ? -1 : buf.readUInt32LE(at + 12));
        }
        return;
      }
      case K_RESERVE_JOB:
        if (rk === R_JOB) {
          const sess = s as Session;
          if (!sess.isWorker) {
            sess.isWorker = true;
            this.workers++;
          }
          sess.reserved(seq, buf, at);
        } else {
          (s as Session).onSimple(seq, kind, false, 0);
        }
        return;
      case K_DELETE:
        (s as Session).inflightDeletes--;
        if (ok) {
          (s as Session).unreserve(id);
          this.jobMap.delete(id);
          const t = this.tubes.get(buf.readUInt32LE(at + 16));
          if (t !== undefined) {
            t.jobs--;
            this.tubes.release(t);
          }
        }
        (s as Session).onSimple(seq, kind, ok, 0);
        return;
      case K_RELEASE:
        if (ok) (s as Session).unreserve(id);
        (s as Session).onSimple(seq, kind, ok, 0);
        if (ok && buf.readUInt32LE(at + 12) === READY) this.readyIn(buf.readUInt32LE(at + 16), 1);
        return;
      case K_BURY:
        if (ok) (s as Session).unreserve(id);
        (s as Session).onSimple(seq, kind, ok, 0);
        return;
      case K_TOUCH:
        if (ok) (s as Session).touched(id, buf.readDoubleLE(at + HEADER_BYTES));
        (s as Session).onSimple(seq, kind, ok, 0);
        return;
      case K_KICK: {
        const n = buf.readUInt32LE(at + 12);
        (s as Session).onSimple(seq, kind, true, n);
        if (n > 0) this.readyIn(buf.readUInt32LE(at + 16), n);
        return;
      }
      case K_KICK_JOB:
        (s as Session).onSimple(seq, kind, ok, 0);
        if (ok) this.readyIn(buf.readUInt32LE(at + 16), 1);
        return;
      case K_PAUSE:
        (s as Session).onSimple(seq, kind, true, 0);
        return;
      case K_PEEK:
        (s as Session).onFound(seq, buf, at);
        return;
      case K_STATS_JOB:
        (s as Session).onStatsJob(seq, buf, at);
        return;
      case K_STATS_TUBE:
        (s as Session).onStatsTube(seq, buf, at);
        return;
      case K_TOTALS:
        (s as Session).onTotals(buf, at);
        return;
      case K_RELEASE_CONN:
        if (rk === R_TUBES) {
          const count = buf.readUInt32LE(at + 16);
          for (let i = 0; i < count; i++) this.readyIn(buf.readUInt32LE(at + HEADER_BYTES + i * 4));
        }
        return;
      case K_ACK:
        return;
      case K_SYNC:
        this.syncDone(rk === R_OK);
        return;
    }
  }

  /** Tube `tubeId` may have gained ready jobs; `known` of them for certain (ReadyCounts). */
  private readyIn(tubeId: number, known = 0): void {
    const t = this.tubes.get(tubeId);
    if (t === undefined) return;
    if (known > 0) this.readyCounts.addLate(t, known);
    this.reserves.fan.ready(t);
  }

  /** What to do when a certain reserve found nothing (the server logs it). */
  onCertainMiss: (connId: number) => void = () => {};

  private onEvent(shard: number, buf: Buffer, at: number): void {
    const kind = buf[at + 4];
    if (kind >= E_WQ_READY) {
      this.workq.onEvent(buf, at, shard);
    } else if (kind === E_READY) {
      this.readyIn(buf.readUInt32LE(at + 12));
    } else if (kind === E_TIMED_OUT) {
      // The job stays held by the connection in its shard until OP_EXPIRE, sent once the
      // connection no longer holds it here: every delete/release/bury it was answered early
      // for reaches the shard first (Engine.expire). The job becomes ready then; not counted in
      // ReadyCounts (jobs readied by the shard itself never are).
      const conn = buf.readUInt32LE(at + 8);
      const id = buf.readDoubleLE(at + 24);
      const s = this.sessions.get(conn);
      if (s !== undefined) {
        s.unreserve(id);
        if (s.reserveAttempt !== null) this.reserves.fan.rearm(s.reserveAttempt);
      }
      this.pool.request(shard, K_ACK, null, 0).header(OP_EXPIRE, 0, conn, 0, buf.readUInt32LE(at + 16), 0, id);
    }
  }

  // ---- connections ----

  sessionOpened(s: Session): void {
    this.sessions.set(s.connId, s);
  }

  sessionClosed(s: Session): void {
    this.sessions.delete(s.connId);
    if (s.reserveAttempt !== null) this.reserves.fan.cancel(s.reserveAttempt);
    if (s.isProducer) this.producers--;
    if (s.isWorker) {
      this.workers--;
      // Give back every job it holds; the request queues behind any reserve still in flight.
      for (let shard = 0; shard < this.pool.links.length; shard++) {
        this.pool.request(shard, K_RELEASE_CONN, null, 0).header(OP_RELEASE_CONN, 0, s.connId, 0, 0, 0, 0);
      }
      this.flushSoon();
    }
    // beanstalkd's connclose order: the watch set (ms_clear), then the used tube. Tubes freed
    // on the way leave list-tubes in that order.
    s.watch.clear((t) => {
      t.watching--;
      this.tubes.release(t);
    });
    s.use.using--;
    this.tubes.release(s.use);
  }

  // ---- stats ----

  /** sums: [urgent, ready, reserved, delayed, buried, job-timeouts] summed over every shard, then
   *  the log's [oldest index (smallest), current index (largest), records written, records migrated]. */
  formatStats(sums: Float64Array): string {
    const ru = process.resourceUsage();
    const secs = (us: number): string => `${Math.floor(us / 1e6)}.${String(us % 1e6).padStart(6, '0')}`;
    let s = '---\n';
    s += `current-jobs-urgent: ${sums[0]}\n`;
    s += `current-jobs-ready: ${sums[1]}\n`;
    s += `current-jobs-reserved: ${sums[2]}\n`;
    s += `current-jobs-delayed: ${sums[3]}\n`;
    s += `current-jobs-buried: ${sums[4]}\n`;
    for (const [key, cmd] of STATS_CMD_KEYS) s += `${key}: ${this.cmdCounts[cmd]}\n`;
    s += `job-timeouts: ${sums[5]}\n`;
    s += `total-jobs: ${this.totalJobs}\n`;
    s += `max-job-size: ${this.config.jobSizeMax}\n`;
    s += `current-tubes: ${this.tubes.count}\n`;
    s += `current-connections: ${this.sessions.size}\n`;
    s += `current-producers: ${this.producers}\n`;
    s += `current-workers: ${this.workers}\n`;
    s += `current-waiting: ${this.waitingCount}\n`;
    s += `total-connections: ${this.totalConnections}\n`;
    s += `pid: ${process.pid}\n`;
    s += `version: "${VERSION}"\n`;
    s += `rusage-utime: ${secs(ru.userCPUTime)}\n`;
    s += `rusage-stime: ${secs(ru.systemCPUTime)}\n`;
    s += `uptime: ${Math.floor((Date.now() - this.startedMs) / 1000)}\n`;
    // No shard has a file yet (a fresh directory): like beanstalkd's first binlog, index 1.
    s += `binlog-oldest-index: ${sums[6] > 0 ? sums[6] : sums[7] > 0 ? 1 : 0}\n`;
    s += `binlog-current-index: ${sums[7]}\n`;
    s += `binlog-records-migrated: ${sums[9]}\n`;
    s += `binlog-records-written: ${sums[8]}\n`;
    s += `binlog-max-size: ${this.config.wal?.segmentBytesMax ?? 10485760}\n`;
    s += `draining: ${this.draining ? 'true' : 'false'}\n`;
    s += `id: ${this.instanceId}\n`;
    s += `hostname: ${os.hostname()}\n`;
    s += `os: ${os.version()}\n`;
    s += `platform: ${os.machine()}\n`;
    return s;
  }

  async close(): Promise<void> {
    for (const s of [...this.sessions.values()]) s.close();
    await this.pool.close();
  }
}

