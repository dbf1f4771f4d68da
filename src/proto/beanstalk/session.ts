// One beanstalk connection: the parser's sink, the per-connection state beanstalkd keeps in its
// Conn (used tube, watch list, reserved jobs, waiting), and replies kept in command order.
//
// A command either answers at once (use, watch, list-tube-used...) or sends one request to the
// shard that owns its tube or job and answers when the reply comes back. Replies go into numbered
// slots so they leave in command order even when shards answer out of order. The few commands
// that read state other commands change (stats, list-tubes...) hold the parser until the
// connection's earlier requests are answered — as beanstalkd's one-command-at-a-time processing
// would.
//
// A reserve over tubes that all live on one shard goes to that shard and, if it must wait, waits
// there (workers/waits.ts). The shard keeps whatever the connection sends it after the reserve
// until the reserve is answered, so commands for that shard go on at once ("the gate" below: a
// pipelined put / reserve / delete cycle on one tube never stops the parser); a command that
// touches anything else waits for the reserve's answer. A reserve over several shards' tubes goes
// through the fan-in (src/route/fanin.ts) and holds the parser until it is answered.
//
// Nothing here knows about sockets: the transport is an interface, so a session can run on any
// thread that owns the socket.

import type { JobHolder, Router } from '../../route/router.ts';
import { type BeanstalkServer, ROW_PARKED, ROW_PRODUCERS, ROW_TOTAL_JOBS, ROW_WORKERS } from './server.ts';
import { B_OUTPUT, B_PENDING, B_QUIT, Connection, type Transport } from '../connection.ts';
import type { Tube } from '../../route/tubes.ts';
import { Multiset } from '../../route/tubes.ts';
import { FanAttempt, type FanEnd, groupByShard, type ShardGroups } from '../../route/fanin.ts';
import type { ReserveClient } from '../../route/reserve.ts';
import {
  DEADLINE_SOON_MS, deferredAt, E_DEFERRED, E_RESERVED, E_WAIT_END, END_DEADLINE_SOON, eventConn, eventTube,
  OP_BURY, OP_CANCEL_WAIT, OP_DELETE, OP_KICK, OP_KICK_JOB, OP_PAUSE_TUBE, OP_PEEK, OP_PEEK_BURIED, OP_PEEK_DELAYED,
  OP_PEEK_READY, OP_PUT, OP_RELEASE, OP_RESERVE_JOB, OP_RESERVE_WAIT, OP_STATS_JOB, OP_STATS_TUBE, OP_TAKE_ID, OP_TOTALS,
  OP_TOUCH, mayMakeReady, R_DEFERRED, R_DROPPED, R_JOB, R_NUMS, R_OK, R_PARKED, jobBodyAt, jobDeadline, okResult,
  okTube, payloadF64, recordEnd, replyId, replyKind, replyUnlogged, RESERVE_FOREVER, reserveEnd, TOTALS_FIELDS,
} from '../../shared/records.ts';
import { NO_REPLY, type ReplyTarget } from '../../route/shards.ts';

import {
  CMD_BURY, CMD_DELETE, CMD_IGNORE, CMD_KICK, CMD_KICK_JOB, CMD_LIST_TUBE_USED, CMD_LIST_TUBES,
  CMD_LIST_TUBES_WATCHED, CMD_PAUSE_TUBE, CMD_PEEK, CMD_PEEK_BURIED, CMD_PEEK_DELAYED,
  CMD_PEEK_READY, CMD_QUIT, CMD_RELEASE, CMD_RESERVE, CMD_RESERVE_JOB, CMD_RESERVE_TIMEOUT,
  CMD_STATS, CMD_STATS_JOB, CMD_STATS_TUBE, CMD_TOUCH, CMD_USE, CMD_WATCH,
} from './commands.ts';
import {
  K_BURY, K_DELETE, K_KICK, K_KICK_JOB, K_PAUSE, K_PEEK, K_PUT, K_PUT_NUMBERED, K_RELEASE, K_RESERVE_JOB, K_RESERVE_WAIT, K_TAKE_ID,
  K_STATS_JOB, K_STATS_TUBE, K_TOTALS, K_TOUCH,
} from './kinds.ts';
import { HeldJobs } from './held.ts';
import { Parser, type ParserSink } from './parser.ts';
import {
  okYaml, FOUND_, RESERVED_, REPLY_BURIED, REPLY_INTERNAL_ERROR, REPLY_OUT_OF_MEMORY, REPLY_DELETED, REPLY_DRAINING,
  REPLY_KICKED, REPLY_NOT_FOUND, REPLY_NOT_IGNORED, REPLY_PAUSED, REPLY_RELEASED,
  REPLY_DEADLINE_SOON, REPLY_TIMED_OUT, REPLY_TOUCHED, yamlList,
} from './replies.ts';
import { addShardTotals, formatJobStats, formatServerStats, formatTubeStats, JOB_STATS_TUBE } from './stats.ts';

