// One load connection: the state machine that speaks either protocol to the server. A thread
// runs a slice of them (slice.ts); they share its read buffer, counters, histograms and ledger.
//
// Hot path, per read: one performance.now(), the reply scanner over the thread's shared read
// buffer (net's `onread`: no Buffer per read), a switch per reply that updates plain counters, a
// histogram and the ledger, and appends follow-up commands to the connection's output buffer;
// then one socket.write for everything the read produced. In-flight commands are kept per
// connection in typed-array rings (kind, send time, job sequence), because beanstalk answers
// each connection's commands in order.
//
// The same loop speaks workq (options.protocol): add for put, lease for reserve, complete for
// delete, with workq.ts's encoders and reply scanner; the code below says put/reserve/delete.

import net from 'node:net';
import {
  ROLE_CONSUMER,
  ROLE_CYCLE,
  ROLE_DRAIN,
  ROLE_PRODUCER,
  COMMAND_WORDS,
  type ConnectionPlan,
  type Protocol,
} from './options.ts';
import {
  CMD_DELETE_PREFIX,
  readBodySeq,
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
import { COMPLETE_ID_OFFSET, COMPLETE_TEMPLATE, leaseCommand, makeAddTemplate, UUID_BYTES, WorkqReplyScanner } from './workq.ts';
import type { Slice } from './slice.ts';

// Kinds of in-flight commands.
const CMD_PUT = 1;
const CMD_RESERVE = 2; //      reserve-with-timeout 0: answered at once, RESERVED or TIMED_OUT
const CMD_RESERVE_WAIT = 5; // reserve-with-timeout T: a consumer waiting for its tube to refill
const CMD_DELETE = 3;
const CMD_SETUP = 4; // use / watch / ignore, before the run starts

/** Open-loop: due puts a connection may queue before further ones are counted as missed. */
const BACKLOG_MAX = 1 << 16;

/** put, reserve, delete, setup, reserve-wait in the protocol's words, by CMD_*: error messages and reports. */
export function commandNames(protocol: Protocol): string[] {
  const words = COMMAND_WORDS[protocol];
  return ['', words.put, words.reserve, words.delete, 'setup', `${words.reserve}-wait`];
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

/** The commands of a connection with this plan: the slice's shared ones (beanstalk), or its own (workq). */
function commandsFor(slice: Slice, plan: ConnectionPlan): WireCommands {
  const { nonce } = slice.task;
  if (!slice.workq) {
    const setup: string[] = [];
    if (plan.useTube >= 0) setup.push(`use ${tubeName(nonce, plan.useTube)}\r\n`);
    for (const t of plan.watchTubes) setup.push(`watch ${tubeName(nonce, t)}\r\n`);
    if (plan.watchTubes.length > 0) setup.push('ignore default\r\n');
    return { put: slice.putTemplate!, idOffset: -1, reserveNow: slice.reserveNowCmd, reserveWait: slice.reserveWaitCmd, setup };
  }
  const o = slice.options;
  const put = plan.useTube < 0 ? null : makeAddTemplate(slice.ids!, nonce, tubeName(nonce, plan.useTube), o.bodyBytes, Math.round(o.ttrS * 1000), Math.round(o.ttlS * 1000));
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

/** A connection that could not be opened or set up: its slice's run fails with it. */
export class SliceFailure extends Error {
  readonly code = 'ERR_BENCH_SLICE';
}

export class LoadConnection implements ReplySink {
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
    this.wire = commandsFor(slice, plan);
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
