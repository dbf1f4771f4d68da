// Tubes made and dropped from every connection thread at once, with names of every length, while
// other connections list them: the shared tube table (src/route/tubetable.ts) allocates, frees,
// reuses and compacts the names in its name heap from real threads at once (one compaction is
// made on purpose first, under the listers). Every name listed, and every stats-tube answered,
// must be one that was made (no torn bytes, no bytes of a name that took a freed block), and at
// the end only default is left.

import { afterEach, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { parseYamlList, waitUntil } from '../support/harness.ts';
import { mulberry32 as random } from '../support/prng.ts';

const NAME_BYTES = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/;.$_()-';
const POOL = 48;
const WRITERS = 8;
const ROUNDS = 120;

/** Valid beanstalkd tube names of 1..200 bytes (not starting with '-'), each length class mixed. */
function pool(rand: () => number): string[] {
  const out = new Set<string>();
  while (out.size < POOL) {
    const len = [1 + Math.floor(rand() * 12), 13 + Math.floor(rand() * 50), 100 + Math.floor(rand() * 101)][out.size % 3];
    let name = '';
    for (let i = 0; i < len; i++) name += NAME_BYTES[Math.floor(rand() * (i === 0 ? NAME_BYTES.length - 1 : NAME_BYTES.length))];
    if (name !== 'default') out.add(name);
  }
  return [...out];
}

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

it('tubes made and dropped on every connection thread at once keep their names', async () => {
  const s = await startServer({ port: 0, shards: 4, connectionThreads: true, logLevel: 'silent', workq: null });
  servers.push(s);
  const rand = random(0x7b5);
  const names = pool(rand);
  const known = new Set([...names, 'default']);
  const seen = new Set<string>();

  let writing = true;
  const writer = async (k: number): Promise<void> => {
    const c = await connect(s.port);
    clients.push(c);
    const r = random(1000 + k);
    for (let i = 0; i < ROUNDS; i++) {
      const name = names[Math.floor(r() * names.length)];
      // use it (made if new), a job in it, gone again: the tube goes once no one uses it.
      await c.send(`use ${name}\r\nput 0 0 60 1\r\nx\r\n`);
      expect(await c.readReply()).toBe(`USING ${name}\r\n`);
      const inserted = await c.readReply();
      const id = /^INSERTED (\d+)\r\n$/.exec(inserted)?.[1];
      expect(id, inserted).toBeDefined();
      expect(await c.request(`delete ${id}`)).toBe('DELETED\r\n');
      if (r() < 0.3) expect(await c.request('use default')).toBe('USING default\r\n');
    }
    expect(await c.request('use default')).toBe('USING default\r\n');
  };
  const lister = async (k: number): Promise<void> => {
    const c = await connect(s.port);
    clients.push(c);
    const r = random(2000 + k);
    while (writing) {
      for (const name of parseYamlList(await c.request('list-tubes'))) {
        expect(known.has(name), `listed a tube never made: ${JSON.stringify(name)}`).toBe(true);
        seen.add(name);
      }
      const name = names[Math.floor(r() * names.length)];
      const reply = await c.request(`stats-tube ${name}`);
      if (reply !== 'NOT_FOUND\r\n') expect(reply).toContain(`\nname: ${name}\n`);
    }
  };

  const listers = [lister(0), lister(1)];

  // First, with only the listers reading, a compaction made on purpose: one connection watches 70
  // tubes of 200-byte names, ignores three in four (not the last, so the heap's end stays), then
  // watches tubes of 100-byte names, which fit none of the holes, until the heap is full and half
  // of it holes: their names are then moved under the listers. Then it checks what it watches.
  const heap = s.router.tubes.table;
  const a = await connect(s.port);
  clients.push(a);
  const name = (prefix: string, len: number): string => {
    let n = prefix;
    while (n.length < len) n += NAME_BYTES[Math.floor(rand() * (NAME_BYTES.length - 1))];
    return n;
  };
  const watched = new Set(['default']);
  const watch = async (n: string): Promise<void> => {
    known.add(n);
    watched.add(n);
    expect(await a.request(`watch ${n}`)).toBe(`WATCHING ${watched.size}\r\n`);
  };
  const long = Array.from({ length: 70 }, (_, i) => name(`L${i}-`, 200));
  for (const n of long) await watch(n);
  for (let i = 0; i < long.length - 1; i++) {
    if (i % 4 === 3) continue;
    watched.delete(long[i]);
    expect(await a.request(`ignore ${long[i]}`)).toBe(`WATCHING ${watched.size}\r\n`);
  }
  const compactions = heap.nameHeap.compactions;
  for (let j = 0; j < 400 && heap.nameHeap.compactions === compactions; j++) await watch(name(`M${j}-`, 100));
  expect(heap.nameHeap.compactions, 'a compaction of the names').toBeGreaterThan(compactions);
  expect(parseYamlList(await a.request('list-tubes-watched')).sort()).toEqual([...watched].sort());
  for (const n of watched) expect(await a.request(`stats-tube ${n}`)).toContain(`\nname: ${n}\n`);
  for (const n of watched) if (n !== 'default') expect(await a.request(`ignore ${n}`)).toMatch(/^WATCHING \d+\r\n$/);

  // Then the churn on every thread, the listers still reading.
  await Promise.all(Array.from({ length: WRITERS }, (_, k) => writer(k)));
  writing = false;
  await Promise.all(listers);

  expect(seen.size).toBeGreaterThan(POOL / 2); // the listers did see the churn
  const c = await connect(s.port);
  clients.push(c);
  await waitUntil('only default is left', async () => parseYamlList(await c.request('list-tubes')).join() === 'default');
}, 60_000);
