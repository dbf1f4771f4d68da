// startServer: the programmatic entry (tests, benchmarks) behind the `shardstalk` command.

import os from 'node:os';
import type net from 'node:net';
// Taken this way, not by an ESM import: Node's ESM facade of a builtin reads every export,
// and fs's `promises` getter then loads fs/promises and readline at start (~2 MiB resident).
const fs = process.getBuiltinModule('node:fs');
import { BeanstalkServer } from './proto/beanstalk/server.ts';
import { BUSY_POLL_US_DEFAULT, Router } from './route/router.ts';
import type { WalConfig } from '../workers/wal/wal.ts';
import { lockDir, type DirLock } from '../workers/wal/lock.ts';
import { recover, removeGenerationsBefore, WalCorruptError, type RecoveredJob, type RecoverResult } from '../workers/wal/reader.ts';
import { SEGMENT_BYTES_DEFAULT } from '../workers/wal/segment.ts';
import { makeLogger, type Logger } from './log.ts';
import { listenBeanstalk, listenWorkq } from './net/listener.ts';
import { ConnectionThreads, listenConnectionThreads } from './net/threads.ts';
import { mainSite, makeMesh } from './route/shards.ts';
import { JOB_SIZE_DEFAULT } from './proto/beanstalk/parser.ts';
import { HTTP_METRICS_TUBES_DEFAULT, OpsHttp } from './ops/http.ts';

export const PORT_DEFAULT = 11300;
/** The workq protocol's port (github.com/iamduo/workq). */
export const WORKQ_PORT_DEFAULT = 9922;
export const HOST_DEFAULT = '127.0.0.1';
/** beanstalkd's -f default: fsync at most every 50 ms. */
export const FSYNC_MS_DEFAULT = 50;

/** Default shard count: one thread per core beside the main thread, at least one. */
export function shardsDefault(): number {
  return Math.max(1, os.availableParallelism() - 1);
}

/**
 * Whether beanstalk connections are served on connection threads (ServerOptions.connectionThreads)
 * unless told: with two shards or more, when the host has a core for each of their threads besides
 * the main thread's (the rule busyPollByDefault applies to shard threads). Then connection work
 * spreads over cores, as the many-core model in bench/RESULTS.md has it; on fewer cores the
 * threads would share them, and the connections that hop to a busy tube's thread cost more than
 * they save (measured on 2 cores, `--shards 2`, one tube: 0.77–0.82× of the one-thread layout
 * at 10 and 100 connections; bench/RESULTS.md, session 11).
 */
export function connectionThreadsByDefault(cores: number, shards: number): boolean {
  return shards >= 2 && cores >= shards + 1;
}

/**
 * The command line's choice: `--connection-threads` or `--no-connection-threads` if given (not
 * both), else off with `--all-shards-on-threads` (the layout with every connection on the main
 * thread), else connectionThreadsByDefault.
 */
export function connectionThreadsChosen(flags: { on?: boolean; off?: boolean; allShardsOnThreads?: boolean }, cores: number, shards: number): boolean {
  if (flags.on === true) return true;
  if (flags.off === true || flags.allShardsOnThreads === true) return false;
  return connectionThreadsByDefault(cores, shards);
}

/**
 * Which threads poll by default (ServerOptions.busyPollUs not given). A polling thread keeps its
 * core busy while commands come faster than the window, so only threads that can have a core to
 * themselves poll: the thread serving connections always (on the smallest host it is the only
 * busy one); shard threads when the host has a core for each of them besides the main thread's;
 * connection threads when it has more cores than threads. Measured on 2 cores, `--shards 2`: put →
 * RESERVED p50 at 10,000 jobs/s 297 µs with both threads polling (the generator got no core),
 * 136 µs with the main thread alone, 159 µs with neither.
 */
export function busyPollByDefault(cores: number, shardThreads: number, connectionThreads: number): { main: boolean; shards: boolean; sites: boolean } {
  return { main: true, shards: cores > 1 + shardThreads, sites: cores > connectionThreads };
}

