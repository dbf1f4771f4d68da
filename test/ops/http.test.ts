// The HTTP port (#14): /healthz, /readyz (503 while the write-ahead log is replayed and in drain
// mode), 404 / 405, and how --http binds: an address given must be free, the default may be taken.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, type TestContext } from 'vitest';
import { connect } from '../support/client.ts';
import { putCmd, waitUntil } from '../support/harness.ts';
import { freePort } from '../support/servers.ts';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { parseExposition, request, scrape } from './support.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const LOCAL = { host: '127.0.0.1', port: 0 };

async function start(ctx: TestContext, opts: ServerOptions = {}): Promise<RunningServer> {
  const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http: LOCAL, ...opts });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

/** A port held open by this process for the test. */
async function takenPort(ctx: TestContext): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  ctx.onTestFinished(() => new Promise<void>((resolve) => s.close(() => resolve())));
  return (s.address() as net.AddressInfo).port;
}

function tmpDir(ctx: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardstalk-http-'));
  ctx.onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('the HTTP port', () => {
  it('answers /healthz and /readyz, 404 for other paths, 405 for other methods', async (ctx) => {
    const srv = await start(ctx);
    const port = srv.httpPort!;
    expect(await request(port, '/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await request(port, '/readyz')).toMatchObject({ status: 200, body: 'ready\n' });
    expect(await request(port, '/readyz?verbose=1')).toMatchObject({ status: 200 });
    const metrics = await request(port, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await request(port, '/index.html')).toMatchObject({ status: 404 });
    expect(await request(port, '/metricsx')).toMatchObject({ status: 404 });
    expect(await request(port, '/nope', 'POST')).toMatchObject({ status: 404 });
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const a = await request(port, '/metrics', method);
      expect(a.status, method).toBe(405);
      expect(a.headers.allow).toBe('GET, HEAD');
    }
    const head = await request(port, '/healthz', 'HEAD');
    expect(head).toMatchObject({ status: 200, body: '' });
  });

  it('is off unless asked for (startServer), and closes with the server', async () => {
    const plain = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent' });
    expect(plain.httpPort).toBeNull();
    await plain.close();
    const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http: LOCAL });
    const port = srv.httpPort!;
    expect((await request(port, '/healthz')).status).toBe(200);
    await srv.close();
    await expect(request(port, '/healthz')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('/readyz says 503 in drain mode; /healthz stays 200', async (ctx) => {
    const srv = await start(ctx);
    srv.drain();
    expect(await request(srv.httpPort!, '/readyz')).toMatchObject({ status: 503, body: 'draining\n' });
    expect(await request(srv.httpPort!, '/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
    expect(parseExposition(await scrape(srv.httpPort!)).value('beanstalkd_draining')).toBe(1);
  });

  it('/readyz says 503 until the write-ahead log is replayed and the ports listen, then 200', async (ctx) => {
    const dir = tmpDir(ctx);
    // A log with jobs in it.
    const first = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', binlogDir: dir });
    const c = await connect(first.port);
    await c.send(putCmd('a') + putCmd('b') + putCmd('c'));
    for (let i = 1; i <= 3; i++) expect(await c.readReply()).toBe(`INSERTED ${i}\r\n`);
    c.destroy();
    await first.close();

    // The second start holds at the hook: HTTP listens, nothing is recovered yet.
    const seen: Record<string, { status: number; body: string }> = {};
    const srv = await start(ctx, {
      binlogDir: dir,
      shards: 2,
      async onHttpListening(port) {
        for (const p of ['/readyz', '/healthz', '/metrics']) {
          const a = await request(port, p);
          seen[p] = { status: a.status, body: a.body };
        }
      },
    });
    expect(seen['/readyz']).toEqual({ status: 503, body: 'starting\n' });
    expect(seen['/healthz']).toEqual({ status: 200, body: 'ok\n' });
    expect(seen['/metrics']).toEqual({ status: 503, body: 'starting\n' });
    // startServer has returned: recovered and listening.
    expect(await request(srv.httpPort!, '/readyz')).toMatchObject({ status: 200, body: 'ready\n' });
    const m = parseExposition(await scrape(srv.httpPort!));
    expect(m.value('beanstalkd_current_jobs_ready_count')).toBe(3);
    expect(m.value('beanstalkd_binlog_current_index')).toBeGreaterThan(0);
  });

  it('an address given that cannot be bound fails the start, and frees what it took', async (ctx) => {
    const taken = await takenPort(ctx);
    const dir = tmpDir(ctx);
    await expect(
      startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', binlogDir: dir, http: { host: '127.0.0.1', port: taken } }),
    ).rejects.toThrow(/EADDRINUSE/);
    // The log directory was not locked on the way.
    const again = await start(ctx, { binlogDir: dir });
    expect(again.httpPort).not.toBeNull();
  });

  it('the default address, taken, only costs a warning', async (ctx) => {
    const taken = await takenPort(ctx);
    const srv = await start(ctx, { http: { host: '127.0.0.1', port: taken }, httpOptional: true });
    expect(srv.httpPort).toBeNull();
    const c = await connect(srv.port);
    expect(await c.request('list-tube-used')).toBe('USING default\r\n');
    c.destroy();
  });
});

describe('the command line', () => {
  it('--http binds there; --http-metrics-tubes caps; a taken --http address exits 1; bad flags exit 5', async (ctx) => {
    const port = await freePort();
    const httpPort = await freePort();
    const child = spawn(process.execPath, [MAIN, '-p', String(port), '--no-workq', '--http', `127.0.0.1:${httpPort}`, '--http-metrics-tubes', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d) => (log += d.toString()));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    ctx.onTestFinished(async () => {
      child.kill('SIGTERM');
      await exited;
    });
    await waitUntil('listening (http)', () => log.includes('listening (http'), () => log);
    expect(await request(httpPort, '/readyz')).toMatchObject({ status: 200 });
    const m = parseExposition(await scrape(httpPort));
    expect(m.value('shardstalk_metrics_tubes_omitted')).toBe(1);
    expect(m.all('beanstalkd_tube_current_jobs_ready_count')).toHaveLength(0);

    // Its HTTP port is taken now: given explicitly, the start fails.
    const clash = spawnSync(process.execPath, [MAIN, '-p', '0', '--no-workq', '--http', `127.0.0.1:${httpPort}`], { encoding: 'utf8', timeout: 20_000 });
    expect(clash.status).toBe(1);
    expect(clash.stderr).toContain('EADDRINUSE');

    for (const [args, msg] of [
      [['--http', 'nope'], '--http wants HOST:PORT'],
      [['--http', '127.0.0.1:99999'], '--http port must be between'],
      [['--no-http', '--http', '127.0.0.1:1'], 'contradict'],
      [['--http-metrics-tubes', 'x'], '--http-metrics-tubes wants a whole number'],
    ] as const) {
      const bad = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8' });
      expect(bad.status, args.join(' ')).toBe(5);
      expect(bad.stderr).toContain(msg);
    }
    const help = spawnSync(process.execPath, [MAIN, '-h'], { encoding: 'utf8' });
    expect(help.stdout).toContain('--http HOST:PORT');
    expect(help.stdout).toContain('11380');
  }, 30_000);
});
