// The main thread's side of the shard threads: one worker per shard, a ring each way, a doorbell
// per shard and one for the main thread.
//
// Requests are appended to a per-shard RecordWriter while the main thread handles socket reads;
// `flush()` (once per event-loop turn) copies each batch into its ring and rings the shard's
// doorbell once. Every request gets exactly one reply, in order, so each shard keeps a FIFO of
// what to do with the next reply (kind, session, slot) instead of tagging records.

import { Worker } from 'node:worker_threads';
import { Doorbell } from '../shared/doorbell.ts';
import { isEvent, RecordReader, RecordWriter, replyKind } from '../shared/records.ts';
import { Ring } from '../shared/ring.ts';

/** Bytes of each ring. Large enough that a burst of 64 KiB puts from many connections rarely waits. */
export const RING_BYTES_DEFAULT = 8 * 1024 * 1024;

/**
 * Request bytes queued for one shard beyond what its ring holds, before connections stop parsing
 * (ConnectionHost.backlogFull); they parse again once every shard's queue is below half of it.
 * With the ring, this bounds what the main thread holds for a shard that falls behind: answered
 * puts cannot pile up without limit.
 */
export const BACKLOG_BYTES_DEFAULT = 4 * 1024 * 1024;

/** Whoever a shard's reply to a request is for: a connection, a fan-in attempt, the router itself. */
export interface ReplyTarget {
  /** The reply (at `at` in `buf`, valid during the call) to the request sent with `kind` and `seq`. */
  onShardReply(shard: number, kind: number, seq: number, buf: Buffer, at: number): void;
}

/** The target of requests whose replies nobody needs (every request gets a reply). */
export const NO_REPLY: ReplyTarget = { onShardReply() {} };

/** A FIFO of pending replies: parallel arrays used as a circular queue, no object per entry. */
class PendingFifo {
  private kinds = new Int32Array(1024);
  private seqs = new Float64Array(1024);
  private targets: (ReplyTarget | null)[] = new Array(1024).fill(null);
  private head = 0;
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(kind: number, target: ReplyTarget, seq: number): void {
    if (this.size === this.kinds.length) this.grow();
    const i = (this.head + this.size) & (this.kinds.length - 1);
    this.kinds[i] = kind;
    this.seqs[i] = seq;
    this.targets[i] = target;
    this.size++;
  }

  // Results of shift(), read right after it.
  kind = 0;
  seq = 0;
  target: ReplyTarget = NO_REPLY;

  shift(): boolean {
    if (this.size === 0) return false;
    const i = this.head;
    this.kind = this.kinds[i];
    this.seq = this.seqs[i];
    this.target = this.targets[i] as ReplyTarget;
    this.targets[i] = null;
    this.head = (i + 1) & (this.kinds.length - 1);
    this.size--;
    return true;
  }

  private grow(): void {
    const cap = this.kinds.length;
    const kinds = new Int32Array(cap * 2);
    const seqs = new Float64Array(cap * 2);
    const targets: (ReplyTarget | null)[] = new Array(cap * 2).fill(null);
    for (let k = 0; k < this.size; k++) {
      const i = (this.head + k) & (cap - 1);
      kinds[k] = this.kinds[i];
      seqs[k] = this.seqs[i];
      targets[k] = this.targets[i];
    }
    this.kinds = kinds;
    this.seqs = seqs;
    this.targets = targets;
    this.head = 0;
  }
}

export interface ShardReplyHandler {
  /** An unsolicited event (E_READY, E_TIMED_OUT). */
  event(shard: number, buf: Buffer, at: number): void;
  /** Called after a batch of replies was handled (flush socket output here). */
  batchDone(): void;
  /** A shard thread died: its jobs are gone from memory, so the server must not go on. */
  fatal(shard: number, err: Error): void;
}

interface ShardLink {
  readonly index: number;
  readonly worker: Worker;
  readonly toShard: Ring;
  readonly fromShard: Ring;
  readonly bell: Doorbell;
  readonly writer: RecordWriter;
  readonly reader: RecordReader;
  readonly pending: PendingFifo;
  flushed: number; // bytes of writer already copied into the ring
  held: boolean; // holdRequests (tests)
}

export interface ShardPoolOptions {
  shards: number;
  ringBytes?: number;
  backlogBytes?: number;
  /** Passed to each shard worker (log level etc.). */
  workerData?: Record<string, unknown>;
}

export class ShardPool {
  readonly links: ShardLink[] = [];
  private readonly mainBell = Doorbell.create();
  /** Word 0 set to 1 asks every shard loop to stop (the loops block in Atomics.wait, not on messages). */
  private readonly stop = new Int32Array(new SharedArrayBuffer(4));
  private readonly handler: ShardReplyHandler;
  private flushScheduled = false;
  private running = true;
  private readonly readyPromises: Promise<void>[] = [];
  private readonly backlogMax: number;
  private roomWaiters: { roomAgain(): void }[] = [];
  /** The most request bytes one shard's queue held when a connection checked it (for tests and stats). */
  backlogPeak = 0;

