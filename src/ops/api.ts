// The JSON API on the HTTP port (#14), for scripts and the dashboard: tubes with stats-tube's
// figures, a tube's jobs by state a page at a time, and the admin actions (kick, pause, clear,
// delete and kick a job). See README "JSON API" for every endpoint and the access rules:
// state-changing requests only by POST, with the token in an Authorization header and a JSON
// content type (a cross-site form can send neither without a CORS preflight, which this port
// never grants), and an Origin, when sent, naming this very host; read-only requests need the
// token too unless the port is bound to loopback.

const crypto = process.getBuiltinModule('node:crypto'); // not an ESM import: see src/server.ts
import type http from 'node:http';
import type { Router } from '../route/router.ts';
import type { Tube } from '../route/tubes.ts';
import {
  LIST_AGE, LIST_BODY_BYTES, LIST_BURIES, LIST_DELAY, LIST_ID, LIST_JOBS_MAX, LIST_KEY, LIST_KICKS, LIST_PRI,
  LIST_RELEASES, LIST_RESERVES, LIST_STATE, LIST_TIME_LEFT, LIST_TIMEOUTS, LIST_TTR, type ListedJob,
} from '../shared/records.ts';
import type { StatsEntry } from '../proto/beanstalk/stats.ts';
import { workqEndpoint, type WorkqEndpoint } from './workq-api.ts';
import { ApiError, preview } from './api-errors.ts';
import { CLEAR_BITS, clearTube, deleteJob, kickJob, kickTube, listJobs, moveTube, pauseTube, STATE_NAMES, STATES, tubeStats } from './admin.ts';

/** Jobs per page when the request names no limit. */
export const API_JOBS_LIMIT_DEFAULT = 100;
/** Largest request body read (the actions' bodies are a few bytes of JSON). */
export const API_BODY_BYTES_MAX = 64 * 1024;
const U32_MAX = 0xffffffff;

/** Whether `host` (the bound address) is a loopback address. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host) || /^::ffff:127\./.test(host);
}

/** A new random token (printed once at start when --http-token is not given). */
export function generateToken(): string {
  return crypto.randomBytes(24).toString('base64url');
}

/** Constant-time comparison (over digests, so the lengths never show either). */
function tokenMatches(given: string, token: string): boolean {
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(token).digest();
  return crypto.timingSafeEqual(a, b);
}

function statsObject(entries: StatsEntry[]): Record<string, string | number> {
  const o: Record<string, string | number> = {};
  for (const e of entries) o[e.key] = e.value ?? e.text;
  return o;
}

function jobJson(j: ListedJob): Record<string, unknown> {
  const f = j.fields;
  return {
    id: f[LIST_ID],
    state: STATE_NAMES[f[LIST_STATE]] ?? 'unknown',
    pri: f[LIST_PRI],
    age: f[LIST_AGE],
    delay: f[LIST_DELAY],
    ttr: f[LIST_TTR],
    'time-left': f[LIST_TIME_LEFT],
    reserves: f[LIST_RESERVES],
    timeouts: f[LIST_TIMEOUTS],
    releases: f[LIST_RELEASES],
    buries: f[LIST_BURIES],
    kicks: f[LIST_KICKS],
    'body-bytes': f[LIST_BODY_BYTES],
    preview: preview(j.preview, f[LIST_BODY_BYTES]),
  };
}

/** An integer in [min, max] from a JSON value, else 400. */
function intIn(v: unknown, name: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new ApiError(400, `${name} must be an integer from ${min} to ${max}`);
  return v;
}

export class JsonApi {
  private readonly token: string;
  /** GETs need the token too (the port is not on loopback). */
  private readonly readNeedsToken: boolean;

  constructor(token: string, loopback: boolean) {
    this.token = token;
    this.readNeedsToken = !loopback;
  }

  /** Answers a request under /api/ (router null: not serving yet). */
  /** A job was made by an action (a move's copy): the server counts it in stats total-jobs (set by the HTTP side). */
  jobCreated: () => void = () => {};

  handle(req: http.IncomingMessage, res: http.ServerResponse, router: Router | null): void {
    this.route(req, router)
      .then((out) => json(res, out.status, out.body))
      .catch((err: unknown) => {
        if (err instanceof ApiError) json(res, err.status, { error: err.message }, err.headers);
        else json(res, 500, { error: (err as Error).message });
      });
  }

