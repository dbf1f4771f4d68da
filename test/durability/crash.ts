// The crash test: several pipelining clients put / reserve / delete / release / bury / kick-job
// against `node src/main.ts -b DIR` in a child process, the test records exactly what each
// client saw acknowledged, the server is SIGKILLed at a seeded random moment, restarted on the
// same directory (possibly with another shard count), and everything it holds is checked against
// what was acknowledged. Used by crash.test.ts (a few seeds) and tools/crash-test.ts (many).
//
// The model. Every put body names the client and its own sequence number ("k=c2-17;..."), so a job
// can be recognised whatever id it got, also when its INSERTED reply was lost. For each job the
// durable changes sent to it (put, release, bury, kick-job, delete) are kept in send order. That
// order is the order the server applied them: each change to a job is only sent after the one
// before it took effect (a delete/release/bury after the RESERVED that follows it, a kick-job
// after its BURIED). Reserves are not durable (a reserved job comes back ready). After the
// restart a job must be in the state of one of its changes from the last acknowledged one on —
// a change not (yet) acknowledged may or may not have reached the disk — and absent only if that
// state is "deleted" or its put was never acknowledged.

import { connect, type Client } from '../support/client.ts';
import { rng, scan, sleep, spawnServer, tubePerShard, type ChildServer } from './support.ts';

export interface CrashOptions {
  seed: number;
  /** Shard count of each run: [before the first kill, after it, after the second, ...]. */
  shards: number[];
  /** Kills (and restarts) on the same directory. Default shards.length - 1. */
  kills?: number;
  /** fsync flags of the server: ['-f', '0'] (default), ['-f', '50'], ['-F']. A process kill loses
   *  nothing acknowledged in any mode: every batch is written before its replies go out. */
  fsync?: string[];
  /** Concurrent client connections. Default 4. */
  clients?: number;
  /** Work before each kill, in ms: chosen by the seed in [min, max]. Default [150, 900]. */
  workMs?: [number, number];
  /** Log directory (must exist). */
  dir: string;
  segmentBytes?: number;
  /** Serve connections on one thread per shard (--connection-threads). */
  connectionThreads?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Called between each kill and the restart (a test of the checker can damage the log here). */
  afterKill?: (round: number) => void;
}

export interface CrashResult {
  seed: number;
  problems: string[];
  /** Acknowledged commands over all rounds, by kind. */
  acked: Record<string, number>;
  /** Jobs checked after each restart. */
  checked: number[];
}

type State = 'ready' | 'delayed' | 'buried' | 'deleted';

interface Change {
  state: State;
  pri: number;
  acked: boolean;
  what: string;
}

interface Job {
  id: number;
  key: string;
  changes: Change[];
}

interface SentPut {
  key: string;
  tube: string;
  pri: number;
  delay: number;
  body: string;
  /** Known once INSERTED or a RESERVED showed it. */
  id: number;
  /** Checked absent after a restart: it must never appear. */
  lost: boolean;
}

interface Pending {
  line: string;
  onReply(reply: string): void;
}

const TTR = 600; // no job times out during a run
const MAX_PROBLEMS = 25;

class Model {
  readonly puts = new Map<string, SentPut>();
  readonly jobs = new Map<number, Job>();
  /** Checked absent (deleted) after a restart: must never come back. */
  readonly gone = new Set<number>();
  maxIdSeen = 0;
  readonly problems: string[] = [];
  readonly acked: Record<string, number> = {};

  problem(msg: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(msg);
  }

  count(kind: string): void {
    this.acked[kind] = (this.acked[kind] ?? 0) + 1;
  }

  sawId(id: number): void {
    if (id > this.maxIdSeen) this.maxIdSeen = id;
  }

