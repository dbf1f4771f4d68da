// Young-generation collections run on the thread that collects (bin/shardstalk.js sets V8's
// --no-parallel-scavenge): V8's helper threads, woken for each 0.2 ms scavenge, would take the core
// of a thread serving connections (bench/RESULTS.md, session 21). Seen from outside, as a user runs
// the server: V8's own trace (--trace-gc, one line per collection; --trace-parallel-scavenge, one
// line per scavenging task before it) shows one task in every scavenge under a load of puts, and
// several once the command line asks for parallel scavenges itself, which it may. (The bin's
// 16 MB young generation is on the command line of the process it replaces itself with: tested
// with that command line's other flags, in reclaim.test.ts.)

import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { waitUntil } from '../support/harness.ts';
import { freePort } from '../support/servers.ts';

const BIN = fileURLToPath(new URL('../../bin/shardstalk.js', import.meta.url));
const BODY = 'x'.repeat(100);
const BATCH = 2_000;

let child: ChildProcess | null = null;
afterEach(() => {
  child?.kill('SIGKILL');
  child = null;
});

/** Tasks per scavenge: the task lines between one collection's trace line and the one before. */
function tasksPerScavenge(trace: string): number[] {
  const counts: number[] = [];
  let tasks = 0;
  for (const line of trace.split('\n')) {
    if (/\bscavenge\[0x[0-9a-f]+\]: time=/.test(line)) tasks++;
    else if (/ms: Scavenge\b/.test(line)) {
      counts.push(tasks);
      tasks = 0;
    }
  }
  return counts;
}

/**
 * Starts the bin with V8's traces and these Node flags, then puts batches until `scavenges`
 * collections are traced. The young generation is held at 1 MB (a size on the command line wins
 * over the bin's 16 MB): collections come after a few thousand puts, however little each allocates.
 */
async function scavengesUnderLoad(nodeFlags: string[], scavenges: number): Promise<number[]> {
  const port = await freePort();
  const young = ['--min-semi-space-size=1', '--max-semi-space-size=1'];
  const c = spawn(process.execPath, ['--trace-gc', '--trace-parallel-scavenge', ...young, ...nodeFlags, BIN, '-l', '127.0.0.1', '-p', String(port), '--no-workq', '--no-http'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child = c;
  let trace = '';
  let log = '';
  c.stdout!.on('data', (d: Buffer) => (trace += d.toString('latin1')));
  c.stderr!.on('data', (d: Buffer) => (log += d.toString('latin1')));
  await waitUntil('listening', () => log.includes('listening (beanstalk)'), () => log.slice(-2000), 20_000);
  const before = tasksPerScavenge(trace).length;
  const socket = net.connect(port, '127.0.0.1');
  let inserted = 0;
  socket.on('data', (d: Buffer) => (inserted += d.toString('latin1').split('INSERTED').length - 1));
  const batch = `put 0 0 60 ${BODY.length}\r\n${BODY}\r\n`.repeat(BATCH);
  for (let sent = 0; tasksPerScavenge(trace).length - before < scavenges; ) {
    expect(sent, 'puts sent before enough collections were traced').toBeLessThan(400_000);
    socket.write(batch);
    sent += BATCH;
    await waitUntil('the batch answered', () => inserted === sent, () => `${inserted} of ${sent}`, 10_000);
  }
  socket.destroy();
  return tasksPerScavenge(trace).slice(before);
}

it('scavenges with one task under load', async () => {
  const counts = await scavengesUnderLoad([], 5);
  expect(counts.length).toBeGreaterThanOrEqual(5);
  expect(counts.every((n) => n === 1), `tasks per scavenge: ${counts.join(' ')}`).toBe(true);
}, 60_000);

it('leaves parallel scavenges to a command line that asks for them', async () => {
  const counts = await scavengesUnderLoad(['--parallel-scavenge'], 5);
  expect(counts.some((n) => n > 1), `tasks per scavenge: ${counts.join(' ')}`).toBe(true);
}, 60_000);