export interface ServerOptions {
  host?: string;
  port?: number;
  shards?: number;
  maxJobSize?: number;
  logLevel?: string;
  logger?: Logger;
  /** -b: keep jobs in a write-ahead log in this directory. */
  binlogDir?: string;
  /** -f: fsync at most every this many ms; 0 = before every reply. Default 50. */
  fsyncMs?: number;
  /** -F: never fsync. */
  noFsync?: boolean;
  /** -s: bytes per log segment file. */
  binlogSegmentBytes?: number;
  /** --binlog-skip-corrupt: skip damaged records in the middle of the log instead of refusing to start. */
  binlogSkipCorrupt?: boolean;
  /** Test hook: Int32 word 0 = how many coming log writes fail with ENOSPC. */
  walFaults?: SharedArrayBuffer;
  /**
   * The first shard runs on the thread that serves the connections (default true): its tubes
   * cost no hop between threads. false: every shard on a thread of its own (the layout before
   * 2026-11-26; kept for comparisons).
   */
  shardHere?: boolean;
  /**
   * Serve beanstalk connections on several threads: one per shard, each running its shard (a
   * command on its tubes costs no hop); the main thread accepts and hands each socket to one of
   * them in turn, and keeps workq and the HTTP port. Default false.
   */
  connectionThreads?: boolean;
  /**
   * Microseconds a thread keeps polling after its last read (connections) or request (a shard
   * thread's ring) before it sleeps (--busy-poll-us; 0: sleep at once). Given, it holds for every
   * thread. Not given, BUSY_POLL_US_DEFAULT for the threads that can have a core to themselves
   * (busyPollByDefault) and none for the others.
   */
  busyPollUs?: number;
  /**
   * The longest a polling thread that serves connections waits on the CPU between two turns of its
   * loop that read nothing (--busy-poll-spin-us; default BUSY_POLL_SPIN_US_DEFAULT; 0: none).
   */
  busyPollSpinUs?: number;
  /**
   * The polling window while it costs at most half a core more than busyPollUs
   * (--busy-poll-long-us; default BUSY_POLL_LONG_US_DEFAULT; 0: never; src/shared/pollwindow.ts).
   */
  busyPollLongUs?: number;
  /**
   * More preemptions of a polling thread than this in a period keep it off the long window for a
   * while (default LONG_WINDOW_PREEMPTIONS; Infinity: never; src/shared/pollwindow.ts). For tests,
   * whose threads share the cores with other tests'.
   */
  busyPollLongPreemptions?: number;
  /** Bytes of each main↔shard ring (default RING_BYTES_DEFAULT). */
  ringBytes?: number;
  /** Request bytes queued per shard before connections stop parsing (default BACKLOG_BYTES_DEFAULT). */
  backlogBytes?: number;
  /** Also serve the workq protocol on this address (the command line's default is 127.0.0.1:9922; here, off unless given). */
  workq?: { host: string; port: number } | null;
  /** When the workq address cannot be bound (the default port taken), warn and serve beanstalk only. */
  workqOptional?: boolean;
  /** Serve /metrics, /healthz and /readyz over HTTP on this address (the command line's default is 127.0.0.1:11380; here, off unless given). */
  http?: { host: string; port: number } | null;
  /** When the HTTP address cannot be bound (the default port taken), warn and go on without it. */
  httpOptional?: boolean;
  /** The JSON API's token (--http-token); made at start and logged once when not given. */
  httpToken?: string;
  /** Tubes that get per-tube series in /metrics, at most (default HTTP_METRICS_TUBES_DEFAULT). */
  httpMetricsTubes?: number;
  /** Test hook: called once the HTTP port listens, before the log is read; the start waits for what it returns (so a test sees /readyz answer 503). */
  onHttpListening?: (port: number) => void | Promise<void>;
}

