// TCP listeners: wire each accepted socket to a protocol connection (a beanstalk Session on the
// beanstalk port, a WorkqSession on the workq port).

import net from 'node:net';
import type { Router } from '../route/router.ts';
import type { BeanstalkServer } from '../proto/beanstalk/server.ts';
import { Session } from '../proto/beanstalk/session.ts';
import type { Logger } from '../log.ts';
import type { Transport } from '../proto/connection.ts';
import { WorkqSession } from '../proto/workq/session.ts';
import { isRawHandle, RAW_READ_BUFFER, RawConnection, rawBinding, type RawOwner, type TcpHandle } from './raw.ts';

/** What a listener needs of a connection. */
export interface Conn {
  /** `chunk` is valid only during the call (it may be the shared read buffer). */
  receive(chunk: Buffer, len?: number): void;
  drained(): void;
  halfClose(): void;
  close(): void;
}

/**
 * Every socket reads into this one buffer: a read is parsed before the next one can happen (all on
 * this thread), and the parser copies what it has to keep (StreamParser.push). Node's default
 * path costs, per read, a fresh 64 KiB allocation trimmed into an ArrayBuffer, a Readable push, a
 * nextTick and a 'data' event: with one command per read (many clients, one command in flight
 * each), a cost per command.
 */
const readBuffer = RAW_READ_BUFFER;

/**
 * Node's own reusable-buffer reading (the `onread` option of net.connect) for an accepted socket.
 * net.Server does not take `onread` (Node 24), so this sets the same two fields the Socket
 * constructor would have set from it, found by their symbols' names, and hands the handle the
 * buffer; Socket.pause/resume then stop and start the handle as they do for `onread` sockets.
 * It must run before the socket reads (the server pauses sockets on accept). Returns false, and
 * changes nothing, when this Node does not look as expected: the caller reads via 'data' then.
 */
function readIntoSharedBuffer(socket: net.Socket, onRead: (n: number, buf: Buffer) => void): boolean {
  const s = socket as unknown as Record<symbol, unknown> & { _handle?: { useUserBuffer?: (b: Uint8Array) => void; reading?: boolean } };
  const handle = s._handle;
  if (handle == null || typeof handle.useUserBuffer !== 'function' || handle.reading) return false;
  let kBuffer: symbol | undefined;
  let kBufferCb: symbol | undefined;
  for (const sym of Object.getOwnPropertySymbols(socket)) {
    if (sym.description === 'kBuffer') kBuffer = sym;
    else if (sym.description === 'kBufferCb') kBufferCb = sym;
  }
  if (kBuffer === undefined || kBufferCb === undefined || s[kBuffer] !== null || s[kBufferCb] !== null) return false;
  handle.useUserBuffer(readBuffer);
  s[kBuffer] = readBuffer;
  s[kBufferCb] = onRead;
  return true;
}

/** Sockets that read into the shared buffer (a test checks that this Node takes that path). */
export let sharedBufferSockets = 0;
/** Connections served from their bare handle (src/net/raw.ts; a test checks that this Node takes that path). */
export let rawConnections = 0;

type Open = (connId: number, transport: Transport) => Conn;

/**
 * Wires an accepted socket, paused (pauseOnConnect), to a new connection `open` makes, and lets
 * it read. On this thread or another: the main thread may hand a socket to a connection thread
 * first (src/net/threads.ts). The socket's handle is served bare when this Node allows it (the
 * net.Socket is then dropped); else the socket itself.
 */
export function serveSocket(socket: net.Socket, connId: number, log: Logger, open: Open, raws: RawConnections): 'raw' | 'socket' {
  const handle = (socket as unknown as { _handle?: unknown })._handle;
  if (rawBinding() !== null && isRawHandle(handle)) {
    serveHandle(handle, connId, log, open, raws);
    return 'raw';
  }
  const conn = open(connId, {
    write: (data) => socket.write(data),
    end: () => socket.end(),
    pauseReading: () => socket.pause(),
    resumeReading: () => socket.resume(),
    bufferedOut: () => socket.writableLength,
  });
  log.debug({ conn: connId, remote: socket.remoteAddress }, 'accept');
  if (readIntoSharedBuffer(socket, (n, buf) => conn.receive(buf, n))) sharedBufferSockets++;
  else socket.on('data', (chunk: Buffer) => conn.receive(chunk));
  socket.on('drain', () => conn.drained());
  socket.on('end', () => conn.halfClose());
  socket.on('error', (err) => log.debug({ conn: connId, err: err.message }, 'socket error'));
  socket.on('close', () => {
    log.debug({ conn: connId }, 'close');
    conn.close();
  });
  socket.resume();
  return 'socket';
}

