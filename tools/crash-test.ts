// The crash test of test/durability/crash.test.ts, as many times as you like:
//
//   npx node tools/crash-test.ts --runs 200 --seed 1
//
// Each run starts `node src/main.ts -b DIR` (a fresh DIR), lets pipelining clients put / reserve /
// delete / release / bury / kick-job, SIGKILLs it at a seeded random moment, restarts it on the
// same DIR with another shard count, checks every acknowledged change against what the server
// holds, and repeats (--kills times per run). Run i uses seed S + i; a failing seed reruns alone
// with --runs 1 --seed <it>. Exit status 1 if any run failed.
//
// Options:
//   --runs N            runs (default 20)
//   --seed S            first seed (default: from the clock, printed)
//   --kills K           kills per run, each on the same directory (default 2)
//   --shards LIST       shard counts to pick from per start, e.g. 1,3 (default 1,2,3,4)
//   --fsync MODE        0 (default), 50 (any -f MS), F
//   --clients C         connections (default 4)
//   --work-ms MIN,MAX   work before each kill (default 150,900)
//   --segment-bytes B   -s (default: the server's)
//   --keep              keep the log directory of failed runs (always printed)
//   --bail              stop at the first failure

import { parseArgs } from 'node:util';
import { crashRun } from '../test/durability/crash.ts';
import { makeDir, removeDir, rng } from '../test/durability/support.ts';

const { values: o } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    seed: { type: 'string' },
    kills: { type: 'string', default: '2' },
    shards: { type: 'string', default: '1,2,3,4' },
    fsync: { type: 'string', default: '0' },
    clients: { type: 'string', default: '4' },
    'work-ms': { type: 'string', default: '150,900' },
    'segment-bytes': { type: 'string' },
    keep: { type: 'boolean', default: false },
    bail: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

if (o.help) {
  process.stdout.write('usage: npx node tools/crash-test.ts [--runs N] [--seed S] [--kills K] [--shards 1,3] ' +
    '[--fsync 0|50|F] [--clients C] [--work-ms MIN,MAX] [--segment-bytes B] [--keep] [--bail]\n');
  process.exit(0);
}

const runs = Number(o.runs);
const firstSeed = o.seed !== undefined ? Number(o.seed) : Date.now() % 1_000_000;
const kills = Number(o.kills);
const shardChoices = o.shards.split(',').map(Number);
const fsync = o.fsync === 'F' ? ['-F'] : ['-f', o.fsync];
const workMs = o['work-ms'].split(',').map(Number) as [number, number];
if (!(runs > 0) || !Number.isFinite(firstSeed) || !(kills > 0) || shardChoices.some((n) => !(n >= 1)) || workMs.length !== 2) {
  process.stderr.write('crash-test: bad arguments (see --help)\n');
  process.exit(2);
}

process.stdout.write(`crash-test: ${runs} runs from seed ${firstSeed}, ${kills} kills each, fsync ${fsync.join(' ')}\n`);
let failed = 0;
const t0 = Date.now();
for (let i = 0; i < runs; i++) {
  const seed = firstSeed + i;
  const pick = rng(seed ^ 0x5eed);
  const shards = Array.from({ length: kills + 1 }, () => shardChoices[Math.floor(pick() * shardChoices.length)]);
  const dir = makeDir('crash-tool');
  const started = Date.now();
  const res = await crashRun({
    seed, shards, kills, fsync, dir, workMs,
    clients: Number(o.clients),
    segmentBytes: o['segment-bytes'] !== undefined ? Number(o['segment-bytes']) : undefined,
  });
  const ms = Date.now() - started;
  const acked = Object.values(res.acked).reduce((a, b) => a + b, 0);
  if (res.problems.length === 0) {
    process.stdout.write(`run ${i + 1}/${runs} seed ${seed} shards ${shards.join('→')}: ok (${acked} acknowledged, checked ${res.checked.join('/')} jobs, ${ms} ms)\n`);
    removeDir(dir);
    continue;
  }
  failed++;
  process.stdout.write(`run ${i + 1}/${runs} seed ${seed} shards ${shards.join('→')}: FAILED\n`);
  for (const p of res.problems) process.stdout.write(`  ${p}\n`);
  process.stdout.write(`  rerun: npx node tools/crash-test.ts --runs 1 --seed ${seed} --kills ${kills} --shards ${o.shards} --fsync ${o.fsync}\n`);
  if (o.keep) process.stdout.write(`  log directory kept: ${dir}\n`);
  else removeDir(dir);
  if (o.bail) break;
}
process.stdout.write(`crash-test: ${failed === 0 ? 'all passed' : `${failed} failed`} in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
process.exit(failed === 0 ? 0 : 1);
