import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../support/harness.ts';
import { connectionThreadsByDefault, connectionThreadsChosen } from '../../src/server.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const NODE = process.execPath;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function ask(port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(data));
    let got = '';
    c.on('data', (d) => {
      got += d.toString('latin1');
      // One reply: a line, or for `OK <n>` the line and its n-byte body and CRLF.
      const ok = /^OK (\d+)\r\n/.exec(got);
      if (ok ? got.length >= ok[0].length + Number(ok[1]) + 2 : got.endsWith('\r\n')) {
        c.destroy();
        resolve(got);
      }
    });
    c.on('error', reject);
  });
}

/**
 * Runs `src/main.ts` with `flags` (beanstalk only, on a free port) until `fn` is done, giving it
 * the port and the fields of the server's "listening (beanstalk)" log line.
 */
async function serving(flags: string[], fn: (port: number, listening: Record<string, unknown>) => Promise<void>): Promise<void> {
  const port = await freePort();
  const child = spawn(NODE, [MAIN, '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http', ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => (log += d.toString()));
  try {
    await waitUntil('listening', () => log.includes('listening (beanstalk)'), () => log);
    const line = log.split('\n').find((l) => l.includes('listening (beanstalk)')) as string;
    await fn(port, JSON.parse(line) as Record<string, unknown>);
  } finally {
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

describe('the shardstalk command', () => {
  it('prints usage and version, and refuses bad flags with exit code 5', () => {
    const help = spawnSync(NODE, [MAIN, '-h'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--shards N');
    const version = spawnSync(NODE, [MAIN, '--version'], { encoding: 'utf8' });
    expect(version.stdout).toMatch(/^shardstalk \d+\.\d+\.\d+\n$/);
    // The command's own entry (compile cache first, then the same main).
    const viaBin = spawnSync(NODE, [fileURLToPath(new URL('../../bin/shardstalk.js', import.meta.url)), '--version'], { encoding: 'utf8' });
    expect(viaBin.stdout).toBe(version.stdout);
    const refused: [string[], string][] = [
      [['-p', 'nope'], '-p wants a whole number'],
      [['--connection-threads', '--no-connection-threads'], '--connection-threads and --no-connection-threads contradict each other'],
      [['--busy-poll-us', '10001'], '--busy-poll-us must be between 0 and 10000'],
      [['--busy-poll-spin-us', '1001'], '--busy-poll-spin-us must be between 0 and 1000'],
      [['--busy-poll-long-us', '10001'], '--busy-poll-long-us must be between 0 and 10000'],
    ];
    for (const [flags, message] of refused) {
      const bad = spawnSync(NODE, [MAIN, ...flags], { encoding: 'utf8' });
      expect(bad.status, flags.join(' ')).toBe(5);
      expect(bad.stderr).toContain(message);
    }
  });

  it.each([[[]], [['--connection-threads']]])('%j: serves, enters drain mode on SIGUSR1 and exits cleanly on SIGTERM', async (flags: string[]) => {
    const port = await freePort();
    const child = spawn(NODE, [MAIN, '-l', '127.0.0.1', '-p', String(port), '--shards', '2', ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d) => (log += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`not listening: ${log}`)), 10_000);
      const check = (): void => {
        if (log.includes('listening')) {
          clearTimeout(t);
          resolve();
        } else setTimeout(check, 50);
      };
      check();
    });
    expect(await ask(port, 'put 0 0 10 2\r\nhi\r\n')).toBe('INSERTED 1\r\n');
    child.kill('SIGUSR1');
    // Wait for the server's own word that the signal took effect.
    await waitUntil('drain mode is on', async () => /\ndraining: true\n/.test(await ask(port, 'stats\r\n')));
    expect(await ask(port, 'put 0 0 10 2\r\nhi\r\n')).toBe('DRAINING\r\n');
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(log).toContain('shutting down');
  }, 20_000);

  it('serves connections on threads by default with 2 shards or more and a core for each besides the main thread\'s', () => {
    expect(connectionThreadsByDefault(2, 1)).toBe(false); // this machine's default: one shard
    expect(connectionThreadsByDefault(2, 2)).toBe(false); // two threads would share two cores with the main thread
    expect(connectionThreadsByDefault(3, 2)).toBe(true);
    expect(connectionThreadsByDefault(16, 15)).toBe(true); // the default shard count on 16 cores
    expect(connectionThreadsByDefault(16, 16)).toBe(false);
    expect(connectionThreadsByDefault(64, 1)).toBe(false); // one shard: one thread serves everything anyway
    // Flags win over the default; --all-shards-on-threads asks for the main-thread layout.
    expect(connectionThreadsChosen({}, 16, 15)).toBe(true);
    expect(connectionThreadsChosen({ off: true }, 16, 15)).toBe(false);
    expect(connectionThreadsChosen({ allShardsOnThreads: true }, 16, 15)).toBe(false);
    expect(connectionThreadsChosen({ on: true }, 2, 2)).toBe(true);
    expect(connectionThreadsChosen({ on: true, allShardsOnThreads: true }, 2, 2)).toBe(true);
  });

  it.each([
    [['--shards', '2'], connectionThreadsByDefault(os.availableParallelism(), 2) ? 2 : 0],
    [['--shards', '2', '--connection-threads'], 2],
    [['--shards', '2', '--no-connection-threads'], 0],
    [['--shards', '2', '--all-shards-on-threads'], 0],
  ])('%j: %i connection threads', async (flags, threads) => {
    await serving(flags, async (port, listening) => {
      expect(listening.connectionThreads).toBe(threads);
      expect(await ask(port, 'use t1\r\nput 0 0 10 2\r\nhi\r\n')).toMatch(/^USING t1\r\nINSERTED \d+\r\n$/);
    });
  }, 20_000);

  it.each([
    [['--shards', '2', '--no-connection-threads'], 1],
    [['--shards', '2', '--all-shards-on-threads'], 2],
    [['--shards', '1'], 0],
  ])('%j: the first shard runs on the connections\' thread unless told otherwise (%i shard threads)', async (flags, threads) => {
    await serving(flags, async (port, listening) => {
      expect(listening.shardThreads).toBe(threads);
      // Jobs on every shard are served either way.
      for (let i = 0; i < 4; i++) {
        expect(await ask(port, `use t${i}\r\nput 0 0 10 2\r\nhi\r\n`)).toMatch(/^USING t\d\r\n/);
      }
      expect(await ask(port, 'stats\r\n')).toMatch(/\ncurrent-jobs-ready: 4\n/);
    });
  }, 20_000);
});
