// Runs one scripted multi-connection session against a server and records the transcript of
// what was sent and what came back, so the same script can be compared between beanstalkd and
// shardstalk line by line.

import { connect, escapeBytes, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import type { RunningServer, ServerOptions, Target } from '../support/servers.ts';

export type Step =
  /** Send raw bytes; read nothing. */
  | { conn: string; send: string }
  /** Send `cmd` + CRLF (and `body` + CRLF when given), then read one reply. */
  | { conn: string; cmd: string; body?: string }
  /** Read `read` replies (waiting up to timeoutMs for each). */
  | { conn: string; read: number; timeoutMs?: number }
  /** Expect no bytes for `nothing` ms. */
  | { conn: string; nothing: number }
  /**
   * Send `reserve` and expect no reply for a moment, as `send` then `nothing`; then, where the
   * server tells (RunningServer.counts), wait until it counts one more waiting reserve, so the
   * next step comes after this reserve has parked. A reserve over tubes on several shards parks
   * once its shards have been asked (README, Differences): a fixed pause would rest on that round
   * trip being short.
   */
  | { conn: string; waits: true }
  /** Close our side; wait until the server counts one connection less (or, where it does not tell, a moment). */
  | { conn: string; close: true }
  /** Expect the server to close the connection (after quit). */
  | { conn: string; closed: true }
  /**
   * Read `count` replies in all from the listed (blocked) connections, whichever of them they
   * arrive on, then check that no more come: for "which of these workers got the job" without
   * scripting the answer. Recorded per connection in the listed order, so arrival timing does
   * not show.
   */
  | { gather: string[]; count: number }
  | { sleep: number };

export interface Script {
  name: string;
  /** Server options (e.g. a small max job size), the same for every target. */
  server?: ServerOptions;
  steps: Step[];
}

/** How long one reply may take before the transcript records that none came (ms). */
const REPLY_TIMEOUT_MS_DEFAULT = 3_000;
/** After a gather has its replies, how long to watch for extra ones (ms). */
const GATHER_SETTLE_MS = 30;
/** After a client closes, how long the server gets to notice before the next step (ms), where it does not tell. */
const CLOSE_SETTLE_MS = 50;
/** How long a waits step lets a reserve show it waits (ms): no reply in that time. */
const WAITS_QUIET_MS = 20;

/** Whether `ok` (a look at RunningServer.counts) holds within REPLY_TIMEOUT_MS_DEFAULT. */
async function counted(ok: () => boolean): Promise<boolean> {
  try {
    await waitUntil('the server counts it', ok, undefined, REPLY_TIMEOUT_MS_DEFAULT, 2);
    return true;
  } catch {
    return false;
  }
}

/** The transcript's line for connection `name`, which should have said nothing so far. */
function quietLine(name: string, c: Client): string {
  const extra = c.buffered;
  return extra === '' && !c.serverClosed ? `${name}< (nothing)` : `${name}< UNEXPECTED "${escapeBytes(extra)}"${c.serverClosed ? ' and closed' : ''}`;
}

/**
 * stats values that differ between any two server processes, and so are replaced by a
 * placeholder before transcripts are compared. This is the one list; each has its reason:
 */
export const PROCESS_STATS_KEYS: Record<string, string> = {
  pid: 'a different process every run',
  uptime: 'the servers start at different moments',
  'rusage-utime': 'CPU time used so far',
  'rusage-stime': 'CPU time used so far',
  id: 'random per process start',
  hostname: 'names the machine, not the protocol (the protocol suite checks it against uname)',
  os: 'names the machine (uname version)',
  platform: 'names the machine (uname machine)',
  version: "each server reports its own version string",
};

/**
 * Values that depend on when, to the second, a command ran. Only the seeded random sessions
 * normalise these: they run hundreds of commands without sleeping, so a second boundary may
 * fall in a different place on each server. The scripted sessions keep them (their sleeps are
 * chosen so the truncated seconds agree).
 */
export const TIMING_STATS_KEYS: Record<string, string> = {
  age: 'seconds since put, truncated',
  'time-left': 'seconds until a deadline, truncated',
  'pause-time-left': 'seconds until unpause, truncated',
};

export interface RunOptions {
  /** Also replace TIMING_STATS_KEYS values. */
  normaliseTiming?: boolean;
}

/** Replace normalised values in a YAML dict reply and recompute its byte count. */
export function normaliseReply(reply: string, opts: RunOptions = {}): string {
  const m = /^OK (\d+)\r\n/.exec(reply);
  if (!m) return reply;
  const body = reply.slice(m[0].length, -2);
  let note = '';
  if (body.length !== Number(m[1]) || !reply.endsWith('\r\n')) {
    note = ` [FRAMING: OK ${m[1]} but body is ${body.length} bytes]`;
  }
  const isGlobalStats = body.startsWith('---\ncurrent-jobs-urgent: ') && /\npid: /.test(body);
  const lines = body.split('\n').map((line) => {
    const at = line.indexOf(': ');
    if (at < 0) return line;
    const key = line.slice(0, at);
    if (isGlobalStats && key in PROCESS_STATS_KEYS) return `${key}: <${key}>`;
    if (opts.normaliseTiming && key in TIMING_STATS_KEYS) return `${key}: <${key}>`;
    return line;
  });
  const out = lines.join('\n');
  return `OK ${out.length}\r\n${out}\r\n${note}`;
}

export interface Transcript {
  target: string;
  lines: string[];
}

/** Run `script` on a fresh server of `target` and return its transcript. */
export async function runScript(target: Target, script: Script, opts: RunOptions = {}): Promise<Transcript> {
  const server = await target.start(script.server ?? {});
  try {
    return { target: target.name, lines: await runSteps(server, script.steps, opts) };
  } finally {
    await server.close();
  }
}

export async function runSteps(server: RunningServer, steps: Step[], opts: RunOptions = {}): Promise<string[]> {
  const conns = new Map<string, Client>();
  const lines: string[] = [];
  const counts = server.counts;
  const get = async (name: string): Promise<Client> => {
    let c = conns.get(name);
    if (!c) {
      c = await connect(server.port);
      conns.set(name, c);
    }
    return c;
  };
  const readOne = async (name: string, c: Client, timeoutMs: number) => {
    try {
      lines.push(`${name}< ${escapeBytes(normaliseReply(await c.readReply(timeoutMs), opts))}`);
    } catch (err) {
      lines.push(`${name}< (no reply: ${firstLine((err as Error).message)})`);
    }
  };
  try {
    for (const step of steps) {
      if ('sleep' in step) {
        lines.push(`sleep ${step.sleep}`);
        await new Promise((r) => setTimeout(r, step.sleep));
        continue;
      }
      if ('gather' in step) {
        lines.push(`gather ${step.count} from ${step.gather.join(',')}`);
        const got = new Map<string, string[]>(step.gather.map((n) => [n, []]));
        const clients = await Promise.all(step.gather.map((n) => get(n)));
        const deadline = Date.now() + REPLY_TIMEOUT_MS_DEFAULT;
        const drain = async () => {
          for (let i = 0; i < clients.length; i++) {
            const c = clients[i]!;
            while (c.buffered.length > 0) {
              let r: string;
              try {
                r = escapeBytes(normaliseReply(await c.readReply(REPLY_TIMEOUT_MS_DEFAULT), opts));
              } catch (err) {
                r = `(no reply: ${firstLine((err as Error).message)})`;
              }
              got.get(step.gather[i]!)!.push(r);
            }
          }
        };
        let total = 0;
        while (total < step.count && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 5));
          await drain();
          total = [...got.values()].reduce((n, rs) => n + rs.length, 0);
        }
        await new Promise((r) => setTimeout(r, GATHER_SETTLE_MS));
        await drain();
        total = [...got.values()].reduce((n, rs) => n + rs.length, 0);
        for (const [n, rs] of got) for (const r of rs) lines.push(`${n}< ${r}`);
        if (total !== step.count) lines.push(`gather: UNEXPECTED ${total} replies`);
        continue;
      }
      const name = step.conn;
      if ('close' in step) {
        lines.push(`${name}: close`);
        const c = conns.get(name);
        const before = counts?.().connections;
        if (c) await c.close();
        conns.delete(name);
        if (counts === undefined || before === undefined || !c) await new Promise((r) => setTimeout(r, CLOSE_SETTLE_MS));
        else if (!(await counted(() => counts().connections < before))) lines.push(`${name}: the server never counted its close`);
        continue;
      }
      const c = await get(name);
      if ('waits' in step) {
        lines.push(`${name}> reserve\r\n`);
        const before = counts?.().waiting;
        await c.send('reserve\r\n');
        await new Promise((r) => setTimeout(r, WAITS_QUIET_MS));
        const quiet = c.buffered === '' && !c.serverClosed;
        lines.push(quietLine(name, c));
        if (counts !== undefined && before !== undefined && quiet && !(await counted(() => counts().waiting > before))) {
          lines.push(`${name}: the server never counted its reserve as waiting`);
        }
        continue;
      }
      if ('send' in step) {
        lines.push(`${name}> ${escapeBytes(step.send)}`);
        await c.send(step.send);
      } else if ('cmd' in step) {
        const data = step.cmd + '\r\n' + (step.body !== undefined ? step.body + '\r\n' : '');
        lines.push(`${name}> ${escapeBytes(data)}`);
        await c.send(data);
        await readOne(name, c, REPLY_TIMEOUT_MS_DEFAULT);
      } else if ('read' in step) {
        for (let i = 0; i < step.read; i++) await readOne(name, c, step.timeoutMs ?? REPLY_TIMEOUT_MS_DEFAULT);
      } else if ('nothing' in step) {
        await new Promise((r) => setTimeout(r, step.nothing));
        lines.push(quietLine(name, c));
      } else if ('closed' in step) {
        let closed = false;
        try {
          closed = await c.isClosed(REPLY_TIMEOUT_MS_DEFAULT);
        } catch (err) {
          lines.push(`${name}: ${firstLine((err as Error).message)}`);
        }
        lines.push(`${name}: ${closed ? 'closed by server' : 'still open'}`);
        conns.delete(name);
        c.destroy();
        // No settle time here on purpose: beanstalkd has released the connection's jobs and
        // tubes before the close reaches us, so the next step may rely on that.
      }
    }
  } finally {
    for (const c of conns.values()) c.destroy();
  }
  return lines;
}