  /** The job with this id, made from its put when first seen. */
  job(id: number, key: string, where: string): Job | null {
    let j = this.jobs.get(id);
    if (j !== undefined) {
      if (j.key !== key) this.problem(`${where}: job ${id} has the body of ${key}, but it was ${j.key}`);
      return j;
    }
    const p = this.puts.get(key);
    if (p === undefined) {
      this.problem(`${where}: job ${id} has a body no client sent (${JSON.stringify(key)})`);
      return null;
    }
    if (p.id !== 0 && p.id !== id) {
      this.problem(`${where}: put ${key} shows up as job ${id}, but it is job ${p.id}`);
      return null;
    }
    if (p.lost) this.problem(`${where}: put ${key} (job ${id}) was absent after an earlier restart, and is back`);
    if (this.gone.has(id)) this.problem(`${where}: job ${id} was deleted, and is back`);
    p.id = id;
    j = { id, key, changes: [{ state: p.delay > 0 ? 'delayed' : 'ready', pri: p.pri, acked: false, what: 'put' }] };
    this.jobs.set(id, j);
    return j;
  }

  /** Checks a body against the put it names; returns the key or null. */
  keyOf(body: string, where: string, id: number): string | null {
    const m = /^k=(c\d+-\d+|v\d+);/.exec(body);
    if (!m) {
      this.problem(`${where}: job ${id} has a body no client sent: ${JSON.stringify(body.slice(0, 60))}`);
      return null;
    }
    const p = this.puts.get(m[1]);
    if (p === undefined) {
      this.problem(`${where}: job ${id} names put ${m[1]}, which was never sent`);
      return null;
    }
    if (p.body !== body) {
      this.problem(`${where}: job ${id} (${m[1]}) has a damaged body: ${JSON.stringify(body.slice(0, 80))}`);
      return null;
    }
    return m[1];
  }
}

function bodyFor(key: string, tube: string, pri: number, r: () => number): string {
  const pad = Math.floor(r() * 300);
  let s = `k=${key};t=${tube};p=${pri};`;
  for (let i = 0; i < pad; i++) s += String.fromCharCode(33 + ((i * 7 + key.length) % 90));
  return s;
}

/** One connection's share of the load: keeps up to `window` commands in flight. */
class Worker {
  readonly name: string;
  private readonly r: () => number;
  private readonly inflight: Pending[] = [];
  private readonly followUps: Array<() => Pending> = [];
  private readonly buried: Job[] = [];
  private seq = 0;
  private using = 'default';
  private readonly window: number;
  dead = false;
  private wake: (() => void) | null = null;

  private readonly c: Client;
  private readonly index: number;
  private readonly m: Model;
  private readonly tubes: string[];

  constructor(c: Client, index: number, m: Model, tubes: string[], seed: number) {
    this.c = c;
    this.index = index;
    this.m = m;
    this.tubes = tubes;
    this.name = `c${index}`;
    this.r = rng(seed);
    this.window = 1 + Math.floor(this.r() * 8);
  }

