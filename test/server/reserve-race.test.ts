// Plain reserves racing over two tubes on different shards (test/server/reserve-race.ts): every
// reply RESERVED, no job reserved twice, none lost. The same run against Debian's beanstalkd
// proves the expectations. RACE_SECONDS=N runs longer (tools/reserve-race.ts for minutes).

import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { startReference } from '../support/servers.ts';
import { runReserveRace, tubesOnTwoShards, type RaceResult } from './reserve-race.ts';

const SECONDS = Number(process.env.RACE_SECONDS ?? 6);
const SEED = Number(process.env.SEED ?? 20261125);

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function check(r: RaceResult): void {
  expect(Object.fromEntries(r.wrongReplies), 'replies to a plain reserve other than RESERVED').toEqual({});
  expect(r.duplicates, 'jobs reserved twice').toEqual([]);
  expect(r.lost, 'jobs put and never reserved').toEqual([]);
  expect(r.badDeletes, 'deletes of reserved jobs not answered DELETED').toEqual([]);
  // The run raced what it means to race: both kinds of consumer got jobs.
  expect(r.reservedBySingle).toBeGreaterThan(100);
  expect(r.reservedByBoth).toBeGreaterThan(100);
}

describe('plain reserves racing over tubes on different shards', () => {
  it('beanstalkd (the reference)', async () => {
    const server = await startReference();
    closers.push(() => server.close());
    check(await runReserveRace({ port: server.port, tubes: tubesOnTwoShards(4), durationMs: SECONDS * 1000, seed: SEED }));
  }, 60_000 + SECONDS * 1000);

  it.each([
    [4, false],
    [3, false],
    [4, true],
  ])('shardstalk, %i shards (connections on a thread per shard: %s)', async (shards, connectionThreads) => {
    const server: RunningServer = await startServer({ port: 0, shards, logLevel: 'silent', connectionThreads });
    closers.push(() => server.close());
    const r = await runReserveRace({ port: server.port, tubes: tubesOnTwoShards(shards), durationMs: SECONDS * 1000, seed: SEED + shards });
    check(r);
  }, 60_000 + SECONDS * 1000);
});
