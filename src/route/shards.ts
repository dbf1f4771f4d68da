// The routing layer's side of the shards. A shard lives either on a thread of its own (a worker
// serving a ring each way, with a doorbell per shard and one for this thread), or on this very
// thread (a ShardCore called in the same turn: no hop, no wake-up). Connections see no difference:
// they append requests to the shard's RecordWriter and get each reply through the ReplyTarget they
// named, always in a later callback than the request, in request order.
//
// Requests are appended while this thread handles socket reads; `flush()` (once per event-loop
// turn) hands each batch over: a thread's shard gets it copied into its ring and one doorbell;
// the shard on this thread applies it at once and its replies are delivered before flush()
// returns. Every request gets exactly one reply, in order, so each shard keeps a FIFO of what to
// do with the next reply (kind, target, seq) instead of tagging records.

import { Worker } from 'node:worker_threads';
import { Doorbell } from '../shared/doorbell.ts';
import { f64le, u32le } from '../shared/bytes.ts';
import { delayUntil } from '../shared/timer.ts';
import {
  E_WQ_GONE, E_WQ_READY, eventConn, HEADER_BYTES, isEvent, OP_AFTER, OP_BATCH, RecordReader, RecordWriter, recordEnd,
  replyKind,
} from '../shared/records.ts';
import { StepOrder } from '../shared/order.ts';
import { BatchSequence, before } from '../shared/sequence.ts';
import { Ring } from '../shared/ring.ts';
import { ShardCore, type ShardConfig } from '../../workers/core.ts';
import { newHistogram, observe } from '../shared/histogram.ts';
import { NO_REPLY, PendingFifo, type ReplyTarget } from './pending.ts';

export { NO_REPLY, type ReplyTarget };

/** Bytes of each ring. Large enough that a burst of 64 KiB puts from many connections rarely waits. */
export const RING_BYTES_DEFAULT = 8 * 1024 * 1024;
/** Bytes of each ring between the threads of a mesh (sites × shards pairs of them, so smaller). */
export const MESH_RING_BYTES_DEFAULT = 2 * 1024 * 1024;

/**
 * The rings between the threads ("sites") of a server whose connections are served on several
 * threads. Site s < shards runs shard s and serves connections; site `shards` is the main thread,
 * which accepts sockets, serves workq and the HTTP port, and runs no shard. Each site has one
 * doorbell, rung by whoever writes into a ring that site reads. All of it is SharedArrayBuffers,
 * so it goes to each thread in workerData.
 */
export interface Mesh {
  readonly shards: number;
  /** Per site. */
  readonly bells: readonly SharedArrayBuffer[];
  /** requests[site][shard]: requests from `site` to `shard` (null where the shard runs on that site). */
  readonly requests: readonly (readonly (SharedArrayBuffer | null)[])[];
  /** replies[site][shard]: replies and events from `shard` to `site`. */
  readonly replies: readonly (readonly (SharedArrayBuffer | null)[])[];
  /** Per shard: its log's fsync durations (where the shard runs writes them). */
  readonly fsyncs: readonly Float64Array[];
  /** hops[site][shard]: that site's round trips to that shard (RingLink.hops; null where the shard runs on the site). */
  readonly hops: readonly (readonly (Float64Array | null)[])[];
  /** The segments' numbers, what each site is writing, each shard's frontier (src/shared/sequence.ts). */
  readonly order: SharedArrayBuffer;
}

export function makeMesh(shards: number, ringBytes = MESH_RING_BYTES_DEFAULT): Mesh {
  const sites = shards + 1;
  const bells: SharedArrayBuffer[] = [];
  const requests: (SharedArrayBuffer | null)[][] = [];
  const replies: (SharedArrayBuffer | null)[][] = [];
  for (let site = 0; site < sites; site++) {
    bells.push(Doorbell.create().sab);
    requests.push([]);
    replies.push([]);
    for (let shard = 0; shard < shards; shard++) {
      requests[site].push(shard === site ? null : Ring.create(ringBytes).sab);
      replies[site].push(shard === site ? null : Ring.create(ringBytes).sab);
    }
  }
  const fsyncs = Array.from({ length: shards }, () => newHistogram(true));
  const hops = requests.map((row) => row.map((ring) => (ring === null ? null : newHistogram(true))));
  return { shards, bells, requests, replies, fsyncs, hops, order: BatchSequence.create(shards).sab };
}

/** The site of the main thread in a mesh. */
export const mainSite = (mesh: Mesh): number => mesh.shards;

/**
 * Request bytes queued for one shard beyond what its ring holds, before connections stop parsing
 * (ConnectionHost.backlogFull); they parse again once every shard's queue is below half of it.
 * With the ring, this bounds what this thread holds for a shard that falls behind: answered puts
 * cannot pile up without limit.
 */
export const BACKLOG_BYTES_DEFAULT = 4 * 1024 * 1024;

export interface ShardReplyHandler {
  /** An unsolicited event (E_TIMED_OUT, E_RESERVED, …). */
  event(shard: number, buf: Buffer, at: number): void;
  /** Called after a batch of replies was handled (flush socket output here). */
  batchDone(): void;
  /** A shard died (its thread, or an error applying a request here): its jobs are gone from memory, so the server must not go on. */
  fatal(shard: number, err: Error): void;
}

/** What the pool needs of a shard, wherever it runs. */
interface ShardLink {
  readonly index: number;
  /** Requests not yet handed to the shard. */
  writer: RecordWriter;
  readonly pending: PendingFifo;
  /** holdRequests (tests). */
  held: boolean;
  /** Request bytes appended but not yet handed to the shard. */
  backlog(): number;
  /** Bytes of the writer already handed to the shard (a mesh hands them over in segments). */
  readonly sent: number;
  /** Request bytes ever appended (free-running): where the next request starts in the shard's stream (src/shared/order.ts). */
  pos(): number;
  /** Hands queued requests to the shard (what does not fit waits for the next call). */
  flush(): void;
  close(): Promise<void>;
  /** The shard's log fsync durations (src/shared/histogram.ts), written where the shard runs. */
  readonly fsyncs: Float64Array;
  /** Round trips to a shard on a thread of its own: from a batch entering its ring to the first replies read after it; null for the shard here (no hop). */
  readonly hops: Float64Array | null;
}

