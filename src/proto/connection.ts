// What every protocol's connection shares: replies kept in command order, one socket write per
// event-loop turn, and backpressure on both sides (too many replies owed, a peer that does not
// read, a peer that sends faster than its commands can run).
//
// A command takes a numbered reply slot (`nextSeq`); its reply fills the slot (`complete`) when
// it is known — at once, or when a shard answers — and replies leave strictly in slot order.
// Replies that can leave now are copied into the connection's output bytes (`acc`) rather than
// kept as one Buffer each, and the commonest ones (INSERTED, RESERVED) are written straight
// into it: no object per reply on the pipelined paths.
// Reasons to stop parsing are bits (`block` / `unblock`): this class owns B_PENDING, B_OUTPUT,
// B_QUIT and B_BACKLOG; subclasses use the other bits for their own reasons (a blocking command,
// a barrier).
//
// Nothing here knows about sockets or threads: the transport is an interface, so a connection
// can run on any thread that owns the socket.

import { copyBytes } from '../shared/bytes.ts';
import type { StreamParser } from './stream.ts';

export interface Transport {
  /**
   * Returns false when the peer is not reading fast enough (stop producing). The transport may
   * keep `data` only while bufferedOut() > 0 after the call: at 0 the caller may reuse it.
   */
  write(data: Buffer): boolean;
  end(): void;
  /** Stop / restart reading from the peer (backpressure on input). */
  pauseReading(): void;
  resumeReading(): void;
  /** Reply bytes accepted by write() but not yet sent. */
  bufferedOut(): number;
}

/** What a connection needs of the thread that runs it. */
export interface ConnectionHost {
  /** Batches output: a connection with new replies is flushed once at the end of the turn. */
  markDirty(c: { flush(): void }): void;
  flushSoon(): void;
  /** A read was parsed: the host flushes at the end of the turn, or now (see Router.readDone). */
  readDone(): void;
  /** The requests queued for the shards are over their limit: stop parsing. */
  backlogFull(): boolean;
  /** Call `c.roomAgain()` once the queues to the shards have drained enough. */
  waitForRoom(c: { roomAgain(): void }): void;
  /** Hands the requests queued so far to the shards now (before the connection's socket is shut). */
  flushRequests(): void;
}

/**
 * Commands of one connection whose replies are not sent yet, before it stops parsing more. Deep
 * enough for full speed (a shard round trip is tens of microseconds), shallow enough that the
 * replies it can owe are bounded: at most this many job bodies.
 */
export const PENDING_REPLIES_MAX = 128;
/** Reply bytes queued for a connection (ours plus the socket's) before it stops parsing commands. */
export const OUTPUT_BUFFERED_MAX = 1024 * 1024;
/**
 * Received bytes a held connection may buffer before we stop reading its socket. Reading goes on
 * below it, so a client that hangs up while its blocking command waits is still noticed; above
 * it the kernel's socket buffers push back on the client.
 */
export const INPUT_BUFFERED_MAX = 1024 * 1024;

/**
 * Replies up to this size are copied into the connection's output bytes; longer ones (job bodies)
 * are queued as they are, so a big body is copied once, by the socket.
 */
export const COPY_REPLY_MAX = 1024;
/** Output bytes one connection keeps between turns; a turn that needed more gives them back. */
const ACC_KEEP_MAX = 16 * 1024;
const ACC_MIN = 256;
const EMPTY = Buffer.alloc(0);
/** The reply ring of a connection with at most one command in flight: none (see Connection.slots). */
const NO_SLOTS: (Buffer | undefined)[] = Object.freeze([]) as unknown as (Buffer | undefined)[];
/** The reply ring's first size. */
const SLOTS_FIRST = 4;
/** What an idle connection holds instead of an empty array of its own (frozen: a push throws). */
const NO_BUFFERS: Buffer[] = Object.freeze([]) as unknown as Buffer[];

