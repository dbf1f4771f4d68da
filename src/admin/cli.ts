// shardstalk-admin: a command-line admin tool that speaks the beanstalk protocol, so it works
// against shardstalk and beanstalkd alike (issue #14). Results go to stdout, errors to stderr;
// it logs nothing else. Exit codes: 0 done, 1 the server refused (NOT_FOUND, an error reply),
// 2 bad arguments, 3 no connection (refused, timed out, closed).
import { parseArgs } from 'node:util';
import { Conn, ConnectionError, parseYamlDict, parseYamlList, type Reply } from './conn.ts';

export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;
export const EXIT_USAGE = 2;
export const EXIT_CONNECTION = 3;

/** Body bytes shown by peek unless --bytes says otherwise. */
export const PREVIEW_BYTES_DEFAULT = 200;
/** Commands written at once when asking for many tubes' stats. */
const PIPELINE_BATCH = 500;
const STATES = ['ready', 'delayed', 'buried'] as const;
type State = (typeof STATES)[number];

export const USAGE = `Usage: shardstalk-admin [-h HOST] [-p PORT] <command> [arguments]

Commands:
  stats [--json]                      the server's stats (YAML as the server sends it, or JSON)
  tubes [--json]                      every tube with its stats-tube counts, as a table
  peek <tube> ready|delayed|buried    the next job in that state: id, stats-job figures, body preview
       [--bytes N] [--base64] [--json]   (text when printable ASCII, else hex; --base64 instead of hex)
  kick <tube> [N|all]                 kick up to N buried jobs (delayed ones when none is buried);
                                      default all
  pause <tube> <seconds>              pause-tube: no reserves from the tube for that long (0 resumes)
  clear <tube> [--state S,S]          delete the tube's jobs in those states (default
                                      ready,delayed,buried; reserved jobs are never touched)
       [--http URL --token T]         shardstalk only: clear through its JSON API (pages on the server)

Options:
  -h, --host HOST   server address (default 127.0.0.1)
  -p, --port PORT   server port (default 11300)
  --timeout SECONDS give up when the server takes longer to connect or to answer (default 10)
  --help            this text

Exit codes: 0 done, 1 the server refused (NOT_FOUND, an error reply), 2 bad arguments,
3 no connection.
`;

class UsageError extends Error {}
class RefusedError extends Error {}

interface Out {
  out(s: string): void;
  err(s: string): void;
}

const stdio: Out = {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
};

/** Tube names as beanstalk accepts them (checked here so a typo is a usage error, not BAD_FORMAT). */
function checkTube(name: string | undefined): string {
  if (name === undefined) throw new UsageError('a tube name is needed');
  if (!/^[A-Za-z0-9+/;.$_()-]{1,200}$/.test(name) || name.startsWith('-')) {
    throw new UsageError(`bad tube name: ${JSON.stringify(name)}`);
  }
  return name;
}

function checkCount(what: string, s: string | undefined, max = 0xffffffff): number {
  if (s === undefined || !/^\d+$/.test(s) || Number(s) > max) throw new UsageError(`${what} must be a whole number from 0 to ${max}, not ${JSON.stringify(s)}`);
  return Number(s);
}

function refused(cmd: string, r: Reply): RefusedError {
  return new RefusedError(`${cmd}: the server answered ${r.line}`);
}

/** stats-tube for one tube; NOT_FOUND becomes "no such tube". */
async function statsTube(c: Conn, tube: string): Promise<Record<string, string | number>> {
  const r = await c.request(`stats-tube ${tube}`);
  if (r.line === 'NOT_FOUND') throw new RefusedError(`no such tube: ${tube}`);
  if (r.body === null) throw refused('stats-tube', r);
  return parseYamlDict(r.body);
}

