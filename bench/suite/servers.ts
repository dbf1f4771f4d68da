// Starting and stopping the servers under test on free loopback ports.
//
// A server that does not come up is an error with its exit code and the tail of its output, never
// a silently skipped column: a benchmark that quietly measures nothing is worse than one that fails.

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryServer } from '../loadgen/procfs.ts';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BEANSTALKD_PATH = '/usr/bin/beanstalkd';
/** How long a server may take to accept connections and answer. Why 5 s: a Node server on a busy 2-core VM starts in well under 1 s. */
export const START_TIMEOUT_MS = 5000;
const STOP_TIMEOUT_MS = 3000;
const OUTPUT_TAIL_BYTES = 4096;

export interface ServerSpec {
  /** Column name in the results, e.g. "beanstalkd", "shardstalk-1". */
  name: string;
  /** What it is, for the results page. */
  description: string;
  command: string;
  /** `workqPort` is a free port for the workq listener, given when `workq` is set. */
  args: (port: number, workqPort?: number) => string[];
  cwd?: string;
  /** Also serves workq: started with a second port, ready once both answer. */
  workq?: boolean;
}

export class ServerStartFailure extends Error {
  readonly code = 'ERR_BENCH_SERVER_START';
  readonly server: string;
  readonly output: string;

  constructor(server: string, message: string, output: string) {
    super(`${server} did not start: ${message}${output ? `\n--- last output of ${server} ---\n${output.trimEnd()}\n---` : ''}`);
    this.server = server;
    this.output = output;
  }
}

export interface RunningServer {
  spec: ServerSpec;
  port: number;
  /** The workq port, or null for a spec without workq. */
  workqPort: number | null;
  pid: number;
  /** Last few KB of stdout and stderr. */
  output(): string;
  /** True while the process is alive. */
  alive(): boolean;
  stop(): Promise<void>;
}

export function beanstalkdSpec(binary = BEANSTALKD_PATH): ServerSpec | null {
  if (!existsSync(binary)) return null;
  return {
    name: 'beanstalkd',
    description: `${beanstalkdVersion(binary)}, in memory (no -b)`,
    command: binary,
    args: (port) => ['-l', '127.0.0.1', '-p', String(port)],
  };
}

export function beanstalkdVersion(binary = BEANSTALKD_PATH): string {
  try {
    return execFileSync(binary, ['-v'], { encoding: 'utf8' }).trim();
  } catch {
    return 'beanstalkd (version unknown)';
  }
}

/**
 * shardstalk from this checkout; `shards` null means its default shard count. With `workq`, it
 * also listens for workq on a second free port (measured there); without, workq is off, so no
 * suite server takes the default workq port.
 */
export function shardstalkSpec(shards: number | null, workq = false): ServerSpec {
  return {
    name: shards === null ? 'shardstalk' : `shardstalk-${shards}`,
    description: `shardstalk, ${shards === null ? 'default shard count' : `${shards} shard${shards === 1 ? '' : 's'}`}${workq ? ', workq listener' : ''}`,
    // The Node running this suite (24, which runs .ts directly), not whatever `node` is on PATH.
    command: process.execPath,
    // The command users run: bin/shardstalk.js turns on the compile cache first (idle memory).
    args: (port, workqPort) => [
      'bin/shardstalk.js',
      '-l',
      '127.0.0.1',
      '-p',
      String(port),
      ...(shards === null ? [] : ['--shards', String(shards)]),
      ...(workq ? ['--workq-listen', `127.0.0.1:${workqPort}`] : ['--no-workq']),
    ],
    cwd: REPO_ROOT,
    workq,
  };
}

/**
 * tools/node-floor.ts: shardstalk's socket path (bare handles, one write per connection per turn)
 * and one FIFO, nothing else; with the young generation bin/shardstalk.js gives the server.
 */
