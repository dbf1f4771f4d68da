// Helpers for the workq protocol suites (test/workq): a raw client that knows how workq replies
// are framed, builders for commands and for expected replies, and fixtures that start a
// shardstalk server with its workq listener.
//
// Expected replies are written out here by hand, from the workq 0.2 server's handlers (which win
// over the spec), NOT built with src/proto/workq/replies.ts: these suites check the wire bytes.
// Strings are latin1 both ways (see client.ts): one char = one byte.

import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Client, READ_TIMEOUT_MS_DEFAULT } from './client.ts';
import type { Router } from '../../src/route/router.ts';
import { startServer } from '../../src/server.ts';
import { shardOf } from '../../src/route/hash.ts';

// ---- replies ----

export const OK = '+OK\r\n';
export const OK_0 = '+OK 0\r\n';
export const NOT_FOUND = '-NOT-FOUND\r\n';
export const TIMEOUT = '-TIMEOUT\r\n';
export const clientError = (text: string): string => `-CLIENT-ERROR ${text}\r\n`;

export const E_UNKNOWN = clientError('Unknown command');
export const E_ARGS = clientError('Invalid command args');
export const E_FLAGS = clientError('Invalid command flags');
export const E_PSIZE = clientError('Invalid payload size');
export const E_RSIZE = clientError('Invalid result size');
export const E_ID = clientError('Invalid ID');
export const E_NAME = clientError('Invalid Name');
export const E_TTR = clientError('Invalid TTR');
export const E_TTL = clientError('Invalid TTL');
export const E_TIME = clientError('Invalid Time');
export const E_MAX_ATTEMPTS = clientError('Invalid Max Attempts');
export const E_MAX_FAILS = clientError('Invalid Max Fails');
export const E_PRIORITY = clientError('Invalid Priority');
export const E_WAIT = clientError('Invalid wait timeout');
export const E_OFFSET = clientError('Invalid cursor offset');
export const E_LIMIT = clientError('Invalid limit');
export const E_TOO_LONG = clientError('Command too long');
export const E_DUP_JOB = clientError('Duplicate job');
export const E_DUP_RESULT = clientError('Duplicate result');

/** lease: `+OK 1\r\n<id> <name> <ttr> <payload-size>\r\n<payload>\r\n`, `ttr` in ms as given at add. */
export function leaseReply(id: string, name: string, ttr: number, payload: string): string {
  return `+OK 1\r\n${id} ${name} ${ttr} ${payload.length}\r\n${payload}\r\n`;
}

/** run / result: `+OK 1\r\n<id> <1|0> <size>\r\n<result>\r\n`. */
export function resultReply(id: string, success: boolean, result: string): string {
  return `+OK 1\r\n${id} ${success ? 1 : 0} ${result.length}\r\n${result}\r\n`;
}

/** One queue's block in `inspect queue(s)`. */
export function queueBlock(name: string, ready: number, scheduled: number): string {
  return `${name} 2\r\nready-len ${ready}\r\nscheduled-len ${scheduled}\r\n`;
}

export function inspectQueueReply(name: string, ready: number, scheduled: number): string {
  return `+OK 1\r\n${queueBlock(name, ready, scheduled)}`;
}

// ---- commands ----

/** Optional flags, written in this order after the positional arguments. */
export interface JobFlags {
  priority?: number;
  maxAttempts?: number;
  maxFails?: number;
}

function flagText(f: JobFlags): string {
  let s = '';
  if (f.priority !== undefined) s += ` -priority=${f.priority}`;
  if (f.maxAttempts !== undefined) s += ` -max-attempts=${f.maxAttempts}`;
  if (f.maxFails !== undefined) s += ` -max-fails=${f.maxFails}`;
  return s;
}

export function addCmd(id: string, name: string, ttr: number, ttl: number, payload: string, flags: JobFlags = {}): string {
  return `add ${id} ${name} ${ttr} ${ttl} ${payload.length}${flagText(flags)}\r\n${payload}\r\n`;
}