/** A preview of a body that is safe on a terminal: printable ASCII as a quoted string, else hex or base64. */
export function preview(body: Buffer, maxBytes: number, binary: 'hex' | 'base64'): { encoding: string; text: string; truncated: boolean } {
  const shown = body.subarray(0, maxBytes);
  const truncated = shown.length < body.length;
  let printable = true;
  for (const b of shown) {
    if (!((b >= 0x20 && b <= 0x7e) || b === 0x09 || b === 0x0a || b === 0x0d)) {
      printable = false;
      break;
    }
  }
  if (printable) return { encoding: 'text', text: JSON.stringify(shown.toString('latin1')), truncated };
  return { encoding: binary, text: shown.toString(binary), truncated };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ').trimEnd() + '\n').join('');
}

const TUBE_COLUMNS: Array<[string, string]> = [
  ['READY', 'current-jobs-ready'],
  ['URGENT', 'current-jobs-urgent'],
  ['RESERVED', 'current-jobs-reserved'],
  ['DELAYED', 'current-jobs-delayed'],
  ['BURIED', 'current-jobs-buried'],
  ['TOTAL', 'total-jobs'],
  ['USING', 'current-using'],
  ['WATCHING', 'current-watching'],
  ['WAITING', 'current-waiting'],
  ['PAUSE-LEFT', 'pause-time-left'],
];

interface Flags {
  json: boolean;
  base64: boolean;
  bytes: string | undefined;
  state: string | undefined;
  http: string | undefined;
  token: string | undefined;
}

