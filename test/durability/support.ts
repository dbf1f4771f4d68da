// Helpers shared by the durability suites and tools/crash-test.ts: log directories, shardstalk as a
// child process (so it can be SIGKILLed), stats parsing, the log's files, a seeded PRNG.

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import type { Client } from '../support/client.ts';
import { mulberry32 as rng } from '../support/prng.ts';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(REPO, 'src', 'main.ts');

/** How long a server child may take to listen (ms). Generous: CI has 2 cores. */
const START_TIMEOUT_MS = 20_000;

/** A Node that runs .ts directly (24+): this one, or the `node` devDependency. */
export function nodeBin(): string {
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= 24) return process.execPath;
  return join(REPO, 'node_modules', '.bin', 'node');
}

/** A fresh empty directory under the system temp dir. */
export function makeDir(prefix: string): string {
  return fs.mkdtempSync(join(os.tmpdir(), `shardstalk-${prefix}-`));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------ server child processes

export interface ChildServer {
  readonly port: number;
  /** The workq port (ChildOptions.workq), else 0. */
  readonly workqPort: number;
  readonly pid: number;
  readonly proc: ChildProcess;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Resolves with how it ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL (a crash) and wait until it is gone. */
  kill(): Promise<void>;
  /** SIGTERM (a clean shutdown) and wait until it is gone. */
  stop(): Promise<void>;
}

export interface ChildOptions {
  dir: string;
  shards: number;
  /** Flags for fsync: ['-f', '0'] (default), ['-f', '50'], ['-F']. */
  fsync?: string[];
  segmentBytes?: number;
  skipCorrupt?: boolean;
  /** Serve workq on a port the kernel picks (else none: children must not fight over 9922). */
  workq?: boolean;
  /** --connection-threads: beanstalk connections served on one thread per shard. */
  connectionThreads?: boolean;
}

export function serverArgs(o: ChildOptions): string[] {
  const args = [MAIN, '-l', '127.0.0.1', '-p', '0', '--shards', String(o.shards), '-b', o.dir, ...(o.fsync ?? ['-f', '0'])];
  if (o.segmentBytes !== undefined) args.push('-s', String(o.segmentBytes));
  if (o.skipCorrupt) args.push('--binlog-skip-corrupt');
  args.push(o.connectionThreads ? '--connection-threads' : '--no-connection-threads'); // not the host's default: the layout asked for
  args.push(...(o.workq ? ['--workq-listen', '127.0.0.1:0'] : ['--no-workq']));
  return args;
}

/**
 * Starts `node src/main.ts -p 0 ...` and resolves once it listens, with the port it logged (no
 * port race: the kernel picks it). Rejects with its stderr if it exits first.
 */
export function spawnServer(o: ChildOptions): Promise<ChildServer> {
  const proc = spawn(nodeBin(), serverArgs(o), { stdio: ['ignore', 'ignore', 'pipe'], cwd: REPO });
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      proc.kill('SIGKILL');
      reject(new Error(`server did not listen within ${START_TIMEOUT_MS} ms; stderr:\n${err}`));
    }, START_TIMEOUT_MS);
    proc.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      if (done) return;
      const m = /"port":(\d+)[^\n]*"msg":"listening \(beanstalk\)"/.exec(err);
      const wm = /"port":(\d+)[^\n]*"msg":"listening \(workq\)"/.exec(err);
      if (m && (!o.workq || wm)) {
        done = true;
        clearTimeout(timer);
        const kill = async (signal: NodeJS.Signals) => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
          await exited;
        };
        resolve({
          port: Number(m[1]),
          workqPort: wm ? Number(wm[1]) : 0,
          pid: proc.pid!,
          proc,
          stderr: () => err,
          exited,
          kill: () => kill('SIGKILL'),
          stop: () => kill('SIGTERM'),
        });
      }
    });
    void exited.then(({ code, signal }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(Object.assign(new Error(`server exited (${code ?? signal}) before listening; stderr:\n${err}`), { code, stderr: err }));
    });
  });
}