const INSERTED_ = Buffer.from('INSERTED ', 'latin1');
/** Bytes `writeInserted` may use. */
const INSERTED_ROOM = 32;

/** Writes `INSERTED <id>\r\n` at `p`; returns the end. */
function writeInserted(out: Uint8Array, p: number, id: number): number {
  out.set(INSERTED_, p);
  p = writeDecimal(out, p + INSERTED_.length, id);
  out[p++] = 13;
  out[p++] = 10;
  return p;
}

/** Writes `<word> <id> <bytes>\r\n<body>\r\n` at `p` (room for word + 48 + body); returns the end. */
function writeJob(out: Uint8Array, p: number, word: Buffer, id: number, body: Uint8Array, start: number, end: number): number {
  out.set(word, p);
  p = writeDecimal(out, p + word.length, id);
  out[p++] = 32;
  p = writeDecimal(out, p, end - start);
  out[p++] = 13;
  out[p++] = 10;
  copyBytes(out, p, body, start, end);
  p += end - start;
  out[p++] = 13;
  out[p++] = 10;
  return p;
}

/** Writes the decimal digits of a non-negative safe integer at `pos`; returns the end. */
export function writeDecimal(buf: Uint8Array, pos: number, n: number): number {
  let digits = 1;
  for (let t = n; t >= 10; t = Math.floor(t / 10)) digits++;
  let i = pos + digits;
  const end = i;
  do {
    const q = Math.floor(n / 10);
    buf[--i] = 48 + (n - q * 10);
    n = q;
  } while (n > 0);
  return end;
}

export const B_PENDING = 4; // too many replies outstanding
export const B_OUTPUT = 8; //  the peer is not reading
export const B_QUIT = 16; //   close once every reply is out
export const B_BACKLOG = 128; // the queues to the shards are full (see ConnectionHost.backlogFull)

export abstract class Connection {
  readonly connId: number;
  readonly transport: Transport;
  closed = false;
  /** The peer will send nothing more (TCP FIN). */
  halfClosed = false;

  protected abstract readonly parser: StreamParser;
  private readonly scheduler: ConnectionHost;

  // Replies in command order: slot seq lives at seq % slots.length. Made once two commands are in
  // flight (with one, its reply is the head and goes straight out), then grown by doubling: an
  // idle connection, and one that sends a command and waits, holds none (80 bytes a connection).
  private slots: (Buffer | undefined)[] = NO_SLOTS;
  protected slotHead = 0; // seq of the oldest reply not yet sent
  protected slotNext = 0; // seq of the next command
  private out: Buffer[] = NO_BUFFERS; // sealed output of this turn, in order, before acc (an array once needed)
  private acc: Buffer = EMPTY; // output bytes of this turn after `out`
  private accLen = 0;
  private outBytes = 0;
  private dirty = false;
  protected blocked = 0;
  private readingPaused = false;

  constructor(scheduler: ConnectionHost, connId: number, transport: Transport) {
    this.scheduler = scheduler;
    this.connId = connId;
    this.transport = transport;
  }

  // ---- input ----

  /** The first `len` bytes of `chunk` were read (the chunk is valid only during the call). */
  receive(chunk: Buffer, len = chunk.length): void {
    if (this.closed) return;
    this.parser.push(chunk, len);
    if (!this.readingPaused && this.parser.bufferedBytes > INPUT_BUFFERED_MAX) {
      this.readingPaused = true;
      this.transport.pauseReading();
    }
    this.scheduler.readDone();
  }

  protected block(bit: number): void {
    this.blocked |= bit;
    this.parser.pause();
  }

  protected unblock(bit: number): void {
    if ((this.blocked & bit) === 0) return;
    this.blocked &= ~bit;
    if (this.blocked === 0 && !this.closed) {
      this.parser.resume();
      if (this.readingPaused && this.parser.bufferedBytes <= INPUT_BUFFERED_MAX) {
        this.readingPaused = false;
        this.transport.resumeReading();
      }
      if (this.halfClosed) this.maybeFinish();
    }
  }

