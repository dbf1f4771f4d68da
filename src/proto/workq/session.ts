// One workq connection: the parser's sink, and replies in command order.
//
// The real server runs one command of a connection at a time. Here commands that only need the
// main thread's state (add's duplicate check, delete, inspect server, an unknown id) answer at
// once, complete and fail go to their job's shard and answer when it replies, and the commands
// that block or gather (lease, run, result, inspect of queues and jobs) hold the parser until they
// are answered, so a pipeline sees the server's one-at-a-time order.

import { Connection, type ConnectionHost, type Transport } from '../connection.ts';
import { type ResultClient, WorkqRouter, type WqQueue } from '../../route/workq.ts';
import type { ReplyTarget } from '../../route/shards.ts';
import {
  okResult, OP_WQ_ADD, OP_WQ_COMPLETE, OP_WQ_FAIL, OP_WQ_RESULT, R_JOB, R_OK, payloadAt, recordEnd, replyId, replyKind,
  replyUnlogged, WQ_ADD_FIXED, WQ_DONE_NOT_FOUND, WQ_DONE_OK, wqJobPayloadAt, wqJobTtr, wqJobUuidAt, wqResultSuccess,
} from '../../shared/records.ts';
import {
  CMD_ADD, CMD_COMPLETE, CMD_DELETE, CMD_FAIL, CMD_INSPECT_JOB, CMD_INSPECT_JOBS, CMD_INSPECT_QUEUE,
  CMD_INSPECT_QUEUES, CMD_INSPECT_SCHEDULED_JOBS, CMD_INSPECT_SERVER, CMD_LEASE, CMD_RESULT, CMD_RUN,
  CMD_SCHEDULE,
} from './commands.ts';
import { K_WQ_ADD, K_WQ_DELETE, K_WQ_DONE, K_WQ_INSPECT, K_WQ_LENS, K_WQ_RESULT } from './kinds.ts';
import { Parser, type WorkqSink } from './parser.ts';
import {
  inspectReply, inspectServerReply, jobBlock, queueBlock, REPLY_DUPLICATE_JOB, REPLY_DUPLICATE_RESULT,
  leaseReply, resultReply, REPLY_NOT_FOUND, REPLY_OK, REPLY_OK_0, REPLY_TIMEOUT, REPLY_UNLOGGED, uuidText,
} from './replies.ts';
import { FanAttempt, type FanEnd } from '../../route/fanin.ts';
import type { LeaseClient } from '../../route/lease.ts';

const B_WAIT = 1; // a blocking or gathering command is being answered

export class WorkqSession extends Connection implements WorkqSink, LeaseClient, ResultClient, ReplyTarget {
  protected readonly parser: Parser;
  private readonly router: WorkqRouter;

  // The lease being answered: its reply slot, and its attempt in the fan-in (made on the first
  // lease; the fan-in keeps the attempt's state).
  private leaseSeq = 0;
  leaseAttempt: FanAttempt<WqQueue> | null = null;

  // result: what the reply needs
  private waitId = 0;
  private waitShard = 0;
  private waitIdText = '';
  private waitTimeoutMs = 0;

  // inspect queue(s): lengths gathered from the shards
  private lensNames: string[] = [];
  private lensAt = new Map<number, number[]>(); // per shard: indexes into lensNames, in request order
  private lens: Float64Array = new Float64Array(0);
  private lensLeft = 0;

  constructor(scheduler: ConnectionHost, router: WorkqRouter, connId: number, transport: Transport) {
    super(scheduler, connId, transport);
    this.router = router;
    this.parser = new Parser(this);
    router.clients++;
  }

  // ---- the parser's sink ----

  reply(msg: Buffer): boolean {
    return this.answer(msg);
  }

  /** workq server: a line ending in a bare \n is a read error there and the connection drops. */
  drop(): void {
    if (!this.closed) this.closeAfterFlush();
  }

