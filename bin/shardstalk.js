#!/usr/bin/env node
// Runs the TypeScript entry directly (Node >= 24 strips the types; see README "Why no build step").
// The compile cache (Node's own, in the system's temporary directory unless NODE_COMPILE_CACHE
// names another) keeps the stripped, compiled modules between starts: after the first start the
// type stripper is not loaded at all (about 30 MiB less resident memory, and a faster start).
import module from 'node:module';
import v8 from 'node:v8';

module.enableCompileCache?.();
// Shard threads start their own module loaders: they find the cache through the environment.
const dir = module.getCompileCacheDir?.();
if (dir !== undefined && process.env.NODE_COMPILE_CACHE === undefined) process.env.NODE_COMPILE_CACHE = dir;

// The start resolves and evaluates a hundred modules once. That makes Node's own loader functions
// hot enough for V8's optimizing compilers (29 compilations measured), which brings 8 MiB of the
// compilers' code pages into an idle server that never runs that code again. So the start runs on
// the interpreter and the baseline compiler; the optimizing tiers are back once the start is over:
// every listener up and the start's garbage collected (main.ts's `started`, a second later), for
// the code that work makes hot. Turned on earlier, they would compile what the start's tail runs
// while a loaded machine stretches it (seen in CI: one compilation before the start's reclaim).
v8.setFlagsFromString('--no-maglev');
v8.setFlagsFromString('--no-turbofan');
try {
  const main = await import('../src/main.ts');
  await main.started;
} finally {
  v8.setFlagsFromString('--maglev');
  v8.setFlagsFromString('--turbofan');
}