export { INPUT_BUFFERED_MAX, OUTPUT_BUFFERED_MAX, PENDING_REPLIES_MAX, type Transport } from '../connection.ts';

export { DEADLINE_SOON_MS };
/** Requests of one connection in flight to shards before it stops parsing (bounds the rings' backlog). */
export const INFLIGHT_MAX = 1024;

// Why the parser is held (bits).
// B_PENDING (too many replies outstanding), B_OUTPUT (the peer is not reading) and B_QUIT
// (close once every reply is out) are Connection's.
const B_RESERVE = 1; //  a reserve is being answered
const B_BARRIER = 2; //  a command waits for earlier requests to be answered
const B_INFLIGHT = 64; // too many requests in flight to shards
const B_ANSWER = 32; //  stats/stats-tube: main-thread counters are read when the shards answer,
//                       so no later command may change them first
const B_GATE = 256; //   a command waits for the answers of reserves waiting in a shard (see passesGate)

const BARRIER_CMDS = new Set([CMD_STATS, CMD_STATS_TUBE, CMD_LIST_TUBES, CMD_PAUSE_TUBE, CMD_QUIT]);
/** These create or free tubes on the main thread; a delete still in flight may free a tube first. */
const TUBE_CMDS = new Set([CMD_USE, CMD_WATCH, CMD_IGNORE]);

/** What a session with no request kept in a shard has instead of an array of its own (frozen: a push throws). */
const NO_KEPT: number[] = Object.freeze([]) as unknown as number[];

/** How a reserve in a shard ended without a job (R_NONE, E_WAIT_END), as the reply says it. */
const endWord = (buf: Buffer, at: number): Buffer => (reserveEnd(buf, at) === END_DEADLINE_SOON ? REPLY_DEADLINE_SOON : REPLY_TIMED_OUT);

export class Session extends Connection implements ParserSink, ReserveClient, JobHolder, ReplyTarget {
  readonly server: BeanstalkServer;
  readonly router: Router;
  readonly parser: Parser;

  use: Tube;
  readonly watch: Multiset<Tube>;
  isProducer = false;
  isWorker = false;

  /** Requests sent to shards and not answered yet. */
  inflight = 0;
  /** Of which deletes (a delete may free a tube). */
  inflightDeletes = 0;
  private deferredCmd = 0;

  // The put being read: its id, 0 if its shard numbers it (read behind a reserve that may wait
  // there: beanstalkd would read it, and number it, only after that reserve's answer).
  private putId = 0;
  private putNumberedLater = false;
  /** The replies of puts that failed behind such a reserve, by reply slot, until their id is used up (K_TAKE_ID). */
  private failedPuts: Map<number, Buffer> | null = null;

  // The reserve over several shards being answered: its reply slot, and its attempt in the
  // fan-in (made on the first such reserve; the fan-in keeps the attempt's state).
  reserveSeq = 0;
  reserveAttempt: FanAttempt<Tube> | null = null;

  // Reserves sent to the one shard of the watched tubes (OP_RESERVE_WAIT) and not yet answered,
  // and that shard: while there are some, only commands for that shard go on (the gate).
  private shardReserves = 0;
  private reserveShard = -1;
  /** The reply slot of the reserve waiting in the shard (R_PARKED), -1 if none. */
  private parkedSeq = -1;
  /** A command that waits at the gate until the shard's reserves are answered. */
  private gatedCmd = 0;
  /** kind, seq of each request the shard keeps behind the waiting reserve (R_DEFERRED), oldest first. */
  private kept: number[] = NO_KEPT; // an array of its own once the shard keeps one
  private keptHead = 0;
  /** Watched tubes grouped by shard, rebuilt after watch/ignore (a reserve keeps the one it got). */
  private watchGroups: ShardGroups<Tube> | null = null;

  /** The jobs this connection holds. */
  readonly held = new HeldJobs();

  // stats: totals gathered from every shard.
  private statsLeft = 0;
  private statsSeq = 0;
  private statsSum: Float64Array | null = null; // made on the first stats
  /** For the reply being handled: the change was made but not logged. */
  unlogged = false;
  /** The tube each stats-tube request in flight asked about, by reply slot. */
  private statsTubes: Map<number, Tube> | null = null; // made on the first stats-tube