function firstLine(s: string): string {
  const at = s.indexOf('\n');
  return at < 0 ? s : s.slice(0, at);
}

/** Show the first difference between two transcripts with a few lines of context. */
export function describeTranscriptDiff(want: Transcript, got: Transcript, context = 6): string | null {
  const n = Math.max(want.lines.length, got.lines.length);
  let at = -1;
  for (let i = 0; i < n; i++) {
    if (want.lines[i] !== got.lines[i]) {
      at = i;
      break;
    }
  }
  if (at < 0) return null;
  const from = Math.max(0, at - context);
  const out: string[] = [`transcripts differ at line ${at + 1} (${want.target} vs ${got.target}):`];
  for (let i = from; i < at; i++) out.push(`    ${want.lines[i]}`);
  out.push(`  - ${want.target}: ${want.lines[at] ?? '(end of transcript)'}`);
  out.push(`  + ${got.target}: ${got.lines[at] ?? '(end of transcript)'}`);
  for (let i = at + 1; i < Math.min(n, at + 4); i++) {
    if (want.lines[i] === got.lines[i]) out.push(`    ${want.lines[i]}`);
    else out.push(`  - ${want.lines[i] ?? ''}\n  + ${got.lines[i] ?? ''}`);
  }
  return out.join('\n');
}