/** The connections of one listener (or one connection thread) served from their bare handle. */
export class RawConnections implements RawOwner {
  readonly live = new Set<RawConnection>();
  private readonly log: Logger;

  constructor(log: Logger) {
    this.log = log;
  }

  closed(raw: RawConnection): void {
    this.live.delete(raw);
    this.log.debug({ conn: raw.connId }, 'close');
  }

  error(raw: RawConnection, code: string): void {
    this.log.debug({ conn: raw.connId, err: code }, 'socket error');
  }

  /** Closes every one of them now. */
  destroyAll(): void {
    for (const r of [...this.live]) r.destroy();
  }
}

/**
 * Serves an accepted TCP handle, not reading now, as connection `connId` (src/net/raw.ts);
 * `first`: what another thread read from it already (src/net/placement.ts), received first.
 */
export function serveHandle(handle: TcpHandle, connId: number, log: Logger, open: Open, raws: RawConnections, first?: Buffer): void {
  const raw = new RawConnection(handle, connId, raws);
  const conn = open(connId, raw);
  raw.conn = conn;
  raws.live.add(raw);
  rawConnections++;
  if (log.isLevelEnabled('debug')) log.debug({ conn: connId, remote: raw.remoteAddress() }, 'accept');
  if (first !== undefined && first.length > 0) conn.receive(first, first.length);
  raw.start();
}

/** Listens on host:port; every accepted socket, paused, goes to `accept`. */
export function listenTcp(host: string, port: number, accept: (socket: net.Socket) => void): Promise<net.Server> {
  const server = net.createServer({ noDelay: true, allowHalfOpen: true, pauseOnConnect: true }, accept);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * Listens on host:port. When this Node allows it, each accepted handle goes to `bare` as it is,
 * without a net.Socket ever made for it: the server's handle hands it to us instead of to
 * net.Server (which then neither counts nor closes it: `closeBare` runs when the server closes);
 * otherwise each accepted socket, paused, goes to `socket`.
 */
export async function listenBare(host: string, port: number, bare: (h: TcpHandle) => void, socket: (s: net.Socket) => void, closeBare: () => void): Promise<net.Server> {
  const server = await listenTcp(host, port, socket);
  const h = (server as unknown as { _handle?: { onconnection?: (err: number, client: unknown) => void } })._handle;
  const nodeAccept = h?.onconnection;
  if (h != null && typeof nodeAccept === 'function' && rawBinding() !== null) {
    h.onconnection = (err, client) => {
      if (err !== 0 || rawBinding() === null || !isRawHandle(client)) nodeAccept.call(h, err, client);
      else bare(client);
    };
    const close = server.close.bind(server);
    server.close = (cb?: (err?: Error) => void) => {
      closeBare();
      return close(cb);
    };
  }
  return server;
}

/**
 * Listens for a protocol's connections: each accepted handle is served bare (src/net/raw.ts)
 * when this Node allows it, else as a net.Socket.
 */
function listen(host: string, port: number, log: Logger, open: Open, newConnId: () => number): Promise<net.Server> {
  const raws = new RawConnections(log);
  return listenBare(host, port, (h) => serveHandle(h, newConnId(), log, open, raws), (s) => void serveSocket(s, newConnId(), log, open, raws), () => raws.destroyAll());
}

/**
 * A new beanstalk connection of `beanstalk` on this thread. `handed`: the connections are
 * accepted, and counted, by the main thread, which hands them to this one (src/net/site.ts).
 */
export function openBeanstalk(beanstalk: BeanstalkServer, handed = false): (connId: number, transport: Transport) => Conn {
  return (connId, transport) => {
    const s = new Session(beanstalk, connId, transport);
    if (handed) beanstalk.adopted(s);
    else beanstalk.opened(s);
    return s;
  };
}

export function listenBeanstalk(beanstalk: BeanstalkServer, host: string, port: number, log: Logger): Promise<net.Server> {
  return listen(host, port, log, openBeanstalk(beanstalk), () => beanstalk.router.newConnId());
}

export function listenWorkq(router: Router, host: string, port: number, log: Logger): Promise<net.Server> {
  let next = 1;
  return listen(host, port, log.child({ proto: 'workq' }), (connId, transport) => new WorkqSession(router, router.workq, connId, transport), () => next++);
}
