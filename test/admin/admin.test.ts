// shardstalk-admin (#14, src/admin/cli.ts), run as a child process the way an operator runs it,
// against Debian's beanstalkd (a missing beanstalkd fails these tests) and against shardstalk:
// each command's output and its effect on the server, the error messages and exit codes.

import { execFile } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { findBeanstalkd, freePort, startReference } from '../support/servers.ts';

const BIN = fileURLToPath(new URL('../../bin/shardstalk-admin.js', import.meta.url));
const TOKEN = 'admin-test-token-0123456789';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the CLI in a child process (asynchronously: shardstalk serves from this very process). */
function admin(port: number, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, '-p', String(port), ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok(port: number, ...args: string[]): Promise<string> {
  const r = await admin(port, ...args);
  if (r.code !== 0) throw new Error(`shardstalk-admin ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function statsTube(c: Client, tube: string): Promise<Record<string, string>> {
  const reply = await c.request(`stats-tube ${tube}`);
  const out: Record<string, string> = {};
  for (const m of reply.matchAll(/^([a-z-]+): (.*)$/gm)) out[m[1]!] = m[2]!;
  return out;
}

async function put(c: Client, body: string | Buffer, pri = 100, delay = 0): Promise<number> {
  const b = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  await c.send(Buffer.concat([Buffer.from(`put ${pri} ${delay} 120 ${b.length}\r\n`), b, Buffer.from('\r\n')]));
  const line = await c.readLine();
  const m = /^INSERTED (\d+)\r\n$/.exec(line);
  if (!m) throw new Error(`put: ${line}`);
  return Number(m[1]);
}

interface Target {
  name: string;
  start(): Promise<{ port: number; httpPort: number | null; close(): Promise<void> }>;
}

const TARGETS: Target[] = [
  {
    name: 'beanstalkd',
    async start() {
      if (findBeanstalkd() === null) throw new Error('beanstalkd is not installed (Debian: apt-get install -y beanstalkd); these tests need it');
      const s = await startReference();
      return { port: s.port, httpPort: null, close: () => s.close() };
    },
  },
  {
    name: 'shardstalk',
    async start() {
      const s = await startServer({ host: '127.0.0.1', port: 0, shards: 2, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN });
      return { port: s.port, httpPort: s.httpPort, close: () => s.close() };
    },
  },
];

describe.each(TARGETS)('shardstalk-admin against $name', (target) => {
  let srv: { port: number; httpPort: number | null; close(): Promise<void> };
  let c: Client;
  beforeAll(async () => {
    srv = await target.start();
    c = await connect(srv.port);
  });
  afterAll(async () => {
    c?.destroy();
    await srv?.close();
  });

  /**
   * Tube `t`: 2 buried (a, b), 1 reserved by `c` (r), 3 ready (x1 x2 x3), 2 delayed (d1 d2).
   * Returns the ids.
   */
  async function fill(t: string) {
    await c.request(`use ${t}`);
    await c.request(`watch ${t}`);
    await c.request('ignore default');
    const ids: Record<string, number> = {};
    for (const name of ['a', 'b']) {
      ids[name] = await put(c, `job ${name}`, 1);
      expect(await c.request('reserve-with-timeout 0')).toMatch(new RegExp(`^RESERVED ${ids[name]} `));
      expect(await c.request(`bury ${ids[name]} 1`)).toBe('BURIED\r\n');
    }
    ids.r = await put(c, 'job r', 1);
    expect(await c.request('reserve-with-timeout 0')).toMatch(new RegExp(`^RESERVED ${ids.r} `));
    for (const name of ['x1', 'x2', 'x3']) ids[name] = await put(c, `job ${name}`, 100);
    for (const name of ['d1', 'd2']) ids[name] = await put(c, `job ${name}`, 100, 600);
    await c.request('watch default');
    await c.request(`ignore ${t}`);
    return ids;
  }

  it('stats prints the server stats as YAML and as JSON', async () => {
    const yaml = await ok(srv.port, 'stats');
    expect(yaml).toMatch(/^---\n/);
    expect(yaml).toMatch(/^current-connections: \d+$/m);
    const json = JSON.parse(await ok(srv.port, 'stats', '--json'));
    expect(typeof json['current-connections']).toBe('number');
    // Every key of the YAML is in the JSON; quoted values stay strings (beanstalkd's version "1.13").
    const keys = [...yaml.matchAll(/^([a-z-]+): (.*)$/gm)];
    expect(Object.keys(json)).toEqual(keys.map((m) => m[1]));
    expect(typeof json.version).toBe('string');
    expect(json.version).toBe(/^version: "?([^"\n]*)"?$/m.exec(yaml)![1]);
  });

  it('tubes, peek, kick, pause and clear: output and effect', async () => {
    const t = `adm-${target.name}`;
    const ids = await fill(t);

    // tubes: a table row with the tube's counts, and the same in JSON.
    const table = await ok(srv.port, 'tubes');
    expect(table.split('\n')[0]).toMatch(/^TUBE\s+READY\s+URGENT\s+RESERVED\s+DELAYED\s+BURIED\s+TOTAL/);
    const row = table.split('\n').find((l) => l.startsWith(t + ' '));
    expect(row, table).toBeDefined();
    // ready urgent reserved delayed buried total (urgent: ready jobs with pri < 1024)
    expect(row!.split(/\s+/).slice(1, 7)).toEqual(['3', '3', '1', '2', '2', '8']);
    expect(table).toMatch(/^default\s/m);
    const tubes = JSON.parse(await ok(srv.port, 'tubes', '--json')) as Array<Record<string, unknown>>;
    const mine = tubes.find((x) => x.name === t)!;
    expect(mine['current-jobs-ready']).toBe(3);
    expect(mine['current-jobs-buried']).toBe(2);

    // peek: the job's id, its stats-job figures and the body.
    const pr = await ok(srv.port, 'peek', t, 'ready');
    expect(pr).toMatch(new RegExp(`^id: ${ids.x1}\n`));
    expect(pr).toMatch(new RegExp(`^tube: ${t}$`, 'm'));
    expect(pr).toMatch(/^state: ready$/m);
    expect(pr).toMatch(/^pri: 100$/m);
    expect(pr).toMatch(/^body: 6 bytes, text\n"job x1"\n$/m);
    const pb = await ok(srv.port, 'peek', t, 'buried');
    expect(pb).toMatch(new RegExp(`^id: ${ids.a}\n`));
    expect(pb).toMatch(/^state: buried$/m);
    expect(pb).toContain('"job a"');
    const pd = JSON.parse(await ok(srv.port, 'peek', t, 'delayed', '--json'));
    expect(pd.id).toBe(ids.d1);
    expect(pd.stats.state).toBe('delayed');
    expect(pd.body).toEqual({ encoding: 'text', preview: 'job d1', truncated: false });

    // kick 1: one buried job becomes ready.
    expect(await ok(srv.port, 'kick', t, '1')).toBe(`kicked 1 job in tube ${t}\n`);
    let s = await statsTube(c, t);
    expect([s['current-jobs-ready'], s['current-jobs-buried']]).toEqual(['4', '1']);
    expect(await c.request(`stats-job ${ids.a}`)).toMatch(/\nstate: ready\n/);

    // pause shows in stats-tube.
    expect(await ok(srv.port, 'pause', t, '30')).toBe(`paused tube ${t} for 30 s\n`);
    s = await statsTube(c, t);
    expect(s.pause).toBe('30');
    expect(Number(s['pause-time-left'])).toBeGreaterThan(25);
    const paused = await ok(srv.port, 'tubes');
    expect(paused.split('\n').find((l) => l.startsWith(t + ' '))!.trim().split(/\s+/).at(-1)).toMatch(/^(29|30)$/);
    expect(await ok(srv.port, 'pause', t, '0')).toBe(`resumed tube ${t}\n`);

    // clear buried and delayed only: 1 + 2 deleted, ready and reserved stay.
    expect(await ok(srv.port, 'clear', t, '--state', 'buried,delayed')).toBe(`deleted 3 jobs from tube ${t}\n`);
    s = await statsTube(c, t);
    expect([s['current-jobs-ready'], s['current-jobs-delayed'], s['current-jobs-buried'], s['current-jobs-reserved']]).toEqual(['4', '0', '0', '1']);
    // clear everything else: the 4 ready go, the reserved job stays and its holder still has it.
    expect(await ok(srv.port, 'clear', t)).toBe(`deleted 4 jobs from tube ${t}\n`);
    s = await statsTube(c, t);
    expect([s['current-jobs-ready'], s['current-jobs-reserved']]).toEqual(['0', '1']);
    expect(await c.request(`stats-job ${ids.r}`)).toMatch(/\nstate: reserved\n/);
    expect(await ok(srv.port, 'clear', t)).toBe(`deleted 0 jobs from tube ${t}\n`);
    expect(await c.request(`delete ${ids.r}`)).toBe('DELETED\r\n');
  });

  it('peek shows a binary body as hex or base64, truncated', async () => {
    const t = `bin-${target.name}`;
    await c.request(`use ${t}`);
    const body = Buffer.alloc(300);
    for (let i = 0; i < body.length; i++) body[i] = i & 0xff;
    const id = await put(c, body);
    const hex = await ok(srv.port, 'peek', t, 'ready', '--bytes', '16');
    expect(hex).toContain(`id: ${id}\n`);
    expect(hex).toContain('body: 300 bytes, hex, first 16 shown\n000102030405060708090a0b0c0d0e0f ...\n');
    const b64 = await ok(srv.port, 'peek', t, 'ready', '--base64');
    expect(b64).toContain(`body: 300 bytes, base64, first 200 shown\n${body.subarray(0, 200).toString('base64')} ...\n`);
    // Control characters never reach the terminal raw.
    await c.request(`delete ${id}`);
    await put(c, 'ab\x1b[31mred');
    const esc = await ok(srv.port, 'peek', t, 'ready');
    expect(esc).not.toContain('\x1b');
    expect(esc).toContain('body: 10 bytes, hex\n61621b5b33316d726564\n');
  });

  it('kick with no count kicks every buried job', async () => {
    const t = `kick-${target.name}`;
    await c.request(`use ${t}`);
    await c.request(`watch ${t}`);
    await c.request('ignore default');
    for (let i = 0; i < 5; i++) {
      const id = await put(c, `k${i}`);
      expect(await c.request('reserve-with-timeout 0')).toMatch(new RegExp(`^RESERVED ${id} `));
      expect(await c.request(`bury ${id} 1`)).toBe('BURIED\r\n');
    }
    await c.request('watch default');
    await c.request(`ignore ${t}`);
    expect(await ok(srv.port, 'kick', t)).toBe(`kicked 5 jobs in tube ${t}\n`);
    const s = await statsTube(c, t);
    expect([s['current-jobs-ready'], s['current-jobs-buried']]).toEqual(['5', '0']);
  });

  it('clears a large tube over the protocol', async () => {
    const t = `big-${target.name}`;
    const N = 5_000;
    await c.request(`use ${t}`);
    // Pipelined puts.
    let batch = '';
    for (let i = 0; i < N; i++) batch += `put 0 0 60 1\r\nx\r\n`;
    await c.send(batch);
    for (let i = 0; i < N; i++) expect(await c.readLine()).toMatch(/^INSERTED /);
    const t0 = performance.now();
    expect(await ok(srv.port, 'clear', t)).toBe(`deleted ${N} jobs from tube ${t}\n`);
    const ms = performance.now() - t0;
    console.log(`${target.name}: cleared ${N} jobs over the protocol in ${ms.toFixed(0)} ms (with the CLI's start)`);
    const s = await statsTube(c, t);
    expect(s['current-jobs-ready']).toBe('0');
  });

  it('errors: no such tube, nothing to peek, bad arguments, connection refused', async () => {
    let r = await admin(srv.port, 'peek', 'no-such-tube', 'ready');
    expect([r.code, r.stderr]).toEqual([1, 'shardstalk-admin: no such tube: no-such-tube\n']);
    r = await admin(srv.port, 'pause', 'no-such-tube', '5');
    expect([r.code, r.stderr]).toEqual([1, 'shardstalk-admin: no such tube: no-such-tube\n']);
    r = await admin(srv.port, 'kick', 'no-such-tube');
    expect(r.code).toBe(1);
    r = await admin(srv.port, 'peek', 'default', 'buried');
    expect([r.code, r.stderr]).toEqual([1, 'shardstalk-admin: no buried job in tube default\n']);
    r = await admin(srv.port, 'peek', 'default', 'reserved');
    expect(r.code).toBe(2);
    r = await admin(srv.port, 'clear', 'default', '--state', 'reserved');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('reserved jobs are never cleared');
    r = await admin(srv.port, 'pause', 'default', 'soon');
    expect(r.code).toBe(2);
    r = await admin(srv.port, 'kick', 'bad tube!');
    expect(r.code).toBe(2);
    r = await admin(srv.port, 'frobnicate');
    expect([r.code, r.stderr]).toEqual([2, 'shardstalk-admin: unknown command: frobnicate\n']);
    r = await admin(srv.port, '--nope');
    expect(r.code).toBe(2);
    r = await admin(srv.port);
    expect(r.code).toBe(2);
    r = await admin(srv.port, '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: shardstalk-admin/);
    r = await admin(srv.port, 'stats', '--timeout', 'never');
    expect(r.code).toBe(2);
    const closed = await freePort();
    r = await admin(closed, 'stats');
    expect([r.code, r.stderr]).toEqual([3, `shardstalk-admin: cannot connect to 127.0.0.1:${closed}: connection refused (is the server running?)\n`]);
  });

  if (target.name === 'beanstalkd') {
    it('gives up on a server that accepts and never answers (--timeout), exit 3', async () => {
      const mute = net.createServer(() => {});
      await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
      const port = (mute.address() as net.AddressInfo).port;
      try {
        const r = await admin(port, 'stats', '--timeout', '0.3');
        expect([r.code, r.stderr]).toEqual([3, `shardstalk-admin: 127.0.0.1:${port} sent no reply within 0.3 s\n`]);
      } finally {
        mute.close();
      }
    });
  }

  if (target.name === 'shardstalk') {
    it('clear --http uses the JSON API and leaves reserved jobs', async () => {
      const t = 'http-clear';
      const ids = await fill(t);
      const url = `http://127.0.0.1:${srv.httpPort}`;
      expect(await ok(srv.port, 'clear', t, '--state', 'ready,buried', '--http', url, '--token', TOKEN)).toBe(`deleted 5 jobs from tube ${t}\n`);
      const s = await statsTube(c, t);
      expect([s['current-jobs-ready'], s['current-jobs-delayed'], s['current-jobs-buried'], s['current-jobs-reserved']]).toEqual(['0', '2', '0', '1']);
      let r = await admin(srv.port, 'clear', t, '--http', url, '--token', 'wrong');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/401/);
      r = await admin(srv.port, 'clear', t, '--http', url);
      expect(r.code).toBe(2);
      r = await admin(srv.port, 'clear', 'no-such-tube', '--http', url, '--token', TOKEN);
      expect([r.code, r.stderr]).toEqual([1, 'shardstalk-admin: no such tube: no-such-tube\n']);
      expect(await c.request(`delete ${ids.r}`)).toBe('DELETED\r\n');
    });
  }
});
