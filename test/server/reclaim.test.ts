// Memory given back after a burst (src/shared/reclaim.ts), as a user runs the server: the
// command, default flags. A burst of connections, each making a tube with a job, all closed and
// the jobs deleted; the server then goes quiet, and within a few seconds its RSS is back within
// #15's bound of its idle size (32 MiB), with the reclaim in its debug log. Without the reclaim
// V8 keeps what the burst grew (measured: +90 MiB for 20,000 connections) for good.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.ts';
import { waitUntil } from '../support/harness.ts';
import { freePort, onGlibc } from '../support/servers.ts';

const BIN = fileURLToPath(new URL('../../bin/shardstalk.js', import.meta.url));
const MIB = 1024 * 1024;

function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

/** One connection: sends `data`, resolves with what came back once `lines` lines did. */
function exchange(port: number, data: string, lines: number): Promise<{ socket: net.Socket; got: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    let got = '';
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (got.split('\r\n').length > lines) resolve({ socket, got });
    });
    socket.on('error', reject);
  });
}

function count(text: string, what: string): number {
  return text.split(what).length - 1;
}

let child: ChildProcess | null = null;
afterEach(() => {
  child?.kill('SIGKILL');
  child = null;
});

describe('memory after a burst', () => {
  it('comes back within 32 MiB of idle once the server is quiet', async () => {
    const port = await freePort();
    const c = spawn(process.execPath, [BIN, '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http', '-V'], { stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    let log = '';
    c.stderr!.on('data', (d) => (log += d.toString()));
    await waitUntil('listening', () => log.includes('listening'), () => log, 10_000);
    await new Promise((r) => setTimeout(r, 1500));
    const idle = rss(c.pid!);
    const reclaimsBefore = count(log, 'memory given back'); // the start's own reclaim (below) may be among them

    // The burst: waves of 500 connections at once, each with a tube and a job of its own.
    const ids: string[] = [];
    for (let wave = 0; wave < 16; wave++) {
      const open = await Promise.all(
        Array.from({ length: 500 }, (_, i) => exchange(port, `use burst-${wave}-${i}\r\nput 0 0 60 1\r\nx\r\n`, 2)),
      );
      for (const { socket, got } of open) {
        ids.push(/INSERTED (\d+)/.exec(got)![1]);
        socket.destroy();
      }
    }
    const peak = rss(c.pid!);
    const { socket } = await exchange(port, ids.map((id) => `delete ${id}\r\n`).join(''), ids.length);
    socket.destroy();

    await waitUntil('memory given back', () => count(log, 'memory given back') > reclaimsBefore, () => log.slice(-2000), 15_000, 50);
    await waitUntil('RSS within 32 MiB of idle', () => rss(c.pid!) <= idle + 32 * MIB,
      () => `idle ${(idle / MIB).toFixed(0)} MiB, peak ${(peak / MIB).toFixed(0)} MiB, now ${(rss(c.pid!) / MIB).toFixed(0)} MiB`, 10_000, 50);
    expect(peak).toBeGreaterThan(idle + 32 * MIB); // the burst did grow it: else this proves nothing
  }, 60_000);
});

// glibc's allocator (bin/shardstalk.js): the command replaces itself once, same pid, with one
// arena and fixed thresholds in its environment, unless the environment already says how.
describe("glibc's allocator", () => {
  const environ = (pid: number): string[] => readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').filter((e) => e.startsWith('MALLOC_'));
  async function started(env: NodeJS.ProcessEnv, nodeFlags: string[] = []): Promise<ChildProcess> {
    const port = await freePort();
    const c = spawn(process.execPath, [...nodeFlags, BIN, '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http'], { stdio: ['ignore', 'ignore', 'pipe'], env });
    child = c;
    let log = '';
    c.stderr!.on('data', (d) => (log += d.toString()));
    await waitUntil('listening', () => log.includes('listening'), () => log, 10_000);
    return c;
  }
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MALLOC_') && k !== 'GLIBC_TUNABLES'));

  it.runIf(onGlibc())('runs the server with one arena, a 32 KiB mmap threshold and a fixed trim threshold', async () => {
    const c = await started(clean);
    expect(environ(c.pid!).sort()).toEqual(['MALLOC_ARENA_MAX=1', 'MALLOC_MMAP_THRESHOLD_=32768', 'MALLOC_TRIM_THRESHOLD_=131072']);
  });

  it('leaves an environment that sets one of them as it is', async () => {
    const c = await started({ ...clean, MALLOC_ARENA_MAX: '4' });
    expect(environ(c.pid!)).toEqual(['MALLOC_ARENA_MAX=4']);
  });

  // The replacement's command line turns V8's optimizing compilers off before Node loads anything
  // (the start, below): the bin's own first line comes too late when a long checkout path makes
  // Node's path functions hot (seen in CI).
  it.runIf(onGlibc())('starts the replacement with the optimizing compilers off', async () => {
    const c = await started(clean);
    const argv = readFileSync(`/proc/${c.pid}/cmdline`, 'latin1').split('\0');
    expect(argv.slice(1, 3)).toEqual(['--no-maglev', '--no-turbofan']);
  });

  // And with a young generation of 16 MB semi-spaces (bin/shardstalk.js, bench/RESULTS.md session
  // 21), unless the command line names a semi-space size, which then wins.
  it.runIf(onGlibc())('starts the replacement with a 16 MB young generation, unless the command line names a semi-space size', async () => {
    const semiSpace = (c: ChildProcess): string[] => readFileSync(`/proc/${c.pid}/cmdline`, 'latin1').split('\0').filter((a) => a.includes('semi-space'));
    expect(semiSpace(await started(clean))).toEqual(['--min-semi-space-size=16']);
    child!.kill('SIGKILL');
    expect(semiSpace(await started(clean, ['--min-semi-space-size=2']))).toEqual(['--min-semi-space-size=2']);
  });
});

// The start (bin/shardstalk.js, src/shared/reclaim.ts): a hundred modules are loaded with V8's
// optimizing compilers off, so their code pages stay out of an idle server, and the garbage of the
// start is collected at the first look. The compilers stay off until then (main.ts's `started`),
// so no compilation precedes that reclaim, even with work arriving as soon as the server listens
// (which compiles at once with the compilers on: 68 compilations for 500 commands, measured). Both
// must end: the compilers are back once the start is over, for the code work makes hot.
//
// The server runs as the bin's replacement does (its environment and command line, above), not
// through the replacing itself: the first process's own trace would be in the output too. And from
// a long path, which makes Node's loader compile before the bin runs unless the command line
// turned the compilers off (checked below, so that the path is long enough wherever this runs).
describe('the start', () => {
  const MALLOC = { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '32768', MALLOC_TRIM_THRESHOLD_: '131072' };
  let linkDir: string | null = null;
  afterEach(() => {
    if (linkDir !== null) rmSync(linkDir, { recursive: true, force: true });
    linkDir = null;
  });
  /** The bin through a symbolic link whose path is about 300 characters long. */
  function longPathBin(): string {
    linkDir = mkdtempSync(join(tmpdir(), 'shardstalk-start-'));
    const dir = join(linkDir, ...Array.from({ length: 6 }, (_, i) => `a-long-directory-name-like-a-ci-checkout-path-${i}`));
    mkdirSync(dir, { recursive: true });
    symlinkSync(BIN, join(dir, 'shardstalk.js'));
    return join(dir, 'shardstalk.js');
  }

  it('runs without the optimizing compilers, gives its garbage back, then optimizes what work makes hot', async () => {
    const bin = longPathBin();
    const env = { ...process.env, ...MALLOC };
    // The provocation: without the flags, this path compiles before the bin's first line.
    const bare = spawnSync(process.execPath, ['--trace-opt', bin, '--version'], { env, encoding: 'latin1' });
    expect(bare.stdout).toContain('compiling method');

    const port = await freePort();
    const c = spawn(process.execPath, ['--no-maglev', '--no-turbofan', '--trace-opt', bin, '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http', '-V'], { stdio: ['ignore', 'pipe', 'pipe'], env });
    child = c;
    let log = '';
    let trace = '';
    let traceAtStartOver: string | null = null; // the trace as it was when the start's reclaim was logged
    c.stderr!.on('data', (d) => {
      log += d.toString();
      if (traceAtStartOver === null && log.includes('memory given back')) traceAtStartOver = trace;
    });
    c.stdout!.on('data', (d) => (trace += d.toString()));
    await waitUntil('listening', () => log.includes('listening'), () => log, 10_000);
    // Work in the start's first second: 500 commands (a few tens of milliseconds on the interpreter).
    const early = await exchange(port, 'use early\r\n' + 'put 0 0 60 1\r\nx\r\nreserve-with-timeout 0\r\n'.repeat(250), 501);
    early.socket.destroy();
    await waitUntil('the start given back', () => traceAtStartOver !== null, () => log, 10_000, 50);
    expect(traceAtStartOver!.split('\n').filter((l) => l.includes('compiling method'))).toEqual([]); // names what did compile

    const { socket } = await exchange(port, 'use t\r\n', 1);
    const work = 'put 0 0 60 1\r\nx\r\nreserve-with-timeout 0\r\n';
    for (let i = 0; i < 40; i++) socket.write(work.repeat(500));
    await waitUntil('optimized once there is work', () => count(trace, 'compiling method') > 0, () => trace.slice(-2000), 15_000, 50);
    socket.destroy();
  }, 40_000);
});

// What counts as a burst (RECLAIM_BUSY_WORK): commands read and connections opened and closed.
// Thousands of connections that send nothing barely show on the event loop, yet leave garbage and
// heap growth.
describe('the work the reclaim counts', () => {
  it('counts the connections a thread opens and closes as well as the commands it reads', async () => {
    const s = await startServer({ port: 0, shards: 1, logLevel: 'silent', workq: null });
    try {
      const before = s.beanstalk.workDone();
      const socks = await Promise.all(Array.from({ length: 20 }, () => new Promise<net.Socket>((resolve, reject) => {
        const c = net.connect(s.port, '127.0.0.1', () => resolve(c));
        c.on('error', reject);
      })));
      await waitUntil('20 connections counted', () => s.beanstalk.connections === 20);
      expect(s.beanstalk.workDone() - before).toBe(20); // they sent nothing
      const { socket } = await exchange(s.port, 'list-tubes\r\n', 1);
      expect(s.beanstalk.workDone() - before).toBe(22); // one more connection, one command
      socket.destroy();
      for (const c of socks) c.destroy();
      await waitUntil('all closed', () => s.beanstalk.connections === 0);
      expect(s.beanstalk.workDone() - before).toBe(22 + 21); // and the 21 closes
    } finally {
      await s.close();
    }
  });
});
