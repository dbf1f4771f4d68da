// startServer: the programmatic entry (tests, benchmarks) behind the `shardstalk` command.

import os from 'node:os';
import type net from 'node:net';
import { Hub } from './hub.ts';
import { makeLogger, type Logger } from './log.ts';
import { listenBeanstalk } from './net/listener.ts';
import { JOB_SIZE_DEFAULT } from './proto/beanstalk/parser.ts';

export const PORT_DEFAULT = 11300;
export const HOST_DEFAULT = '127.0.0.1';

/** Default shard count: one thread per core beside the main thread, at least one. */
export function shardsDefault(): number {
  return Math.max(1, os.availableParallelism() - 1);
}

export interface ServerOptions {
  host?: string;
  port?: number;
  shards?: number;
  maxJobSize?: number;
  logLevel?: string;
  logger?: Logger;
}

export interface RunningServer {
  readonly port: number;
  readonly host: string;
  readonly shards: number;
  readonly hub: Hub;
  /** Drain mode (SIGUSR1): puts are answered DRAINING. */
  drain(): void;
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions = {}): Promise<RunningServer> {
  const log = opts.logger ?? makeLogger(opts.logLevel ?? 'info');
  const shards = opts.shards ?? shardsDefault();
  const host = opts.host ?? HOST_DEFAULT;
  const hub = new Hub({ shards, jobSizeMax: opts.maxJobSize ?? JOB_SIZE_DEFAULT });
  let server: net.Server;
  try {
    await hub.pool.ready();
    server = await listenBeanstalk(hub, host, opts.port ?? PORT_DEFAULT, log);
  } catch (err) {
    await hub.close();
    throw err;
  }
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  log.info({ host, port, shards }, 'listening (beanstalk)');
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    port,
    host,
    shards,
    hub,
    drain() {
      hub.draining = true;
      log.info('drain mode: new jobs are refused');
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await hub.close();
    },
  };
}