async function run(c: Conn, cmd: string, args: string[], f: Flags, io: Out): Promise<void> {
  switch (cmd) {
    case 'stats': {
      if (args.length > 0) throw new UsageError('stats takes no arguments');
      const r = await c.request('stats');
      if (r.body === null) throw refused('stats', r);
      io.out(f.json ? JSON.stringify(parseYamlDict(r.body), null, 2) + '\n' : r.body.toString('utf8').replace(/\n?$/, '\n'));
      return;
    }
    case 'tubes': {
      if (args.length > 0) throw new UsageError('tubes takes no arguments');
      const r = await c.request('list-tubes');
      if (r.body === null) throw refused('list-tubes', r);
      const names = parseYamlList(r.body);
      const stats: Array<Record<string, string | number>> = [];
      for (let i = 0; i < names.length; i += PIPELINE_BATCH) {
        const batch = names.slice(i, i + PIPELINE_BATCH);
        c.send(...batch.map((n) => `stats-tube ${n}`));
        for (const n of batch) {
          const s = await c.reply();
          // A tube can go away between list-tubes and stats-tube: leave it out.
          if (s.line === 'NOT_FOUND') continue;
          if (s.body === null) throw refused(`stats-tube ${n}`, s);
          stats.push(parseYamlDict(s.body));
        }
      }
      if (f.json) {
        io.out(JSON.stringify(stats, null, 2) + '\n');
        return;
      }
      const rows = [['TUBE', ...TUBE_COLUMNS.map(([h]) => h)]];
      for (const s of stats) rows.push([String(s.name), ...TUBE_COLUMNS.map(([, k]) => String(s[k] ?? '-'))]);
      io.out(table(rows));
      return;
    }
    case 'peek': {
      const tube = checkTube(args[0]);
      const state = args[1] as State;
      if (args.length !== 2 || !STATES.includes(state)) throw new UsageError('usage: peek <tube> ready|delayed|buried');
      const maxBytes = f.bytes === undefined ? PREVIEW_BYTES_DEFAULT : checkCount('--bytes', f.bytes, 1 << 30);
      await statsTube(c, tube);
      c.send(`use ${tube}`, `peek-${state}`);
      const used = await c.reply();
      if (!used.line.startsWith('USING ')) throw refused('use', used);
      const p = await c.reply();
      if (p.line === 'NOT_FOUND') throw new RefusedError(`no ${state} job in tube ${tube}`);
      if (p.body === null || !p.line.startsWith('FOUND ')) throw refused(`peek-${state}`, p);
      const id = Number(p.line.split(' ')[1]);
      const sj = await c.request(`stats-job ${id}`);
      // The job may have left between the peek and stats-job: show what the peek saw.
      const figures = sj.body === null ? {} : parseYamlDict(sj.body);
      const pv = preview(p.body, maxBytes, f.base64 ? 'base64' : 'hex');
      if (f.json) {
        io.out(JSON.stringify({ id, stats: figures, bytes: p.body.length, body: { encoding: pv.encoding, preview: pv.encoding === 'text' ? JSON.parse(pv.text) : pv.text, truncated: pv.truncated } }, null, 2) + '\n');
        return;
      }
      let text = `id: ${id}\n`;
      for (const [k, v] of Object.entries(figures)) if (k !== 'id') text += `${k}: ${v}\n`;
      text += `body: ${p.body.length} bytes, ${pv.encoding}${pv.truncated ? `, first ${maxBytes} shown` : ''}\n${pv.text}${pv.truncated ? ' ...' : ''}\n`;
      io.out(text);
      return;
    }
    case 'kick': {
      const tube = checkTube(args[0]);
      if (args.length > 2) throw new UsageError('usage: kick <tube> [N|all]');
      const s = await statsTube(c, tube);
      let bound: number;
      if (args[1] === undefined || args[1] === 'all') {
        // kick takes buried jobs when there are any, else delayed ones: ask for all of those.
        const buried = Number(s['current-jobs-buried'] ?? 0);
        bound = buried > 0 ? buried : Number(s['current-jobs-delayed'] ?? 0);
      } else {
        bound = checkCount('N', args[1]);
      }
      let kicked = 0;
      if (bound > 0) {
        c.send(`use ${tube}`, `kick ${bound}`);
        const used = await c.reply();
        if (!used.line.startsWith('USING ')) throw refused('use', used);
        const k = await c.reply();
        if (!k.line.startsWith('KICKED ')) throw refused('kick', k);
        kicked = Number(k.line.slice(7));
      }
      io.out(f.json ? JSON.stringify({ tube, kicked }) + '\n' : `kicked ${kicked} job${kicked === 1 ? '' : 's'} in tube ${tube}\n`);
      return;
    }
    case 'pause': {
      const tube = checkTube(args[0]);
      if (args.length !== 2) throw new UsageError('usage: pause <tube> <seconds>');
      const seconds = checkCount('seconds', args[1]);
      const r = await c.request(`pause-tube ${tube} ${seconds}`);
      if (r.line === 'NOT_FOUND') throw new RefusedError(`no such tube: ${tube}`);
      if (r.line !== 'PAUSED') throw refused('pause-tube', r);
      io.out(f.json ? JSON.stringify({ tube, paused: seconds }) + '\n' : seconds === 0 ? `resumed tube ${tube}\n` : `paused tube ${tube} for ${seconds} s\n`);
      return;
    }
    case 'clear': {
      const tube = checkTube(args[0]);
      if (args.length !== 1) throw new UsageError('usage: clear <tube> [--state ready,delayed,buried]');
      const states = (f.state ?? STATES.join(',')).split(',').filter((s) => s !== '');
      for (const s of states) if (!STATES.includes(s as State)) throw new UsageError(`--state: ${JSON.stringify(s)} is not ready, delayed or buried (reserved jobs are never cleared)`);
      if (states.length === 0) throw new UsageError('--state names no state');
      let deleted: number;
      if (f.http !== undefined) deleted = await clearHttp(f.http, f.token, tube, states);
      else {
        await statsTube(c, tube);
        deleted = await clearProtocol(c, tube, states as State[]);
      }
      io.out(f.json ? JSON.stringify({ tube, deleted }) + '\n' : `deleted ${deleted} job${deleted === 1 ? '' : 's'} from tube ${tube}\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command: ${cmd}`);
  }
}

/**
 * Clear over the protocol: peek-<state>, then "delete <id>" and the next peek-<state> written
 * together, so each job costs one round trip. A job that a worker reserves or that moves
 * meanwhile answers NOT_FOUND to the delete and is not counted; the next peek finds the next one.
 */
export async function clearProtocol(c: Conn, tube: string, states: State[]): Promise<number> {
  const used = await c.request(`use ${tube}`);
  if (!used.line.startsWith('USING ')) throw refused('use', used);
  let deleted = 0;
  for (const state of states) {
    let p = await c.request(`peek-${state}`);
    let lastMissed = -1;
    while (p.line.startsWith('FOUND ')) {
      const id = Number(p.line.split(' ')[1]);
      c.send(`delete ${id}`, `peek-${state}`);
      const d = await c.reply();
      if (d.line === 'DELETED') deleted++;
      else if (d.line === 'NOT_FOUND') {
        // The same job twice, still not deletable: give up rather than loop.
        if (lastMissed === id) throw new RefusedError(`clear: job ${id} in tube ${tube} cannot be deleted`);
        lastMissed = id;
      } else throw refused('delete', d);
      p = await c.reply();
    }
    if (p.line !== 'NOT_FOUND') throw refused(`peek-${state}`, p);
  }
  return deleted;
}

/** Clear through shardstalk's JSON API (POST /api/tubes/:name/clear), which pages on the server. */
async function clearHttp(base: string, token: string | undefined, tube: string, states: string[]): Promise<number> {
  if (token === undefined) throw new UsageError('--http needs --token (the server logs it at start, or takes --http-token)');
  let url: URL;
  try {
    url = new URL(`api/tubes/${encodeURIComponent(tube)}/clear`, base.endsWith('/') ? base : base + '/');
  } catch {
    throw new UsageError(`--http: not a URL: ${base}`);
  }
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ states }),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ConnectionError(`cannot reach ${url.origin}: ${cause?.code === 'ECONNREFUSED' ? 'connection refused' : (cause?.message ?? (err as Error).message)}`);
  }
  const text = await res.text();
  let answer: { deleted?: unknown; error?: unknown } = {};
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    // not JSON: reported below
  }
  if (res.status === 404) throw new RefusedError(`no such tube: ${tube}`);
  if (!res.ok || typeof answer.deleted !== 'number') throw new RefusedError(`clear over HTTP: ${res.status} ${typeof answer.error === 'string' ? answer.error : text.slice(0, 200)}`);
  return answer.deleted;
}

