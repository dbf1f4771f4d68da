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
import { delayUntil } from '../shared/timer.ts';
import {
  E_WQ_GONE, E_WQ_READY, eventConn, HEADER_BYTES, isEvent, OP_AFTER, OP_BATCH, RecordReader, RecordWriter, recordEnd,
  replyKind,
} from '../shared/records.ts';
import { StepOrder } from '../shared/order.ts';
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
  /** The batches' numbers: one BigInt64 counter every site takes from (see Source). */
  readonly clock: SharedArrayBuffer;
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
  return { shards, bells, requests, replies, fsyncs, clock: new SharedArrayBuffer(64) };
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
  readonly hops = newHistogram(false);
  /** When the oldest batch not yet answered entered the ring (performance.now(); 0: none). */
  private sentAt = 0;
  /** A mesh's clock: each batch starts with an OP_BATCH record carrying a number from it. */
  private readonly clock: BigInt64Array | null;
  private readonly marker: RecordWriter | null;

  constructor(index: number, toShard: Ring, fromShard: Ring, bell: Doorbell, fsyncs: Float64Array, clock: BigInt64Array | null = null) {
    this.index = index;
    this.toShard = toShard;
    this.fromShard = fromShard;
    this.bell = bell;
    this.fsyncs = fsyncs;
    this.clock = clock;
    this.marker = clock === null ? null : new RecordWriter(HEADER_BYTES);
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
    if (this.flushed === 0 && this.marker !== null) {
      // A new batch: its number is taken now, after everything this thread published before, so
      // a batch published later anywhere (one that may depend on it) gets a larger one.
      if (this.toShard.writable() < HEADER_BYTES + 1) return;
      const m = this.marker;
      m.reset();
      m.header(OP_BATCH, 0, 0, 0, 0, 0, Number(Atomics.add(this.clock as BigInt64Array, 0, 1n)));
      this.toShard.write(m.buf, 0, HEADER_BYTES);
    }
    const n = this.toShard.write(w.buf, this.flushed, w.len - this.flushed);
    this.flushed += n;
    if (this.flushed === w.len) {
      this.base = (this.base + w.len) | 0;
      w.reset();
      this.flushed = 0;
    }
    if (n > 0) {
      if (this.sentAt === 0) this.sentAt = performance.now();
      this.bell.ring();
    }
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
    return this.writer.len;
  }

  /** Request bytes appended before the writer's (free-running). */
  private base = 0;

  pos(): number {
    return (this.base + this.writer.len) | 0;
  }

  flush(): void {
    if (this.busy || this.closed) return;
    if (this.writer.len > 0 && !this.held) this.beforeLocal();
    this.busy = true;
    try {
      while (this.writer.len > 0 && !this.held) {
        const batch = this.writer;
        this.base = (this.base + batch.len) | 0;
        this.writer = this.applying;
        this.applying = batch;
        const now = Date.now();
        const buf = batch.buf;
        for (let at = 0; at < batch.len; at += buf.readUInt32LE(at)) this.core.handle(buf, at, now);
        batch.reset();
        this.endBatch(now, this.site);
      }
    } catch (err) {
      this.handler.fatal(this.index, err as Error);
    } finally {
      this.busy = false;
    }
  }

  /** Mesh: before a batch of this site's own requests, the other sites' published ones (ShardPool.serveSources). */
  beforeLocal: () => void = () => {};

  /**
   * Applies one batch another site has sent (a mesh): the requests in `reader` up to its next
   * OP_BATCH record or its end; their replies go back to that site.
   */
  serveBatch(site: number, reader: RecordReader): void {
    if (this.closed) return;
    const wasBusy = this.busy;
    this.busy = true;
    try {
      const now = Date.now();
      const buf = reader.buf;
      for (let at = reader.peek(); at !== -1 && buf[at + 4] !== OP_BATCH; at = reader.peek()) {
        reader.next();
        this.core.handle(buf, at, now);
      }
      this.endBatch(now, site);
    } catch (err) {
      this.handler.fatal(this.index, err as Error);
    } finally {
      this.busy = wasBusy;
    }
  }

  /** Runs the clock, writes the log, and sends the batch's replies (to `source`) and events on, in order. */
  private endBatch(now: number, source: number): void {
    const core = this.core;
    const next = core.afterBatch(now);
    const out = core.out;
    const buf = out.buf;
    for (let at = 0; at < out.len; at += buf.readUInt32LE(at)) this.emit(this, source, buf, at);
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
    this.flush(); // requests a reply's target made meanwhile
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

/** Another site whose requests to the shard here arrive in a ring (a mesh). */
class Source {
  readonly site: number;
  readonly requests: Ring;
  readonly replies: Ring;
  /** That site's doorbell. */
  readonly bell: Doorbell;
  readonly reader = new RecordReader();
  /** Replies and events for that site not yet copied into its ring. */
  readonly out = new RecordWriter(4096);
  private flushed = 0;

  constructor(site: number, requests: Ring, replies: Ring, bell: Doorbell) {
    this.site = site;
    this.requests = requests;
    this.replies = replies;
    this.bell = bell;
  }

  get unflushed(): boolean {
    return this.out.len > this.flushed;
  }

  /** The number of the batch being read (from its OP_BATCH record). */
  private seq = -1;

  /** Reads what the ring holds into the reader; whether it read anything. */
  pull(): boolean {
    const r = this.reader;
    r.prepare(64 * 1024);
    const n = this.requests.read(r.buf, r.end, r.buf.length - r.end);
    r.end += n;
    return n > 0;
  }

  /** The number of the batch the next whole record belongs to; -1 if none is whole yet. */
  headSeq(): number {
    const at = this.reader.peek();
    if (at === -1) return -1;
    return this.reader.buf[at + 4] === OP_BATCH ? this.reader.buf.readDoubleLE(at + 24) : this.seq;
  }

  /** Steps over the OP_BATCH record that starts the next batch, if there is one. */
  beginBatch(): void {
    const r = this.reader;
    const at = r.peek();
    if (at !== -1 && r.buf[at + 4] === OP_BATCH) {
      this.seq = r.buf.readDoubleLE(at + 24);
      r.next();
    }
  }

  /** Copies what fits of `out` into the ring and rings the site. */
  publish(): void {
    const out = this.out;
    if (out.len === this.flushed) return;
    const n = this.replies.write(out.buf, this.flushed, out.len - this.flushed);
    this.flushed += n;
    if (this.flushed === out.len) {
      out.reset();
      this.flushed = 0;
    }
    if (n > 0) this.bell.ring();
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

  constructor(opts: ShardPoolOptions, handler: ShardReplyHandler) {
    this.handler = handler;
    this.schedule = opts.schedule ?? null;
    const ringBytes = opts.ringBytes ?? RING_BYTES_DEFAULT;
    this.backlogMax = opts.backlogBytes ?? BACKLOG_BYTES_DEFAULT;
    const m = opts.mesh;
    this.order = m === undefined && opts.shards > 1 ? StepOrder.create(opts.shards) : null;
    this.afterPairs = new Int32Array(2 * opts.shards);
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
      const clock = new BigInt64Array(mesh.clock, 0, 1);
      this.site = site;
      this.sites = mesh.shards + 1;
      this.mainSite = mainSite(mesh);
      this.mainBell = Doorbell.attach(mesh.bells[site]);
      for (let i = 0; i < mesh.shards; i++) {
        if (i === site) {
          const here = new HereShard({ ...opts.config, index: i, fsyncHistogram: mesh.fsyncs[i], tubeName: opts.tubeName }, site, handler, this.emit);
          here.onClock = () => this.publish();
          here.beforeLocal = () => this.serveSources();
          this.links.push(here);
        } else {
          const link = new RingLink(i, Ring.attach(mesh.requests[site][i] as SharedArrayBuffer),
            Ring.attach(mesh.replies[site][i] as SharedArrayBuffer), Doorbell.attach(mesh.bells[i]), mesh.fsyncs[i], clock);
          this.remote.push(link);
          this.links.push(link);
        }
      }
      if (site < mesh.shards) {
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
   */
  readyStep(shard: number): void {
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
    for (const link of this.links) link.flush();
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

  /**
   * Mesh: applies every request the other sites have published to the shard here, batch by
   * batch in the order of their numbers. Why that order is enough: a thread publishes a request
   * before it sends any reply that depends on it, and numbers a batch (the mesh's clock) just
   * before publishing it; so whatever a request may depend on (another client was told of it)
   * was published, with a smaller number, before that request's batch got its number. Reading
   * every ring until a whole pass finds nothing new sees every such earlier batch (it was
   * published before anything read in that pass), and the smallest number goes first. The
   * requests of this site's own connections go after (HereShard.beforeLocal), for the same
   * reason. Returns whether it applied anything.
   */
  serveSources(): boolean {
    const here = this.links[this.site] as HereShard;
    let any = false;
    for (;;) {
      for (let pulled = true; pulled; ) {
        pulled = false;
        for (const src of this.sources) if (src.pull()) pulled = true;
      }
      let best: Source | null = null;
      let bestSeq = Infinity;
      for (const src of this.sources) {
        const seq = src.headSeq();
        if (seq >= 0 && seq < bestSeq) {
          best = src;
          bestSeq = seq;
        }
      }
      if (best === null) break;
      best.beginBatch();
      here.serveBatch(best.site, best.reader);
      any = true;
    }
    if (any) this.publish();
    return any;
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
    for (const src of this.sources) if (src.requests.readable() > 0) return true;
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
    if (this.anyReadable() || (handled && this.threadsUnflushed())) {
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