  constructor(server: BeanstalkServer, connId: number, transport: Transport) {
    super(server.router, connId, transport);
    this.server = server;
    this.router = server.router;
    this.parser = new Parser(this, server.router.config.jobSizeMax);
    const def = server.router.tubes.acquire('default', 'using');
    this.use = def;
    this.watch = new Multiset(def);
    server.router.tubes.retain(def, 'watching');
  }

  // ---- requests to shards ----

  /** One request sent: its reply comes back to onShardReply. */
  private sent(): void {
    if (++this.inflight >= INFLIGHT_MAX) this.block(B_INFLIGHT);
    this.requested();
  }

  /** After every reply addressed to this session. */
  private replied(): void {
    this.inflight--;
    if ((this.blocked & B_INFLIGHT) !== 0 && this.inflight < INFLIGHT_MAX / 2) this.unblock(B_INFLIGHT);
    if (this.inflight === 0 && this.deferredCmd !== 0 && !this.closed) {
      const cmd = this.deferredCmd;
      this.deferredCmd = 0;
      this.run(cmd);
      this.unblock(B_BARRIER);
    }
  }

  // ---- ParserSink ----

  count(cmd: number): void {
    this.server.cmdCounts[cmd]++;
  }

  reply(msg: Buffer): boolean {
    if (this.putNumberedLater) {
      // EXPECTED_CRLF: the put failed, but it still uses up its id.
      this.putNumberedLater = false;
      this.failedPut(this.nextSeq(), msg);
      return this.blocked === 0;
    }
    return this.answer(msg);
  }

  /** A put numbered by its shard failed (EXPECTED_CRLF, DRAINING): it uses up an id there, then is answered. */
  private failedPut(seq: number, msg: Buffer): void {
    (this.failedPuts ??= new Map()).set(seq, msg);
    this.router.pool.request(this.reserveShard >= 0 ? this.reserveShard : this.use.shard, K_TAKE_ID, this, seq)
      .header(OP_TAKE_ID, 0, this.connId, 0, 0, 0, 0);
    this.sent();
  }

  putStart(): void {
    // beanstalkd makes the job, and so uses up a job id, before reading the body.
    if (!this.isProducer) {
      this.isProducer = true;
      this.server.row[ROW_PRODUCERS]++;
    }
    this.putNumberedLater = this.shardReserves > 0;
    this.putId = this.putNumberedLater ? 0 : this.router.ids.next();
  }

  putBody(buf: Uint8Array, start: number, end: number): boolean {
    const router = this.router;
    const seq = this.nextSeq();
    const numbered = !this.putNumberedLater;
    this.putNumberedLater = false;
    if (this.server.draining) {
      if (numbered) this.complete(seq, REPLY_DRAINING);
      else this.failedPut(seq, REPLY_DRAINING);
      return this.blocked === 0;
    }
    const p = this.parser;
    const tube = this.use;
    const id = this.putId;
    router.tubes.retain(tube, 'jobs');
    this.server.row[ROW_TOTAL_JOBS]++;
    if (numbered) router.jobMap.set(id, tube.shard);
    // In memory (no -b), a put cannot fail once it is on its way to the shard, and everything
    // this or any client does next with the job goes through the same ring after it: answer now.
    // With -b the answer waits for the log; a put its shard numbers waits for its number.
    const early = router.earlyAck && numbered;
    if (mayMakeReady(OP_PUT, p.delaySec)) router.pool.readyStep(tube.shard);
    const w = router.pool.request(tube.shard, numbered ? K_PUT : K_PUT_NUMBERED, this, early ? -1 : seq);
    w.header(OP_PUT, 4 + (end - start), this.connId, tube.id, p.pri, p.delaySec, id);
    w.u32(p.ttrSec);
    w.bytes(buf, start, end);
    this.sent();
    if (early) this.completeInserted(seq, id);
    return this.blocked === 0;
  }

  command(cmd: number): boolean {
    if (this.shardReserves > 0 && !this.passesGate(cmd)) {
      this.gatedCmd = cmd;
      this.block(B_GATE);
      return false;
    }
    if (this.inflight > 0 && (BARRIER_CMDS.has(cmd) || (this.inflightDeletes > 0 && TUBE_CMDS.has(cmd)))) {
      this.deferredCmd = cmd;
      this.block(B_BARRIER);
      return false;
    }
    this.run(cmd);
    return this.blocked === 0;
  }