/** A shard on another thread, behind a ring each way: requests go into one, replies come out of the other. */
class RingLink implements ShardLink {
  readonly index: number;
  writer = new RecordWriter();
  readonly pending = new PendingFifo();
  held = false;
  /** holdReplies (tests). */
  repliesHeld = false;
  readonly toShard: Ring;
  readonly fromShard: Ring;
  /** The doorbell of the thread that serves the shard. */
  readonly bell: Doorbell;
  readonly reader = new RecordReader();
  /** Bytes of writer already copied into the ring. */
  private flushed = 0;
  /** Request bytes appended before the writer's (free-running). */
  private base = 0;
  /**
   * Reply bytes read out of the ring while the shard here waited for this one, not yet delivered
   * (kept apart from `reader`, which a delivery may be walking at that moment).
   */
  stash: RecordReader | null = null;
  readonly fsyncs: Float64Array;
  readonly hops: Float64Array;
  /** When the oldest batch not yet answered entered the ring (performance.now(); 0: none). */
  private sentAt = 0;
  /** Mesh: the OP_BATCH record that starts a segment's part. */
  private marker: RecordWriter | null = null;

  /** `hops`: where its round trips are counted (a mesh's shared histogram; default: its own). */
  constructor(index: number, toShard: Ring, fromShard: Ring, bell: Doorbell, fsyncs: Float64Array, hops: Float64Array = newHistogram(false)) {
    this.index = index;
    this.hops = hops;
    this.toShard = toShard;
    this.fromShard = fromShard;
    this.bell = bell;
    this.fsyncs = fsyncs;
  }

  backlog(): number {
    return this.writer.len - this.flushed;
  }

  pos(): number {
    return (this.base + this.writer.len) | 0;
  }

  /** `force`: even while held (the shard here waits for this one: see ShardPool.whileHereWaits). */
  flush(force = false): void {
    const w = this.writer;
    if (w.len === this.flushed || (this.held && !force)) return;
    const was = this.flushed;
    const all = this.sendUpTo(w.len);
    const wrote = this.flushed !== was;
    if (all) this.restart();
    if (wrote) this.bell.ring();
  }

  // ---- writing into the ring (flush, and a mesh's segments: ShardPool.flushSegments) ----

  /** Bytes of the writer already in the ring (a mesh's part may be written in several goes). */
  get sent(): number {
    return this.flushed;
  }

  /** Whether the ring has room for a segment's OP_BATCH record now. */
  roomForMarker(): boolean {
    return this.toShard.writable() >= HEADER_BYTES;
  }

  /** Writes the OP_BATCH record of segment `num` (roomForMarker() said it fits). */
  beginSegment(num: number): void {
    const m = (this.marker ??= new RecordWriter(HEADER_BYTES));
    m.reset();
    m.header(OP_BATCH, 0, 0, 0, 0, 0, num);
    this.toShard.write(m.buf, 0, HEADER_BYTES);
  }

  /** Copies the writer's bytes up to `end` into the ring, as far as they fit; whether all are in. Does not ring. */
  sendUpTo(end: number): boolean {
    const n = this.toShard.write(this.writer.buf, this.flushed, end - this.flushed);
    this.flushed += n;
    if (n > 0 && this.sentAt === 0) this.sentAt = performance.now();
    return this.flushed === end;
  }

  /** Everything appended is in the ring: the writer starts again. */
  restart(): void {
    this.base = (this.base + this.writer.len) | 0;
    this.writer.reset();
    this.flushed = 0;
  }

  /** Replies were read: one round trip observed; the next starts now if requests are still out. */
  answered(): void {
    if (this.sentAt === 0) return;
    const now = performance.now();
    observe(this.hops, (now - this.sentAt) / 1000);
    this.sentAt = this.pending.length > 0 ? now : 0;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A shard on a worker thread of its own (workers/shard.ts), behind a ring each way. */
class ThreadShard extends RingLink {
  readonly worker: Worker;
  readonly started: Promise<void>;

  constructor(config: ShardConfig, ringBytes: number, mainBell: Doorbell, stop: Int32Array, onFatal: (err: Error) => void) {
    super(config.index, Ring.create(ringBytes), Ring.create(ringBytes), Doorbell.create(), config.fsyncHistogram as Float64Array);
    this.worker = new Worker(new URL('../../workers/shard.ts', import.meta.url), {
      workerData: {
        ...config,
        toShard: this.toShard.sab,
        fromShard: this.fromShard.sab,
        bell: this.bell.sab,
        mainBell: mainBell.sab,
        stop: stop.buffer,
      },
    });
    let started = false;
    this.started = new Promise<void>((resolve, reject) => {
      this.worker.once('message', () => {
        started = true;
        resolve();
      });
      this.worker.once('error', (err) => {
        if (started) onFatal(err);
        else reject(err);
      });
    });
  }

  override close(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.worker.once('exit', () => resolve());
      this.bell.ring(); // the loop sees the pool's stop word
    });
  }
}

/**
 * A shard on this thread: its core applies a batch of requests as soon as flush() hands it over,
 * and the replies go to their targets before flush() returns. The clock (delays, TTRs, pauses,
 * log syncs) runs on one timer, armed for the core's next deadline.
 */
class HereShard implements ShardLink {
  readonly index: number;
  writer = new RecordWriter();
  /** The other writer: the batch being applied, while replies append new requests to `writer`. */
  private applying = new RecordWriter();
  readonly pending = new PendingFifo();
  held = false;
  readonly core: ShardCore;
  /** Sends one record of the core's output on: replies to `source` (a site), events where they belong. */
  private readonly emit: (link: HereShard, source: number, buf: Buffer, at: number) => void;
  /** The site this runs on: the source of the requests from flush(). */
  private readonly site: number;
  /** Called after the clock ran on its own (events may have gone to other sites' queues). */
  onClock: () => void = () => {};
  private readonly handler: ShardReplyHandler;
  /** Inside a batch: a flush() from a reply's target leaves the new requests to the running loop. */
  private busy = false;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private closed = false;
  readonly fsyncs: Float64Array;
  readonly hops = null;

