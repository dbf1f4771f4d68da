// A connection thread's side of a handover: serving the connections the main thread accepted and
// handed it (src/net/threads.ts), by their handle with the bytes the main thread read of them
// (src/net/placement.ts), or as paused net.Sockets. Apart from the thread's own script
// (src/net/thread.ts) so that a test can run a site's side on its own thread.

import type net from 'node:net';
import type { Logger } from '../log.ts';
import type { BeanstalkServer } from '../proto/beanstalk/server.ts';
import { openBeanstalk, RawConnections, serveHandle, serveSocket } from './listener.ts';
import { isRawHandle, rawBinding } from './raw.ts';
import type { HandedHandle, HandedSocket } from './threads.ts';

export class SiteConnections {
  private readonly beanstalk: BeanstalkServer;
  private readonly log: Logger;
  private readonly open: ReturnType<typeof openBeanstalk>;
  /** Connections served as net.Sockets (this Node cannot serve their bare handle). */
  private readonly sockets = new Set<net.Socket>();
  private readonly raws: RawConnections;

  constructor(beanstalk: BeanstalkServer, log: Logger) {
    this.beanstalk = beanstalk;
    this.log = log;
    this.open = openBeanstalk(beanstalk, true);
    this.raws = new RawConnections(log);
  }

  /** Serves a connection the main thread handed over. */
  take(m: HandedHandle | HandedSocket): void {
    const router = this.beanstalk.router;
    if ('handle' in m) {
      // Placed by its first line (src/net/placement.ts): those bytes are this connection's first
      // read. The main thread placed it only because this Node serves bare handles (same checks here).
      if (rawBinding() === null || !isRawHandle(m.handle)) {
        this.log.error('a connection handed over by its handle cannot be served bare here; closed');
        // The main thread counted it; this thread closes it, so uncounts it.
        this.beanstalk.tookOver();
        this.beanstalk.gone();
        (m.handle as { close?: () => void }).close?.();
        return;
      }
      serveHandle(m.handle, router.newConnId(), this.log, this.open, this.raws, Buffer.from(m.first.buffer, m.first.byteOffset, m.first.byteLength));
      return;
    }
    const socket = m.socket;
    // Served bare (src/net/raw.ts), the socket object is dropped and `raws` has the connection.
    if (serveSocket(socket, router.newConnId(), this.log, this.open, this.raws) === 'raw') return;
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
  }

  /** Closes every one of them now (the thread is closing). */
  destroyAll(): void {
    for (const s of this.sockets) s.destroy();
    this.raws.destroyAll();
  }
}
