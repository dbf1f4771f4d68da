// Connection threads: which thread serves a connection, chosen by its first command.
//
// A connection is cheapest on the thread that runs the shard of its tubes: its commands are
// applied there in the same turn, with no hop through the mesh. Which tubes those are, a
// connection says in its first line: a producer's `use <tube>`, a worker's `watch <tube>` (it
// then ignores `default`); any other first command works on `default`. So the main thread reads a
// new connection's first line from its bare handle, then hands the handle and the bytes it read
// to that tube's thread (a net.Socket that has read cannot be handed over, Node 24 refuses:
// ERR_WORKER_HANDLE_NOT_TRANSFERABLE; its handle can, once it stopped reading). One hot tube
// must not put every connection on one thread: a thread that already serves PLACEMENT_SLACK more
// connections than the least busy one does not get another; that one does.
//
// The main thread counts each connection at its accept (current-connections, total-connections),
// so an idle connection that has said nothing is in `stats` as in beanstalkd; the handover counts
// nothing, and the thread that closes the connection uncounts it (BeanstalkServer.accepted).

import { isTubeName } from '../proto/beanstalk/parser.ts';
import { shardOf } from '../route/hash.ts';
import { ignoreRead, lastReadResult, RAW_READ_BUFFER, rawBinding, readIntoSharedBuffer, type TcpHandle } from './raw.ts';

/** The longest first line read before the connection is handed over anyway (beanstalkd's longest command line is 224 bytes). */
export const PLACEMENT_SNIFF_BYTES = 256;
/** A thread serving this many more connections than the least busy one gets no more by its tubes. */
export const PLACEMENT_SLACK = 16;

const USE = Buffer.from('use ');
const WATCH = Buffer.from('watch ');

function startsWith(b: Uint8Array, n: number, prefix: Buffer): boolean {
  if (n < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (b[i] !== prefix[i]) return false;
  return true;
}

/**
 * The tube a connection's first line `b[0, n)` names for its work: the argument of `use` or
 * `watch` when it is a well-formed name, else `default` (every other command works on the tubes
 * a new connection has: `default`).
 */
export function firstTube(b: Uint8Array, n: number): string {
  const prefix = startsWith(b, n, USE) ? USE.length : startsWith(b, n, WATCH) ? WATCH.length : -1;
  if (prefix < 0) return 'default';
  const cr = b.indexOf(0x0d, prefix);
  if (cr < 0 || cr + 1 >= n || b[cr + 1] !== 0x0a || !isTubeName(b, prefix, cr)) return 'default';
  return Buffer.from(b.buffer, b.byteOffset + prefix, cr - prefix).toString('latin1');
}

/** The thread for a connection whose work is on `shard`'s thread, given each thread's connections now. */
export function chooseSite(shard: number, load: (site: number) => number, sites: number): number {
  let least = 0;
  for (let s = 1; s < sites; s++) if (load(s) < load(least)) least = s;
  return load(shard) - load(least) >= PLACEMENT_SLACK ? least : shard;
}

/** What placement needs of the connection threads and the counters. */
export interface PlacementHost {
  readonly sites: number;
  /** Connections thread `site` has closed since the start. */
  closed(site: number): number;
  /** A connection accepted: counted, once (the thread that closes it uncounts it). */
  accepted(): void;
  /** Hands `handle` (stopped reading) and the bytes read from it so far to thread `site`, which does not count it again. */
  hand(site: number, handle: TcpHandle, first: Buffer): void;
  /** A connection handed over: no longer served here (still counted). */
  handedOver(): void;
  /** A connection closed here, before its first line or because no thread could take it: uncounted. */
  dropped(): void;
}

type Sniffed = TcpHandle & { sniff: Sniff | null };

/** A connection read by the main thread until its first line is complete. */
class Sniff {
  bytes: Buffer | null = null;
  readonly handle: Sniffed;
  readonly placement: Placement;
  constructor(handle: Sniffed, placement: Placement) {
    this.handle = handle;
    this.placement = placement;
  }
}

function onSniffRead(this: Sniffed): void {
  const s = this.sniff;
  if (s !== null) s.placement.read(s);
}

export class Placement {
  private readonly host: PlacementHost;
  private readonly shards: number;
  /** Connections still saying their first line. */
  readonly pending = new Set<Sniff>();
  /** Connections handed to each thread since the start. */
  private readonly handed: Float64Array;
  /**
   * Connections thread `site` serves, counting those handed to it that it has yet to open: the
   * thread's own count of open connections lags behind a burst of accepts (measured: 100
   * connections made at once all went to one thread by it).
   */
  private readonly load = (site: number): number => this.handed[site] - this.host.closed(site);

  constructor(host: PlacementHost, shards: number) {
    this.host = host;
    this.shards = shards;
    this.handed = new Float64Array(host.sites);
  }

  /** Whether this Node lets the main thread read a handle and hand it over (else: hand sockets at once). */
  static available(): boolean {
    return rawBinding() !== null;
  }

  /** A new connection's handle (accepted, not reading): read until its first line. */
  accept(handle: TcpHandle): void {
    const h = handle as Sniffed;
    const s = new Sniff(h, this);
    h.sniff = s;
    this.pending.add(s);
    this.host.accepted();
    readIntoSharedBuffer(handle, onSniffRead);
    h.reading = true;
    if (handle.readStart() < 0) this.drop(s);
  }

  /** The handle read something, its end, or an error. */
  read(s: Sniff): void {
    const n = lastReadResult();
    if (n === 0) return;
    if (n < 0) {
      // Gone before a whole first line (nothing beanstalkd would answer): closed here.
      this.drop(s);
      return;
    }
    const got = Buffer.from(RAW_READ_BUFFER.subarray(0, n)); // the shared buffer is the next read's
    s.bytes = s.bytes === null ? got : Buffer.concat([s.bytes, got]);
    const nl = s.bytes.indexOf(0x0a);
    if (nl < 0 && s.bytes.length < PLACEMENT_SNIFF_BYTES) return;
    this.handOver(s, firstTube(s.bytes, nl < 0 ? s.bytes.length : nl + 1));
  }

  private handOver(s: Sniff, tube: string): void {
    const h = s.handle;
    this.pending.delete(s);
    h.readStop();
    h.reading = false;
    h.onread = ignoreRead;
    h.sniff = null;
    const site = chooseSite(shardOf(tube, this.shards), this.load, this.host.sites);
    try {
      this.host.hand(site, h, s.bytes as Buffer);
      this.handed[site]++;
    } catch {
      // The thread cannot take it (the server is closing): the connection ends here.
      this.host.dropped();
      h.close();
      return;
    }
    this.host.handedOver();
  }

  private drop(s: Sniff): void {
    if (!this.pending.delete(s)) return;
    s.handle.sniff = null;
    s.handle.onread = ignoreRead;
    this.host.dropped();
    s.handle.close();
  }

  /** Closes every connection still saying its first line (the server is closing). */
  closeAll(): void {
    for (const s of [...this.pending]) this.drop(s);
  }
}