export function scheduleCmd(
  id: string, name: string, ttr: number, ttl: number, time: string, payload: string, flags: JobFlags = {},
): string {
  return `schedule ${id} ${name} ${ttr} ${ttl} ${time} ${payload.length}${flagText(flags)}\r\n${payload}\r\n`;
}

export function runCmd(id: string, name: string, ttr: number, timeout: number, payload: string, priority?: number): string {
  const pri = priority === undefined ? '' : ` -priority=${priority}`;
  return `run ${id} ${name} ${ttr} ${timeout} ${payload.length}${pri}\r\n${payload}\r\n`;
}

export function completeCmd(id: string, result: string): string {
  return `complete ${id} ${result.length}\r\n${result}\r\n`;
}

export function failCmd(id: string, result: string): string {
  return `fail ${id} ${result.length}\r\n${result}\r\n`;
}

/** A fresh random UUIDv4, lowercase canonical (as the server echoes ids). */
export function uuid(): string {
  return randomUUID();
}

/** n distinct ids. */
export function uuids(n: number): string[] {
  return Array.from({ length: n }, () => randomUUID());
}

/**
 * A schedule time as the parser takes it: RFC 3339 UTC with milliseconds
 * (`2024-01-01T00:00:00.250Z`; the server, like Go's time.Parse, accepts the fraction).
 */
export function wqTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** A time as the server writes it in `inspect`: whole seconds, `2024-01-01T00:00:00Z`. */
export function wqTimeShown(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19) + 'Z';
}

/** Parse a time the server wrote (`2024-01-01T00:00:00Z`) to ms; throws if malformed. */
export function parseShownTime(s: string): number {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(s)) throw new Error(`bad time ${JSON.stringify(s)}`);
  return Date.parse(s);
}

// ---- shards ----

/**
 * `count` queue names with `prefix`, each on a different shard of `shards` when count <= shards
 * (shard = FNV-1a-32(name) % shards, as the server routes). With shards = 1 they are simply
 * distinct names. The result is deterministic.
 */
export function namesOnShards(prefix: string, count: number, shards: number): string[] {
  const out: string[] = [];
  const used = new Set<number>();
  for (let i = 0; out.length < count && i < 10000; i++) {
    const name = `${prefix}${i}`;
    const s = shardOf(name, shards);
    if (count <= shards && used.has(s)) continue;
    used.add(s);
    out.push(name);
  }
  if (out.length < count) throw new Error(`namesOnShards: could not find ${count} names`);
  return out;
}

// ---- the client ----

