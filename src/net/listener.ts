// TCP listener: wires each accepted socket to a beanstalk Session.

import net from 'node:net';
import type { Hub } from '../hub.ts';
import type { Logger } from '../log.ts';
import { Session } from '../proto/beanstalk/session.ts';

export function listenBeanstalk(hub: Hub, host: string, port: number, log: Logger): Promise<net.Server> {
  const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (socket) => {
    const connId = hub.newConnId();
    const session = new Session(hub, connId, {
      write: (data) => socket.write(data),
      end: () => socket.end(),
      pauseReading: () => socket.pause(),
      resumeReading: () => socket.resume(),
      bufferedOut: () => socket.writableLength,
    });
    hub.sessionOpened(session);
    log.debug({ conn: connId, remote: socket.remoteAddress }, 'accept');
    socket.on('data', (chunk: Buffer) => session.receive(chunk));
    socket.on('drain', () => session.drained());
    socket.on('end', () => session.halfClose());
    socket.on('error', (err) => log.debug({ conn: connId, err: err.message }, 'socket error'));
    socket.on('close', () => {
      log.debug({ conn: connId }, 'close');
      session.close();
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