  private run(cmd: number): void {
    const router = this.router;
    const p = this.parser;
    switch (cmd) {
      case CMD_RESERVE:
      case CMD_RESERVE_TIMEOUT: {
        if (!this.isWorker) {
          this.isWorker = true;
          this.server.row[ROW_WORKERS]++;
        }
        const timeoutSec = cmd === CMD_RESERVE ? -1 : p.timeoutSec;
        const groups = (this.watchGroups ??= groupByShard(this.watch.items));
        if (groups.shards.length === 1) this.reserveInShard(groups.shards[0], timeoutSec);
        else this.startReserve(this.nextSeq(), timeoutSec);
        return;
      }
      case CMD_RESERVE_JOB:
        this.byId(OP_RESERVE_JOB, K_RESERVE_JOB, p.id, 0, 0);
        return;
      case CMD_DELETE:
        if (this.heldOp(OP_DELETE, K_DELETE, p.id, 0, 0, REPLY_DELETED) || this.byId(OP_DELETE, K_DELETE, p.id, 0, 0)) {
          this.inflightDeletes++;
        }
        return;
      case CMD_RELEASE:
        if (!this.heldOp(OP_RELEASE, K_RELEASE, p.id, p.pri, p.delaySec, REPLY_RELEASED)) {
          this.byId(OP_RELEASE, K_RELEASE, p.id, p.pri, p.delaySec);
        }
        return;
      case CMD_BURY:
        if (!this.heldOp(OP_BURY, K_BURY, p.id, p.pri, 0, REPLY_BURIED)) this.byId(OP_BURY, K_BURY, p.id, p.pri, 0);
        return;
      case CMD_TOUCH:
        this.byId(OP_TOUCH, K_TOUCH, p.id, 0, 0);
        return;
      case CMD_KICK_JOB:
        this.byId(OP_KICK_JOB, K_KICK_JOB, p.id, 0, 0);
        return;
      case CMD_PEEK:
        this.byId(OP_PEEK, K_PEEK, p.id, 0, 0);
        return;
      case CMD_STATS_JOB:
        this.byId(OP_STATS_JOB, K_STATS_JOB, p.id, 0, 0);
        return;
      case CMD_PEEK_READY:
      case CMD_PEEK_DELAYED:
      case CMD_PEEK_BURIED: {
        const op = cmd === CMD_PEEK_READY ? OP_PEEK_READY : cmd === CMD_PEEK_DELAYED ? OP_PEEK_DELAYED : OP_PEEK_BURIED;
        const w = router.pool.request(this.use.shard, K_PEEK, this, this.nextSeq());
        w.header(op, 0, this.connId, this.use.id, 0, 0, 0);
        this.sent();
        return;
      }
      case CMD_KICK: {
        router.pool.readyStep(this.use.shard);
        const w = router.pool.request(this.use.shard, K_KICK, this, this.nextSeq());
        w.header(OP_KICK, 0, this.connId, this.use.id, p.kickCount, 0, 0);
        this.sent();
        return;
      }
      case CMD_USE: {
        const t = router.tubes.acquire(p.name, 'using');
        const old = this.use;
        this.use = t;
        router.tubes.release(old, 'using');
        this.answer(Buffer.from(`USING ${t.name}\r\n`, 'latin1'));
        return;
      }
      case CMD_WATCH: {
        let watched = false;
        for (const w of this.watch.items) {
          if (w.name === p.name) {
            watched = true;
            break;
          }
        }
        if (!watched) {
          this.watch.append(router.tubes.acquire(p.name, 'watching'));
          this.watchGroups = null;
        }
        this.answer(Buffer.from(`WATCHING ${this.watch.len}\r\n`, 'latin1'));
        return;
      }
      case CMD_IGNORE: {
        let t: Tube | undefined;
        for (const w of this.watch.items) {
          if (w.name === p.name) {
            t = w;
            break;
          }
        }
        if (t !== undefined && this.watch.len < 2) {
          this.answer(REPLY_NOT_IGNORED);
          return;
        }
        if (t !== undefined) {
          this.watch.remove(t);
          this.watchGroups = null;
          router.tubes.release(t, 'watching');
        }
        this.answer(Buffer.from(`WATCHING ${this.watch.len}\r\n`, 'latin1'));
        return;
      }
      case CMD_LIST_TUBE_USED:
        this.answer(Buffer.from(`USING ${this.use.name}\r\n`, 'latin1'));
        return;
      case CMD_LIST_TUBES_WATCHED:
        this.answer(okYaml(yamlList(this.watch.items.map((t) => t.name))));
        return;
      case CMD_LIST_TUBES:
        this.answer(okYaml(yamlList(router.tubes.names())));
        return;
      case CMD_STATS_TUBE: {
        const t = router.tubes.find(p.name);
        if (t === undefined) {
          this.answer(REPLY_NOT_FOUND);
          return;
        }
        const seq = this.nextSeq();
        (this.statsTubes ??= new Map()).set(seq, t);
        this.block(B_ANSWER);
        const w = router.pool.request(t.shard, K_STATS_TUBE, this, seq);
        w.header(OP_STATS_TUBE, 0, this.connId, t.id, 0, 0, 0);
        this.sent();
        return;
      }
      case CMD_PAUSE_TUBE: {
        const t = router.tubes.find(p.name);
        if (t === undefined) {
          this.answer(REPLY_NOT_FOUND);
          return;
        }
        router.pool.readyStep(t.shard); // it may end a pause
        const w = router.pool.request(t.shard, K_PAUSE, this, this.nextSeq());
        w.header(OP_PAUSE_TUBE, 0, this.connId, t.id, p.delaySec, 0, Date.now());
        this.sent();
        return;
      }
      case CMD_STATS: {
        this.statsSeq = this.nextSeq();
        this.block(B_ANSWER);
        this.statsLeft = router.pool.links.length;
        (this.statsSum ??= new Float64Array(TOTALS_FIELDS)).fill(0);
        for (let s = 0; s < router.pool.links.length; s++) {
          router.pool.request(s, K_TOTALS, this, this.statsSeq).header(OP_TOTALS, 0, this.connId, 0, 0, 0, 0);
          this.sent();
        }
        return;
      }
      case CMD_QUIT:
        this.block(B_QUIT);
        if (this.slotHead === this.slotNext) this.closeAfterFlush();
        return;
    }
  }

