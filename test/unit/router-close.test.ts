// A connection thread's Router closing while its ring to another thread is full (that thread may
// already have stopped reading it, as happens when a server's threads close together): the
// replies' retry timer must stop with it, or the thread never exits and the server's close never
// ends. The ring is filled on purpose: shard 1's site is never started, so nothing reads it.

import { expect, it } from 'vitest';
import { Router } from '../../src/route/router.ts';
import { makeMesh, NO_REPLY } from '../../src/route/shards.ts';
import { OP_TUBE_NAME } from '../../src/shared/records.ts';

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

it('a Router closing with a full ring to another thread stops retrying its replies', async () => {
  const before = timers();
  const router = new Router({ shards: 2, here: 0, jobSizeMax: 1024, mesh: { mesh: makeMesh(2, 4096), site: 0 }, busyPollUs: 0 });
  const name = Buffer.from('t');
  for (let i = 0; i < 1000 && !router.pool.unpublished(); i++) {
    const w = router.pool.request(1, 0, NO_REPLY, 0);
    w.header(OP_TUBE_NAME, name.length, 0, 1, 0, 0, 0);
    w.bytes(name, 0, name.length);
    router.flushRequests();
  }
  expect(router.pool.unpublished()).toBe(true);
  let flushed = 0;
  router.markDirty({ flush: () => flushed++ });
  router.flushOutputs();
  expect(flushed).toBe(0); // the reply waits for the requests before it
  expect(timers()).toBeGreaterThan(before); // ...on the retry timer
  // Each retry runs flushOutputs again: count them, to see them happen and then stop.
  let retries = 0;
  const flushOutputs = router.flushOutputs.bind(router);
  router.flushOutputs = () => {
    retries++;
    flushOutputs();
  };
  await new Promise((r) => setTimeout(r, 10));
  expect(retries).toBeGreaterThan(0);
  await router.close();
  retries = 0;
  await new Promise((r) => setTimeout(r, 10)); // several of the retry's 1 ms periods
  expect(retries).toBe(0);
  // No timer of the router's is left. (At most as many as before: one of the test runner's may
  // have ended meanwhile on a loaded machine, so the count alone cannot say whose is left.)
  expect(timers()).toBeLessThanOrEqual(before);
  expect(flushed).toBe(0);
});
