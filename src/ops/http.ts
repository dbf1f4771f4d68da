// The operations port (--http): /metrics for Prometheus, /healthz and /readyz for supervisors and
// load balancers, /api/ (src/ops/api.ts: the JSON API), and the dashboard at / (src/ops/dashboard.ts). node:http and nothing else; every answer is made on request (a scrape asks the
// shards then), so nothing here costs the queues anything between requests.

import type http from 'node:http';
import type { Logger } from '../log.ts';
import { type BeanstalkServer, ROW_TOTAL_JOBS } from '../proto/beanstalk/server.ts';
import { generateToken, isLoopback, JsonApi } from './api.ts';
import { isDashboardPath, serveDashboard } from './dashboard.ts';
import { gather } from './gather.ts';
import { METRICS_CONTENT_TYPE, renderMetrics } from './metrics.ts';
import { threadCpu } from './threads.ts';

/**
 * The operations port when none is given: beanstalk's 11300 with HTTP's 80 in its last digits,
 * so it is easy to guess from the queue port; unassigned at IANA and below Linux's ephemeral
 * range (32768 and up), so an outgoing connection never holds it.
 */
export const HTTP_PORT_DEFAULT = 11380;
/**
 * Tubes that get beanstalkd_tube_* series at most (--http-metrics-tubes). Each tube adds 13
 * series and one request to its shard per scrape; 1000 tubes are 13,000 series, about what
 * one Prometheus target should carry. The rest are counted in shardstalk_metrics_tubes_omitted.
 */
export const HTTP_METRICS_TUBES_DEFAULT = 1000;

type Phase = 'starting' | 'serving' | 'stopping';

// Taken as the CommonJS module, not imported: an ESM import of a builtin reads every export once,
// and node:http's WebSocket, CloseEvent and MessageEvent getters then load undici, and with it
// tls, http2, perf_hooks and the web streams (about 13 MiB resident that an idle server never uses).
const { createServer } = process.getBuiltinModule('node:http');

export class OpsHttp {
  readonly server: http.Server;
  private phase: Phase = 'starting';
  private beanstalk: BeanstalkServer | null = null;
  private scrapes = 0;
  private readonly tubesMax: number;
  private readonly log: Logger;

  /** The JSON API's token (--http-token, or one made at start). */
  readonly token: string;
  private readonly tokenGenerated: boolean;
  private api: JsonApi | null = null;

  constructor(log: Logger, tubesMax: number, token?: string) {
    this.log = log;
    this.tubesMax = tubesMax;
    this.tokenGenerated = token === undefined;
    this.token = token ?? generateToken();
    this.server = createServer((req, res) => this.handle(req, res));
  }

  /** Binds; rejects when the address cannot be bound (EADDRINUSE, EADDRNOTAVAIL...). */
  listen(host: string, port: number): Promise<number> {
    this.api = new JsonApi(this.token, isLoopback(host));
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        this.server.on('error', (err) => this.log.error({ err: err.message }, 'http server error'));
        const a = this.server.address();
        // Once, and only when made here: whoever passed --http-token knows it already.
        if (this.tokenGenerated) this.log.info({ token: this.token }, 'http api token (state-changing requests send it as Authorization: Bearer; --http-token sets it)');
        resolve(typeof a === 'object' && a !== null ? a.port : port);
      });
    });
  }

  /** The log is replayed and the protocol ports listen: /readyz answers 200 (unless draining), /metrics serves. */
  ready(beanstalk: BeanstalkServer): void {
    this.beanstalk = beanstalk;
    if (this.api !== null) this.api.jobCreated = () => void beanstalk.row[ROW_TOTAL_JOBS]++;
    this.phase = 'serving';
  }

  /** Closes the port, and the connections kept alive on it. */
  close(): Promise<void> {
    this.phase = 'stopping';
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** Why /readyz says 503, or null when it says 200. */
  private notReady(): string | null {
    if (this.phase !== 'serving' || this.beanstalk === null) return this.phase;
    // Drain mode (SIGUSR1) refuses new jobs: a balancer should send producers elsewhere. Live
    // connections go on, so workers can still empty the queues.
    if (this.beanstalk.draining) return 'draining';
    return null;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (path.startsWith('/api/') && this.api !== null) {
      this.api.handle(req, res, this.phase === 'serving' && this.beanstalk !== null ? this.beanstalk.router : null);
      return;
    }
    const dashboard = isDashboardPath(path);
    if (!dashboard && path !== '/metrics' && path !== '/healthz' && path !== '/readyz') {
      text(res, 404, 'not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      text(res, 405, 'method not allowed\n');
      return;
    }
    if (dashboard) {
      serveDashboard(req, res, path);
      return;
    }
    switch (path) {
      case '/healthz':
        // The process answers: alive, even while it replays its log.
        text(res, 200, 'ok\n');
        return;
      case '/readyz': {
        const why = this.notReady();
        text(res, why === null ? 200 : 503, `${why ?? 'ready'}\n`);
        return;
      }
      case '/metrics':
        this.metrics(res);
        return;
    }
  }

  private metrics(res: http.ServerResponse): void {
    const beanstalk = this.beanstalk;
    if (beanstalk === null || this.phase !== 'serving') {
      text(res, 503, `${this.phase}\n`);
      return;
    }
    const scrapes = ++this.scrapes;
    Promise.all([gather(beanstalk, this.tubesMax), threadCpu()])
      .then(([figures, threads]) => {
        const body = renderMetrics(figures, {
          scrapes,
          tubesMax: this.tubesMax,
          backlogPeakBytes: beanstalk.router.pool.backlogPeak,
          threads,
        });
        res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      })
      .catch((err: Error) => {
        this.log.error({ err: err.stack ?? err.message }, 'cannot make /metrics');
        if (!res.headersSent) text(res, 500, 'cannot make metrics\n');
      });
  }
}

function text(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