  /**
   * delete/release/bury of a job this connection holds, answered without waiting for the shard
   * (in memory only): the shard will find it held by us whatever the time. Nobody else can touch
   * a reserved job, and one whose TTR runs out stays held by us in its shard until the main
   * thread has taken it from `held` and sent OP_EXPIRE behind this request (Engine.expire).
   * The request still goes, and its reply still updates the server.
   */
  private heldOp(op: number, kind: number, id: number, b: number, c: number, reply: Buffer): boolean {
    if (!this.router.earlyAck) return false;
    if (!this.held.has(id)) return false;
    const shard = this.router.jobMap.get(id);
    if (shard < 0) return false;
    this.held.remove(id);
    if (mayMakeReady(op, c)) this.router.pool.readyStep(shard);
    const w = this.router.pool.request(shard, kind, this, -1);
    w.header(op, 0, this.connId, 0, b, c, id);
    this.sent();
    this.answer(reply);
    return true;
  }

  /**
   * Whether a command read while reserves wait for answers from shard `reserveShard` may go on
   * now: it goes to that shard, which applies it after them (reserves on the same watch list, and
   * commands on the used tube or a job that live there). Anything else waits for their answers.
   */
  private passesGate(cmd: number): boolean {
    switch (cmd) {
      case CMD_RESERVE:
      case CMD_RESERVE_TIMEOUT:
        return true; // the watch list cannot change meanwhile: still that one shard
      case CMD_PEEK_READY:
      case CMD_PEEK_DELAYED:
      case CMD_PEEK_BURIED:
      case CMD_KICK:
        return this.use.shard === this.reserveShard;
      case CMD_DELETE:
      case CMD_RELEASE:
      case CMD_BURY:
      case CMD_TOUCH:
      case CMD_KICK_JOB:
      case CMD_PEEK:
      case CMD_STATS_JOB:
      case CMD_RESERVE_JOB:
        return this.router.jobMap.get(this.parser.id) === this.reserveShard;
      default:
        return false;
    }
  }