  constructor(config: ShardConfig, site: number, handler: ShardReplyHandler, emit: (link: HereShard, source: number, buf: Buffer, at: number) => void) {
    this.index = config.index;
    this.site = site;
    this.fsyncs = config.fsyncHistogram as Float64Array;
    this.core = new ShardCore(config);
    this.handler = handler;
    this.emit = emit;
  }

  backlog(): number {
    return this.writer.len - this.sent;
  }

  /** Request bytes appended before the writer's (free-running). */
  private base = 0;

  pos(): number {
    return (this.base + this.writer.len) | 0;
  }

  /**
   * In a mesh the requests here are applied in the order of the segments' numbers, with every
   * other site's (ShardPool.serveSources), not by flush(). `sent`: bytes of the writer already
   * handed over that way.
   */
  sequenced = false;
  sent = 0;

  flush(): void {
    if (this.busy || this.closed || this.sequenced) return;
    this.busy = true;
    try {
      while (this.writer.len > 0 && !this.held) {
        const batch = this.writer;
        this.base = (this.base + batch.len) | 0;
        this.writer = this.applying;
        this.applying = batch;
        const now = Date.now();
        const buf = batch.buf;
        for (let at = 0; at < batch.len; at += u32le(buf, at)) this.core.handle(buf, at, now);
        batch.reset();
        this.endBatch(now, this.site);
      }
    } catch (err) {
      this.handler.fatal(this.index, err as Error);
    } finally {
      this.busy = false;
    }
  }

  /**
   * Applies (part of) a segment a site has sent (a mesh): the requests in `reader` up to its next
   * OP_BATCH record or its end; their replies go back to that site. Stops before a request that
   * `mayApply` refuses (it must wait for other shards); returns whether it stopped so.
   */
  serveBatch(site: number, reader: RecordReader, mayApply: (buf: Buffer, at: number) => boolean): boolean {
    if (this.closed) return true;
    const wasBusy = this.busy;
    this.busy = true;
    let stopped = false;
    try {
      const now = Date.now();
      const buf = reader.buf;
      for (let at = reader.peek(); at !== -1 && buf[at + 4] !== OP_BATCH; at = reader.peek()) {
        if (!mayApply(buf, at)) {
          stopped = true;
          break;
        }
        reader.next();
        this.core.handle(buf, at, now);
      }
      this.endBatch(now, site);
    } catch (err) {
      this.handler.fatal(this.index, err as Error);
    } finally {
      this.busy = wasBusy;
    }
    return stopped;
  }

  /** Runs the clock, writes the log, and sends the batch's replies (to `source`) and events on, in order. */
  private endBatch(now: number, source: number): void {
    const core = this.core;
    const next = core.afterBatch(now);
    const out = core.out;
    const buf = out.buf;
    for (let at = 0; at < out.len; at += u32le(buf, at)) this.emit(this, source, buf, at);
    out.reset();
    core.tidyLog(now);
    this.handler.batchDone();
    this.arm(Math.min(next, core.logDueMs(now)));
  }

  private arm(until: number): void {
    if (until >= this.timerAt || this.closed) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = until;
    this.timer = setTimeout(this.onTimer, delayUntil(until));
  }

  private readonly onTimer = (): void => {
    this.timer = null;
    this.timerAt = Infinity;
    if (this.closed) return;
    this.busy = true;
    try {
      this.endBatch(Date.now(), this.site);
    } catch (err) {
      this.handler.fatal(this.index, err as Error);
    } finally {
      this.busy = false;
    }
    this.flush(); // requests a reply's target made meanwhile (none in a mesh: the router's turn hands them over)
    this.onClock();
  };

  close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.core.close();
    return Promise.resolve();
  }
}

export interface ShardPoolOptions {
  shards: number;
  /** The shard that runs on this thread (no hop for its tubes), or null: every shard on a thread of its own. */
  here?: number | null;
  ringBytes?: number;
  backlogBytes?: number;
  /** Given to every shard (log level, write-ahead log). */
  config?: Omit<ShardConfig, 'index' | 'tubeName'>;
  /** For the shard here: a tube's name from the shared tube table (ShardConfig.tubeName). */
  tubeName?: (tube: number) => string | undefined;
  /**
   * Asks for flush() before this turn ends (the router's end-of-turn work, one setImmediate for
   * both); by default the pool schedules its own.
   */
  schedule?: () => void;
  /**
   * The threads of a server whose connections are served on several threads, and which of them
   * this is: its shard (if it runs one) is the one here, every other shard is behind the mesh's
   * rings, and this thread also serves the requests the other sites send its shard.
   */
  mesh?: { mesh: Mesh; site: number };
}

/**
 * A site whose requests to the shard here arrive in segments (a mesh): another site, through a
 * ring, or this one (`requests` null), whose parts ShardPool.flushSegments appends to `incoming`.
 */
class Source {
  readonly site: number;
  readonly requests: Ring | null;
  readonly replies: Ring | null;
  /** That site's doorbell. */
  readonly bell: Doorbell | null;
  readonly reader = new RecordReader();
  /** This site: its parts not yet moved into the reader (which a segment being applied may be walking). */
  readonly incoming: RecordWriter | null;
  /** Replies and events for that site not yet copied into its ring. */
  readonly out = new RecordWriter(4096);
  private flushed = 0;

  constructor(site: number, requests: Ring | null, replies: Ring | null, bell: Doorbell | null) {
    this.site = site;
    this.requests = requests;
    this.replies = replies;
    this.bell = bell;
    this.incoming = requests === null ? new RecordWriter(4096) : null;
  }

  get unflushed(): boolean {
    return this.out.len > this.flushed;
  }

  /** The number of the segment being read (from its OP_BATCH record). */
  private seq = 0;