  private async route(req: http.IncomingMessage, router: Router | null): Promise<{ status: number; body: unknown }> {
    const url = new URL(req.url ?? '/', 'http://x');
    let parts: string[];
    try {
      parts = url.pathname.split('/').slice(2).map(decodeURIComponent); // after "/api"
    } catch {
      throw new ApiError(400, 'malformed path');
    }
    const n = parts.length;
    // Which endpoint, and which method it takes.
    let post: string | null = null;
    let get: 'tubes' | 'tube' | 'jobs' | null = null;
    let workq: WorkqEndpoint | null = null; // /api/workq/... (./workq-api.ts)
    if (parts[0] === 'workq') workq = workqEndpoint(parts);
    else if (parts[0] === 'tubes' && n === 1) get = 'tubes';
    else if (parts[0] === 'tubes' && n === 2 && parts[1] !== '') get = 'tube';
    else if (parts[0] === 'tubes' && n === 3 && parts[2] === 'jobs') get = 'jobs';
    else if (parts[0] === 'tubes' && n === 3 && ['kick', 'pause', 'clear', 'move'].includes(parts[2])) post = `tube-${parts[2]}`;
    else if (parts[0] === 'jobs' && n === 3 && ['delete', 'kick'].includes(parts[2])) post = `job-${parts[2]}`;
    else throw new ApiError(404, 'no such endpoint');
    const method = post !== null || workq?.post === true ? 'POST' : 'GET';
    if (req.method !== method) throw new ApiError(405, `${method} only`, { Allow: method });
    if (method === 'POST') this.checkPost(req);
    else if (this.readNeedsToken) this.checkToken(req);
    if (router === null) throw new ApiError(503, 'starting');
    const body = method === 'POST' ? await readJson(req) : null;
    if (workq !== null) return workq.run(router, url.searchParams);

    switch (get ?? post) {
      case 'tubes': {
        const tubes = router.tubes.list();
        const stats = await Promise.all(tubes.map((t) => tubeStats(router, t)));
        return { status: 200, body: { tubes: tubes.map((t, i) => ({ name: t.name, stats: statsObject(stats[i] ?? []) })) } };
      }
      case 'tube': {
        const t = findTube(router, parts[1]);
        const stats = await tubeStats(router, t);
        return { status: 200, body: { name: t.name, stats: statsObject(stats ?? []) } };
      }
      case 'jobs':
        return { status: 200, body: await this.jobs(router, findTube(router, parts[1]), url.searchParams) };
      case 'tube-kick': {
        const t = findTube(router, parts[1]);
        const count = intIn((body as Record<string, unknown>).count, 'count', 0, U32_MAX);
        const r = await kickTube(router, t, count);
        if (r.unlogged) throw new ApiError(500, 'kicked, but the change could not be logged');
        return { status: 200, body: { tube: t.name, kicked: r.kicked } };
      }
      case 'tube-pause': {
        const t = findTube(router, parts[1]);
        const seconds = intIn((body as Record<string, unknown>).seconds, 'seconds', 0, U32_MAX);
        await pauseTube(router, t, seconds);
        return { status: 200, body: { tube: t.name, paused: seconds } };
      }
      case 'tube-move': {
        const t = findTube(router, parts[1]);
        const b = body as Record<string, unknown>;
        const to = b.to;
        if (typeof to !== 'string' || !TUBE_NAME.test(to)) throw new ApiError(400, 'to must be a tube name (1 to 200 of A-Z a-z 0-9 - + / ; . $ _ ( ), not starting with -)');
        if (to === t.name) throw new ApiError(400, 'to names the same tube');
        const mask = stateMask(b.states, 'moved');
        const max = b.max === undefined ? Number.MAX_SAFE_INTEGER : intIn(b.max, 'max', 1, Number.MAX_SAFE_INTEGER);
        const r = await moveTube(router, t.name, to, mask, max, this.jobCreated);
        if (r.unlogged) throw new ApiError(500, `moved ${r.moved}, but not every change could be logged`);
        return { status: 200, body: { tube: t.name, to, moved: r.moved } };
      }
      case 'tube-clear': {
        const t = findTube(router, parts[1]);
        const mask = stateMask((body as Record<string, unknown>).states, 'cleared');
        const r = await clearTube(router, t.name, mask);
        if (r.unlogged) throw new ApiError(500, `deleted ${r.deleted}, but not every deletion could be logged`);
        return { status: 200, body: { tube: t.name, deleted: r.deleted } };
      }
      case 'job-delete':
      case 'job-kick': {
        const id = parseId(parts[1]);
        const r = post === 'job-delete' ? await deleteJob(router, id) : await kickJob(router, id);
        if (r === 'not_found') {
          throw new ApiError(404, post === 'job-delete' ? 'no such job (or reserved by a connection)' : 'no such job in a buried or delayed state');
        }
        if (r === 'unlogged') throw new ApiError(500, 'done, but the change could not be logged');
        return { status: 200, body: post === 'job-delete' ? { id, deleted: true } : { id, kicked: true } };
      }
    }
    throw new ApiError(404, 'no such endpoint');
  }

