// The `shardstalk` command: beanstalkd's flags where they exist, plus --shards.

import os from 'node:os';
import { parseArgs } from 'node:util';
import { VERSION } from './version.ts';
import { makeLogger } from './log.ts';
import { startReclaimTimer } from './shared/reclaim.ts';
import { JOB_SIZE_DEFAULT } from './proto/beanstalk/parser.ts';
import { BUSY_POLL_LONG_US_DEFAULT, BUSY_POLL_SPIN_US_DEFAULT, BUSY_POLL_SPIN_US_MAX, BUSY_POLL_US_DEFAULT, BUSY_POLL_US_MAX } from './route/router.ts';
import { connectionThreadsByDefault, connectionThreadsChosen, FSYNC_MS_DEFAULT, HOST_DEFAULT, PORT_DEFAULT, shardsDefault, startServer, WORKQ_PORT_DEFAULT } from './server.ts';
import { SEGMENT_BYTES_DEFAULT } from '../workers/wal/segment.ts';
import { HTTP_METRICS_TUBES_DEFAULT, HTTP_PORT_DEFAULT } from './ops/http.ts';

const USAGE = `Usage: shardstalk [OPTIONS]

Options:
 -l ADDR      listen on address (default is ${HOST_DEFAULT})
 -p PORT      listen on port (default is ${PORT_DEFAULT})
 -z BYTES     set the maximum job size in bytes (default is ${JOB_SIZE_DEFAULT})
 -b DIR       write-ahead log directory: jobs survive restarts and crashes
 -f MS        fsync at most every MS milliseconds (default is ${FSYNC_MS_DEFAULT}); -f 0 fsyncs before every reply
 -F           never fsync
 -s BYTES     size of each write-ahead log file (default is ${SEGMENT_BYTES_DEFAULT})
 --binlog-skip-corrupt  start even if the log is damaged in the middle, losing the jobs in damaged records
 --workq-listen HOST:PORT  serve the workq protocol there (default is ${HOST_DEFAULT}:${WORKQ_PORT_DEFAULT}; if that
              default port is taken, shardstalk warns and serves beanstalk only)
 --no-workq   do not serve the workq protocol
 --http HOST:PORT  serve /metrics (Prometheus), /healthz and /readyz over HTTP there (default is
              ${HOST_DEFAULT}:${HTTP_PORT_DEFAULT}; if that default port is taken, shardstalk warns and goes on without)
 --no-http    do not serve HTTP
 --http-token TOKEN  the JSON API's token for state-changing requests (default: one made at start, logged once)
 --http-metrics-tubes N  per-tube series in /metrics for at most N tubes (default is ${HTTP_METRICS_TUBES_DEFAULT})
 --shards N   queue shards; the first runs on the connections' thread, each other one on a thread
              of its own (default: cores - 1, at least 1; here ${shardsDefault()})
 --all-shards-on-threads  the first shard on a thread of its own too (the connections' thread then
              only parses and routes; for comparisons and heavy pipelined load on many cores)
 --connection-threads  serve beanstalk connections on one thread per shard, each running its shard
              (the main thread accepts and hands sockets over; workq and HTTP stay on it); default:
              on with 2 shards or more when there is a core for each besides the main thread's
              (here, with the default shard count: ${connectionThreadsByDefault(os.availableParallelism(), shardsDefault()) ? 'on' : 'off'})
 --no-connection-threads  serve every beanstalk connection on the main thread, whatever the cores
 --busy-poll-us N  every thread keeps polling this many microseconds after its last read (or
              request, a shard thread) before sleeping, so a client's next command needs no wake-up
              (0: sleep at once; default ${BUSY_POLL_US_DEFAULT} for the threads that can have a core to
              themselves, none for the others; costs CPU only while commands keep coming)
 --busy-poll-long-us N  a thread serving connections polls this long instead while that costs at
              most half a core more than the --busy-poll-us window would (it measures
              what that window would sleep) and no other task keeps wanting its core (it
              counts its preemptions), so a steady load meets no wake-ups (default
              ${BUSY_POLL_LONG_US_DEFAULT}; 0: never)
 --busy-poll-spin-us N  the longest a polling thread waits between two turns of its loop that
              read nothing: half its idle time so far, at least 2 µs, at most N (fewer turns,
              less garbage; a command that comes meanwhile waits; default
              ${BUSY_POLL_SPIN_US_DEFAULT}; 0: no wait)
 -V           increase verbosity (info; -V debug; -VV trace)
 -v, --version  show version information
 -h, --help   show this help
`;

function fail(msg: string): never {
  process.stderr.write(`shardstalk: ${msg}\n${USAGE}`);
  process.exit(5);
}

