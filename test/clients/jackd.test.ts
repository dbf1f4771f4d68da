import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { jackdTour } from '../../tools/example-jackd.ts';

// An existing client library, unchanged, against a 4-shard server: the four tubes of the tour
// hash onto different shards, so reserve must pick the globally most urgent job among them.
describe('the npm client jackd against shardstalk --shards 4', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ port: 0, shards: 4, logLevel: 'silent' });
  });
  afterAll(async () => {
    await server.close();
  });

  it('puts, reserves across shards, releases, buries, kicks and deletes', async () => {
    const shardsUsed = new Set(['emails', 'images', 'pdf', 'sms'].map((t) => shardOf(t, 4)));
    expect(shardsUsed.size).toBe(4);
    const seen = await jackdTour(server.port, () => {});
    expect(seen).toEqual([
      'reserved 4 job for sms', // pri 1: the most urgent of all watched tubes
      'released 4',
      'reserved 3 job for pdf', // pri 34; job 4 now has pri 500
      'buried 3',
      'kicked 1',
      'reserved 3 job for pdf',
      'deleted 3',
      'reserved 2 job for images',
      'deleted 2',
      'reserved 1 job for emails',
      'deleted 1',
      'reserved 4 job for sms',
      'deleted 4',
    ]);
  });
});