  async run(until: () => boolean): Promise<void> {
    const reader = this.readLoop();
    for (const t of this.tubes) if (t !== 'default') this.send({ line: `watch ${t}`, onReply: (r) => this.expectPrefix(r, 'WATCHING', 'watch') });
    while (!this.dead && !until()) {
      while (!this.dead && this.inflight.length < this.window) this.send(this.next());
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    await reader;
  }

  /** Ends the worker at once (the server is gone). */
  stop(): void {
    this.dead = true;
    this.c.destroy();
    this.wake?.();
  }

  private send(p: Pending): void {
    this.inflight.push(p);
    this.c.send(p.line + '\r\n').catch(() => {
      // the server was killed; the reader sees the socket end
    });
  }

  private async readLoop(): Promise<void> {
    for (;;) {
      let reply: string;
      try {
        reply = await this.c.readReply(30_000);
      } catch {
        this.dead = true;
        this.wake?.();
        return;
      }
      const p = this.inflight.shift();
      if (p === undefined) {
        this.m.problem(`${this.name}: a reply nobody asked for: ${JSON.stringify(reply)}`);
        continue;
      }
      p.onReply(reply);
      const w = this.wake;
      this.wake = null;
      w?.();
    }
  }

  private expectPrefix(reply: string, prefix: string, what: string): void {
    if (!reply.startsWith(prefix)) this.m.problem(`${this.name}: ${what} answered ${JSON.stringify(reply)}`);
  }

  private next(): Pending {
    const follow = this.followUps.shift();
    if (follow !== undefined) return follow();
    const r = this.r();
    if (this.buried.length > 0 && r < 0.08) return this.kickJob(this.buried.splice(Math.floor(this.r() * this.buried.length), 1)[0]);
    if (r < 0.55) {
      const tube = this.tubes[Math.floor(this.r() * this.tubes.length)];
      if (tube !== this.using) {
        this.using = tube;
        // The put right after it follows as the next command.
        this.followUps.unshift(() => this.put(tube));
        return { line: `use ${tube}`, onReply: (rep) => this.expectPrefix(rep, `USING ${tube}\r\n`, 'use') };
      }
      return this.put(tube);
    }
    return this.reserve();
  }

  private put(tube: string): Pending {
    const key = `c${this.index}-${++this.seq}`;
    const pris = [0, 1, 100, 1024, 65536, 4294967295];
    const pri = pris[Math.floor(this.r() * pris.length)];
    const delay = this.r() < 0.05 ? 1 + Math.floor(this.r() * 2) : 0;
    const body = bodyFor(key, tube, pri, this.r);
    this.m.puts.set(key, { key, tube, pri, delay, body, id: 0, lost: false });
    return {
      line: `put ${pri} ${delay} ${TTR} ${body.length}\r\n${body}`,
      onReply: (rep) => {
        const mm = /^INSERTED (\d+)\r\n$/.exec(rep);
        if (!mm) {
          this.m.problem(`${this.name}: put ${key} answered ${JSON.stringify(rep)}`);
          return;
        }
        const id = Number(mm[1]);
        this.m.sawId(id);
        this.m.count('put');
        const j = this.m.job(id, key, `${this.name} INSERTED`);
        if (j !== null) j.changes[0].acked = true;
      },
    };
  }

  private reserve(): Pending {
    return {
      line: 'reserve-with-timeout 0',
      onReply: (rep) => {
        if (rep === 'TIMED_OUT\r\n') return;
        const mm = /^RESERVED (\d+) (\d+)\r\n/.exec(rep);
        if (!mm) {
          this.m.problem(`${this.name}: reserve answered ${JSON.stringify(rep.slice(0, 80))}`);
          return;
        }
        const id = Number(mm[1]);
        this.m.sawId(id);
        this.m.count('reserve');
        const body = rep.slice(mm[0].length, mm[0].length + Number(mm[2]));
        const key = this.m.keyOf(body, `${this.name} RESERVED`, id);
        if (key === null) return;
        const j = this.m.job(id, key, `${this.name} RESERVED`);
        if (j === null) return;
        // What to do with it: mostly delete, sometimes release (new pri, maybe a delay) or bury.
        const x = this.r();
        if (x < 0.6) this.followUps.push(() => this.change(j, `delete ${id}`, 'DELETED\r\n', 'deleted', 0, 'delete'));
        else if (x < 0.85) {
          const pri = Math.floor(this.r() * 2000);
          const delay = this.r() < 0.2 ? 1 : 0;
          this.followUps.push(() => this.change(j, `release ${id} ${pri} ${delay}`, 'RELEASED\r\n', delay > 0 ? 'delayed' : 'ready', pri, 'release'));
        } else {
          const pri = Math.floor(this.r() * 2000);
          this.followUps.push(() => this.change(j, `bury ${id} ${pri}`, 'BURIED\r\n', 'buried', pri, 'bury', () => this.buried.push(j)));
        }
      },
    };
  }

  private kickJob(j: Job): Pending {
    const pri = j.changes.at(-1)!.pri;
    return this.change(j, `kick-job ${j.id}`, 'KICKED\r\n', 'ready', pri, 'kick-job');
  }

  /** A durable change to a job this connection controls (reserved, or buried by it). */
  private change(j: Job, line: string, ok: string, state: State, pri: number, kind: string, then?: () => void): Pending {
    const c: Change = { state, pri: state === 'deleted' ? 0 : pri, acked: false, what: kind };
    j.changes.push(c);
    return {
      line,
      onReply: (rep) => {
        if (rep !== ok) {
          this.m.problem(`${this.name}: ${line} answered ${JSON.stringify(rep)}`);
          return;
        }
        c.acked = true;
        this.m.count(kind);
        then?.();
      },
    };
  }
}

/** Checks the restarted server against the model; then makes the model what was found. */
async function verify(port: number, m: Model, round: number): Promise<number> {
  const c = await connect(port);
  try {
    const where = `after kill ${round}`;
    const statsReply = await c.request('stats');
    const n = (k: string) => Number(new RegExp(`\\n${k}: (\\d+)\\n`).exec(statsReply)?.[1] ?? 'NaN');
    const total = n('current-jobs-ready') + n('current-jobs-reserved') + n('current-jobs-delayed') + n('current-jobs-buried');
    if (n('current-jobs-reserved') !== 0) m.problem(`${where}: ${n('current-jobs-reserved')} jobs reserved right after the start`);
    let unknownIds = 0;
    for (const p of m.puts.values()) if (p.id === 0 && !p.lost) unknownIds++;
    const maxId = m.maxIdSeen + unknownIds + 64;
    const found = await scan(c, maxId);
    if (found.size !== total) {
      m.problem(`${where}: stats counts ${total} jobs, ids 1..${maxId} hold ${found.size}: some job has an id beyond every id handed out`);
    }
    // Every job found: a put some client sent, in a state its changes allow.
    for (const [id, f] of found) {
      const key = m.keyOf(f.body, where, id);
      if (key === null) continue;
      const p = m.puts.get(key)!;
      if (f.tube !== p.tube) m.problem(`${where}: job ${id} (${key}) is in tube ${f.tube}, was put into ${p.tube}`);
      const j = m.job(id, key, where);
      if (j === null) continue;
      const allowed = allowedChanges(j);
      const ok = allowed.some((ch) => ch.state !== 'deleted' && matches(ch, f.state, f.pri));
      if (!ok) {
        m.problem(`${where}: job ${id} (${key}) is ${f.state} pri ${f.pri}; allowed: ${describe(allowed)}; history: ${describe(j.changes)}`);
      }
    }
    // Every job the model knows and did not find: only if that is allowed.
    for (const j of m.jobs.values()) {
      if (found.has(j.id)) continue;
      const allowed = allowedChanges(j);
      const mayBeGone = !j.changes.some((ch) => ch.acked) || allowed.some((ch) => ch.state === 'deleted');
      if (!mayBeGone) {
        m.problem(`${where}: job ${j.id} (${j.key}) is missing; allowed: ${describe(allowed)}; history: ${describe(j.changes)}`);
      }
    }
    // The model becomes what was found (the next round starts from it).
    for (const j of [...m.jobs.values()]) {
      const f = found.get(j.id);
      if (f === undefined) {
        m.jobs.delete(j.id);
        m.gone.add(j.id);
        m.puts.get(j.key)!.lost = true;
      } else {
        j.changes = [{ state: f.state as State, pri: f.pri, acked: true, what: `found ${f.state} after kill ${round}` }];
      }
    }
    for (const p of m.puts.values()) if (p.id === 0) p.lost = true;
    // A new put gets an id above every id ever seen.
    const key = `v${round}`;
    const body = `k=${key};t=default;p=0;`;
    m.puts.set(key, { key, tube: 'default', pri: 0, delay: 0, body, id: 0, lost: false });
    const rep = await c.request(`put 0 0 ${TTR} ${body.length}\r\n${body}`);
    const mm = /^INSERTED (\d+)\r\n$/.exec(rep);
    if (!mm) m.problem(`${where}: put answered ${JSON.stringify(rep)}`);
    else {
      const id = Number(mm[1]);
      const maxFound = Math.max(0, ...found.keys());
      if (id <= m.maxIdSeen || id <= maxFound) m.problem(`${where}: new put got id ${id}, but ids up to ${Math.max(m.maxIdSeen, maxFound)} were handed out before`);
      m.sawId(id);
      m.job(id, key, where)!.changes[0].acked = true;
    }
    return found.size;
  } finally {
    c.destroy();
  }
}

/** A job's changes from its last acknowledged one on: the states a restart may show. */
function allowedChanges(j: Job): Change[] {
  let k = -1;
  for (let i = 0; i < j.changes.length; i++) if (j.changes[i].acked) k = i;
  return j.changes.slice(Math.max(0, k));
}

function matches(ch: Change, state: string, pri: number): boolean {
  if (ch.pri !== pri) return false;
  if (ch.state === 'delayed') return state === 'delayed' || state === 'ready'; // its delay may be over
  return ch.state === state; // a reserved job comes back ready: its last change said ready
}

function describe(changes: Change[]): string {
  return changes.map((c) => `${c.what}→${c.state}/${c.pri}${c.acked ? '' : '?'}`).join(', ');
}

/** Runs the whole test for one seed; never throws for a server fault (see problems). */
export async function crashRun(o: CrashOptions): Promise<CrashResult> {
  const r = rng(o.seed);
  const kills = o.kills ?? Math.max(1, o.shards.length - 1);
  const clients = o.clients ?? 4;
  const [minMs, maxMs] = o.workMs ?? [150, 900];
  const m = new Model();
  const checked: number[] = [];
  const tubes = [...new Set(['default', ...tubePerShard(Math.max(...o.shards), 'crash')])];
  const shardsAt = (i: number) => o.shards[Math.min(i, o.shards.length - 1)];
  let server: ChildServer | null = null;
  try {
    server = await spawnServer({ dir: o.dir, shards: shardsAt(0), fsync: o.fsync, segmentBytes: o.segmentBytes, connectionThreads: o.connectionThreads });
    for (let round = 1; round <= kills; round++) {
      const workMs = minMs + Math.floor(r() * (maxMs - minMs));
      const conns = await Promise.all(Array.from({ length: clients }, () => connect(server!.port)));
      const workers = conns.map((c, i) => new Worker(c, i + (round - 1) * clients, m, tubes, Math.floor(r() * 2 ** 32)));
      let killed = false;
      const runs = workers.map((w) => w.run(() => killed));
      await sleep(workMs);
      if (server.proc.exitCode !== null || server.proc.signalCode !== null) {
        m.problem(`round ${round}: the server exited by itself: ${server.stderr().slice(-2000)}`);
      }
      const victim = server;
      server = null;
      await victim.kill();
      killed = true;
      for (const w of workers) w.stop();
      await Promise.all(runs);
      o.afterKill?.(round);
      o.log?.(`seed ${o.seed} round ${round}: killed after ${workMs} ms; acknowledged so far ${JSON.stringify(m.acked)}`);
      try {
        server = await spawnServer({ dir: o.dir, shards: shardsAt(round), fsync: o.fsync, segmentBytes: o.segmentBytes, connectionThreads: o.connectionThreads });
      } catch (e) {
        m.problem(`round ${round}: the restart failed: ${(e as Error).message.slice(0, 3000)}`);
        break;
      }
      checked.push(await verify(server.port, m, round));
      if (m.problems.length > 0) break;
    }
  } catch (e) {
    m.problem(`test error: ${(e as Error).stack ?? e}`);
  } finally {
    await server?.kill();
  }
  return { seed: o.seed, problems: m.problems, acked: m.acked, checked };
}