  command(cmd: number): boolean {
    const p = this.parser;
    const router = this.router;
    switch (cmd) {
      case CMD_ADD:
      case CMD_SCHEDULE:
      case CMD_RUN:
        return this.add(cmd);
      case CMD_LEASE: {
        const queues: WqQueue[] = [];
        for (const name of p.names) queues.push(router.findOrMakeQueue(name));
        this.leaseSeq = this.nextSeq();
        this.block(B_WAIT);
        router.lease((this.leaseAttempt ??= new FanAttempt<WqQueue>(this)), queues, p.timeoutMs);
        return false;
      }
      case CMD_COMPLETE:
      case CMD_FAIL: {
        const i = router.uuids.lookup(p.id);
        if (i === -1) return this.answer(REPLY_NOT_FOUND);
        const id = router.uuids.idAt(i);
        const seq = this.nextSeq();
        const w = router.request(router.uuids.shardAt(i), K_WQ_DONE, this, seq);
        w.header(cmd === CMD_COMPLETE ? OP_WQ_COMPLETE : OP_WQ_FAIL, p.bodyEnd - p.bodyStart, 0, 0, 0, 0, id);
        w.bytes(p.body, p.bodyStart, p.bodyEnd);
        this.requested();
        return this.blocked === 0;
      }
      case CMD_DELETE: {
        const i = router.uuids.lookup(p.id);
        if (i === -1) return this.answer(REPLY_NOT_FOUND);
        if (router.earlyAck) {
          router.deleteJob(p.id, router.uuids.idAt(i), router.uuids.shardAt(i));
          this.requested();
          return this.answer(REPLY_OK);
        }
        router.deleteJob(p.id, router.uuids.idAt(i), router.uuids.shardAt(i), this, K_WQ_DELETE, this.nextSeq());
        this.requested();
        return this.blocked === 0;
      }
      case CMD_RESULT: {
        const i = router.uuids.lookup(p.id);
        if (i === -1) return this.answer(REPLY_NOT_FOUND);
        this.waitId = router.uuids.idAt(i);
        this.waitShard = router.uuids.shardAt(i);
        this.waitIdText = p.idText;
        this.waitTimeoutMs = p.timeoutMs;
        const seq = this.nextSeq();
        this.block(B_WAIT);
        router.request(this.waitShard, K_WQ_RESULT, this, seq).header(OP_WQ_RESULT, 0, 0, 0, 0, 0, this.waitId);
        return false;
      }
      case CMD_INSPECT_SERVER:
        return this.answer(inspectServerReply(router.clients, router.evicted, router.startedMs));
      case CMD_INSPECT_QUEUES: {
        const names = router.sortedNames();
        if (p.offset >= names.length) return this.answer(REPLY_OK_0);
        return this.gatherLens(names.slice(p.offset, p.offset + p.limit));
      }
      case CMD_INSPECT_QUEUE:
        if (router.queue(p.name) === undefined) return this.answer(REPLY_NOT_FOUND);
        return this.gatherLens([p.name]);
      case CMD_INSPECT_JOBS:
      case CMD_INSPECT_SCHEDULED_JOBS: {
        const q = router.queue(p.name);
        if (q === undefined) return this.answer(REPLY_NOT_FOUND);
        const seq = this.nextSeq();
        this.block(B_WAIT);
        router.requestJobs(q, cmd === CMD_INSPECT_SCHEDULED_JOBS, p.offset, p.limit, this, K_WQ_INSPECT, seq);
        return false;
      }
      case CMD_INSPECT_JOB: {
        const i = router.uuids.lookup(p.id);
        if (i === -1) return this.answer(REPLY_NOT_FOUND);
        const seq = this.nextSeq();
        this.block(B_WAIT);
        router.requestJob(i, this, K_WQ_INSPECT, seq);
        return false;
      }
    }
    throw new Error(`workq command ${cmd} has no handler`);
  }

  /** add, schedule, run: the UUID is taken on the main thread, so a duplicate is known at once. */
  private add(cmd: number): boolean {
    const p = this.parser;
    const router = this.router;
    const q = router.findOrMakeQueue(p.name);
    const id = router.newId();
    if (!router.uuids.insert(p.id, 0, id, q.shard)) return this.answer(REPLY_DUPLICATE_JOB);
    const run = cmd === CMD_RUN;
    const scheduled = cmd === CMD_SCHEDULE && !p.scheduleZero;
    const len = p.bodyEnd - p.bodyStart;
    // In memory the add cannot fail now: answered at once. With a log, once it is logged.
    const logged = !run && !router.earlyAck;
    const w = router.request(q.shard, K_WQ_ADD, logged ? this : router.addedEarly, logged ? this.nextSeq() : 0);
    w.header(OP_WQ_ADD, WQ_ADD_FIXED + len, 0, q.id, p.priority, p.ttrMs, id);
    w.f64(run ? 0 : p.ttlMs); // a run's job has no TTL: it is deleted when the run returns
    w.f64(scheduled ? p.scheduleMs : NaN);
    w.f64(Date.now());
    w.u32(run ? 0 : p.maxAttempts | (p.maxFails << 8));
    w.u32(0);
    w.bytes(p.id, 0, 16);
    w.bytes(p.body, p.bodyStart, p.bodyEnd);
    this.requested();
    if (logged) return this.blocked === 0;
    if (!run) return this.answer(REPLY_OK);
    const seq = this.nextSeq();
    this.block(B_WAIT);
    router.waitResult(this, seq, id, q.shard, p.idText, p.timeoutMs, Uint8Array.from(p.id));
    return false;
  }

