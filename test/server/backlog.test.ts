// A shard that falls behind pushes back on the clients: puts (and workq adds) are answered before
// their shard has them, so without a bound the main thread would queue them without limit. With
// a small ring and a small backlog limit, a flood of 4 KiB puts must be answered in full, every
// job must be there, and no shard's queue may have held more than the limit plus one request.

import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';

const RING = 16 * 1024;
const LIMIT = 256 * 1024;
const BODY = 4096;
const JOBS = 2000; // 8 MB of puts, sent in one go

const servers: RunningServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** Sends `data` and collects replies until `done(text)` says so. */
function exchange(port: number, data: Buffer, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`timed out with ${text.length} bytes of replies`));
    }, 20_000);
    sock.on('data', (d) => {
      text += d.toString('latin1');
      if (done(text)) {
        clearTimeout(timer);
        sock.end();
        resolve(text);
      }
    });
    sock.on('error', reject);
    sock.write(data);
  });
}

const count = (text: string, re: RegExp): number => text.match(re)?.length ?? 0;

async function server(backlogBytes: number, shards: number, workq = false, shardHere = true): Promise<RunningServer> {
  const s = await startServer({ port: 0, shards, shardHere, ringBytes: RING, backlogBytes, logLevel: 'silent', workq: workq ? { host: '127.0.0.1', port: 0 } : null });
  servers.push(s);
  return s;
}

function putFlood(): Buffer {
  const body = Buffer.alloc(BODY, 'j');
  const parts: Buffer[] = [];
  for (let i = 0; i < JOBS; i++) parts.push(Buffer.from(`put 0 0 60 ${BODY}\r\n`), body, Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

// The first shard runs on the connections' thread by default: it applies each batch in the turn
// it is made, so it cannot fall behind; shards on threads of their own can.
describe.each([
  [1, true],
  [1, false],
  [3, true],
])('backlog to the shards (%i shards, the first here: %s)', (shards, here) => {
  it('a flood of puts is answered in full, every job is there, and the queue stayed bounded', async () => {
    const s = await server(LIMIT, shards, false, here);
    const text = await exchange(s.port, putFlood(), (t) => count(t, /\r\n/g) >= JOBS);
    expect(count(text, /^INSERTED \d+\r\n/gm)).toBe(JOBS);
    const stats = await exchange(s.port, Buffer.from('stats-tube default\r\n'), (t) => t.endsWith('\r\n') && t.includes('current-jobs-ready'));
    expect(stats).toMatch(new RegExp(`current-jobs-ready: ${JOBS}\n`));
    expect(s.router.pool.backlogPeak).toBeGreaterThan(0);
    expect(s.router.pool.backlogPeak).toBeLessThanOrEqual(LIMIT + BODY + 256);
  });
});

describe('backlog to the shards: the test load does outrun a shard', () => {
  it('without the bound (a huge limit) the same flood queues far more than the limit (the shard on a thread of its own)', async () => {
    const s = await server(1 << 30, 1, false, false);
    await exchange(s.port, putFlood(), (t) => count(t, /\r\n/g) >= JOBS);
    expect(s.router.pool.backlogPeak).toBeGreaterThan(2 * LIMIT);
  });
});

describe('backlog to the shards: workq adds', () => {
  it('a flood of adds is answered in full and the queue stayed bounded', async () => {
    const s = await server(LIMIT, 2, true);
    const payload = Buffer.alloc(BODY, 'w');
    const parts: Buffer[] = [];
    for (let i = 0; i < JOBS; i++) parts.push(Buffer.from(`add ${randomUUID()} q${i % 5} 60000 60000 ${BODY}\r\n`), payload, Buffer.from('\r\n'));
    const text = await exchange(s.workqPort as number, Buffer.concat(parts), (t) => count(t, /\r\n/g) >= JOBS);
    expect(count(text, /^\+OK\r\n/gm)).toBe(JOBS);
    const lens = await exchange(s.workqPort as number, Buffer.from('inspect queues 0 10\r\n'), (t) => count(t, /ready-len/g) === 5);
    const ready = [...lens.matchAll(/ready-len (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(ready).toBe(JOBS);
    expect(s.router.pool.backlogPeak).toBeLessThanOrEqual(LIMIT + BODY + 256);
  });
});