/** Runs the server expecting it NOT to start: resolves with its exit code and stderr. */
export async function expectStartFailure(o: ChildOptions): Promise<{ code: number | null; stderr: string }> {
  try {
    const s = await spawnServer(o);
    await s.kill();
    throw new Error(`server started on ${o.dir} but should have refused; stderr:\n${s.stderr()}`);
  } catch (e) {
    const err = e as { code?: number | null; stderr?: string; message: string };
    if (err.stderr === undefined) throw e;
    return { code: err.code ?? null, stderr: err.stderr };
  }
}

// ------------------------------------------------------------------ protocol helpers

/** `key: value` lines of a YAML dict reply (stats, stats-job, stats-tube). */
export function parseYaml(reply: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of reply.split('\n')) {
    const m = /^([a-z-]+): (.*)$/.exec(line);
    if (m) out[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
  }
  return out;
}

/** `- name` lines of a YAML list reply (list-tubes). */
export function parseList(reply: string): string[] {
  return reply.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2));
}

export async function stats(c: Client): Promise<Record<string, string>> {
  const r = await c.request('stats');
  if (!r.startsWith('OK ')) throw new Error(`stats: ${r}`);
  return parseYaml(r);
}

/** stats-job as numbers/strings, or null for NOT_FOUND. */
export async function statsJob(c: Client, id: number): Promise<Record<string, string> | null> {
  const r = await c.request(`stats-job ${id}`);
  if (r === 'NOT_FOUND\r\n') return null;
  if (!r.startsWith('OK ')) throw new Error(`stats-job ${id}: ${r}`);
  return parseYaml(r);
}

/** A put with a body; returns the reply line without CRLF. */
export async function put(c: Client, body: string, pri = 0, delay = 0, ttr = 120): Promise<string> {
  const r = await c.request(`put ${pri} ${delay} ${ttr} ${Buffer.byteLength(body, 'latin1')}\r\n${body}`);
  return r.trimEnd();
}

/** A put that must succeed: its id. */
export async function putId(c: Client, body: string, pri = 0, delay = 0, ttr = 120): Promise<number> {
  const r = await put(c, body, pri, delay, ttr);
  const m = /^INSERTED (\d+)$/.exec(r);
  if (!m) throw new Error(`put "${body.slice(0, 40)}": ${r}`);
  return Number(m[1]);
}

/** Body of a RESERVED/FOUND reply, and its id. */
export function jobOf(reply: string): { id: number; body: string } | null {
  const m = /^(?:RESERVED|FOUND) (\d+) (\d+)\r\n/.exec(reply);
  if (!m) return null;
  const head = m[0].length;
  return { id: Number(m[1]), body: reply.slice(head, head + Number(m[2])) };
}

export interface ScannedJob {
  state: string;
  pri: number;
  tube: string;
  body: string;
}

/** stats-job / peek over an id range, pipelined in chunks; returns the jobs found. */
export async function scan(c: Client, maxId: number): Promise<Map<number, ScannedJob>> {
  const found = new Map<number, ScannedJob>();
  const CHUNK = 400;
  for (let from = 1; from <= maxId; from += CHUNK) {
    const to = Math.min(maxId, from + CHUNK - 1);
    let cmds = '';
    for (let id = from; id <= to; id++) cmds += `stats-job ${id}\r\npeek ${id}\r\n`;
    await c.send(cmds);
    for (let id = from; id <= to; id++) {
      const st = await c.readReply(30_000);
      const pk = await c.readReply(30_000);
      if (st === 'NOT_FOUND\r\n') {
        if (pk !== 'NOT_FOUND\r\n') throw new Error(`job ${id}: stats-job NOT_FOUND but peek ${JSON.stringify(pk.slice(0, 40))}`);
        continue;
      }
      const y = (k: string) => new RegExp(`\\n${k}: "?([^"\\n]*)"?\\n`).exec(st)?.[1] ?? '';
      const m = /^FOUND (\d+) (\d+)\r\n/.exec(pk);
      if (!m) throw new Error(`job ${id}: stats-job found it but peek says ${JSON.stringify(pk.slice(0, 40))}`);
      found.set(id, { state: y('state'), pri: Number(y('pri')), tube: y('tube'), body: pk.slice(m[0].length, m[0].length + Number(m[2])) });
    }
  }
  return found;
}