  /** Reads what the ring (or `incoming`) holds into the reader; whether it read anything. */
  pull(): boolean {
    const r = this.reader;
    const inc = this.incoming;
    if (inc !== null) {
      if (inc.len === 0) return false;
      r.prepare(inc.len);
      inc.buf.copy(r.buf, r.end, 0, inc.len);
      r.end += inc.len;
      inc.reset();
      return true;
    }
    r.prepare(64 * 1024);
    const n = (this.requests as Ring).read(r.buf, r.end, r.buf.length - r.end);
    r.end += n;
    return n > 0;
  }

  /** Whether a whole record waits in the reader. */
  get ready(): boolean {
    return this.reader.peek() !== -1;
  }

  /** The number of the segment the next whole record belongs to (ready must be true). */
  headSeq(): number {
    const at = this.reader.peek();
    return this.reader.buf[at + 4] === OP_BATCH ? f64le(this.reader.buf, at + 24) : this.seq;
  }

  /** Steps over the OP_BATCH record that starts the next batch, if there is one. */
  beginBatch(): void {
    const r = this.reader;
    const at = r.peek();
    if (at !== -1 && r.buf[at + 4] === OP_BATCH) {
      this.seq = f64le(r.buf, at + 24);
      r.next();
    }
  }

  /** Copies what fits of `out` into the ring and rings the site. */
  publish(): void {
    const out = this.out;
    if (out.len === this.flushed) return;
    const n = (this.replies as Ring).write(out.buf, this.flushed, out.len - this.flushed);
    this.flushed += n;
    if (this.flushed === out.len) {
      out.reset();
      this.flushed = 0;
    }
    if (n > 0) (this.bell as Doorbell).ring();
  }
}

export class ShardPool {
  readonly links: ShardLink[] = [];
  /** Shards on worker threads this pool started (not in a mesh). */
  private readonly threads: ThreadShard[] = [];
  /** Every shard behind rings: those threads, or the other sites of a mesh. */
  private readonly remote: RingLink[] = [];
  /** Mesh: the other sites' requests to the shard here. */
  private readonly sources: Source[] = [];
  private readonly sourceBySite: (Source | undefined)[] = [];
  /** Mesh: this site, and how many sites there are (1 without a mesh). */
  readonly site: number;
  private readonly sites: number;
  private readonly mainSite: number;
  /** This thread's doorbell: rung by whoever writes into a ring it reads. */
  private readonly mainBell: Doorbell;
  /** Word 0 set to 1 asks every shard loop to stop (the loops block in Atomics.wait, not on messages). */
  private readonly stop = new Int32Array(new SharedArrayBuffer(4));
  private readonly handler: ShardReplyHandler;
  private flushScheduled = false;
  private readonly schedule: (() => void) | null;
  private running = true;
  private readonly backlogMax: number;
  private roomWaiters: { roomAgain(): void }[] = [];
  /** The most request bytes one shard's queue held when a connection checked it (for tests and stats). */
  backlogPeak = 0;
  /**
   * How far each shard has applied what this thread sent it (src/shared/order.ts): null with one
   * shard, or in a mesh (several threads send to each shard there).
   */
  readonly order: StepOrder | null;
  /** readyStep's [shard, position] pairs. */
  private readonly afterPairs: Int32Array;
  /**
   * Whether a reserve this thread parked in several shards may still wait in them (the router
   * says). When none does, a step needs no order: one parked later is parked behind it in every
   * ring it could claim it from, so it is neither named nor sent behind anything.
   */
  stepsMatter: () => boolean = () => true;
  /** OP_AFTER records sent (tests). */
  afterRecords = 0;

  // ---- a mesh: one order over every site's segments (src/shared/sequence.ts) ----
  /** The shared numbers, null without a mesh. */
  private readonly seq: BatchSequence | null;
  /** Every site's doorbell (a mesh), to wake a shard whose frontier this one waits for. */
  private readonly siteBells: Doorbell[] = [];
  /** This site's own requests to the shard here, in segments (a mesh whose site runs a shard). */
  private readonly local: Source | null = null;
  /** Where each link's writer is cut into segments: `links.length` offsets per cut, oldest first. */
  private cuts: number[] = [];
  private cutHead = 0;
  /** Where the open segment starts in each link's writer. */
  private readonly segStart: Int32Array;
  /** A segment is being written (its parts did not all fit their rings yet), up to partEnd in each writer. */
  private writing = false;
  /** Its number, and which of its parts have their OP_BATCH record in the ring. */
  private writingNum = 0;
  private readonly partsMarked: Uint8Array;
  private readonly partEnd: Int32Array;
  /** take()'s shards; while writing, -1 for each part already all in its ring. */
  private readonly partShards: Int32Array;
  /** holdPart (tests). */
  private readonly partsHeld: Uint8Array;
  /** Applying segments now (serveSources); a flush meanwhile leaves them to that loop. */
  private serving = false;
  /** The segment the shard here stopped in, waiting for the other shards' frontiers; null: none. */
  private stalledAt: number | null = null;
  /** The frontier this shard last published. */
  private published = 0;
  /** Times the shard here stopped before a step to wait for other shards (tests). */
  frontierWaits = 0;