export interface RunningServer {
  readonly port: number;
  readonly host: string;
  readonly shards: number;
  /** The routing layer: shards, tubes, queues, job map, fan-ins. */
  readonly router: Router;
  /** The beanstalk protocol's connections and server-wide counters. */
  readonly beanstalk: BeanstalkServer;
  /** The workq port, or null when workq is off. */
  readonly workqPort: number | null;
  /** The HTTP port (/metrics, /healthz, /readyz), or null when it is off. */
  readonly httpPort: number | null;
  /** The JSON API's token, or null when HTTP is off. */
  readonly httpToken: string | null;
  /** Drain mode (SIGUSR1): puts are answered DRAINING. */
  drain(): void;
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions = {}): Promise<RunningServer> {
  const log = opts.logger ?? makeLogger(opts.logLevel ?? 'info');
  // The HTTP port first: while the log is replayed, /healthz answers and /readyz says 503.
  let ops: OpsHttp | null = null;
  let httpPort: number | null = null;
  if (opts.http) {
    ops = new OpsHttp(log, opts.httpMetricsTubes ?? HTTP_METRICS_TUBES_DEFAULT, opts.httpToken);
    try {
      httpPort = await ops.listen(opts.http.host, opts.http.port);
    } catch (err) {
      if (!opts.httpOptional) throw err;
      log.warn({ host: opts.http.host, port: opts.http.port, err: (err as Error).message }, 'cannot listen for http; going on without /metrics, /healthz, /readyz');
      ops = null;
    }
  }
  try {
    if (ops !== null && opts.onHttpListening) await opts.onHttpListening(httpPort as number);
    return await startServing(opts, log, ops, httpPort);
  } catch (err) {
    await ops?.close();
    throw err;
  }
}

