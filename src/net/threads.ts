// Connection threads, the main thread's side: it starts one thread per shard (a "site",
// src/net/thread.ts), each of which runs its shard and serves beanstalk connections; it accepts
// every socket itself (so the port is bound once, and EADDRINUSE stays honest) and hands each to
// a site. The main thread keeps what is not a beanstalk connection: workq, the HTTP port, the log's
// recovery, signals.

import type net from 'node:net';
import { Worker } from 'node:worker_threads';
import type { WalConfig } from '../../workers/wal/wal.ts';
import type { Mesh } from '../route/shards.ts';
import type { RouterShared } from '../route/router.ts';
import type { TcpHandle } from './raw.ts';
import type { BeanstalkServer, ServerIdentity } from '../proto/beanstalk/server.ts';
import { listenBare, listenTcp } from './listener.ts';
import { Placement } from './placement.ts';

/** What a site is started with (its workerData). */
export interface SiteData {
  readonly site: number;
  readonly mesh: Mesh;
  readonly shared: RouterShared;
  /** The beanstalk server's counters (ServerCounters' memory); the site writes row `site + 1`. */
  readonly counters: SharedArrayBuffer;
  /** The main thread's server's start and `stats` id, which every site's `stats` says too. */
  readonly identity: ServerIdentity;
  readonly jobSizeMax: number;
  readonly wal?: WalConfig;
  readonly logLevel: string;
  readonly walFaults?: SharedArrayBuffer;
  readonly backlogBytes?: number;
  /** --busy-poll-us (RouterConfig.busyPollUs). */
  readonly busyPollUs?: number;
  /** --busy-poll-spin-us (RouterConfig.busyPollSpinUs). */
  readonly busyPollSpinUs?: number;
  /** --busy-poll-long-us (RouterConfig.busyPollLongUs). */
  readonly busyPollLongUs?: number;
  /** RouterConfig.busyPollLongPreemptions. */
  readonly busyPollLongPreemptions?: number;
}

/** A site's counters row: the main thread has row 0. */
export const siteRow = (site: number): number => site + 1;

/** A connection handed to a site by its handle (placement), with what the main thread read of it. */
export interface HandedHandle {
  readonly handle: TcpHandle;
  readonly first: Uint8Array;
}

/** A connection handed to a site as a paused net.Socket (where its handle cannot be read first). */
export interface HandedSocket {
  readonly socket: net.Socket;
}

/** Messages a site sends the main thread. */
export type SiteMessage = { type: 'ready' } | { type: 'closed' } | { type: 'fatal'; shard: number; err: string };

export class ConnectionThreads {
  private readonly workers: Worker[] = [];
  private readonly readies: Promise<void>[] = [];
  private next = 0;
  private closing = false;

  /** Starts a site per shard; `fatal` is called if one dies (its shard's jobs are gone from memory). */
  constructor(sites: Omit<SiteData, 'site'>, fatal: (site: number, err: string) => void) {
    for (let site = 0; site < sites.mesh.shards; site++) {
      const w = new Worker(new URL('./thread.ts', import.meta.url), { workerData: { ...sites, site } satisfies SiteData });
      this.workers.push(w);
      this.readies.push(
        new Promise<void>((resolve, reject) => {
          let started = false;
          w.on('message', (m: SiteMessage) => {
            if (m.type === 'ready') {
              started = true;
              resolve();
            } else if (m.type === 'fatal') {
              fatal(site, m.err);
            }
          });
          w.once('error', (err) => {
            if (!started) reject(err);
            else fatal(site, err.stack ?? err.message);
          });
          w.once('exit', (code) => {
            if (!this.closing) fatal(site, `exited with code ${code}`);
          });
        }),
      );
    }
  }

  get count(): number {
    return this.workers.length;
  }

  ready(): Promise<void> {
    return Promise.all(this.readies).then(() => undefined);
  }

  /**
   * Hands a connection's handle, which the main thread has read and stopped reading
   * (src/net/placement.ts), and the bytes it read, to site `site`.
   */
  handTo(site: number, handle: TcpHandle, first: Buffer): void {
    this.workers[site].postMessage({ handle, first } satisfies HandedHandle, [handle as never]);
  }

  /** Hands an accepted socket (paused: pauseOnConnect) to the next site, in turn (where the handle cannot be read first). */
  hand(socket: net.Socket): void {
    const w = this.workers[this.next];
    this.next = (this.next + 1) % this.workers.length;
    w.postMessage({ socket } satisfies HandedSocket, [socket as never]);
  }

  /** Each site closes its connections and its shard (its log), then exits. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            w.once('exit', () => resolve());
            w.postMessage('close');
          }),
      ),
    );
  }
}

/** What the beanstalk port needs of the connection threads (a test fakes them). */
export type Sites = Pick<ConnectionThreads, 'count' | 'handTo' | 'hand'>;

/**
 * The beanstalk port with connection threads: each connection goes to the thread of the tubes its
 * first line names (src/net/placement.ts) when this Node lets the main thread read a handle and
 * hand it over; else each socket goes to the next thread in turn as it is accepted.
 */
export async function listenConnectionThreads(host: string, port: number, threads: Sites, beanstalk: BeanstalkServer, shards: number): Promise<net.Server> {
  // Every connection is counted here at its accept; the site that closes it uncounts it, and the
  // handover counts nothing (BeanstalkServer.accepted says why).
  const hand = (socket: net.Socket): void => {
    beanstalk.accepted();
    try {
      threads.hand(socket);
    } catch {
      // No thread can take it (the server is closing): the connection ends here.
      beanstalk.gone();
      socket.destroy();
      return;
    }
    beanstalk.handedOver();
  };
  if (!Placement.available()) return listenTcp(host, port, hand);
  const placement = new Placement(
    {
      sites: threads.count,
      closed: (site) => beanstalk.closedBy(siteRow(site)),
      accepted: () => beanstalk.accepted(),
      hand: (site, handle, first) => threads.handTo(site, handle, first),
      handedOver: () => beanstalk.handedOver(),
      dropped: () => beanstalk.gone(),
    },
    shards,
  );
  return listenBare(host, port, (h) => placement.accept(h), hand, () => placement.closeAll());
}