function intArg(name: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) fail(`${name} wants a whole number, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) fail(`${name} must be between ${min} and ${max}`);
  return n;
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      l: { type: 'string' },
      p: { type: 'string' },
      z: { type: 'string' },
      b: { type: 'string' },
      f: { type: 'string' },
      F: { type: 'boolean' },
      s: { type: 'string' },
      'binlog-skip-corrupt': { type: 'boolean' },
      shards: { type: 'string' },
      'all-shards-on-threads': { type: 'boolean' },
      'connection-threads': { type: 'boolean' },
      'no-connection-threads': { type: 'boolean' },
      'busy-poll-us': { type: 'string' },
      'busy-poll-spin-us': { type: 'string' },
      'busy-poll-long-us': { type: 'string' },
      'workq-listen': { type: 'string' },
      'no-workq': { type: 'boolean' },
      http: { type: 'string' },
      'no-http': { type: 'boolean' },
      'http-metrics-tubes': { type: 'string' },
      'http-token': { type: 'string' },
      V: { type: 'boolean', multiple: true },
      v: { type: 'boolean' },
      version: { type: 'boolean' },
      h: { type: 'boolean' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
} catch (err) {
  fail((err as Error).message);
}
const o = parsed.values;
if (o.h || o.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (o.v || o.version) {
  process.stdout.write(`shardstalk ${VERSION}\n`);
  process.exit(0);
}

function hostPort(flag: string, v: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(v);
  if (m === null || m[1] === '') fail(`${flag} wants HOST:PORT, got "${v}"`);
  const port = intArg(`${flag} port`, m[2], 0, 65535) as number;
  // [::1]:9922 -> ::1
  const host = m[1].startsWith('[') && m[1].endsWith(']') ? m[1].slice(1, -1) : m[1];
  return { host, port };
}
if (o['no-workq'] && o['workq-listen'] !== undefined) fail('--no-workq and --workq-listen contradict each other');
const workqExplicit = o['workq-listen'] !== undefined;
const workq = o['no-workq'] ? null : workqExplicit ? hostPort('--workq-listen', o['workq-listen'] as string) : { host: HOST_DEFAULT, port: WORKQ_PORT_DEFAULT };
if (o['no-http'] && o.http !== undefined) fail('--no-http and --http contradict each other');
if (o['http-token'] !== undefined && !/^[\x21-\x7e]{16,}$/.test(o['http-token'] as string)) fail('--http-token must be at least 16 printable ASCII characters without spaces');
const httpExplicit = o.http !== undefined;
const http = o['no-http'] ? null : httpExplicit ? hostPort('--http', o.http as string) : { host: HOST_DEFAULT, port: HTTP_PORT_DEFAULT };

if (o['connection-threads'] && o['no-connection-threads']) fail('--connection-threads and --no-connection-threads contradict each other');
const shards = intArg('--shards', o.shards, 1, 254) ?? shardsDefault();
const connectionThreads = connectionThreadsChosen(
  { on: o['connection-threads'], off: o['no-connection-threads'], allShardsOnThreads: o['all-shards-on-threads'] },
  os.availableParallelism(),
  shards,
);

const verbosity = o.V?.length ?? 0;
const log = makeLogger(verbosity === 0 ? 'info' : verbosity === 1 ? 'debug' : 'trace');
const server = await startServer({
  host: o.l ?? HOST_DEFAULT,
  port: intArg('-p', o.p, 0, 65535) ?? PORT_DEFAULT,
  maxJobSize: intArg('-z', o.z, 0, 1024 * 1024 * 1024) ?? JOB_SIZE_DEFAULT,
  shards,
  shardHere: !(o['all-shards-on-threads'] ?? false),
  connectionThreads,
  busyPollUs: intArg('--busy-poll-us', o['busy-poll-us'], 0, BUSY_POLL_US_MAX),
  busyPollSpinUs: intArg('--busy-poll-spin-us', o['busy-poll-spin-us'], 0, BUSY_POLL_SPIN_US_MAX),
  busyPollLongUs: intArg('--busy-poll-long-us', o['busy-poll-long-us'], 0, BUSY_POLL_US_MAX),
  binlogDir: o.b,
  fsyncMs: intArg('-f', o.f, 0, 86_400_000),
  noFsync: o.F ?? false,
  binlogSegmentBytes: intArg('-s', o.s, 4096, 2 ** 31 - 1),
  binlogSkipCorrupt: o['binlog-skip-corrupt'] ?? false,
  workq,
  workqOptional: !workqExplicit,
  http,
  httpOptional: !httpExplicit,
  httpToken: o['http-token'],
  httpMetricsTubes: intArg('--http-metrics-tubes', o['http-metrics-tubes'], 0, 1_000_000) ?? HTTP_METRICS_TUBES_DEFAULT,
  logger: log,
}).catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot start');
  process.exit(1);
});

// The process's own memory policy, not the library's (startServer may run inside a test or
// another program): after a burst, a quiet main thread gives back what V8 kept. The shard and
// connection threads do the same for their own heaps (src/shared/reclaim.ts).
let startOver!: () => void;
/**
 * Settles at the main thread's first reclaim look, once the start's garbage is collected (a
 * second after the listeners are up): bin/shardstalk.js keeps V8's optimizing compilers off until
 * then, so nothing the start made hot is compiled before it.
 */
export const started = new Promise<void>((resolve) => (startOver = resolve));
startReclaimTimer((r) => log.debug(r, 'memory given back'), () => server.beanstalk.workDone(), () => startOver());

process.on('SIGUSR1', () => server.drain());
let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'shutting down');
  server.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