  private async jobs(router: Router, t: Tube, q: URLSearchParams): Promise<unknown> {
    const stateName = q.get('state') ?? 'ready';
    const state = (STATES as Record<string, number>)[stateName];
    if (state === undefined) throw new ApiError(400, 'state must be ready, delayed, buried or reserved');
    const limitText = q.get('limit');
    const limit = limitText === null ? API_JOBS_LIMIT_DEFAULT : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_JOBS_MAX) throw new ApiError(400, `limit must be an integer from 1 to ${LIST_JOBS_MAX}`);
    let key = 0;
    let id = 0;
    const cursor = q.get('cursor');
    if (cursor !== null && cursor !== '') {
      const m = /^([0-9]+(?:\.[0-9]+)?)_([0-9]+)$/.exec(cursor);
      if (m === null || !Number.isSafeInteger(Number(m[2])) || Number(m[2]) < 1) throw new ApiError(400, 'malformed cursor');
      key = Number(m[1]);
      id = Number(m[2]);
    }
    const page = await listJobs(router, t, state, key, id, limit);
    const last = page.jobs[page.jobs.length - 1];
    return {
      tube: t.name,
      state: stateName,
      jobs: page.jobs.map(jobJson),
      next: page.more && last !== undefined ? `${last.fields[LIST_KEY]}_${last.fields[LIST_ID]}` : null,
    };
  }

  private checkToken(req: http.IncomingMessage): void {
    const auth = req.headers.authorization;
    const m = auth === undefined ? null : /^Bearer (.+)$/.exec(auth);
    if (m === null || !tokenMatches(m[1], this.token)) {
      throw new ApiError(401, 'the token is missing or wrong (Authorization: Bearer <token>)', { 'WWW-Authenticate': 'Bearer' });
    }
  }

  /** A state-changing request: same origin if it says, the token, and JSON. */
  private checkPost(req: http.IncomingMessage): void {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      let host: string | null = null;
      try {
        host = new URL(origin).host;
      } catch {
        host = null;
      }
      if (host === null || host !== req.headers.host) throw new ApiError(403, 'cross-origin requests are refused');
    }
    this.checkToken(req);
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/json') throw new ApiError(415, 'Content-Type must be application/json (form posts are refused)');
  }
}

/** beanstalkd's tube names: 1 to 200 of its NAME_CHARS, not starting with '-'. */
const TUBE_NAME = /^[A-Za-z0-9+/;.$_()][A-Za-z0-9+/;.$_()-]{0,199}$/;

/** A list of ready, delayed, buried as CLEAR_BITS, else 400 (reserved jobs are never `verb`). */
function stateMask(states: unknown, verb: string): number {
  if (!Array.isArray(states) || states.length === 0) throw new ApiError(400, 'states must be a list of ready, delayed, buried');
  let mask = 0;
  for (const s of states) {
    if (s === 'reserved') throw new ApiError(400, `reserved jobs are not ${verb} (their connections hold them)`);
    const bit = typeof s === 'string' ? CLEAR_BITS[s] : undefined;
    if (bit === undefined) throw new ApiError(400, `unknown state ${JSON.stringify(s)}`);
    mask |= bit;
  }
  return mask;
}

function findTube(router: Router, name: string): Tube {
  const t = router.tubes.find(name);
  if (t === undefined) throw new ApiError(404, 'no such tube');
  return t;
}

function parseId(text: string): number {
  const id = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id) || id < 1) throw new ApiError(400, 'a job id is a positive integer');
  return id;
}

function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (d: Buffer) => {
      size += d.length;
      if (size > API_BODY_BYTES_MAX && !failed) {
        failed = true;
        reject(new ApiError(413, `the body is over ${API_BODY_BYTES_MAX} bytes`));
      }
      if (!failed) chunks.push(d);
    });
    req.on('error', (err) => reject(err));
    req.on('end', () => {
      if (failed) return;
      const text = Buffer.concat(chunks).toString('utf8').trim();
      if (text === '') {
        resolve({});
        return;
      }
      let v: unknown;
      try {
        v = JSON.parse(text);
      } catch {
        reject(new ApiError(400, 'the body is not JSON'));
        return;
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) reject(new ApiError(400, 'the body must be a JSON object'));
      else resolve(v as Record<string, unknown>);
    });
  });
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  });
  res.end(text);
}
