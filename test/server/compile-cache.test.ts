// The compile cache lives with the code (bin/shardstalk.js: node_modules/.cache/shardstalk) and an
// install warms it (tools/warm-compile-cache.ts, npm's postinstall): a start after that takes every
// TypeScript module from the cache, on the main thread and on the shard and connection threads, and
// never loads the type stripper (an idle server 56.5 MiB instead of 73; bench/memory.ts measures it).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { warmCompileCache } from '../../tools/warm-compile-cache.ts';
import { waitUntil } from '../support/harness.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/shardstalk.js', import.meta.url));

/** The environment of a start; no NODE_COMPILE_CACHE unless `cacheDir` (then the bin uses that). */
function envWith(cacheDir: string | null, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_COMPILE_CACHE;
  if (cacheDir !== null) env.NODE_COMPILE_CACHE = cacheDir;
  return env;
}

/** Starts the bin with the compile cache's debug output until it listens; returns what it printed. */
async function startLog(flags: string[], cacheDir: string | null): Promise<string> {
  const child = spawn(process.execPath, [BIN, '-l', '127.0.0.1', '-p', '0', '--no-workq', '--no-http', ...flags], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: envWith(cacheDir, { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }),
  });
  let log = '';
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  try {
    await waitUntil('listening', () => log.includes('listening (beanstalk)'), () => log.slice(-2000));
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return log;
}

it('a plain start keeps its compile cache with the code, in node_modules/.cache/shardstalk', async () => {
  const log = await startLog([], null);
  expect(log).toContain(`resolved path ${ROOT}node_modules/.cache/shardstalk/`);
}, 30_000);

it.each([[['--shards', '2']], [['--shards', '2', '--connection-threads']]])(
  '%j: after the warm-up every module comes from the cache, on every thread',
  async (flags) => {
    // A cache of its own, empty at first: what the warm-up wrote is all there is.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardstalk-cc-'));
    try {
      await warmCompileCache(envWith(dir));
      const log = await startLog(flags, dir);
      const hits = log.match(/retrieving transpile cache for StrippedTypeScript \S+\.\.\.success/g) ?? [];
      const misses = log.match(/no transpile cache for StrippedTypeScript \S+/g) ?? [];
      expect(misses).toEqual([]);
      // The main thread's modules and a thread's (workers/shard.ts or src/net/thread.ts and theirs).
      expect(hits.length).toBeGreaterThan(60);
      const thread = flags.includes('--connection-threads') ? 'src/net/thread.ts' : 'workers/shard.ts';
      expect(hits.some((h) => h.includes(thread))).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
  60_000,
);
