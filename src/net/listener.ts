// TCP listeners: wire each accepted socket to a protocol connection (a beanstalk Session on the
// beanstalk port, a WorkqSession on the workq port).

import net from 'node:net';
import type { Hub } from '../hub.ts';
import type { Logger } from '../log.ts';
import type { Transport } from '../proto/connection.ts';
import { Session } from '../proto/beanstalk/session.ts';
import { WorkqSession } from '../proto/workq/session.ts';

/** What a listener needs of a connection. */
interface Conn {
  receive(chunk: Buffer): void;
  drained(): void;
  halfClose(): void;
  close(): void;
}

function listen(host: string, port: number, log: Logger, open: (connId: number, transport: Transport) => Conn, newConnId: () => number): Promise<net.Server> {
  const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (socket) => {
    const connId = newConnId();
    const conn = open(connId, {
      write: (data) => socket.write(data),
      end: () => socket.end(),
      pauseReading: () => socket.pause(),
      resumeReading: () => socket.resume(),
      bufferedOut: () => socket.writableLength,
    });
    log.debug({ conn: connId, remote: socket.remoteAddress }, 'accept');
    socket.on('data', (chunk: Buffer) => conn.receive(chunk));
    socket.on('drain', () => conn.drained());
    socket.on('end', () => conn.halfClose());
    socket.on('error', (err) => log.debug({ conn: connId, err: err.message }, 'socket error'));
    socket.on('close', () => {
      log.debug({ conn: connId }, 'close');
      conn.close();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

export function listenBeanstalk(hub: Hub, host: string, port: number, log: Logger): Promise<net.Server> {
  return listen(
    host,
    port,
    log,
    (connId, transport) => {
      const session = new Session(hub, connId, transport);
      hub.sessionOpened(session);
      return session;
    },
    () => hub.newConnId(),
  );
}

export function listenWorkq(hub: Hub, host: string, port: number, log: Logger): Promise<net.Server> {
  let next = 1;
  return listen(host, port, log.child({ proto: 'workq' }), (connId, transport) => new WorkqSession(hub, hub.workq, connId, transport), () => next++);
}
