// Glue between vitest and the servers: a fresh server per test (so job ids in assertions never
// depend on other tests), connections that are closed for you, and a few reply helpers.

import { connect, type Client } from './client.ts';
import type { RunningServer, ServerOptions, Target } from './servers.ts';

export interface Fixture {
  readonly server: RunningServer;
  readonly port: number;
  /** Open a new client connection (closed automatically when the test ends). */
  conn(): Promise<Client>;
  /** Open `n` connections. */
  conns(n: number): Promise<Client[]>;
  dispose(): Promise<void>;
}

/** The part of vitest's test context we use; pass the test's own context for concurrent tests. */
export interface TestContextLike {
  onTestFinished(fn: () => unknown): void;
}

/**
 * Start a fresh server of `target` for one test and arrange for it (and every connection opened
 * through the fixture) to be closed when the test finishes, pass or fail.
 */
export async function fixture(target: Target, ctx: TestContextLike, opts: ServerOptions = {}): Promise<Fixture> {
  const server = await target.start(opts);
  const clients: Client[] = [];
  let disposed = false;
  const f: Fixture = {
    server,
    port: server.port,
    async conn() {
      const c = await connect(server.port);
      clients.push(c);
      return c;
    },
    async conns(n: number) {
      const out: Client[] = [];
      for (let i = 0; i < n; i++) out.push(await f.conn());
      return out;
    },
    async dispose() {
      if (disposed) return;
      disposed = true;
      for (const c of clients) c.destroy();
      await server.close();
    },
  };
  ctx.onTestFinished(() => f.dispose());
  return f;
}

/**
 * One server shared by the tests of a describe block (started in beforeAll, stopped in afterAll),
 * for table-driven cases that only look at parsing and must not pay a server start per row.
 * Such tests must not assert absolute job ids: use `putForId` to learn the id of a job.
 * Connections opened through it are closed after each test.
 */
export function sharedFixture(target: Target, hooks: {
  beforeAll(fn: () => unknown): void;
  afterAll(fn: () => unknown): void;
  afterEach(fn: () => unknown): void;
}, opts: ServerOptions = {}): { conn(): Promise<Client>; readonly port: number } {
  let server: RunningServer | null = null;
  let clients: Client[] = [];
  hooks.beforeAll(async () => {
    server = await target.start(opts);
  });
  hooks.afterEach(() => {
    for (const c of clients) c.destroy();
    clients = [];
  });
  hooks.afterAll(async () => {
    await server?.close();
  });
  return {
    get port() {
      if (!server) throw new Error('shared server not started');
      return server.port;
    },
    async conn() {
      if (!server) throw new Error('shared server not started');
      const c = await connect(server.port);
      clients.push(c);
      return c;
    },
  };
}

/** Put a job and return the id from the INSERTED reply. */
export async function putForId(c: Client, body: string, pri = 0, delay = 0, ttr = 60): Promise<number> {
  await c.send(putCmd(body, pri, delay, ttr));
  const reply = await c.readReply();
  const m = /^INSERTED (\d+)\r\n$/.exec(reply);
  if (!m) throw new Error(`expected INSERTED, got ${JSON.stringify(reply)}`);
  return Number(m[1]);
}

/** Parse a stats YAML body ("---\nkey: value\n...") into ordered [key, value] pairs. */
export function parseYamlDict(reply: string): Array<[string, string]> {
  const body = yamlBody(reply);
  const lines = body.split('\n');
  if (lines[0] !== '---') throw new Error(`stats body does not start with "---": ${JSON.stringify(body)}`);
  const out: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    if (line === '') continue;
    const at = line.indexOf(': ');
    if (at < 0) throw new Error(`bad stats line ${JSON.stringify(line)}`);
    out.push([line.slice(0, at), line.slice(at + 2)]);
  }
  return out;
}

/** Parse a YAML list body ("---\n- a\n- b\n") into its items. */
export function parseYamlList(reply: string): string[] {
  const body = yamlBody(reply);
  const lines = body.split('\n');
  if (lines[0] !== '---') throw new Error(`list body does not start with "---": ${JSON.stringify(body)}`);
  return lines.slice(1).filter((l) => l !== '').map((l) => {
    if (!l.startsWith('- ')) throw new Error(`bad list line ${JSON.stringify(l)}`);
    return l.slice(2);
  });
}

/**
 * Check an `OK <n>\r\n<body>\r\n` reply: the count must equal the body length. Returns the body
 * (without the trailing CRLF).
 */
export function yamlBody(reply: string): string {
  const m = /^OK (\d+)\r\n/.exec(reply);
  if (!m) throw new Error(`expected an OK reply, got ${JSON.stringify(reply)}`);
  const body = reply.slice(m[0].length);
  if (!body.endsWith('\r\n')) throw new Error(`OK body does not end in \\r\\n: ${JSON.stringify(reply)}`);
  const data = body.slice(0, -2);
  if (Buffer.byteLength(data, 'latin1') !== Number(m[1])) {
    throw new Error(`OK ${m[1]} but the body has ${data.length} bytes: ${JSON.stringify(reply)}`);
  }
  return data;
}

/** Build `OK <n>\r\n<yaml>\r\n` for a list of names, exactly as beanstalkd formats it. */
export function yamlListReply(items: string[]): string {
  const body = '---\n' + items.map((i) => `- ${i}\n`).join('');
  return `OK ${body.length}\r\n${body}\r\n`;
}

/** `put` command plus body, ready to send. */
export function putCmd(body: string, pri = 0, delay = 0, ttr = 60): string {
  return `put ${pri} ${delay} ${ttr} ${Buffer.byteLength(body, 'latin1')}\r\n${body}\r\n`;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * How long a test waits for the server to reach a state it is polling for (ms). Generous: a slow
 * CI machine only makes the wait longer; the test never goes on before the state is seen.
 */
export const POLL_TIMEOUT_MS = 10_000;

/**
 * Poll `probe` (every `everyMs`) until it returns true; fails after `timeoutMs`, saying `what`
 * was awaited and, when `detail` is given, what was last seen. For waiting on something the
 * server shows (a count in `stats`, its in-process state) instead of sleeping and hoping.
 */
export async function waitUntil(
  what: string,
  probe: () => boolean | Promise<boolean>,
  detail?: () => string,
  timeoutMs = POLL_TIMEOUT_MS,
  everyMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) {
      throw new Error(`not within ${timeoutMs} ms: ${what}${detail ? ` (last seen: ${detail()})` : ''}`);
    }
    await sleep(everyMs);
  }
}

/** `stats` sent on `c`, as a key -> value record. */
export async function statsOf(c: Client): Promise<Record<string, string>> {
  return Object.fromEntries(parseYamlDict(await c.request('stats')));
}

/**
 * Poll `stats` on `c` until `ready` holds for it, and return that snapshot (so a test can assert
 * on the very reply that showed the state). Fails after `timeoutMs` naming `what` and the last
 * values of `keys`. Each poll is one `stats` command on `c` (cmd-stats counts it).
 */
export async function statsWhen(
  c: Client,
  what: string,
  ready: (s: Record<string, string>) => boolean,
  keys: string[] = [],
  timeoutMs = POLL_TIMEOUT_MS,
): Promise<Record<string, string>> {
  let last: Record<string, string> = {};
  await waitUntil(
    what,
    async () => ready((last = await statsOf(c))),
    () => keys.map((k) => `${k}: ${last[k]}`).join(', '),
    timeoutMs,
  );
  return last;
}