async function startServing(opts: ServerOptions, log: Logger, ops: OpsHttp | null, httpPort: number | null): Promise<RunningServer> {
  const shards = opts.shards ?? shardsDefault();
  const host = opts.host ?? HOST_DEFAULT;
  const logLevel = opts.logLevel ?? (opts.logger ? opts.logger.level : 'info');

  // Durability: lock the directory and read back what the log holds before anything serves.
  let lock: DirLock | null = null;
  let recovered: RecoverResult | null = null;
  let wal: WalConfig | undefined;
  if (opts.binlogDir !== undefined) {
    fs.mkdirSync(opts.binlogDir, { recursive: true });
    lock = lockDir(opts.binlogDir);
    try {
      recovered = recover(opts.binlogDir, {
        skipCorrupt: opts.binlogSkipCorrupt ?? false,
        onWarning: (w) => log.warn({ file: w.path, offset: w.offset, bytes: w.bytes }, w.message),
      });
    } catch (err) {
      lock.unlock();
      if (err instanceof WalCorruptError) {
        throw new Error(`write-ahead log is damaged: ${err.path} at byte ${err.offset} (${err.reason}); ` +
          'start with --binlog-skip-corrupt to skip damaged records and lose the jobs in them');
      }
      throw err;
    }
    wal = {
      dir: opts.binlogDir,
      generation: recovered.maxGeneration + 1,
      sync: opts.noFsync ? 'never' : (opts.fsyncMs ?? FSYNC_MS_DEFAULT) === 0 ? 'always' : { everyMs: opts.fsyncMs ?? FSYNC_MS_DEFAULT },
      segmentBytesMax: opts.binlogSegmentBytes ?? SEGMENT_BYTES_DEFAULT,
      idFloor: recovered.maxId,
    };
  }

  const jobSizeMax = opts.maxJobSize ?? JOB_SIZE_DEFAULT;
  // Connection threads: a mesh of rings between one thread per shard and this one (which runs no shard).
  const mesh = opts.connectionThreads === true ? makeMesh(shards) : null;
  const polls = busyPollByDefault(os.availableParallelism(), mesh !== null ? 0 : opts.shardHere === false ? shards : shards - 1, mesh !== null ? shards : 0);
  const pollUs = (yes: boolean): number => opts.busyPollUs ?? (yes ? BUSY_POLL_US_DEFAULT : 0);
  const router = new Router({
    shards, jobSizeMax, wal, logLevel, walFaults: opts.walFaults, here: opts.shardHere === false ? null : 0,
    ringBytes: opts.ringBytes, backlogBytes: opts.backlogBytes, busyPollUs: pollUs(polls.main), busyPollSpinUs: opts.busyPollSpinUs, busyPollLongUs: opts.busyPollLongUs, busyPollLongPreemptions: opts.busyPollLongPreemptions, shardBusyPollUs: pollUs(polls.shards), mesh: mesh === null ? undefined : { mesh, site: mainSite(mesh) },
  });
  const beanstalk = new BeanstalkServer(router);
  const threads = mesh === null ? null : new ConnectionThreads(
    { mesh, shared: router.shared, counters: beanstalk.counters.shared, identity: { startedMs: beanstalk.startedMs, instanceId: beanstalk.instanceId }, jobSizeMax, wal, logLevel, walFaults: opts.walFaults, backlogBytes: opts.backlogBytes, busyPollUs: pollUs(polls.sites), busyPollSpinUs: opts.busyPollSpinUs, busyPollLongUs: opts.busyPollLongUs, busyPollLongPreemptions: opts.busyPollLongPreemptions },
    (site, err) => {
      log.fatal({ site, err }, 'a connection thread died; exiting');
      process.exit(70);
    },
  );
  router.onFatal = (shard, err) => {
    // Its queues are gone from memory: serving on would answer wrongly. Exit; with -b the log
    // still holds every acknowledged job for the next start.
    log.fatal({ shard, err: err.stack ?? err.message }, 'a shard thread died; exiting');
    process.exit(70);
  };
  let server: net.Server;
  let workqServer: net.Server | null = null;
  try {
    await router.pool.ready();
    await threads?.ready();
    if (recovered !== null && wal !== undefined) {
      // Every live job goes to the shard its tube hashes to now (the shard count may have
      // changed), which writes it into the new generation; once that is durable, the old
      // generations can go.
      const ids = [...recovered.jobs.keys()].sort((x, y) => x - y);
      for (const id of ids) router.restoreJob(recovered.jobs.get(id) as RecoveredJob);
      for (const j of recovered.wqJobs.values()) router.workq.restoreJob(j);
      if (recovered.maxId > 0) router.ids.raiseTo(recovered.maxId);
      await router.syncShards();
      removeGenerationsBefore(wal.dir, wal.generation);
      log.info({ jobs: ids.length, workqJobs: recovered.wqJobs.size, nextId: router.ids.peek(), records: recovered.records, dir: wal.dir }, 'recovered from the write-ahead log');
      recovered = null;
    }
    server = threads === null
      ? await listenBeanstalk(beanstalk, host, opts.port ?? PORT_DEFAULT, log)
      : await listenConnectionThreads(host, opts.port ?? PORT_DEFAULT, threads, beanstalk, shards);
    if (opts.workq) {
      try {
        workqServer = await listenWorkq(router, opts.workq.host, opts.workq.port, log);
        router.workq.serving = true;
      } catch (err) {
        if (!opts.workqOptional) {
          server.close();
          throw err;
        }
        log.warn({ host: opts.workq.host, port: opts.workq.port, err: (err as Error).message }, 'cannot listen for workq; serving beanstalk only');
      }
    }
  } catch (err) {
    await threads?.close();
    await router.close();
    lock?.unlock();
    throw err;
  }
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  log.info({ host, port, shards, shardThreads: router.pool.threadCount, connectionThreads: threads?.count ?? 0 }, 'listening (beanstalk)');
  let workqPort: number | null = null;
  if (workqServer !== null) {
    const waddr = workqServer.address();
    workqPort = typeof waddr === 'object' && waddr !== null ? waddr.port : 0;
    log.info({ host: opts.workq?.host, port: workqPort }, 'listening (workq)');
  }
  if (ops !== null) {
    ops.ready(beanstalk);
    log.info({ host: opts.http?.host, port: httpPort }, 'listening (http: /metrics /healthz /readyz /api)');
  }
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  server.on('connection', track);
  workqServer?.on('connection', track);
  return {
    port,
    host,
    shards,
    router,
    beanstalk,
    workqPort,
    httpPort,
    httpToken: ops === null ? null : ops.token,
    drain() {
      beanstalk.draining = true;
      log.info('drain mode: new jobs are refused');
    },
    async close() {
      const opsClosed = ops?.close();
      await Promise.all(
        [server, workqServer].map(
          (srv) => new Promise<void>((resolve) => (srv === null ? resolve() : srv.close(() => resolve()))),
        ).concat([Promise.resolve().then(() => { for (const s of sockets) s.destroy(); })]),
      );
      beanstalk.closeAll();
      await threads?.close();
      await opsClosed;
      await router.close();
      lock?.unlock();
    },
  };
}
