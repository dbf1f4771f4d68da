// The figures of `stats` and `stats-tube`, gathered for /metrics the way a connection's `stats`
// and `stats-tube` gather them: one OP_TOTALS to every shard, one OP_STATS_TUBE to each tube's
// shard, through the same request queues (so a scrape sees every request made before it), and
// the server's counters (every thread's row, ServerCounters) and the tube table's counts read
// when the last shard has answered. Nothing is counted per command for this: a scrape only asks.

import type { BeanstalkServer } from '../proto/beanstalk/server.ts';
import { addShardTotals, serverStatsEntries, tubeStatsEntries, type StatsEntry } from '../proto/beanstalk/stats.ts';
import type { ReplyTarget } from '../route/shards.ts';
import type { Tube } from '../route/tubes.ts';
import { addedUp } from '../shared/histogram.ts';
import { OP_STATS_TUBE, OP_TOTALS, payloadF64, R_NUMS, replyKind, TOTALS_FIELDS } from '../shared/records.ts';

/** One shard as the routing layer sees it when the scrape starts, and its OP_TOTALS reply. */
export interface ShardFigures {
  readonly index: number;
  /** On a worker thread of its own (false: on a thread that serves connections, the main thread's or a connection thread). */
  readonly ownThread: boolean;
  /** OP_TOTALS' numbers (TOTALS_* in src/shared/records.ts). */
  readonly totals: Float64Array;
  /** Requests sent to the shard whose replies have not come back yet. */
  readonly requestsPending: number;
  /** Request bytes queued on this thread, not yet handed to the shard (its ring was full, or the turn has not ended). */
  readonly backlogBytes: number;
  /** Bytes in its rings (main → shard, shard → main), or null for the shard on this thread (no rings). */
  readonly ringToShardBytes: number | null;
  readonly ringFromShardBytes: number | null;
  readonly ringCapacityBytes: number | null;
  /** Copies, taken as the scrape starts: log fsync durations, and round trips to a shard on a thread of its own (null for the shard here). */
  readonly fsyncs: Float64Array;
  readonly hops: Float64Array | null;
}

export interface TubeFigures {
  readonly name: string;
  /** stats-tube's keys and values, as its YAML reply would show them now. */
  readonly entries: StatsEntry[];
}

export interface Figures {
  /** stats' keys and values, as its YAML reply would show them now. */
  readonly stats: StatsEntry[];
  readonly shards: ShardFigures[];
  /** The first `tubesMax` tubes in list-tubes order. */
  readonly tubes: TubeFigures[];
  /** Tubes left out by the cap. */
  readonly tubesOmitted: number;
}

/** Request kinds of our own: only this gatherer sees them again (ReplyTarget echoes them). */
const KIND_TOTALS = 1;
const KIND_TUBE = 2;

/** A ring's occupancy, if the link has rings (a shard on a thread of its own). */
interface RingLike {
  readonly capacity: number;
  readable(): number;
}
function ringOf(link: object, field: 'toShard' | 'fromShard'): RingLike | null {
  // ShardLink does not name its rings (only ThreadShard has them); read them where they are,
  // and leave them out if that ever changes (test/ops/metrics.test.ts checks they are there).
  const r = (link as Record<string, unknown>)[field] as RingLike | undefined;
  return r !== undefined && typeof r.readable === 'function' && typeof r.capacity === 'number' ? r : null;
}

/** Asks every shard, and each of the first `tubesMax` tubes' shard; resolves when all have answered. */
export function gather(server: BeanstalkServer, tubesMax: number): Promise<Figures> {
  const router = server.router;
  const pool = router.pool;
  const here = router.config.here === undefined ? 0 : router.config.here;
  // With connection threads each shard runs on a thread that serves connections, and every
  // thread counts its round trips to the others' shards in the mesh's shared histograms.
  const mesh = router.config.mesh?.mesh;
  return new Promise<Figures>((resolve) => {
    const shards: ShardFigures[] = pool.links.map((link, index) => {
      const to = ringOf(link, 'toShard');
      const from = ringOf(link, 'fromShard');
      const hops =
        mesh !== undefined
          ? addedUp(mesh.hops.flatMap((row) => (row[index] === null ? [] : [row[index] as Float64Array])))
          : link.hops === null ? null : link.hops.slice();
      return {
        index,
        ownThread: mesh === undefined && index !== here,
        totals: new Float64Array(TOTALS_FIELDS),
        requestsPending: link.pending.length,
        backlogBytes: link.backlog(),
        ringToShardBytes: to === null ? null : to.readable(),
        ringFromShardBytes: from === null ? null : from.readable(),
        ringCapacityBytes: to === null ? null : to.capacity,
        fsyncs: link.fsyncs.slice(),
        hops,
      };
    });
    const all = router.tubes.list();
    const asked: Tube[] = all.slice(0, Math.max(0, tubesMax));
    const tubeEntries: (StatsEntry[] | null)[] = asked.map(() => null);
    const sums = new Float64Array(TOTALS_FIELDS);
    let left = shards.length + asked.length;

    const finish = (): void => {
      const tubes: TubeFigures[] = [];
      for (let i = 0; i < asked.length; i++) {
        const e = tubeEntries[i];
        if (e !== null) tubes.push({ name: asked[i].name, entries: e });
      }
      resolve({ stats: serverStatsEntries(server, sums), shards, tubes, tubesOmitted: all.length - asked.length });
    };

    const target: ReplyTarget = {
      onShardReply(shard, kind, seq, buf, at) {
        if (kind === KIND_TOTALS) {
          const t = shards[shard].totals;
          for (let i = 0; i < TOTALS_FIELDS; i++) t[i] = payloadF64(buf, at, i);
          addShardTotals(sums, buf, at);
        } else if (replyKind(buf, at) === R_NUMS) {
          // Read now, as stats-tube reads the main thread's counts when the shard answers. A tube
          // freed meanwhile still answers (its shard forgets it after this request).
          tubeEntries[seq] = tubeStatsEntries(asked[seq], buf, at);
        }
        if (--left === 0) finish();
      },
    };

    for (let s = 0; s < shards.length; s++) {
      pool.request(s, KIND_TOTALS, target, 0).header(OP_TOTALS, 0, 0, 0, 0, 0, 0);
    }
    for (let i = 0; i < asked.length; i++) {
      const t = asked[i];
      pool.request(t.shard, KIND_TUBE, target, i).header(OP_STATS_TUBE, 0, 0, t.id, 0, 0, 0);
    }
  });
}
