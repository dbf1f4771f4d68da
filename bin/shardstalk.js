#!/usr/bin/env node
// Runs the TypeScript entry directly (Node >= 24 strips the types; see README "Why no build step").
// The compile cache (Node's own) keeps the stripped, compiled modules between starts: with it warm
// the type stripper is not loaded at all (measured: an idle server 56.5 MiB instead of 73, and a
// faster start). It lives with the code, in node_modules/.cache/shardstalk, which an install warms
// (tools/warm-compile-cache.ts, npm's postinstall) and which an image built with the code keeps:
// in the system's temporary directory, every fresh container would start cold. Where that
// directory cannot be written, Node's default; NODE_COMPILE_CACHE, when set, names another.
import module from 'node:module';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';

// glibc's allocator, set before anything allocates: it reads these at the process's start, so the
// process replaces itself once (execve: same pid, same descriptors) with them in its environment.
// By default each thread that mallocs (V8's compiler and GC helpers, shard threads) gets an arena
// of its own, and a burst's freed memory stays resident in them: 25 MiB of arenas after 50,000
// tubes were made and emptied, measured. One arena, blocks of 32 KiB and more mapped on their own
// (returned when freed, rather than left as holes in the arena), and both thresholds fixed (glibc
// otherwise raises them after the first large free) give most of it back: RSS after that burst
// 85-88 MiB -> 77-85, after a 200,000-job drain 82 -> 71-76 MiB; throughput within noise
// (bench/RESULTS.md, session 10). An environment that sets any of them (or GLIBC_TUNABLES) is left as it is.
const MALLOC_ENV = { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '32768', MALLOC_TRIM_THRESHOLD_: '131072' };
// The replacement starts with V8's optimizing compilers off (see the start, below): set here,
// they are off before Node's loader resolves this file, whose path functions a long checkout path
// makes hot enough to compile before this file's first line could turn them off (seen in CI).
const COMPILERS_OFF = ['--no-maglev', '--no-turbofan'];
// A young generation of 16 MB semi-spaces from the start. V8 sizes it itself (1-4 MB here) and
// grows it only when much survives, which little does in this server; a polling thread allocates
// 50-130 MB/s (Node's immediates), so a young collection came every 10-30 ms, and the puts that
// arrived during one were among the slowest percent (at 10,000 jobs/s, with the long polling
// window, p99 169 -> 93 us; bench/RESULTS.md, session 21). A V8 flag, so every thread's isolate
// gets it: its pages are touched only while a thread allocates fast (idle RSS unchanged; under
// load ~22 MiB more per busy thread, given back after it). A command line that names a
// semi-space size itself keeps its own. Given only to the replacement below (so on Linux with
// glibc): V8 reads it when an isolate's heap is made, so set later it would miss the main thread's.
const YOUNG = process.execArgv.some((a) => /semi[-_]space/.test(a)) ? [] : ['--min-semi-space-size=16'];
if (
  process.platform === 'linux' && typeof process.execve === 'function' && process.env.GLIBC_TUNABLES === undefined &&
  Object.keys(MALLOC_ENV).every((k) => process.env[k] === undefined) &&
  process.report?.getReport().header.glibcVersionRuntime !== undefined
) {
  process.execve(process.execPath, [process.execPath, ...COMPILERS_OFF, ...YOUNG, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, ...MALLOC_ENV });
}

const COMPILE_CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/shardstalk/', import.meta.url));
if (process.env.NODE_COMPILE_CACHE !== undefined || module.enableCompileCache?.(COMPILE_CACHE_DIR)?.status === module.constants.compileCacheStatus.FAILED) {
  module.enableCompileCache?.();
}
// Shard threads start their own module loaders: they find the cache through the environment.
const dir = module.getCompileCacheDir?.();
if (dir !== undefined && process.env.NODE_COMPILE_CACHE === undefined) process.env.NODE_COMPILE_CACHE = dir;

// Young-generation collections run on the thread that collects, not spread over V8's helper
// threads. The server's threads are meant to have the cores (one per core, or fewer), so a helper
// that wakes for a 0.2 ms scavenge takes a core from a thread serving connections: on this 2-core VM
// (server on one core, a polling load at 10,000 jobs/s), 1,400-1,800 helper wake-ups in 7 s
// preempted the serving thread 1,300-1,900 times; serial, 350-530 times (beanstalkd: 50-400), and
// the p98 of put -> RESERVED fell from 181 to 143 us (20 rounds, bench/RESULTS.md, session 21). The
// flag is read at every scavenge, so it holds though the heap exists already, for every thread's
// isolate. A command line that names the flag itself (`node --parallel-scavenge bin/...`) wins.
if (!process.execArgv.some((a) => /^--(no-)?parallel[-_]scavenge\b/.test(a))) v8.setFlagsFromString('--no-parallel-scavenge');

// The start resolves and evaluates a hundred modules once. That makes Node's own loader functions
// hot enough for V8's optimizing compilers (29 compilations measured), which brings 8 MiB of the
// compilers' code pages into an idle server that never runs that code again. So the start runs on
// the interpreter and the baseline compiler; the optimizing tiers are back once the start is over:
// every listener up and the start's garbage collected (main.ts's `started`, a second later), for
// the code that work makes hot. Turned on earlier, they would compile what the start's tail runs
// while a loaded machine stretches it (seen in CI: one compilation before the start's reclaim).
// Replaced above, the process started with them off already; these lines are for one that was not.
v8.setFlagsFromString('--no-maglev');
v8.setFlagsFromString('--no-turbofan');
try {
  const main = await import('../src/main.ts');
  await main.started;
} finally {
  v8.setFlagsFromString('--maglev');
  v8.setFlagsFromString('--turbofan');
}