export class WqClient extends Client {
  /**
   * Read one complete workq reply, whatever command it answers:
   *   `+OK\r\n`, `-<error>\r\n`,
   *   `+OK <n>\r\n` then n items, each a head line and what it announces:
   *     `<id> <name> <ttr> <size>\r\n<bytes>\r\n`             (lease)
   *     `<id> <0|1> <size>\r\n<bytes>\r\n`                     (run, result)
   *     `<head> <k>\r\n` then k `<key> <value>\r\n` lines      (inspect), where a `payload` line
   *     holds `payload-size` raw bytes (CR/LF allowed), and the `server 2` block of
   *     `inspect server` is followed by 3 lines (the server's count is one short).
   */
  override async readReply(timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<string> {
    const first = await this.readLine(timeoutMs);
    const m = /^\+OK (\d+)\r\n$/.exec(first);
    if (!m) return first;
    let out = first;
    for (let item = 0; item < Number(m[1]); item++) {
      const head = await this.readLine(timeoutMs);
      out += head;
      const parts = head.slice(0, -2).split(' ');
      if (parts.length === 3 || parts.length === 4) {
        out += (await this.readBytes(Number(parts[parts.length - 1]) + 2, timeoutMs)).toString('latin1');
        continue;
      }
      if (parts.length !== 2) throw new Error(`unexpected item head ${JSON.stringify(head)} in ${JSON.stringify(out)}`);
      let keys = Number(parts[1]);
      let payloadSize = -1;
      for (let k = 0; k < keys; k++) {
        if (payloadSize >= 0) {
          // The payload line is "payload " + raw bytes + "\r\n": read it by size, not to a CRLF.
          const peek = await this.readBytes(8, timeoutMs);
          out += peek.toString('latin1');
          if (peek.toString('latin1') === 'payload ') {
            out += (await this.readBytes(payloadSize + 2, timeoutMs)).toString('latin1');
            payloadSize = -1;
            continue;
          }
          payloadSize = -1;
          // Not the payload line: read the rest of this line.
          out += await this.readLine(timeoutMs);
          continue;
        }
        const line = await this.readLine(timeoutMs);
        out += line;
        const ps = /^payload-size (\d+)\r\n$/.exec(line);
        if (ps) payloadSize = Number(ps[1]);
        if (k === 0 && parts[0] === 'server' && line.startsWith('active-clients ')) keys = 3;
      }
    }
    return out;
  }

  /** Send a command (a line with its CRLF, and for payload commands the payload and its CRLF). */
  cmd(text: string): Promise<void> {
    return this.send(text);
  }

  /** Send a full command text (CRLFs included) and read one reply. */
  async call(text: string, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<string> {
    await this.send(text);
    return this.readReply(timeoutMs);
  }

  /** Send a full command text and expect exactly `reply`. */
  async want(text: string, reply: string | Buffer, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<void> {
    await this.send(text);
    await this.expect(reply, timeoutMs);
  }

  /** `inspect job <id>`, parsed; null on -NOT-FOUND. */
  async inspectJob(id: string): Promise<InspectedJob | null> {
    const reply = await this.request(`inspect job ${id}`);
    if (reply === NOT_FOUND) return null;
    const items = parseInspect(reply);
    if (items.length !== 1) throw new Error(`inspect job: ${items.length} items in ${JSON.stringify(reply)}`);
    return toJob(items[0]!);
  }

  /** The `state` of a job, or null when the server does not know it. */
  async jobState(id: string): Promise<number | null> {
    return (await this.inspectJob(id))?.state ?? null;
  }

  /** `inspect jobs` or `inspect scheduled-jobs`, parsed (throws on an error reply). */
  async inspectJobs(which: 'jobs' | 'scheduled-jobs', name: string, offset: number, limit: number): Promise<InspectedJob[]> {
    const reply = await this.request(`inspect ${which} ${name} ${offset} ${limit}`);
    return parseInspect(reply).map(toJob);
  }

  /** `inspect server`, parsed. */
  async inspectServer(): Promise<{ activeClients: number; evictedJobs: number; started: string; raw: string }> {
    const raw = await this.request('inspect server');
    const m = /^\+OK 1\r\nserver 2\r\nactive-clients (\d+)\r\nevicted-jobs (\d+)\r\nstarted (\S+)\r\n$/.exec(raw);
    if (!m) throw new Error(`bad inspect server reply ${JSON.stringify(raw)}`);
    return { activeClients: Number(m[1]), evictedJobs: Number(m[2]), started: m[3]!, raw };
  }
}

/** One item of an inspect reply: its head (`<id>` / `<name>` / `server`), key count, and keys in order. */
export interface InspectItem {
  head: string;
  keyCount: number;
  keys: Array<[string, string]>;
}

/** Parse a whole `+OK <n>` inspect reply (as WqClient.readReply returns it). */
export function parseInspect(reply: string): InspectItem[] {
  const m = /^\+OK (\d+)\r\n/.exec(reply);
  if (!m) throw new Error(`not an inspect reply: ${JSON.stringify(reply)}`);
  let p = m[0].length;
  const line = (): string => {
    const at = reply.indexOf('\r\n', p);
    if (at < 0) throw new Error(`truncated inspect reply ${JSON.stringify(reply)}`);
    const s = reply.slice(p, at);
    p = at + 2;
    return s;
  };
  const items: InspectItem[] = [];
  for (let i = 0; i < Number(m[1]); i++) {
    const head = line();
    const sp = head.lastIndexOf(' ');
    const keyCount = Number(head.slice(sp + 1));
    const item: InspectItem = { head: head.slice(0, sp), keyCount, keys: [] };
    let n = keyCount;
    let payloadSize = -1;
    for (let k = 0; k < n; k++) {
      if (payloadSize >= 0 && reply.startsWith('payload ', p)) {
        const value = reply.slice(p + 8, p + 8 + payloadSize);
        if (reply.slice(p + 8 + payloadSize, p + 10 + payloadSize) !== '\r\n') {
          throw new Error(`payload not followed by CRLF in ${JSON.stringify(reply)}`);
        }
        p += 10 + payloadSize;
        item.keys.push(['payload', value]);
        payloadSize = -1;
        continue;
      }
      const l = line();
      const at = l.indexOf(' ');
      const key = at < 0 ? l : l.slice(0, at);
      const value = at < 0 ? '' : l.slice(at + 1);
      item.keys.push([key, value]);
      if (key === 'payload-size') payloadSize = Number(value);
      if (k === 0 && item.head === 'server' && key === 'active-clients') n = 3;
    }
    items.push(item);
  }
  if (p !== reply.length) throw new Error(`trailing bytes after inspect reply: ${JSON.stringify(reply.slice(p))}`);
  return items;
}

/** A job as `inspect` shows it. */
export interface InspectedJob {
  id: string;
  keyCount: number;
  keyOrder: string[];
  name: string;
  ttr: number;
  ttl: number;
  payloadSize: number;
  payload: string;
  maxAttempts: number;
  attempts: number;
  maxFails: number;
  fails: number;
  priority: number;
  state: number;
  created: string;
  time: string | null;
}

/** The keys of a job block in the server's order (handlers.JobResp); `time` only for scheduled jobs. */
export const JOB_KEYS = [
  'name', 'ttr', 'ttl', 'payload-size', 'payload', 'max-attempts', 'attempts', 'max-fails', 'fails', 'priority',
  'state', 'created',
];

export function toJob(item: InspectItem): InspectedJob {
  const get = (k: string): string => {
    const kv = item.keys.find(([key]) => key === k);
    if (!kv) throw new Error(`job ${item.head}: no key ${k}`);
    return kv[1];
  };
  const num = (k: string): number => {
    const v = get(k);
    if (!/^-?\d+$/.test(v)) throw new Error(`job ${item.head}: ${k} is not a number: ${JSON.stringify(v)}`);
    return Number(v);
  };
  return {
    id: item.head,
    keyCount: item.keyCount,
    keyOrder: item.keys.map(([k]) => k),
    name: get('name'),
    ttr: num('ttr'),
    ttl: num('ttl'),
    payloadSize: num('payload-size'),
    payload: get('payload'),
    maxAttempts: num('max-attempts'),
    attempts: num('attempts'),
    maxFails: num('max-fails'),
    fails: num('fails'),
    priority: num('priority'),
    state: num('state'),
    created: get('created'),
    time: item.keys.some(([k]) => k === 'time') ? get('time') : null,
  };
}

// ---- timing ----

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** How much later than its timeout a -TIMEOUT (or a timer's effect) may come. */
export const LATE_MS = 2000;

/**
 * The longest a test lets pass between two of its own commands when a timer must not fire in
 * between (a TTR, a TTL, a wait timeout or a schedule time that a later check still needs ahead).
 * A test that checks an in-between state sets its timer to at least this, so a slow CI machine
 * cannot pass the timer before the check (a 10 ms TTL once did).
 */
export const STEP_MS = 1000;

/** Clock granularity slack for "not before": Node timers may fire a hair early against performance.now. */
export const EARLY_SLACK_MS = 2;

/** Poll `probe` until it returns true; fails after `ms`. Returns the elapsed ms. */
export async function eventually(what: string, probe: () => Promise<boolean>, ms = 3000, every = 20): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    if (await probe()) return performance.now() - t0;
    if (performance.now() - t0 > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(every);
  }
}

// ---- servers ----

export interface WqServer {
  readonly shards: number;
  readonly workqPort: number;
  /** The in-process server's state, for tests that wait on it (see leasesWaiting, resultWaiters). */
  readonly router: Router;
  close(): Promise<void>;
}

/**
 * Start shardstalk in this process with its workq listener on an ephemeral port. With
 * WORKQ_CONNECTION_THREADS=1 the beanstalk connections are served on a thread per shard (workq
 * stays on the main thread, which then reaches every shard through the mesh's rings).
 */
export async function startWorkq(shards: number): Promise<WqServer> {
  const srv = await startServer({
    host: '127.0.0.1',
    port: 0,
    shards,
    logLevel: 'silent',
    workq: { host: '127.0.0.1', port: 0 },
    connectionThreads: process.env.WORKQ_CONNECTION_THREADS === '1',
  });
  const workqPort = (srv as unknown as { workqPort?: number }).workqPort;
  if (typeof workqPort !== 'number' || workqPort <= 0) {
    await srv.close();
    throw new Error('startServer did not report a workqPort: is the workq listener in src/server.ts yet?');
  }
  return { shards, workqPort, router: srv.router, close: () => srv.close() };
}

/** Open a workq connection. */
export function wqConnect(port: number, host = '127.0.0.1'): Promise<WqClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host });
    socket.setNoDelay(true);
    const onError = (err: Error): void => reject(err);
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve(new WqClient(socket));
    });
  });
}