// ------------------------------------------------------------------ the log's files

export interface WalFile {
  name: string;
  path: string;
  size: number;
  generation: number;
  shard: number;
  seq: number;
}

/** The segment files of DIR (not the lock), in replay order (generation, seq, shard). */
export function walFiles(dir: string): WalFile[] {
  const out: WalFile[] = [];
  for (const name of fs.readdirSync(dir)) {
    const m = /^g(\d+)-s(\d+)-(\d+)\.wal$/.exec(name);
    if (!m) continue;
    const path = join(dir, name);
    let size: number;
    try {
      size = fs.statSync(path).size;
    } catch {
      continue; // removed meanwhile
    }
    out.push({ name, path, size, generation: Number(m[1]), shard: Number(m[2]), seq: Number(m[3]) });
  }
  out.sort((a, b) => a.generation - b.generation || a.seq - b.seq || a.shard - b.shard);
  return out;
}

export function walBytes(dir: string): number {
  return walFiles(dir).reduce((n, f) => n + f.size, 0);
}

/** Record boundaries of a segment file, parsed from the documented format (u32 length after the
 *  crc field; a record is 8 + length bytes): [start, end) of each whole record. */
export function recordSpans(path: string): Array<{ start: number; end: number; type: number; id: number }> {
  const buf = fs.readFileSync(path);
  const spans: Array<{ start: number; end: number; type: number; id: number }> = [];
  let at = 0;
  while (at + 8 < buf.length) {
    const end = at + 8 + buf.readUInt32LE(at);
    if (end > buf.length) break;
    spans.push({ start: at, end, type: buf[at + 8], id: buf.readDoubleLE(at + 9) });
    at = end;
  }
  return spans;
}

/** Size of a FULL record: what a live job costs in the log (see workers/wal/README.md). */
export function fullRecordBytes(tube: string, bodyBytes: number): number {
  return 71 + tube.length + bodyBytes;
}

/** Copies DIR's files (segments, not the lock) into a fresh directory. */
export function copyLog(dir: string, prefix: string): string {
  const to = makeDir(prefix);
  for (const f of walFiles(dir)) fs.copyFileSync(f.path, join(to, f.name));
  return to;
}

// ------------------------------------------------------------------ seeded randomness

export { rng };

/** One tube name per shard (index = shard) for a server with `shards` shards. */
export function tubePerShard(shards: number, prefix = 't'): string[] {
  const out: string[] = new Array(shards);
  let found = 0;
  for (let i = 0; found < shards; i++) {
    const name = `${prefix}${i}`;
    const s = shardOf(name, shards);
    if (out[s] === undefined) {
      out[s] = name;
      found++;
    }
  }
  return out;
}

/** What a test file's tests make, undone after each test (see cleanedAfterEach). */
export interface Made {
  readonly dirs: string[];
  readonly servers: { close(): Promise<void> }[];
  readonly clients: { destroy(): void }[];
  readonly children: { kill(): Promise<void> }[];
}

/**
 * Lists to push what each test makes into; after each test its clients are destroyed, its
 * in-process servers closed, its child servers killed, then its directories removed.
 */
export function cleanedAfterEach(): Made {
  const made: Made = { dirs: [], servers: [], clients: [], children: [] };
  afterEach(async () => {
    for (const c of made.clients.splice(0)) c.destroy();
    for (const s of made.servers.splice(0)) await s.close();
    for (const c of made.children.splice(0)) await c.kill();
    for (const d of made.dirs.splice(0)) removeDir(d);
  });
  return made;
}