  /**
   * A request went to a shard: while the queues to the shards are over their limit, parse no
   * more (a shard that falls behind pushes back on the clients instead of piling up here).
   */
  protected requested(): void {
    if ((this.blocked & B_BACKLOG) === 0 && this.scheduler.backlogFull()) {
      this.block(B_BACKLOG);
      this.scheduler.waitForRoom(this);
    }
  }

  /** The queues to the shards drained: parse again. */
  roomAgain(): void {
    this.unblock(B_BACKLOG);
  }

  /** The transport drained: read commands again. */
  drained(): void {
    this.unblock(B_OUTPUT);
  }

  // ---- replies in order ----

  protected nextSeq(): number {
    const seq = this.slotNext++;
    const pending = this.slotNext - this.slotHead;
    if (pending > this.slots.length && pending > 1) {
      // Grow the ring, keeping each pending slot at seq % length.
      const old = this.slots;
      const next: (Buffer | undefined)[] = new Array(Math.max(SLOTS_FIRST, old.length * 2));
      if (old.length > 0) for (let s = this.slotHead; s < seq; s++) next[s % next.length] = old[s % old.length];
      this.slots = next;
    }
    if (this.slotNext - this.slotHead >= PENDING_REPLIES_MAX) this.block(B_PENDING);
    return seq;
  }

  /** The reply of command `seq` is known (seq -1: it was answered already). */
  complete(seq: number, reply: Buffer): void {
    if (this.closed || seq < 0) return;
    if (seq !== this.slotHead) {
      this.slots[seq % this.slots.length] = reply;
      return;
    }
    this.emit(reply);
    this.advance();
  }

  /** `INSERTED <id>` for command `seq`, written straight into the output when it can leave now. */
  protected completeInserted(seq: number, id: number): void {
    if (this.closed || seq < 0) return;
    if (seq !== this.slotHead) {
      const out = Buffer.allocUnsafe(INSERTED_ROOM);
      this.slots[seq % this.slots.length] = out.subarray(0, writeInserted(out, 0, id));
      return;
    }
    const at = this.room(INSERTED_ROOM);
    this.wrote(writeInserted(this.acc, at, id) - at);
    this.advance();
  }

  /**
   * `<word> <id> <bytes>\r\n<body>\r\n` (RESERVED, FOUND) for command `seq`: written straight into
   * the output when it can leave now and is small, one Buffer otherwise.
   */
  protected completeJob(seq: number, word: Buffer, id: number, body: Uint8Array, start: number, end: number): void {
    if (this.closed || seq < 0) return;
    const n = end - start;
    if (seq !== this.slotHead || n > COPY_REPLY_MAX) {
      // One Buffer, one copy of the body.
      const out = Buffer.allocUnsafe(word.length + 48 + n);
      this.complete(seq, out.subarray(0, writeJob(out, 0, word, id, body, start, end)));
      return;
    }
    const at = this.room(word.length + 48 + n);
    this.wrote(writeJob(this.acc, at, word, id, body, start, end) - at);
    this.advance();
  }

  /** The head reply went out: send every later one that is ready, then lift what it allows. */
  private advance(): void {
    this.slotHead++;
    for (;;) {
      if (this.slotHead === this.slotNext) break; // (else two or more were in flight: slots exist)
      const i = this.slotHead % this.slots.length;
      const r = this.slots[i];
      if (r === undefined) break;
      this.slots[i] = undefined;
      this.emit(r);
      this.slotHead++;
    }
    if ((this.blocked & B_PENDING) !== 0 && this.slotNext - this.slotHead < PENDING_REPLIES_MAX / 2) {
      this.unblock(B_PENDING);
    }
    if ((this.blocked & B_QUIT) !== 0 && this.slotHead === this.slotNext) this.closeAfterFlush();
    else if (this.halfClosed) this.maybeFinish();
  }

