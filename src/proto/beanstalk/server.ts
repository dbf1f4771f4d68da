// The beanstalk protocol's server-wide state: its connections and the counters `stats` reports
// that are not the shards' (commands, producers, workers, connections), and drain mode.

import { randomBytes } from 'node:crypto';
import type { FanAttempt } from '../../route/fanin.ts';
import type { JobHolder, Router } from '../../route/router.ts';
import type { Multiset, Tube } from '../../route/tubes.ts';
import { CMD_COUNT } from './commands.ts';

/** What the server keeps of a connection (the Session). */
export interface BeanstalkConn extends JobHolder {
  readonly connId: number;
  readonly isProducer: boolean;
  readonly isWorker: boolean;
  readonly reserveAttempt: FanAttempt<Tube> | null;
  readonly watch: Multiset<Tube>;
  readonly use: Tube;
  close(): void;
}

export class BeanstalkServer {
  readonly router: Router;
  readonly sessions = new Map<number, BeanstalkConn>();
  readonly cmdCounts = new Float64Array(CMD_COUNT);
  totalJobs = 0;
  producers = 0;
  workers = 0;
  totalConnections = 0;
  /** SIGUSR1: puts answer DRAINING. */
  draining = false;
  readonly startedMs = Date.now();
  readonly instanceId = randomBytes(8).toString('hex');

  constructor(router: Router) {
    this.router = router;
  }

  /** A new connection (made with a connection id from Router.newConnId). */
  opened(s: BeanstalkConn): void {
    this.totalConnections++;
    this.sessions.set(s.connId, s);
    this.router.conns.set(s.connId, s);
  }

  /** The connection has gone: give back what it held, as beanstalkd's connclose does. */
  closed(s: BeanstalkConn): void {
    const router = this.router;
    this.sessions.delete(s.connId);
    if (s.reserveAttempt !== null) router.reserves.fan.cancel(s.reserveAttempt);
    if (s.isProducer) this.producers--;
    if (s.isWorker) {
      this.workers--;
      // Give back every job it holds and end a reserve it left waiting in a shard; the request
      // queues behind everything it sent. It stays in router.conns until every shard answered.
      router.releaseHeld(s.connId);
    } else {
      router.conns.delete(s.connId);
    }
    // beanstalkd's connclose order: the watch set (ms_clear), then the used tube. Tubes freed
    // on the way leave list-tubes in that order.
    s.watch.clear((t) => {
      t.watching--;
      router.tubes.release(t);
    });
    s.use.using--;
    router.tubes.release(s.use);
  }

  /** Closes every connection (shutdown). */
  closeAll(): void {
    for (const s of [...this.sessions.values()]) s.close();
  }
}