  constructor(opts: ShardPoolOptions, handler: ShardReplyHandler) {
    this.handler = handler;
    this.schedule = opts.schedule ?? null;
    const ringBytes = opts.ringBytes ?? RING_BYTES_DEFAULT;
    this.backlogMax = opts.backlogBytes ?? BACKLOG_BYTES_DEFAULT;
    const m = opts.mesh;
    this.order = m === undefined && opts.shards > 1 ? StepOrder.create(opts.shards) : null;
    this.afterPairs = new Int32Array(2 * opts.shards);
    this.segStart = new Int32Array(opts.shards);
    this.partEnd = new Int32Array(opts.shards);
    this.partShards = new Int32Array(opts.shards);
    this.partsHeld = new Uint8Array(opts.shards);
    this.partsMarked = new Uint8Array(opts.shards);
    this.seq = m === undefined ? null : BatchSequence.attach(m.mesh.order, m.mesh.shards);
    if (m === undefined) {
      this.site = 0;
      this.sites = 1;
      this.mainSite = 0;
      this.mainBell = Doorbell.create();
      for (let i = 0; i < opts.shards; i++) {
        const config: ShardConfig = { ...opts.config, index: i, fsyncHistogram: newHistogram(true), order: this.order?.sab };
        if (i === opts.here) {
          const here = new HereShard({ ...config, tubeName: opts.tubeName }, this.site, handler, this.emit);
          here.core.whileWaiting = this.whileHereWaits;
          here.core.waitSliceMs = 0.05;
          this.links.push(here);
        } else {
          const t = new ThreadShard(config, ringBytes, this.mainBell, this.stop, (err) => handler.fatal(i, err));
          this.threads.push(t);
          this.remote.push(t);
          this.links.push(t);
        }
      }
    } else {
      const { mesh, site } = m;
      this.site = site;
      this.sites = mesh.shards + 1;
      this.mainSite = mainSite(mesh);
      this.mainBell = Doorbell.attach(mesh.bells[site]);
      for (let i = 0; i < mesh.shards; i++) {
        if (i === site) {
          const here = new HereShard({ ...opts.config, index: i, fsyncHistogram: mesh.fsyncs[i], tubeName: opts.tubeName }, site, handler, this.emit);
          here.onClock = () => this.publish();
          here.sequenced = true;
          this.links.push(here);
        } else {
          const link = new RingLink(i, Ring.attach(mesh.requests[site][i] as SharedArrayBuffer),
            Ring.attach(mesh.replies[site][i] as SharedArrayBuffer), Doorbell.attach(mesh.bells[i]), mesh.fsyncs[i], mesh.hops[site][i] as Float64Array);
          this.remote.push(link);
          this.links.push(link);
        }
      }
      for (let s = 0; s < this.sites; s++) this.siteBells.push(Doorbell.attach(mesh.bells[s]));
      for (let z = 0; z < mesh.shards; z++) {
        const into: Ring[] = [];
        for (let s = 0; s < this.sites; s++) if (s !== z) into.push(Ring.attach(mesh.requests[s][z] as SharedArrayBuffer));
        this.ringsInto.push(into);
      }
      if (site < mesh.shards) {
        this.local = new Source(site, null, null, null);
        this.sources.push(this.local);
        for (let other = 0; other < this.sites; other++) {
          if (other === site) continue;
          const src = new Source(other, Ring.attach(mesh.requests[other][site] as SharedArrayBuffer),
            Ring.attach(mesh.replies[other][site] as SharedArrayBuffer), Doorbell.attach(mesh.bells[other]));
          this.sources.push(src);
          this.sourceBySite[other] = src;
        }
      }
    }
    if (this.remote.length > 0 || this.sources.length > 0) this.pump();
  }

  /** Resolves once every shard thread has loaded and is serving its ring. */
  ready(): Promise<void> {
    return Promise.all(this.threads.map((t) => t.started)).then(() => undefined);
  }

  /** How many shards there are. */
  get count(): number {
    return this.links.length;
  }

  /** How many of them run on threads of their own. */
  get threadCount(): number {
    return this.threads.length;
  }

  /** Registers what to do with the shard's next reply and returns its writer for the request. */
  request(shard: number, kind: number, target: ReplyTarget, seq: number): RecordWriter {
    const link = this.links[shard];
    link.pending.push(kind, target, seq);
    if (this.schedule !== null) this.schedule();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
    return link.writer;
  }

  /**
   * Before a request to `shard` that may make a job ready (a put, a release, a kick, a closed
   * connection's jobs): names, for every other shard that has not applied all this thread sent
   * it, how far it must get (all of it: earlier steps, and the parks of reserves waiting over
   * several shards, whose claims they may win); the shard lets those go first if such a reserve
   * is parked in it (src/shared/order.ts). Call it just before request().
   *
   * In a mesh: starts a new segment if the open one holds a request to another shard (cutBefore;
   * src/shared/sequence.ts).
   */
  readyStep(shard: number): void {
    if (this.seq !== null) {
      this.cutBefore(shard);
      return;
    }
    const order = this.order;
    if (order === null || !this.stepsMatter()) return;
    const links = this.links;
    const pairs = this.afterPairs;
    let deps = 0;
    for (let z = 0; z < links.length; z++) {
      if (z === shard) continue;
      const pos = links[z].pos();
      if (order.reached(z, pos)) continue;
      pairs[2 * deps] = z;
      pairs[2 * deps + 1] = pos;
      deps++;
    }
    if (deps === 0) return;
    this.afterRecords++;
    const w = links[shard].writer;
    w.header(OP_AFTER, deps * 8, 0, deps, 0, 0, 0);
    for (let i = 0; i < 2 * deps; i++) w.u32(pairs[i] >>> 0);
  }

  /**
   * While the shard here waits for other shards to apply earlier steps (StepOrder.waitFor): their
   * requests still queued here go into their rings, held or not, and their replies come out of
   * their rings (delivered later, by the pump), so none of them waits for this thread meanwhile.
   */
  private readonly whileHereWaits = (): boolean => {
    let stashed = false;
    for (const link of this.remote) {
      link.flush(true);
      for (;;) {
        const r = (link.stash ??= new RecordReader(64 * 1024));
        r.prepare(64 * 1024);
        const n = link.fromShard.read(r.buf, r.end, r.buf.length - r.end);
        if (n === 0) break;
        r.end += n;
        stashed = true;
      }
    }
    if (stashed) this.mainBell.ring(); // the pump delivers them
    return this.running;
  };

  private readonly flushNow = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  /** Hands queued requests to the shards; what does not fit a ring stays queued for the next wake-up. */
  flush(): void {
    if (this.seq !== null) {
      this.flushSegments();
      if (this.local !== null) this.serveSources();
    } else for (const link of this.links) link.flush();
    if (this.sources.length > 0) this.publish();
    if (this.roomWaiters.length > 0 && this.largestBacklog() <= this.backlogMax / 2) {
      const waiters = this.roomWaiters;
      this.roomWaiters = [];
      for (const c of waiters) c.roomAgain(); // may parse, request, and wait again
    }
  }