  /**
   * A reserve over watched tubes that all live on `shard`: one request, answered with a job, an
   * end (DEADLINE_SOON, TIMED_OUT), or "waiting here" (then by an event). The shard judges
   * DEADLINE_SOON by the jobs this connection holds there; the request carries the soonest TTR
   * end of those it holds on other shards. Commands for that shard go on behind it; if puts would
   * go elsewhere (the used tube lives on another shard), the parser stops until it is answered.
   */
  private reserveInShard(shard: number, timeoutSec: number): void {
    const tubes = this.watch.items;
    const w = this.router.pool.request(shard, K_RESERVE_WAIT, this, this.nextSeq());
    // A connection whose peer shut its sending side cannot wait (beanstalkd: TIMED_OUT at once).
    const timeout = this.halfClosed ? 0 : timeoutSec;
    const elsewhere = this.held.count === 0 ? Infinity : this.held.soonestDeadline((id) => this.router.jobMap.get(id) !== shard);
    w.header(OP_RESERVE_WAIT, tubes.length * 4, this.connId, tubes.length, timeout < 0 ? 0 : timeout,
      timeout < 0 ? RESERVE_FOREVER : 0, elsewhere);
    for (const t of tubes) w.u32(t.id);
    this.sent();
    this.shardReserves++;
    this.reserveShard = shard;
    if (this.use.shard !== shard) this.block(B_GATE);
  }

  /** A reserve in a shard has its answer: when none is left, the command at the gate goes on. */
  private shardReserveDone(): void {
    if (--this.shardReserves > 0) return;
    this.reserveShard = -1;
    const cmd = this.gatedCmd;
    this.gatedCmd = 0;
    if (cmd !== 0 && !this.closed) this.command(cmd);
    this.unblock(B_GATE);
  }

  /** The reserve waits in its shard (stats: current-waiting, the tubes' current-waiting). */
  private parked(seq: number): void {
    this.parkedSeq = seq;
    this.server.row[ROW_PARKED]++;
  }

  /** It waits no more (answered, or the connection closed: then the shard ends it unanswered). */
  private unparked(): number {
    const seq = this.parkedSeq;
    if (seq < 0) return seq;
    this.parkedSeq = -1;
    this.server.row[ROW_PARKED]--;
    return seq;
  }

  /** What a shard says about the reserve waiting there, or a request it kept behind it (JobHolder). */
  onShardEvent(shard: number, buf: Buffer, at: number): void {
    switch (replyKind(buf, at)) {
      case E_RESERVED: {
        const a = this.reserveAttempt;
        if (a !== null && a.waiting) {
          // A reserve over several shards, parked in each: this shard won its claim.
          this.router.reserves.fan.claimed(a);
          this.onReserved(buf, at);
          return;
        }
        const seq = this.unparked();
        if (seq >= 0) this.reserved(seq, buf, at);
        this.shardReserveDone();
        this.replied();
        return;
      }
      case E_WAIT_END: {
        const seq = this.unparked();
        if (seq >= 0) this.complete(seq, endWord(buf, at));
        this.shardReserveDone();
        this.replied();
        return;
      }
      case E_DEFERRED: {
        const kind = this.kept[this.keptHead];
        const seq = this.kept[this.keptHead + 1];
        this.keptHead += 2;
        if (this.keptHead === this.kept.length) {
          this.kept = NO_KEPT;
          this.keptHead = 0;
        }
        this.onShardReply(shard, kind, seq, buf, deferredAt(at));
        return;
      }
    }
  }

  /** A reserve over tubes of several shards (the fan-in): it holds the parser until it is answered. */
  private startReserve(seq: number, timeoutSec: number): void {
    this.reserveSeq = seq;
    this.block(B_RESERVE);
    const a = (this.reserveAttempt ??= new FanAttempt<Tube>(this));
    a.over((this.watchGroups ??= groupByShard(this.watch.items)));
    this.router.reserves.fan.begin(a, timeoutSec < 0 ? -1 : timeoutSec * 1000);
  }

  /** A command about one job: route it to the job's shard, or NOT_FOUND if no shard has it. */
  private byId(op: number, kind: number, id: number, b: number, c: number): boolean {
    const shard = this.router.jobMap.get(id);
    if (shard < 0) {
      this.answer(REPLY_NOT_FOUND);
      return false;
    }
    if (mayMakeReady(op, c)) this.router.pool.readyStep(shard);
    const w = this.router.pool.request(shard, kind, this, this.nextSeq());
    w.header(op, 0, this.connId, 0, b, c, id);
    this.sent();
    return true;
  }

  // ---- shard replies ----

  /** The reply to a request this connection sent (ReplyTarget). */
  onShardReply(_shard: number, kind: number, seq: number, buf: Buffer, at: number): void {
    const rk = replyKind(buf, at);
    // Kept behind the reserve waiting in that shard: the answer comes later (E_DEFERRED).
    if (rk === R_DEFERRED) {
      if (this.kept === NO_KEPT) this.kept = [];
      this.kept.push(kind, seq);
      return;
    }
    if (rk === R_PARKED) {
      this.parked(seq);
      return;
    }
    this.applyReply(kind, seq, buf, at);
    // Last: a command deferred behind this reply must see its effects (a delete freeing a tube).
    this.replied();
  }