  constructor(opts: ShardPoolOptions, handler: ShardReplyHandler) {
    this.handler = handler;
    const ringBytes = opts.ringBytes ?? RING_BYTES_DEFAULT;
    this.backlogMax = opts.backlogBytes ?? BACKLOG_BYTES_DEFAULT;
    for (let i = 0; i < opts.shards; i++) {
      const toShard = Ring.create(ringBytes);
      const fromShard = Ring.create(ringBytes);
      const bell = Doorbell.create();
      const worker = new Worker(new URL('../../workers/shard.ts', import.meta.url), {
        workerData: {
          index: i,
          toShard: toShard.sab,
          fromShard: fromShard.sab,
          bell: bell.sab,
          mainBell: this.mainBell.sab,
          stop: this.stop.buffer,
          ...opts.workerData,
        },
      });
      let started = false;
      this.readyPromises.push(
        new Promise<void>((resolve, reject) => {
          worker.once('message', () => {
            started = true;
            resolve();
          });
          worker.once('error', (err) => {
            if (started) handler.fatal(i, err);
            else reject(err);
          });
        }),
      );
      this.links.push({
        index: i,
        worker,
        toShard,
        fromShard,
        bell,
        writer: new RecordWriter(),
        reader: new RecordReader(),
        pending: new PendingFifo(),
        flushed: 0,
        held: false,
      });
    }
    this.pump();
  }

  /** Resolves once every shard thread has loaded and is serving its ring. */
  ready(): Promise<void> {
    return Promise.all(this.readyPromises).then(() => undefined);
  }

  /** Registers what to do with the shard's next reply and returns its writer for the request. */
  request(shard: number, kind: number, target: ReplyTarget, seq: number): RecordWriter {
    const link = this.links[shard];
    link.pending.push(kind, target, seq);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
    return link.writer;
  }

  private readonly flushNow = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  /** Copies queued requests into the rings; what does not fit stays queued for the next wake-up. */
  flush(): void {
    for (const link of this.links) {
      const w = link.writer;
      if (w.len === link.flushed || link.held) continue;
      const n = link.toShard.write(w.buf, link.flushed, w.len - link.flushed);
      link.flushed += n;
      if (link.flushed === w.len) {
        w.reset();
        link.flushed = 0;
      }
      if (n > 0) link.bell.ring();
    }
    if (this.roomWaiters.length > 0 && this.largestBacklog() <= this.backlogMax / 2) {
      const waiters = this.roomWaiters;
      this.roomWaiters = [];
      for (const c of waiters) c.roomAgain(); // may parse, request, and wait again
    }
  }

  /**
   * For tests: while held, requests to `shard` wait on the main thread instead of entering its
   * ring, as if the shard or its ring had stalled for that long (the shard's clock runs on).
   */
  holdRequests(shard: number, held: boolean): void {
    this.links[shard].held = held;
    if (!held) this.flush();
  }

  /** Some shard's queue holds more than the limit. */
  backlogFull(): boolean {
    const n = this.largestBacklog();
    if (n > this.backlogPeak) this.backlogPeak = n;
    return n > this.backlogMax;
  }

  waitForRoom(c: { roomAgain(): void }): void {
    this.roomWaiters.push(c);
  }

  /** Request bytes of the fullest shard queue not yet copied into its ring. */
  private largestBacklog(): number {
    let max = 0;
    for (const link of this.links) max = Math.max(max, link.writer.len - link.flushed);
    return max;
  }

  private hasUnflushed(): boolean {
    for (const link of this.links) if (link.writer.len !== link.flushed) return true;
    return false;
  }

  private anyReadable(): boolean {
    for (const link of this.links) if (link.fromShard.readable() > 0) return true;
    return false;
  }

  /** Reads every shard's replies; yields to the event loop between batches so sockets are served. */
  private readonly pump = (): void => {
    if (!this.running) return;
    let handled = false;
    for (const link of this.links) {
      const r = link.reader;
      for (;;) {
        r.prepare(64 * 1024);
        const n = link.fromShard.read(r.buf, r.end, r.buf.length - r.end);
        if (n === 0) break;
        r.end += n;
        handled = true;
        let at: number;
        while ((at = r.next()) !== -1) {
          const kind = replyKind(r.buf, at);
          if (isEvent(kind)) {
            this.handler.event(link.index, r.buf, at);
          } else {
            const p = link.pending;
            if (!p.shift()) throw new Error(`shard ${link.index}: reply without a request`);
            p.target.onShardReply(link.index, p.kind, p.seq, r.buf, at);
          }
        }
      }
    }
    if (handled) this.handler.batchDone();
    // A ring that was full may have room now.
    if (this.hasUnflushed()) this.flush();
    const seq = this.mainBell.prepareWait();
    if (this.anyReadable() || (handled && this.hasUnflushed())) {
      this.mainBell.cancelWait();
      setImmediate(this.pump);
      return;
    }
    void this.mainBell.waitAsync(seq).then(this.pump);
  };

  /** Stops the shard threads and waits for them to exit. */
  async close(): Promise<void> {
    const exits = this.links.map(
      (l) =>
        new Promise<void>((resolve) => {
          l.worker.once('exit', () => resolve());
        }),
    );
    Atomics.store(this.stop, 0, 1);
    for (const link of this.links) link.bell.ring();
    this.running = false;
    this.mainBell.ring(); // let a pending waitAsync settle
    await Promise.all(exits);
  }
}
