// Warms the compile cache that bin/shardstalk.js keeps with the code (node_modules/.cache/shardstalk):
// starts the server once in each layout that loads a different set of modules (the main thread
// with a shard thread; connection threads), on ports the system picks, and stops it once it
// listens. npm runs it after an install (package.json's postinstall), so the first start of an
// installed copy, or of a fresh container from an image built with it, loads no type stripper
// (its idle server 56.5 MiB instead of 73, measured).
//
//   node tools/warm-compile-cache.ts
//
// It never fails an install: a start that does not come up within START_WAIT_MS is killed, and
// whatever went wrong leaves a cold cache (the first real start warms it instead).

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/shardstalk.js', import.meta.url));

/** How long one start may take to listen before it is killed. */
export const START_WAIT_MS = 30_000;

/** The layouts whose starts together load every module: a shard thread (workers/), connection threads (src/net/thread.ts). */
const LAYOUTS = [['--shards', '2'], ['--shards', '2', '--connection-threads']];

/** Starts the server in each layout and stops it once it listens; resolves when all have exited. */
export async function warmCompileCache(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  for (const flags of LAYOUTS) await startAndStop(flags, env);
}

function startAndStop(flags: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve) => {
    const args = [BIN, '-l', '127.0.0.1', '-p', '0', '--workq-listen', '127.0.0.1:0', '--http', '127.0.0.1:0', ...flags];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
    const timer = setTimeout(() => child.kill('SIGKILL'), START_WAIT_MS);
    let log = '';
    child.stderr.on('data', (d: Buffer) => {
      log += d.toString();
      // The last listener to come up; SIGTERM shuts down cleanly, and Node writes the cache at exit.
      if (log.includes('listening (http')) child.kill('SIGTERM');
    });
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    child.on('exit', done);
    child.on('error', done);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await warmCompileCache();