/** Run the tool with these arguments; resolves to the exit code. */
export async function main(argv: string[], io: Out = stdio): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        host: { type: 'string', short: 'h' },
        port: { type: 'string', short: 'p' },
        help: { type: 'boolean' },
        json: { type: 'boolean' },
        base64: { type: 'boolean' },
        bytes: { type: 'string' },
        state: { type: 'string' },
        http: { type: 'string' },
        token: { type: 'string' },
        timeout: { type: 'string' },
      },
    });
  } catch (err) {
    io.err(`shardstalk-admin: ${(err as Error).message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const v = parsed.values;
  if (v.help) {
    io.out(USAGE);
    return EXIT_OK;
  }
  const [cmd, ...args] = parsed.positionals;
  if (cmd === undefined) {
    io.err(`shardstalk-admin: no command given\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  let c: Conn | null = null;
  try {
    const host = v.host ?? '127.0.0.1';
    const port = v.port === undefined ? 11300 : checkCount('--port', v.port, 65535);
    if (!['stats', 'tubes', 'peek', 'kick', 'pause', 'clear'].includes(cmd)) throw new UsageError(`unknown command: ${cmd}`);
    const timeoutS = v.timeout === undefined ? 10 : Number(v.timeout);
    if (!(timeoutS > 0 && timeoutS <= 86_400)) throw new UsageError(`--timeout must be a number of seconds above 0, not ${JSON.stringify(v.timeout)}`);
    // clear over HTTP needs no beanstalk connection.
    if (!(cmd === 'clear' && v.http !== undefined)) c = await Conn.open(host, port, timeoutS * 1000);
    await run(c as Conn, cmd, args, { json: v.json ?? false, base64: v.base64 ?? false, bytes: v.bytes, state: v.state, http: v.http, token: v.token }, io);
    return EXIT_OK;
  } catch (err) {
    io.err(`shardstalk-admin: ${(err as Error).message}\n`);
    if (err instanceof UsageError) return EXIT_USAGE;
    if (err instanceof RefusedError) return EXIT_REFUSED;
    if (err instanceof ConnectionError) return EXIT_CONNECTION;
    return EXIT_REFUSED;
  } finally {
    c?.close();
  }
}