  /**
   * One record of the shard here's output: a reply to a request from `source` (this site: the
   * pending FIFO here; another site: its ring), or an event, which goes where it belongs: to the
   * site that serves its connection, workq's to the main thread (the workq router lives there).
   */
  private readonly emit = (link: HereShard, source: number, buf: Buffer, at: number): void => {
    const kind = replyKind(buf, at);
    let dest = source;
    if (isEvent(kind)) {
      if (this.sites === 1) dest = this.site;
      else if (kind >= E_WQ_READY && kind <= E_WQ_GONE) dest = this.mainSite;
      else dest = eventConn(buf, at) % this.sites;
    }
    if (dest === this.site) this.deliver(link, buf, at);
    else (this.sourceBySite[dest] as Source).out.bytes(buf, at, recordEnd(buf, at));
  };

  // ---- a mesh: segments numbered in one order with every other site's (src/shared/sequence.ts) ----

  /**
   * Before a step to `shard` (readyStep): if the open segment already holds a request to another
   * shard, the step starts a new segment, so those requests take a lower number than it.
   */
  private cutBefore(shard: number): void {
    const links = this.links;
    const start = this.segStart;
    let cut = false;
    for (let z = 0; z < links.length; z++) {
      if (z !== shard && links[z].writer.len > start[z]) {
        cut = true;
        break;
      }
    }
    if (!cut) return;
    for (let z = 0; z < links.length; z++) {
      const end = links[z].writer.len;
      this.cuts.push(end);
      start[z] = end;
    }
  }

  /**
   * Mesh: hands the queued requests over segment by segment, each with one number for all its
   * parts: into the rings of the shards on other sites, and to `local` for the shard here. A
   * segment whose parts do not all fit their rings at once is finished on later calls, and no
   * later one is numbered before it is; none is numbered while a ring it needs lacks room for its
   * first record, or while requests to a shard are held (tests).
   */
  private flushSegments(): void {
    const seq = this.seq as BatchSequence;
    const links = this.links;
    const shards = links.length;
    if (this.writing && !this.finishSegment()) return;
    for (;;) {
      const fromCut = this.cutHead < this.cuts.length;
      let parts = 0;
      let local = false;
      let blocked = false;
      for (let z = 0; z < shards; z++) {
        const link = links[z];
        const end = fromCut ? this.cuts[this.cutHead + z] : link.writer.len;
        this.partEnd[z] = end;
        if (end <= link.sent) continue;
        if (link.held || (link instanceof RingLink && !link.roomForMarker())) blocked = true;
        if (z === this.site) local = true;
        else this.partShards[parts++] = z;
      }
      if (parts === 0 && !local) {
        if (!fromCut) break;
        this.cutHead += shards; // an empty segment
        continue;
      }
      if (blocked) return;
      if (local) this.markBusy(); // before its number exists: see BatchSequence.idle
      const num = seq.take(this.site, this.partShards, parts);
      if (seq.refreshDue(num)) for (let z = 0; z < shards; z++) this.siteBells[z].ring();
      if (local) {
        const here = links[this.site] as HereShard;
        const inc = (this.local as Source).incoming as RecordWriter;
        const end = this.partEnd[this.site];
        inc.header(OP_BATCH, 0, 0, 0, 0, 0, num);
        inc.bytes(here.writer.buf, here.sent, end);
        here.sent = end;
      }
      this.partsMarked.fill(0);
      this.writingNum = num;
      this.writingParts = parts;
      this.writing = true;
      if (fromCut) this.cutHead += shards;
      for (let z = 0; z < shards; z++) if (this.segStart[z] < this.partEnd[z]) this.segStart[z] = this.partEnd[z];
      if (!this.finishSegment()) return;
    }
    // All handed over: the writers start again.
    for (const link of links) {
      if (link instanceof RingLink) link.restart();
      else {
        (link as HereShard).writer.reset();
        (link as HereShard).sent = 0;
      }
    }
    this.cuts.length = 0;
    this.cutHead = 0;
    this.segStart.fill(0);
  }

  /** How many of partShards the segment being written has. */
  private writingParts = 0;

  /**
   * Copies what is left of the segment being written into its rings, as far as they take it, and
   * rings each shard it reached (after saying its part is all in, when it is). Whether all is in.
   */
  private finishSegment(): boolean {
    const seq = this.seq as BatchSequence;
    let left = 0;
    for (let i = 0; i < this.writingParts; i++) {
      const z = this.partShards[i];
      if (z < 0) continue;
      if (this.partsHeld[z] !== 0) {
        left++;
        continue;
      }
      const link = this.links[z] as RingLink;
      if (this.partsMarked[z] === 0) {
        // (Room for it was there before the number was taken, and only this thread writes here.)
        link.beginSegment(this.writingNum);
        this.partsMarked[z] = 1;
      }
      if (link.sendUpTo(this.partEnd[z])) {
        seq.written(this.site, z);
        this.partShards[i] = -1;
      } else left++;
      link.bell.ring();
    }
    this.writing = left > 0;
    return !this.writing;
  }

  /** Reads every source until a pass finds nothing new. */
  private pullAll(): void {
    for (let pulled = true; pulled; ) {
      pulled = false;
      for (const src of this.sources) if (src.pull()) pulled = true;
    }
  }

  /** The source whose next whole record has the lowest number, or null if none has one. */
  private lowest(): Source | null {
    let best: Source | null = null;
    let bestSeq = 0;
    for (const src of this.sources) {
      if (!src.ready) continue;
      const n = src.headSeq();
      if (best === null || before(n, bestSeq)) {
        best = src;
        bestSeq = n;
      }
    }
    return best;
  }

