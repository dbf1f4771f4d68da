// The reserve race of test/server/reserve-race.test.ts for as long as you like, against a
// shardstalk started here or any server already listening:
//
//   npx node tools/reserve-race.ts --seconds 180 --shards 4
//   npx node tools/reserve-race.ts --seconds 60 --port 11300      (a running server, e.g. beanstalkd)
//
// Producers put into two tubes on different shards; consumers watching both and consumers
// watching one take them with plain `reserve` in pipelines of 1-3. Prints what it counted and
// exits 1 on any reply to a reserve other than RESERVED, any job reserved twice or never.
//
// Options:
//   --seconds N     how long the producers put (default 60)
//   --shards N      shards of the shardstalk started here (default 4); ignored with --port
//   --port P        race a server already listening on 127.0.0.1:P instead
//   --seed S        (default: from the clock, printed)
//   --consumers K   consumers per group (both tubes / first / second; default 2)
//   --connection-threads  serve the connections on a thread per shard (ignored with --port)

import { parseArgs } from 'node:util';
import { startServer } from '../src/server.ts';
import { runReserveRace, tubesOnTwoShards } from '../test/server/reserve-race.ts';

const { values: o } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    shards: { type: 'string', default: '4' },
    port: { type: 'string' },
    seed: { type: 'string' },
    consumers: { type: 'string', default: '2' },
    'connection-threads': { type: 'boolean', default: false },
  },
});
const shards = Number(o.shards);
const seed = o.seed !== undefined ? Number(o.seed) : Date.now() % 1_000_000;
const server = o.port === undefined ? await startServer({ port: 0, shards, logLevel: 'warn', connectionThreads: o['connection-threads'] }) : null;
const port = server !== null ? server.port : Number(o.port);
const tubes = tubesOnTwoShards(server !== null ? shards : 4);
console.log(`reserve race: ${server !== null ? `shardstalk, ${shards} shards${o['connection-threads'] ? ', connection threads' : ''}` : `port ${port}`}, tubes ${tubes.join(' ')}, ${o.seconds} s, seed ${seed}`);
const r = await runReserveRace({ port, tubes, durationMs: Number(o.seconds) * 1000, seed, consumersPerGroup: Number(o.consumers) });
if (server !== null) await server.close();
console.log(`put ${r.inserted}, reserved ${r.reserved} (one-tube consumers ${r.reservedBySingle}, two-tube ${r.reservedByBoth})`);
console.log(`other replies to reserve: ${JSON.stringify(Object.fromEntries(r.wrongReplies))}`);
console.log(`reserved twice: ${r.duplicates.length}, never reserved: ${r.lost.length}, bad deletes: ${r.badDeletes.length}`);
const ok = r.wrongReplies.size === 0 && r.duplicates.length === 0 && r.lost.length === 0 && r.badDeletes.length === 0;
console.log(ok ? 'OK' : 'FAILED');
process.exit(ok ? 0 : 1);