export function nodeFloorSpec(): ServerSpec {
  return {
    name: 'node-floor',
    description: 'tools/node-floor.ts: Node reading and writing as shardstalk does, one FIFO, no protocol beyond that',
    command: process.execPath,
    args: (port) => ['--min-semi-space-size=16', 'tools/node-floor.ts', String(port)],
    cwd: REPO_ROOT,
  };
}

/** A shardstalk server run beside the default one: its name, its arguments, and Node's (before the script). */
export interface Variant {
  name: string;
  args: string[];
  nodeArgs: string[];
}

/**
 * `NAME=ARGS` (cycle-c's --variant): shardstalk-NAME, run with ARGS split at spaces; an argument
 * written `node:FLAG` is Node's (a V8 flag, say), given before the script.
 */
export function parseVariant(spec: string): Variant {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`--variant wants NAME=ARGS, got "${spec}"`);
  const all = spec.slice(eq + 1).split(' ').filter(Boolean);
  const NODE = 'node:';
  return {
    name: `shardstalk-${spec.slice(0, eq)}`,
    args: all.filter((a) => !a.startsWith(NODE)),
    nodeArgs: all.filter((a) => a.startsWith(NODE)).map((a) => a.slice(NODE.length)),
  };
}

/** A port that was free a moment ago (the kernel picks it; a server may still race us for it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

const children = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Servers must not outlive the suite, whatever way it ends. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of children) c.kill('SIGKILL');
  });
}

export async function startServer(spec: ServerSpec, startTimeoutMs = START_TIMEOUT_MS): Promise<RunningServer> {
  installExitHook();
  let lastError: ServerStartFailure | null = null;
  // Retry on another port when the one we picked was taken in between.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await startOnPort(spec, port, startTimeoutMs);
    } catch (err) {
      if (!(err instanceof ServerStartFailure) || !/EADDRINUSE|Address already in use/i.test(err.message + err.output)) throw err;
      lastError = err;
    }
  }
  throw lastError!;
}

async function startOnPort(spec: ServerSpec, port: number, startTimeoutMs: number): Promise<RunningServer> {
  const workqPort = spec.workq ? await freePort() : null;
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES);
  };
  let child: ChildProcess;
  try {
    child = spawn(spec.command, spec.args(port, workqPort ?? undefined), { cwd: spec.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    throw new ServerStartFailure(spec.name, (err as Error).message, '');
  }
  children.add(child);
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  let spawnError: Error | null = null;
  const exitedPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      children.delete(child);
      resolve();
    });
    child.once('error', (err) => {
      spawnError = err;
      children.delete(child);
      resolve();
    });
  });

  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (spawnError !== null) throw new ServerStartFailure(spec.name, (spawnError as Error).message, output);
    if (exited !== null) {
      const e = exited as { code: number | null; signal: NodeJS.Signals | null };
      throw new ServerStartFailure(spec.name, `exited with ${e.signal ?? `code ${e.code}`} before listening on 127.0.0.1:${port}`, output);
    }
    if ((await answers(port)) && (workqPort === null || (await answers(workqPort, 'workq')))) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await exitedPromise;
      throw new ServerStartFailure(spec.name, `not answering on 127.0.0.1:${port} after ${startTimeoutMs} ms`, output);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    spec,
    port,
    workqPort,
    pid: child.pid!,
    output: () => output,
    alive: () => exited === null,
    async stop(): Promise<void> {
      if (exited !== null || spawnError !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exitedPromise;
      clearTimeout(timer);
    },
  };
}

/**
 * True once the port accepts a connection and answers a beanstalk command. Why list-tube-used: the
 * cheapest command every server implements, answered without asking any shard. workq: a lease of
 * a name nobody uses, answered -TIMEOUT at once.
 */
async function answers(port: number, protocol: 'beanstalk' | 'workq' = 'beanstalk'): Promise<boolean> {
  try {
    const command = protocol === 'workq' ? 'lease bench.ready 0' : 'list-tube-used';
    const reply = await queryServer('127.0.0.1', port, command, 1000, protocol);
    return reply.kind !== 'GARBLED';
  } catch {
    return false;
  }
}