  /**
   * Mesh: applies the segments the sites have handed the shard here (other sites through their
   * rings, this one through `local`) in the order of their numbers: the lowest first, once no
   * site may still publish a lower one. A step there waits, while a reserve over several shards
   * is parked here, until every other shard has applied everything numbered lower
   * (src/shared/sequence.ts). Never blocks: what must wait is left for a later call, and this
   * thread's doorbell rings when it may go on. Returns whether it applied anything.
   */
  serveSources(): boolean {
    if (this.serving || !this.running || this.applyHeld) return false;
    this.serving = true;
    const seq = this.seq as BatchSequence;
    const here = this.links[this.site] as HereShard;
    let any = false;
    this.markBusy(); // before it reads its rings: see BatchSequence.idle
    try {
      for (;;) {
        this.pullAll();
        let best = this.lowest();
        if (best === null) {
          if (this.settle()) continue;
          // All read is applied and the rings were empty at the last look.
          if (!this.idleNow) {
            this.idleNow = true;
            seq.setIdle(this.site, true);
          }
          break;
        }
        const c = best.headSeq();
        if (seq.blocks(this.site, this.site, c)) {
          // A site is writing a lower number (or taking one): it rings when it is done. (No
          // frontier from here: that site may finish between this look and any other, and its
          // segment would be in a ring not read since.)
          this.blockedAt = c;
          break;
        }
        this.blockedAt = null;
        // Whatever was numbered before c is in the rings now.
        this.pullAll();
        best = this.lowest() as Source;
        this.applying = best.headSeq();
        best.beginBatch();
        any = true;
        if (here.serveBatch(best.site, best.reader, this.mayApply)) break;
      }
      // Asked to publish afresh (BatchSequence.refreshDue) while never idle: everything before
      // the segment applied last is applied.
      const epoch = seq.refreshEpoch();
      if (any && this.stalledAt === null && this.refreshSeen !== epoch) {
        this.publishFrontier(this.applying);
        this.refreshSeen = epoch;
      }
    } finally {
      this.serving = false;
    }
    if (any) this.publish();
    return any;
  }

  /** The number of the segment the shard here is applying. */
  private applying = 0;
  /** What this shard last said of itself in BatchSequence.idle. */
  private idleNow = false;

  private markBusy(): void {
    if (!this.idleNow) return;
    this.idleNow = false;
    (this.seq as BatchSequence).setIdle(this.site, false);
  }

  /**
   * Whether shard `z` has applied everything numbered before `c`, as far as shared memory tells
   * without waking it: it said it was idle, no thread is taking or writing a number for it, every
   * ring into it is empty, and it still says it is idle (it reads its rings only after it says it
   * is not). See BatchSequence.idle.
   */
  private caughtUp(z: number, c: number): boolean {
    const seq = this.seq as BatchSequence;
    if (!seq.idle(z) || seq.blocks(z, z, c)) return false;
    for (const ring of this.ringsInto[z]) if (ring.readable() > 0) return false;
    return seq.idle(z);
  }

  /** Mesh: ringsInto[z], every ring other sites write shard z's requests into (for caughtUp). */
  private readonly ringsInto: Ring[][] = [];
  /** The segment the shard here waits to apply while a site writes a lower one; null: none. */
  private blockedAt: number | null = null;

  /**
   * Whether what the shard here waits for has come meanwhile (looked at after the pump's
   * prepareWait: a ring of this thread's doorbell before it would otherwise be missed).
   */
  private mayGoOn(): boolean {
    const seq = this.seq;
    if (seq === null) return false;
    if (this.stalledAt !== null) return !this.anyBehind(this.stalledAt);
    if (this.blockedAt !== null) return !seq.blocks(this.site, this.site, this.blockedAt);
    // A shard that waits for this one's frontier rang it: it may have rung while this thread was
    // applying, after its last look (settle).
    return this.local !== null && seq.wantedAbove(this.site, this.published);
  }

  /**
   * Before each request of a segment: a step, with a reserve over several shards parked here,
   * waits until every other shard has applied everything numbered before its segment (any claim
   * they make on that reserve comes first). The rest of the segment waits with it.
   */
  private readonly mayApply = (buf: Buffer, at: number): boolean => {
    const here = this.links[this.site] as HereShard;
    if (!here.core.stepWaits(buf, at)) return true;
    const seq = this.seq as BatchSequence;
    const c = this.applying;
    if (this.anyBehind(c)) {
      // Everything before c is applied here: say so first, so a shard waiting for this one can go on.
      this.publishFrontier(c);
      seq.want(this.site, c);
      if (this.stalledAt !== c) {
        this.stalledAt = c;
        this.frontierWaits++;
      }
      let behind = false;
      for (let z = 0; z < this.links.length; z++) {
        if (!this.isBehind(z, c)) continue;
        behind = true;
        this.siteBells[z].ring(); // it publishes afresh
      }
      if (behind) return false;
    }
    if (this.stalledAt !== null) {
      seq.wantNone(this.site);
      this.stalledAt = null;
    }
    return true;
  };

  /** Whether some other shard may not have applied everything numbered before `c`. */
  private anyBehind(c: number): boolean {
    for (let z = 0; z < this.links.length; z++) if (this.isBehind(z, c)) return true;
    return false;
  }

  /** Whether shard `z` (not this one) may not have applied everything numbered before `c`: neither its frontier nor caughtUp says so. */
  private isBehind(z: number, c: number): boolean {
    return z !== this.site && before((this.seq as BatchSequence).frontier(z), c) && !this.caughtUp(z, c);
  }

  /**
   * Nothing left to apply: if some shard waits for frontiers, publishes this one's, the clock's
   * value (or a lower number a site is writing here), read before the last look at the sources.
   * True if that look found something.
   */
  private settle(): boolean {
    const seq = this.seq as BatchSequence;
    const epoch = seq.refreshEpoch();
    if (!seq.anyWants() && epoch === this.refreshSeen) return false;
    const k = seq.now();
    const low = seq.lowestWriting(this.site, this.site, k);
    this.pullAll();
    if (this.lowest() !== null) return true;
    if (low !== null) {
      this.publishFrontier(low);
      this.refreshSeen = epoch;
    }
    return false;
  }

