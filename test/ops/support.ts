// Helpers for the HTTP port's tests: a server with it on, requests, a reader of the exposition
// format, and promtool.

import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { afterAll, beforeAll, type TestContext } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body parsed as JSON, or null when it is not JSON. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/**
 * The two layouts the JSON API's tests run in: every connection on the main thread, and
 * connection threads (the default on hosts with a core per shard), where the API on the main thread
 * reaches every shard through the mesh while connections on other threads change the same tubes.
 */
export const LAYOUTS: ServerOptions[] = [{ connectionThreads: false }, { connectionThreads: true }];

/**
 * `start` starts a server with the HTTP port (startWithHttp) in the layout of the describe block
 * that called `inLayout` (one of LAYOUTS), under each test's own options.
 */
export function inLayouts(token: string): { start(ctx: TestContext, opts?: ServerOptions): Promise<RunningServer>; inLayout(l: ServerOptions): void } {
  let layout: ServerOptions = {};
  return {
    start: (ctx, opts = {}) => startWithHttp(ctx, token, { ...layout, ...opts }),
    inLayout(l) {
      beforeAll(() => void (layout = l));
      afterAll(() => void (layout = {}));
    },
  };
}

/** The token's headers for a state-changing request of the JSON API. */
export function apiHeaders(token: string): Record<string, string> {
  return { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
}

/** One request to the HTTP port (no keep-alive, so nothing outlives the test). */
export function request(port: number, path: string, method = 'GET', opts: { headers?: Record<string, string>; body?: string } = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers: opts.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        let json: unknown = null;
        try {
          json = JSON.parse(body);
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json });
      });
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** GET /metrics; fails unless 200. */
export async function scrape(port: number): Promise<string> {
  const a = await request(port, '/metrics');
  if (a.status !== 200) throw new Error(`/metrics answered ${a.status}: ${a.body}`);
  return a.body;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** # TYPE lines: name → type. */
  types: Map<string, string>;
  /** The value of the one sample of `name` whose labels include `labels`; fails when there is not exactly one. */
  value(name: string, labels?: Record<string, string>): number;
  /** Every sample of `name`. */
  all(name: string): Sample[];
}

/** Reads the text format back, label escapes included (a reader of our own, independent of the writer). */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name, type);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (m === null) throw new Error(`bad sample line ${JSON.stringify(line)}`);
    const name = m[1];
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      while (line[i] !== '}') {
        const eq = line.indexOf('="', i);
        const key = line.slice(i, eq);
        i = eq + 2;
        let v = '';
        while (line[i] !== '"') {
          if (line[i] === '\\') {
            const e = line[i + 1];
            v += e === 'n' ? '\n' : e;
            i += 2;
          } else v += line[i++];
        }
        labels[key] = v;
        i++;
        if (line[i] === ',') i++;
      }
      i++;
    }
    if (line[i] !== ' ') throw new Error(`bad sample line ${JSON.stringify(line)}`);
    const raw = line.slice(i + 1);
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    samples.push({ name, labels, value });
  }
  const matches = (s: Sample, name: string, labels: Record<string, string>): boolean =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  return {
    samples,
    types,
    all: (name) => samples.filter((s) => s.name === name),
    value(name, labels = {}) {
      const found = samples.filter((s) => matches(s, name, labels));
      if (found.length !== 1) throw new Error(`${found.length} samples of ${name} ${JSON.stringify(labels)}`);
      return found[0].value;
    },
  };
}

export const PROMTOOL_HINT =
  'promtool is missing: install Debian\'s prometheus package (apt-get install -y --no-install-recommends prometheus), as .ci/run does';

/** `promtool check metrics` on `text`: its exit code and what it said. Throws (never skips) when promtool is not installed. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error !== undefined) {
    if ((r.error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(PROMTOOL_HINT);
    throw r.error;
  }
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** A server with the HTTP port on (loopback, port 0) and `token`, closed when the test ends. */
export async function startWithHttp(ctx: TestContext, token: string, opts: ServerOptions = {}): Promise<RunningServer> {
  const srv = await startServer({
    host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: token, ...opts,
  });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

/** A protocol client, destroyed when the test ends. */
export async function clientFor(ctx: TestContext, port: number): Promise<Client> {
  const c = await connect(port);
  ctx.onTestFinished(() => c.destroy());
  return c;
}