  private applyReply(kind: number, seq: number, buf: Buffer, at: number): void {
    const router = this.router;
    // The change happened but is not on disk: the effects below still apply (the job exists or
    // is gone in memory), the client is told the command failed.
    this.unlogged = replyUnlogged(buf, at);
    const rk = replyKind(buf, at);
    const ok = rk === R_OK;
    const id = replyId(buf, at);
    if (rk === R_DROPPED) {
      this.dropped(kind, buf, at);
      return;
    }
    switch (kind) {
      case K_PUT:
      case K_PUT_NUMBERED: {
        const t = router.tubes.get(okTube(buf, at));
        if (kind === K_PUT_NUMBERED && t !== undefined) router.jobMap.set(id, t.shard);
        this.onPut(seq, id);
        return;
      }
      case K_TAKE_ID: {
        const msg = this.failedPuts?.get(seq) as Buffer;
        this.failedPuts?.delete(seq);
        this.complete(seq, msg);
        return;
      }
      case K_RESERVE_WAIT:
        if (rk === R_JOB) {
          this.reserved(seq, buf, at);
        } else {
          this.complete(seq, endWord(buf, at));
        }
        this.shardReserveDone();
        return;
      case K_RESERVE_JOB:
        if (rk === R_JOB) {
          if (!this.isWorker) {
            this.isWorker = true;
            this.server.row[ROW_WORKERS]++;
          }
          this.reserved(seq, buf, at);
        } else {
          this.onSimple(seq, kind, false, 0);
        }
        return;
      case K_DELETE:
        this.inflightDeletes--;
        if (ok) {
          this.held.remove(id);
          router.deleted(id, okTube(buf, at));
        }
        this.onSimple(seq, kind, ok, 0);
        return;
      case K_RELEASE:
        if (ok) this.held.remove(id);
        this.onSimple(seq, kind, ok, 0);
        return;
      case K_BURY:
        if (ok) this.held.remove(id);
        this.onSimple(seq, kind, ok, 0);
        return;
      case K_TOUCH:
        if (ok) this.held.touched(id, payloadF64(buf, at, 0));
        this.onSimple(seq, kind, ok, 0);
        return;
      case K_KICK: {
        this.onSimple(seq, kind, true, okResult(buf, at));
        return;
      }
      case K_KICK_JOB:
        this.onSimple(seq, kind, ok, 0);
        return;
      case K_PAUSE:
        this.onSimple(seq, kind, true, 0);
        return;
      case K_PEEK:
        this.onFound(seq, buf, at);
        return;
      case K_STATS_JOB:
        this.onStatsJob(seq, buf, at);
        return;
      case K_STATS_TUBE:
        this.onStatsTube(seq, buf, at);
        return;
      case K_TOTALS:
        this.onTotals(buf, at);
        return;
    }
  }

  /**
   * The connection closed while its reserve waited in a shard, and the shard dropped this request
   * it kept behind it, unapplied (beanstalkd never reads past a waiting reserve): undo what was
   * counted when it was sent.
   */
  private dropped(kind: number, buf: Buffer, at: number): void {
    if (kind === K_PUT || kind === K_PUT_NUMBERED) {
      this.server.row[ROW_TOTAL_JOBS]--;
      this.router.putDropped(replyId(buf, at), eventTube(buf, at));
    } else if (kind === K_DELETE) {
      this.inflightDeletes--;
    }
  }

  onPut(seq: number, id: number): void {
    // beanstalkd answers OUT_OF_MEMORY when it cannot reserve log space for a put.
    if (this.unlogged) this.complete(seq, REPLY_OUT_OF_MEMORY);
    else this.completeInserted(seq, id);
  }

  onSimple(seq: number, kind: number, found: boolean, n: number): void {
    if (!found) {
      this.complete(seq, REPLY_NOT_FOUND);
      return;
    }
    if (this.unlogged) {
      this.complete(seq, REPLY_INTERNAL_ERROR);
      return;
    }
    switch (kind) {
      case K_DELETE:
        this.complete(seq, REPLY_DELETED);
        return;
      case K_RELEASE:
        this.complete(seq, REPLY_RELEASED);
        return;
      case K_BURY:
        this.complete(seq, REPLY_BURIED);
        return;
      case K_TOUCH:
        this.complete(seq, REPLY_TOUCHED);
        return;
      case K_KICK_JOB:
        this.complete(seq, REPLY_KICKED);
        return;
      case K_KICK:
        this.complete(seq, Buffer.from(`KICKED ${n}\r\n`, 'latin1'));
        return;
      case K_PAUSE:
        this.complete(seq, REPLY_PAUSED);
        return;
    }
  }