  /** The refresh (BatchSequence.refreshDue) this shard last published for. */
  private refreshSeen = 0;

  /** The shard here has applied everything numbered before `f`: publishes it and rings the shards waiting for it. */
  private publishFrontier(f: number): void {
    // (Never lower than the last: everything before that was applied. Compared by equality, as
    // the last may be older than before() can tell.)
    if (f === this.published) return;
    const seq = this.seq as BatchSequence;
    this.published = f;
    seq.publish(this.site, f);
    for (let z = 0; z < this.links.length; z++) if (z !== this.site && seq.wants(z, f)) this.siteBells[z].ring();
  }

  /**
   * Copies the replies and events for other sites into their rings. What does not fit waits for
   * the pump, which retries on a short timer while anything is left (the sites that read those
   * rings do not ring this one when they make room): this rings the pump awake for that.
   */
  private publish(): void {
    for (const src of this.sources) src.publish();
    if (this.sourcesUnflushed()) this.mainBell.ring();
  }

  private sourcesUnflushed(): boolean {
    for (const src of this.sources) if (src.unflushed) return true;
    return false;
  }

  /** One reply or event of `link`, at `at` in `buf` (valid during the call). */
  private readonly deliver = (link: ShardLink, buf: Buffer, at: number): void => {
    if (isEvent(replyKind(buf, at))) {
      this.handler.event(link.index, buf, at);
      return;
    }
    const p = link.pending;
    if (!p.shift()) throw new Error(`shard ${link.index}: reply without a request`);
    p.target.onShardReply(link.index, p.kind, p.seq, buf, at);
  };

  /**
   * For tests: while held, requests to `shard` wait on this thread instead of reaching the shard,
   * as if the shard or its ring had stalled for that long (the shard's clock runs on).
   */
  holdRequests(shard: number, held: boolean): void {
    this.links[shard].held = held;
    if (!held) this.flush();
  }

  /**
   * For tests: while held, what `shard` (on a thread of its own) answers waits in its ring
   * unread, as if this thread were slow to read it; the shard goes on applying requests.
   */
  holdReplies(shard: number, held: boolean): void {
    const link = this.links[shard];
    if (!(link instanceof RingLink)) throw new Error(`shard ${shard} runs here: it has no ring to hold`);
    link.repliesHeld = held;
    if (!held) this.mainBell.ring();
  }

  /**
   * For tests, in a mesh: while held, the part for `shard` of a segment this site has numbered
   * is not written into its ring, as if this thread had stopped between taking the number and
   * writing (the shard sees the number being written); the other parts are written, and no later
   * segment is numbered meanwhile.
   */
  holdPart(shard: number, held: boolean): void {
    this.partsHeld[shard] = held ? 1 : 0;
    if (!held) this.flush();
  }

  /**
   * For tests, in a mesh: while held, the shard here applies nothing (as if its thread were busy
   * elsewhere); what the sites hand it waits in its rings.
   */
  holdApply(held: boolean): void {
    this.applyHeld = held;
    if (!held) this.serveSources();
  }

  private applyHeld = false;

  /** Requests for shards on other threads not yet in their rings (full). */
  unpublished(): boolean {
    for (const t of this.remote) if (t.backlog() > 0) return true;
    return false;
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

  /** Request bytes of the fullest shard queue not yet handed to its shard. */
  private largestBacklog(): number {
    let max = 0;
    for (const link of this.links) max = Math.max(max, link.backlog());
    return max;
  }

  private threadsUnflushed(): boolean {
    return this.unpublished() || this.sourcesUnflushed();
  }

  private anyReadable(): boolean {
    for (const t of this.remote) if (!t.repliesHeld && ((t.stash !== null && t.stash.end > t.stash.start) || t.fromShard.readable() > 0)) return true;
    for (const src of this.sources) if (src.requests !== null && src.requests.readable() > 0) return true;
    return false;
  }

  /**
   * Reads the other threads' replies (and, in a mesh, their requests to the shard here); yields
   * to the event loop between batches so sockets are served.
   */
  private readonly pump = (): void => {
    if (!this.running) return;
    let handled = false;
    if (this.sources.length > 0) handled = this.serveSources() || handled;
    for (const link of this.remote) {
      if (link.repliesHeld) continue;
      const r = link.reader;
      let read = false;
      for (;;) {
        // Bytes the shard here's wait took out of the ring (whileHereWaits) come before what is left in it.
        const stash = link.stash;
        let n: number;
        if (stash !== null && stash.end > stash.start) {
          n = stash.end - stash.start;
          r.prepare(n);
          stash.buf.copy(r.buf, r.end, stash.start, stash.end);
          stash.start = stash.end = 0;
        } else {
          r.prepare(64 * 1024);
          n = link.fromShard.read(r.buf, r.end, r.buf.length - r.end);
          if (n === 0) break;
        }
        r.end += n;
        handled = true;
        read = true;
        let at: number;
        while ((at = r.next()) !== -1) this.deliver(link, r.buf, at);
      }
      if (read) link.answered();
    }
    if (handled) this.handler.batchDone();
    // A ring that was full may have room now.
    if (this.threadsUnflushed()) this.flush();
    const seq = this.mainBell.prepareWait();
    if (this.anyReadable() || (handled && this.threadsUnflushed()) || this.mayGoOn()) {
      this.mainBell.cancelWait();
      setImmediate(this.pump);
      return;
    }
    if (this.sourcesUnflushed()) {
      // Replies for another site wait for room in its ring: look again shortly.
      this.mainBell.cancelWait();
      setTimeout(this.pump, 1);
      return;
    }
    void this.mainBell.waitAsync(seq).then(this.pump);
  };

  /** Stops the shards and waits for their threads to exit. */
  async close(): Promise<void> {
    Atomics.store(this.stop, 0, 1);
    const closing = this.links.map((l) => l.close());
    this.running = false;
    this.mainBell.ring(); // let a pending waitAsync settle
    await Promise.all(closing);
  }
}