  /** A reply decided now, in order after everything pending. Returns whether parsing may go on. */
  protected answer(reply: Buffer): boolean {
    this.complete(this.nextSeq(), reply);
    return this.blocked === 0;
  }

  private emit(reply: Buffer): void {
    const n = reply.length;
    if (n <= COPY_REPLY_MAX) {
      const at = this.room(n); // first: it may replace acc
      this.acc.set(reply, at);
      this.accLen += n;
    } else {
      this.seal();
      this.queueOut(reply);
    }
    this.counted(n);
  }

  /** Offset in `acc` where `n` more bytes fit (grows it, keeping what it holds). */
  private room(n: number): number {
    const need = this.accLen + n;
    if (need > this.acc.length) {
      let size = Math.max(ACC_MIN, this.acc.length * 2);
      while (size < need) size *= 2;
      const bigger = Buffer.allocUnsafeSlow(size);
      this.acc.copy(bigger, 0, 0, this.accLen);
      this.acc = bigger;
    }
    return this.accLen;
  }

  /** `n` bytes were written at the end of `acc`. */
  private wrote(n: number): void {
    this.accLen += n;
    this.counted(n);
  }

  private counted(n: number): void {
    this.outBytes += n;
    if (this.outBytes > OUTPUT_BUFFERED_MAX && (this.blocked & B_OUTPUT) === 0) this.block(B_OUTPUT);
    if (!this.dirty) {
      this.dirty = true;
      this.scheduler.markDirty(this);
    }
  }

  /** Appends to `out`, giving it an array of its own first if it has none. */
  private queueOut(b: Buffer): void {
    if (this.out === NO_BUFFERS) this.out = [];
    this.out.push(b);
  }

  /** Moves the bytes in `acc` into `out` as a Buffer of their own (acc is reused). */
  private seal(): void {
    if (this.accLen === 0) return;
    const b = Buffer.allocUnsafe(this.accLen);
    this.acc.copy(b, 0, 0, this.accLen);
    this.queueOut(b);
    this.accLen = 0;
  }

  /** Writes what this turn produced with one write call. */
  flush(): void {
    this.dirty = false;
    if (this.closed || (this.out.length === 0 && this.accLen === 0)) return;
    let data: Buffer;
    const lent = this.out.length === 0;
    if (lent) {
      // Only small replies (the usual turn): write them from acc itself, no Buffer of their own.
      data = this.acc.subarray(0, this.accLen);
      this.accLen = 0;
    } else {
      this.seal();
      data = this.out.length === 1 ? this.out[0] : Buffer.concat(this.out);
      this.out = NO_BUFFERS;
    }
    this.outBytes = 0;
    const below = this.transport.write(data);
    // A transport that could not send it all at once keeps acc: the next turn writes into a new one.
    if ((lent && this.transport.bufferedOut() > 0) || this.acc.length > ACC_KEEP_MAX) this.acc = EMPTY;
    // Below the socket's high-water mark: go on reading; above it, wait for 'drain'.
    if (below) this.unblock(B_OUTPUT);
    else this.block(B_OUTPUT);
  }

  // ---- closing ----

  /** Every command received has been answered and nothing holds the parser: close if the peer is done. */
  protected maybeFinish(): void {
    if (this.closed || this.blocked !== 0 || this.slotHead !== this.slotNext) return;
    if (this.parser.bufferedBytes > 0) return;
    this.closeAfterFlush();
  }

  protected closeAfterFlush(): void {
    this.flush();
    // What the close gives back (held jobs, a reserve waiting in a shard) reaches the shards
    // before the peer can see the connection end: beanstalkd has released them by then, and the
    // peer may go on on another connection, served on another thread.
    this.close();
    this.scheduler.flushRequests();
    this.transport.end();
  }

  /** The peer shut its sending side: finish the commands already received, then close. */
  halfClose(): void {
    this.halfClosed = true;
    this.maybeFinish();
  }

  /** The connection is gone. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }

  /** Give back what the connection held (subclasses). */
  protected abstract onClose(): void;
}