export interface WqFixture {
  readonly server: WqServer;
  readonly port: number;
  conn(): Promise<WqClient>;
  conns(n: number): Promise<WqClient[]>;
}

interface TestContextLike {
  onTestFinished(fn: () => unknown): void;
}

/** A fresh server for one test, closed (with every connection opened through it) when the test ends. */
export async function wqFixture(shards: number, ctx: TestContextLike): Promise<WqFixture> {
  const server = await startWorkq(shards);
  const clients: WqClient[] = [];
  ctx.onTestFinished(async () => {
    for (const c of clients) c.destroy();
    await server.close();
  });
  const f: WqFixture = {
    server,
    port: server.workqPort,
    async conn() {
      const c = await wqConnect(server.workqPort);
      clients.push(c);
      return c;
    },
    async conns(n: number) {
      const out: WqClient[] = [];
      for (let i = 0; i < n; i++) out.push(await f.conn());
      return out;
    },
  };
  return f;
}

/**
 * One server for the tests of a describe block, for table-driven cases that do not depend on
 * global state (each uses its own ids and names). Connections are closed after each test.
 */
export function sharedWqServer(shards: number, hooks: {
  beforeAll(fn: () => unknown): void;
  afterAll(fn: () => unknown): void;
  afterEach(fn: () => unknown): void;
}): { conn(): Promise<WqClient> } {
  let server: WqServer | null = null;
  let clients: WqClient[] = [];
  hooks.beforeAll(async () => {
    server = await startWorkq(shards);
  });
  hooks.afterEach(() => {
    for (const c of clients) c.destroy();
    clients = [];
  });
  hooks.afterAll(async () => {
    await server?.close();
  });
  return {
    async conn() {
      if (!server) throw new Error('shared workq server not started');
      const c = await wqConnect(server.workqPort);
      clients.push(c);
      return c;
    },
  };
}

// ---- server state ----
// What the workq protocol does not show (a blocked lease or result has no count in `inspect`),
// read from the in-process server, so a test can wait until the server has taken a command in
// instead of sleeping.

/** How many leases wait on queue `name` (0 when the queue does not exist yet). */
export function leasesWaiting(server: WqServer, name: string): number {
  return server.router.workq.queue(name)?.waiting.len ?? 0;
}

/**
 * How many run and result commands wait for a job's result. Reads the router's private waiter
 * map (the only place this exists); fails loudly if that changes shape.
 */
export function resultWaiters(server: WqServer): number {
  const waiters = (server.router.workq as unknown as { waiters?: unknown }).waiters;
  if (!(waiters instanceof Map)) {
    throw new Error('WorkqRouter has no `waiters` map any more: update resultWaiters in test/support/workq.ts');
  }
  let n = 0;
  for (const list of waiters.values()) n += (list as unknown[]).length;
  return n;
}

/** The shard counts every suite runs with. */
export const SHARD_COUNTS = [1, 4] as const;