  /** inspect queue / queues: ready and scheduled lengths of each named queue, from its shard. */
  private gatherLens(names: string[]): boolean {
    this.lensNames = names;
    this.lens = new Float64Array(names.length * 2);
    const seq = this.nextSeq();
    this.block(B_WAIT);
    this.lensAt = this.router.requestLens(names, this, K_WQ_LENS, seq);
    this.lensLeft = this.lensAt.size;
    return false;
  }

  // ---- answers ----

  // ---- the lease's side of the fan-in (LeaseClient) ----

  /** A lease's wait has no early end. */
  soonMs(): number {
    return Infinity;
  }

  /** The server keeps waiting after the peer shuts its sending side (until the lease's timeout). */
  get cannotWait(): boolean {
    return false;
  }

  onNone(_end: FanEnd): void {
    this.answered(this.leaseSeq, REPLY_TIMEOUT);
  }

  onLeased(buf: Buffer, at: number, queue: WqQueue): void {
    // With a log, a lease it could not record is refused; the job comes back at its TTR end.
    if (replyUnlogged(buf, at)) {
      this.answered(this.leaseSeq, REPLY_UNLOGGED);
      return;
    }
    const idText = uuidText(buf, wqJobUuidAt(at));
    this.answered(this.leaseSeq, leaseReply(idText, queue.name, wqJobTtr(buf, at), buf, wqJobPayloadAt(at), recordEnd(buf, at)));
  }

  /** The blocking command `seq` is answered: send it and read on. */
  answered(seq: number, reply: Buffer): void {
    this.complete(seq, reply);
    this.unblock(B_WAIT);
  }

  /** The wait of run or result `seq` ended (ResultClient): the result, or (null) TIMEOUT. */
  onResult(seq: number, idText: string, buf: Buffer | null, at: number): void {
    if (buf === null) {
      this.answered(seq, REPLY_TIMEOUT);
      return;
    }
    this.answered(seq, resultReply(idText, wqResultSuccess(buf, at), buf, payloadAt(at), recordEnd(buf, at)));
  }

  /** The reply to a request this connection sent (ReplyTarget). */
  onShardReply(shard: number, kind: number, seq: number, buf: Buffer, at: number): void {
    const rk = replyKind(buf, at);
    switch (kind) {
      case K_WQ_ADD:
        // With a log, add waits for this reply; a change the log could not take is an error.
        this.complete(seq, replyUnlogged(buf, at) ? REPLY_UNLOGGED : REPLY_OK);
        this.router.added(buf, at);
        return;
      case K_WQ_DELETE:
        this.complete(seq, replyUnlogged(buf, at) ? REPLY_UNLOGGED : REPLY_OK);
        return;
      case K_WQ_DONE: {
        const code = okResult(buf, at);
        if (code === WQ_DONE_OK) {
          this.complete(seq, replyUnlogged(buf, at) ? REPLY_UNLOGGED : REPLY_OK);
          this.router.processed(replyId(buf, at), shard);
        } else {
          this.complete(seq, code === WQ_DONE_NOT_FOUND ? REPLY_NOT_FOUND : REPLY_DUPLICATE_RESULT);
        }
        return;
      }
      case K_WQ_RESULT:
        if (rk === R_JOB) this.onResult(seq, this.waitIdText, buf, at);
        else if (rk === R_OK) this.router.waitResult(this, seq, this.waitId, this.waitShard, this.waitIdText, this.waitTimeoutMs, null);
        else this.answered(seq, REPLY_NOT_FOUND);
        return;
      case K_WQ_LENS: {
        WorkqRouter.readLens(buf, at, this.lensAt.get(shard) ?? [], this.lens);
        if (--this.lensLeft > 0) return;
        const blocks = this.lensNames.map((name, i) => queueBlock(name, this.lens[i * 2], this.lens[i * 2 + 1]));
        this.lensNames = [];
        this.answered(seq, inspectReply(blocks));
        return;
      }
      case K_WQ_INSPECT: {
        const jobs = this.router.readJobs(buf, at);
        if (jobs === null) {
          this.answered(seq, REPLY_NOT_FOUND);
          return;
        }
        const blocks = jobs.map(jobBlock);
        this.answered(seq, inspectReply(blocks));
        return;
      }
    }
  }

  protected onClose(): void {
    this.router.closed(this.leaseAttempt);
  }
}
