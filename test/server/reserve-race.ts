// A race of plain `reserve`s over two tubes, as a beanstalk user's workers would run them:
// producers put into both tubes, some consumers watch both (with several shards: a reserve that
// asks two shards), others watch one (with a count: a reserve sent as certain), all with
// pipelines of 1–3 and plain `reserve` (no timeout). beanstalkd answers such a reserve only with
// RESERVED (DEADLINE_SOON needs a held job near its TTR; the TTR here is long).
//
// What must hold, on any server: every reply to a reserve is RESERVED, no job is reserved twice,
// every job put is reserved, every delete of a reserved job is DELETED.
//
// Used by test/server/reserve-race.test.ts (seconds, against beanstalkd and shardstalk) and by
// tools/reserve-race.ts (minutes).

import { shardOf } from '../../src/route/hash.ts';
import { connect, type Client } from '../support/client.ts';
import { mulberry32 } from '../support/prng.ts';

/** Two tube names that live on different shards of `shards`. */
export function tubesOnTwoShards(shards: number): [string, string] {
  const a = 'race-a';
  for (let i = 0; ; i++) {
    const b = `race-b${i}`;
    if (shards === 1 || shardOf(a, shards) !== shardOf(b, shards)) return [a, b];
  }
}

export interface RaceOptions {
  port: number;
  /** Two tube names (pick them on different shards to race the cross-shard reserve). */
  tubes: [string, string];
  /** How long the producers put, in ms; the consumers then take what is left. */
  durationMs: number;
  seed: number;
  producers?: number;
  /** Consumers per group: watching both tubes, only the first, only the second. */
  consumersPerGroup?: number;
  /** Jobs put and not yet reserved above which a producer pauses (keeps queues short, races many). */
  backlogMax?: number;
  /** How long the consumers may take to reserve what is left once the producers stop (ms). */
  drainMs?: number;
}

export interface RaceResult {
  inserted: number;
  reserved: number;
  /** Replies to `reserve` other than RESERVED, with a count each. */
  wrongReplies: Map<string, number>;
  /** Job ids reserved more than once. */
  duplicates: number[];
  /** Job ids inserted and never reserved. */
  lost: number[];
  /** Replies to `delete <id>` of a reserved job other than DELETED. */
  badDeletes: string[];
  /** Reserves answered by one-tube consumers and by two-tube consumers. */
  reservedBySingle: number;
  reservedByBoth: number;
}

export async function runReserveRace(o: RaceOptions): Promise<RaceResult> {
  const producers = o.producers ?? 2;
  const perGroup = o.consumersPerGroup ?? 2;
  const backlogMax = o.backlogMax ?? 64;
  const drainMs = o.drainMs ?? 15_000;
  const [ta, tb] = o.tubes;
  const inserted = new Set<number>();
  const reservedOnce = new Set<number>();
  const duplicates: number[] = [];
  const wrongReplies = new Map<string, number>();
  const badDeletes: string[] = [];
  let reservedBySingle = 0;
  let reservedByBoth = 0;
  let stopProducing = false;
  let finished = false;
  const clients: Client[] = [];
  const open = async (): Promise<Client> => {
    const c = await connect(o.port);
    clients.push(c);
    return c;
  };

  const producer = async (k: number): Promise<void> => {
    const rand = mulberry32(o.seed * 31 + k);
    const c = await open();
    let used = '';
    while (!stopProducing) {
      if (inserted.size - reservedOnce.size > backlogMax) {
        // Pacing, not synchronisation: let the consumers catch up.
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      const n = 1 + Math.floor(rand() * 3);
      let cmds = '';
      let replies = 0;
      for (let i = 0; i < n; i++) {
        const tube = rand() < 0.5 ? ta : tb;
        if (tube !== used) {
          cmds += `use ${tube}\r\n`;
          used = tube;
          replies++;
        }
        cmds += `put ${Math.floor(rand() * 4)} 0 600 3\r\njob\r\n`;
        replies++;
      }
      await c.send(cmds);
      for (let i = 0; i < replies; i++) {
        const r = await c.readReply(10_000);
        const m = /^INSERTED (\d+)\r\n$/.exec(r);
        if (m) inserted.add(Number(m[1]));
        else if (!r.startsWith('USING ')) throw new Error(`producer ${k}: unexpected reply ${JSON.stringify(r)}`);
      }
    }
  };

  const consumer = async (k: number, watch: string[]): Promise<void> => {
    const rand = mulberry32(o.seed * 37 + 1000 + k);
    const c = await open();
    for (const t of watch) if ((await c.request(`watch ${t}`)).startsWith('WATCHING') === false) throw new Error('watch');
    if ((await c.request('ignore default')) !== `WATCHING ${watch.length}\r\n`) throw new Error('ignore');
    while (!finished) {
      const n = 1 + Math.floor(rand() * 3);
      await c.send('reserve\r\n'.repeat(n));
      const got: number[] = [];
      for (let i = 0; i < n; i++) {
        // A plain reserve waits as long as it takes; the run ends by closing the connection.
        const r = await c.readReply(24 * 3600_000);
        const m = /^RESERVED (\d+) 3\r\njob\r\n$/.exec(r);
        if (!m) {
          wrongReplies.set(r, (wrongReplies.get(r) ?? 0) + 1);
          continue;
        }
        const id = Number(m[1]);
        if (reservedOnce.has(id)) duplicates.push(id);
        reservedOnce.add(id);
        got.push(id);
        if (watch.length === 1) reservedBySingle++;
        else reservedByBoth++;
      }
      if (got.length === 0) continue;
      await c.send(got.map((id) => `delete ${id}\r\n`).join(''));
      for (const id of got) {
        const r = await c.readReply(10_000);
        if (r !== 'DELETED\r\n') badDeletes.push(`delete ${id}: ${JSON.stringify(r)}`);
      }
    }
  };

  const work: Promise<void>[] = [];
  for (let k = 0; k < producers; k++) work.push(producer(k));
  for (let k = 0; k < perGroup; k++) {
    work.push(consumer(3 * k, [ta, tb]), consumer(3 * k + 1, [ta]), consumer(3 * k + 2, [tb]));
  }
  // A consumer's promise rejects once its connection is destroyed at the end; a producer's or a
  // consumer's failure before that is the run's failure.
  let failure: Error | null = null;
  const settled = work.map((p) =>
    p.catch((e: Error) => {
      if (!finished && failure === null) failure = e;
    }),
  );

  await new Promise((r) => setTimeout(r, o.durationMs));
  stopProducing = true;
  const until = Date.now() + drainMs;
  // Wait for the producers' last replies, then for the consumers to reserve every job put.
  await Promise.all(settled.slice(0, producers));
  while (reservedOnce.size < inserted.size && Date.now() < until && failure === null) {
    await new Promise((r) => setTimeout(r, 10));
  }
  finished = true;
  for (const c of clients) c.destroy();
  await Promise.all(settled);
  if (failure !== null) throw failure;

  const lost: number[] = [];
  for (const id of inserted) if (!reservedOnce.has(id)) lost.push(id);
  return {
    inserted: inserted.size,
    reserved: reservedOnce.size,
    wrongReplies,
    duplicates,
    lost,
    badDeletes,
    reservedBySingle,
    reservedByBoth,
  };
}
