// The servers the suites run against: the real beanstalkd (the reference every expected string
// is proven against) and shardstalk with 1 and 4 shards.
//
//   TARGETS=beanstalkd            run only against the reference (local work)
//   TARGETS=shardstalk-4,beanstalkd
// The default is all three. A missing beanstalkd FAILS the suites (never skips): without the
// reference nothing proves the expected strings are right. CI installs it (.ci/run).

import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export interface ServerOptions {
  /** Largest accepted job body in bytes (beanstalkd `-z`). */
  maxJobSize?: number;
}

export interface RunningServer {
  readonly name: string;
  readonly port: number;
  /** Put the server in drain mode (beanstalkd: SIGUSR1); resolves once it is in effect. */
  drain(): Promise<void>;
  close(): Promise<void>;
  /**
   * stats' current-waiting and current-connections as the server counts them, read without a
   * connection (which would count in stats); absent for beanstalkd. A script waits on them where
   * the next step must come after the server has taken in a step of another connection
   * (test/conformance/runner.ts).
   */
  readonly counts?: () => { waiting: number; connections: number };
}

export interface Target {
  readonly name: string;
  /** True for the real beanstalkd. */
  readonly reference: boolean;
  start(opts?: ServerOptions): Promise<RunningServer>;
}

/** How long a server may take to start listening before the test fails (ms). */
const START_TIMEOUT_MS = 10_000;

export const REFERENCE_NAME = 'beanstalkd';
export const ALL_TARGET_NAMES = [REFERENCE_NAME, 'shardstalk-1', 'shardstalk-4', 'shardstalk-4-threads'] as const;

/**
 * Absolute path of the beanstalkd binary, or null when it is not installed. The environment
 * variable BEANSTALKD may name the binary to use (and then nothing else is tried).
 */
export function findBeanstalkd(): string | null {
  const isExecutable = (file: string) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  const explicit = process.env.BEANSTALKD;
  if (explicit !== undefined && explicit !== '') return isExecutable(explicit) ? explicit : null;
  const dirs = (process.env.PATH ?? '').split(path.delimiter).concat(['/usr/bin', '/usr/sbin']);
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, 'beanstalkd');
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

const MISSING_BEANSTALKD =
  'beanstalkd is not installed, and it is the reference these suites are checked against. ' +
  'Install it (Debian: `apt-get install -y beanstalkd`; `.ci/run` does this) and run again, ' +
  'or point BEANSTALKD at the binary. ' +
  'The suites fail rather than skip so a missing reference is never mistaken for a pass.';

/**
 * The error a suite throws when it needs beanstalkd at the fixed path `binary` (the bench suites
 * run /usr/bin/beanstalkd) and it is not there: they fail, never skip, like the suites above.
 */
export function beanstalkdMissingAt(binary: string, neededFor: string): Error {
  return new Error(
    `beanstalkd is not installed at ${binary}, and ${neededFor} runs it from there. ` +
      'Install it (Debian: `apt-get install -y beanstalkd`; `.ci/run` does this) and run again. ' +
      'The tests fail rather than skip so a missing reference is never mistaken for a pass.',
  );
}

/**
 * Whether this process runs on glibc: bin/shardstalk.js then replaces itself once, with glibc's
 * allocator settings and V8's start flags on its command line (its tests run only there).
 */
export function onGlibc(): boolean {
  // A function, not a constant: a diagnostic report is a few milliseconds, and most suites that
  // import this file never ask.
  return (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime !== undefined;
}

/** Ports this process has handed out: never hand out the same one twice (tests start in parallel). */
const portsHandedOut = new Set<number>();

/**
 * A port that was free a moment ago: bind port 0, read the port, close. The caller must still
 * check that its server got the port (see waitListening), since another process may take it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.unref();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const addr = srv.address();
        if (addr === null || typeof addr === 'string') return reject(new Error('no port'));
        srv.close(() => resolve(addr.port));
      });
    });
    if (!portsHandedOut.has(port)) {
      portsHandedOut.add(port);
      return port;
    }
  }
}

/**
 * Whether process `pid` listens on 127.0.0.1:port, read from /proc so that waiting for the
 * server does not itself open a connection (that would show in total-connections), and so that
 * another process that happens to hold the port is not mistaken for ours.
 * Returns null when /proc is not readable; the caller then probes with a connection.
 */
function listeningInProc(port: number, pid: number): boolean | null {
  let table: string;
  try {
    table = readFileSync('/proc/net/tcp', 'latin1');
  } catch {
    return null;
  }
  const want = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let inode: string | null = null;
  for (const line of table.split('\n')) {
    const cols = line.trim().split(/\s+/);
    // cols[1] is the local address, cols[3] the state (0A is LISTEN), cols[9] the inode.
    if (cols[1] === want && cols[3] === '0A') inode = cols[9] ?? null;
  }
  if (inode === null) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return null;
  }
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return true;
    } catch {
      // fd closed meanwhile
    }
  }
  return false;
}

function probeConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitListening(port: number, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`beanstalkd exited early (${child.exitCode ?? child.signalCode}): ${stderr()}`);
    }
    const inProc = child.pid === undefined ? null : listeningInProc(port, child.pid);
    if (inProc === true) return;
    if (inProc === null && (await probeConnect(port))) return;
    await sleep(5);
  }
  throw new Error(`beanstalkd did not listen on port ${port} within ${START_TIMEOUT_MS} ms: ${stderr()}`);
}

/** Spawn `beanstalkd -l 127.0.0.1 -p <free port> [-z maxJobSize]` and wait until it listens. */
export async function startReference(opts: ServerOptions = {}): Promise<RunningServer> {
  const bin = findBeanstalkd();
  if (bin === null) throw new Error(MISSING_BEANSTALKD);
  // A port can be taken between freePort() and the bind; try a few.
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const args = ['-l', '127.0.0.1', '-p', String(port)];
    if (opts.maxJobSize !== undefined) args.push('-z', String(opts.maxJobSize));
    const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      await waitListening(port, child, () => err);
    } catch (e) {
      lastError = e;
      child.kill('SIGKILL');
      await exited;
      continue;
    }
    return {
      name: REFERENCE_NAME,
      port,
      async drain() {
        child.kill('SIGUSR1');
        // The signal is handled asynchronously; wait until stats reports it so the next
        // command is certain to see drain mode. This opens one connection (counted in stats).
        await waitDraining(port);
      },
      async close() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          await exited;
        }
      },
    };
  }
  throw lastError;
}

async function waitDraining(port: number): Promise<void> {
  const { connect } = await import('./client.ts');
  const c = await connect(port);
  try {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const reply = await c.request('stats');
      if (/\ndraining: true\n/.test(reply)) return;
      await sleep(5);
    }
    throw new Error('beanstalkd did not enter drain mode after SIGUSR1');
  } finally {
    await c.close();
  }
}

/** The shape of src/server.ts, declared here so this file loads before the server exists. */
interface ShardstalkModule {
  startServer(opts: {
    host?: string;
    port?: number;
    shards?: number;
    maxJobSize?: number;
    logLevel?: string;
    connectionThreads?: boolean;
  }): Promise<{ port: number; close(): Promise<void>; drain(): void; beanstalk: { waiting: number; connections: number } }>;
}

/** Start shardstalk in this process on an ephemeral port. */
export async function startShardstalk(shards: number, opts: ServerOptions = {}, connectionThreads = false): Promise<RunningServer> {
  // Dynamic import through a computed URL: the suites must load (and run against beanstalkd)
  // while src/server.ts is still being written.
  const url = new URL('../../src/server.ts', import.meta.url).href;
  let mod: ShardstalkModule;
  try {
    mod = (await import(url)) as ShardstalkModule;
  } catch (e) {
    throw new Error(`cannot load shardstalk from src/server.ts: ${(e as Error).message}`);
  }
  const srv = await mod.startServer({
    host: '127.0.0.1',
    port: 0,
    shards,
    logLevel: 'silent',
    connectionThreads,
    ...(opts.maxJobSize !== undefined ? { maxJobSize: opts.maxJobSize } : {}),
  });
  let closed = false;
  return {
    name: `shardstalk-${shards}${connectionThreads ? '-threads' : ''}`,
    port: srv.port,
    async drain() {
      srv.drain();
    },
    async close() {
      if (closed) return;
      closed = true;
      await srv.close();
    },
    counts: () => ({ waiting: srv.beanstalk.waiting, connections: srv.beanstalk.connections }),
  };
}

function makeTarget(name: string): Target {
  if (name === REFERENCE_NAME) return { name, reference: true, start: (o) => startReference(o) };
  const m = /^shardstalk-(\d+)(-threads)?$/.exec(name);
  if (m) {
    const shards = Number(m[1]);
    const threads = m[2] !== undefined;
    return { name, reference: false, start: (o) => startShardstalk(shards, o, threads) };
  }
  throw new Error(`unknown target "${name}" in TARGETS (known: ${ALL_TARGET_NAMES.join(', ')}, shardstalk-N, shardstalk-N-threads)`);
}

/** The targets every suite iterates: all three unless TARGETS narrows the list. */
export function targets(): Target[] {
  const env = (process.env.TARGETS ?? '').trim();
  const names = env === '' ? [...ALL_TARGET_NAMES] : env.split(',').map((s) => s.trim()).filter(Boolean);
  return names.map(makeTarget);
}

/** The reference target (always beanstalkd, whatever TARGETS says): for comparisons. */
export function referenceTarget(): Target {
  return makeTarget(REFERENCE_NAME);
}

/** The shardstalk targets selected by TARGETS (default shardstalk-1 and shardstalk-4). */
export function shardstalkTargets(): Target[] {
  return targets().filter((t) => !t.reference);
}