  onFound(seq: number, buf: Buffer, at: number): void {
    if (replyKind(buf, at) !== R_JOB) {
      this.complete(seq, REPLY_NOT_FOUND);
      return;
    }
    this.completeJob(seq, FOUND_, replyId(buf, at), buf, jobBodyAt(at), recordEnd(buf, at));
  }

  onStatsJob(seq: number, buf: Buffer, at: number): void {
    if (replyKind(buf, at) !== R_NUMS) {
      this.complete(seq, REPLY_NOT_FOUND);
      return;
    }
    const tube = this.router.tubes.get(payloadF64(buf, at, JOB_STATS_TUBE));
    this.complete(seq, okYaml(formatJobStats(buf, at, tube ? tube.name : '')));
  }

  onStatsTube(seq: number, buf: Buffer, at: number): void {
    const tubes = this.statsTubes as Map<number, Tube>;
    const t = tubes.get(seq);
    tubes.delete(seq);
    if (t === undefined || replyKind(buf, at) !== R_NUMS) this.complete(seq, REPLY_NOT_FOUND);
    else this.complete(seq, okYaml(formatTubeStats(t, buf, at)));
    this.unblock(B_ANSWER);
  }

  onTotals(buf: Buffer, at: number): void {
    addShardTotals(this.statsSum as Float64Array, buf, at);
    if (--this.statsLeft === 0) {
      this.complete(this.statsSeq, okYaml(formatServerStats(this.server, this.statsSum as Float64Array)));
      this.unblock(B_ANSWER);
    }
  }

  // ---- reservations ----

  // ---- the reserve's side of the fan-in (ReserveClient) ----

  /** A reserve's wait ends DEADLINE_SOON_MS before the soonest TTR end of the jobs it holds. */
  soonMs(): number {
    return this.held.soonestDeadline() - DEADLINE_SOON_MS;
  }

  /** beanstalkd answers a reserve of a connection whose peer shut its sending side at once. */
  get cannotWait(): boolean {
    return this.halfClosed;
  }

  onNone(end: FanEnd): void {
    this.reserveAnswered(end === 'soon' ? REPLY_DEADLINE_SOON : REPLY_TIMED_OUT);
  }

  onReserved(buf: Buffer, at: number): void {
    this.reserved(this.reserveSeq, buf, at);
    this.reserveAnswered(null);
  }

  /** A job was reserved for this connection (reserve or reserve-job). */
  reserved(seq: number, buf: Buffer, at: number): void {
    const id = replyId(buf, at);
    this.held.add(id, jobDeadline(buf, at));
    this.completeJob(seq, RESERVED_, id, buf, jobBodyAt(at), recordEnd(buf, at));
  }

  /** Job `id`'s TTR ran out (JobHolder): no longer held; a waiting reserve's DEADLINE_SOON moves. */
  jobExpired(id: number): void {
    this.held.remove(id);
    if (this.reserveAttempt !== null) this.router.reserves.fan.rearm(this.reserveAttempt);
  }

  /** The reserve is answered (RESERVED was completed by `reserved`, or one of these words). */
  reserveAnswered(word: Buffer | null): void {
    if (word !== null) this.complete(this.reserveSeq, word);
    this.unblock(B_RESERVE);
    this.router.flushSoon();
  }


  // ---- closing ----

  /**
   * The peer shut its sending side. beanstalkd answers a reserve blocked at that moment with
   * TIMED_OUT; we also finish the commands already received, then close.
   */
  halfClose(): void {
    this.halfClosed = true;
    if (this.reserveAttempt !== null) this.router.reserves.fan.endWait(this.reserveAttempt);
    if (this.shardReserves > 0) {
      // Ends the reserve waiting there (TIMED_OUT) and any kept behind it that would wait.
      this.router.pool.request(this.reserveShard, 0, NO_REPLY, 0).header(OP_CANCEL_WAIT, 0, this.connId, 0, 0, 0, 0);
      this.router.flushSoon();
    }
    this.maybeFinish();
  }

  /** The connection is gone: give back what it held, as beanstalkd's connclose does. */
  protected onClose(): void {
    // A reserve waiting in a shard ends there unanswered when the shard reads the close.
    this.unparked();
    this.server.closed(this);
  }
}
