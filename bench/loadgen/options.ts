// Load-run options, their defaults and checks, and how connections map to roles and tubes.

import { BODY_BYTES_MAX, BODY_BYTES_MIN } from './protocol.ts';
import { WORKQ_DEFAULT_PORT, WQ_PAYLOAD_BYTES_MAX, WQ_TTL_MS_MAX, WQ_TTR_MS_MAX } from './workq.ts';

export const MODES = ['put', 'reserve', 'cycle', 'mixed', 'mem'] as const;
export type LoadMode = (typeof MODES)[number];

export const PROTOCOLS = ['beanstalk', 'workq'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** What each protocol calls the generator's three commands (reports, error messages). */
export const COMMAND_WORDS: Record<Protocol, { put: string; reserve: string; delete: string }> = {
  beanstalk: { put: 'put', reserve: 'reserve', delete: 'delete' },
  workq: { put: 'add', reserve: 'lease', delete: 'complete' },
};

export interface LoadOptions {
  /** Wire protocol: beanstalk, or workq (put = add, reserve = lease, delete = complete). */
  protocol: Protocol;
  host: string;
  /** Default 11300, or 9922 for workq. */
  port: number;
  mode: LoadMode;
  /** Connections (-c). */
  connections: number;
  /** Commands in flight per connection (-P). */
  pipeline: number;
  /** Measured duration in seconds (-d); null when the run is sized by jobs. */
  durationS: number | null;
  /** Jobs to complete (-n); for `reserve` and `mem`, the jobs to pre-fill. */
  jobs: number | null;
  /** Job body size in bytes (-s). */
  bodyBytes: number;
  tubes: number;
  /** Tubes each consumer watches. */
  watch: number;
  /** Open-loop put rate in jobs/s over all producers; null: closed loop, as fast as replies come. */
  rate: number | null;
  /** Worker threads the connections are spread over. */
  threads: number;
  /** Seconds of load before measuring (-d runs only). */
  warmupS: number;
  /**
   * -d is a minimum: the window grows (up to WINDOW_GROWTH_MAX × -d) until it holds this many
   * "waves" of jobs, a wave being every job in flight (producers × pipeline). Why: closed-loop
   * pipelines fall into lockstep, the server answering the same 16,000 chains of a 1000 × 16 run
   * wave after wave, and a window of only a few waves quantizes the rate (one wave more or less is
   * 1/waves of it). 0 turns it off.
   */
  minWaves: number;
  pri: number;
  ttrS: number;
  /** workq: the jobs' TTL (after it the server drops a job, done or not). */
  ttlS: number;
  /** Timeout of the consumers' reserve-with-timeout in cycle and mixed modes. */
  reserveTimeoutS: number;
  /** After a put run, reserve and delete everything and verify it (always done for other modes). */
  drain: boolean;
  connectTimeoutMs: number;
  /** PID of the server, for its CPU time and RSS (found with `stats` when the server is local). */
  serverPid: number | null;
}

export const DEFAULT_OPTIONS: LoadOptions = {
  protocol: 'beanstalk',
  host: '127.0.0.1',
  port: 11300,
  mode: 'cycle',
  connections: 100,
  pipeline: 16,
  durationS: null,
  jobs: null,
  bodyBytes: 100,
  tubes: 1,
  watch: 1,
  rate: null,
  threads: 1, // why: on a 2-core machine the server needs the other core
  warmupS: 0.5,
  minWaves: 20, // a wave more or less moves the rate by at most 5 %
  pri: 1024,
  ttrS: 120, // why: long enough that no job is ever released by TTR during a run, which would read as a duplicate
  // why: a workq job must outlive the run and its final drain (an expired job reads as lost), yet
  // the server keeps every completed job and its result until its TTL, so not for hours.
  ttlS: 600,
  reserveTimeoutS: 1, // why: lets blocked consumers notice the end of a run within a second
  drain: false,
  connectTimeoutMs: 10_000,
  serverPid: null,
};

export const DEFAULT_DURATION_S = 5;
export const DEFAULT_RESERVE_JOBS = 200_000;
export const DEFAULT_MEM_JOBS = 1_000_000;
/** Per-connection pipeline bound: the in-flight ring and output buffer are sized from it. */
export const PIPELINE_MAX = 4096;
/** The measured window may grow to this multiple of -d to hold minWaves waves. */
export const WINDOW_GROWTH_MAX = 5;

export class UsageError extends Error {
  readonly code = 'ERR_BENCH_USAGE';
}

/** Fills derived defaults and rejects impossible combinations. */
export function resolveOptions(partial: Partial<LoadOptions>): LoadOptions {
  const o: LoadOptions = { ...DEFAULT_OPTIONS, ...partial };
  if (!PROTOCOLS.includes(o.protocol)) throw new UsageError(`protocol must be one of ${PROTOCOLS.join(', ')}`);
  const workq = o.protocol === 'workq';
  if (workq && partial.port === undefined) o.port = WORKQ_DEFAULT_PORT;
  const positiveInt = (name: string, v: number): void => {
    if (!Number.isInteger(v) || v < 1) throw new UsageError(`${name} must be a positive integer, got ${v}`);
  };
  positiveInt('connections', o.connections);
  positiveInt('pipeline', o.pipeline);
  positiveInt('tubes', o.tubes);
  positiveInt('watch', o.watch);
  positiveInt('threads', o.threads);
  positiveInt('port', o.port);
  if (o.pipeline > PIPELINE_MAX) throw new UsageError(`pipeline must be at most ${PIPELINE_MAX}`);
  if (!MODES.includes(o.mode)) throw new UsageError(`mode must be one of ${MODES.join(', ')}`);
  const bodyMax = workq ? WQ_PAYLOAD_BYTES_MAX : BODY_BYTES_MAX;
  if (o.bodyBytes < BODY_BYTES_MIN || o.bodyBytes > bodyMax) {
    throw new UsageError(`body size must be ${BODY_BYTES_MIN}..${bodyMax} bytes (the body carries a nonce and a sequence number)`);
  }
  if (workq) {
    // The server's limits, in ms; 0 is refused too.
    if (!(o.ttrS * 1000 >= 1 && o.ttrS * 1000 <= WQ_TTR_MS_MAX)) throw new UsageError(`ttr must be 0.001..${WQ_TTR_MS_MAX / 1000} s for workq`);
    if (!(o.ttlS * 1000 >= 1 && o.ttlS * 1000 <= WQ_TTL_MS_MAX)) throw new UsageError(`ttl must be 0.001..${WQ_TTL_MS_MAX / 1000} s`);
  }
  if (o.watch > o.tubes) o.watch = o.tubes;
  if (o.mode === 'mixed' && o.connections < 2) throw new UsageError('mixed mode needs at least 2 connections (half produce, half consume)');
  if (o.rate !== null && !(o.rate > 0)) throw new UsageError('rate must be positive');
  if (o.rate !== null && (o.mode === 'reserve' || o.mode === 'mem')) throw new UsageError(`--rate applies to puts; not available in ${o.mode} mode`);
  if (o.jobs !== null) positiveInt('jobs', o.jobs);
  if (o.durationS !== null && !(o.durationS > 0)) throw new UsageError('duration must be positive');
  if (o.mode === 'reserve' && o.jobs === null) o.jobs = DEFAULT_RESERVE_JOBS;
  if (o.mode === 'mem' && o.jobs === null) o.jobs = DEFAULT_MEM_JOBS;
  if (o.mode === 'mem') o.durationS = null;
  if (o.durationS === null && o.jobs === null) o.durationS = DEFAULT_DURATION_S;
  // Warm-up only makes sense when a duration is measured; a -n run measures all of its jobs.
  if (o.durationS === null || o.mode === 'reserve') o.warmupS = 0;
  if (!(o.warmupS >= 0)) throw new UsageError('warmup must be >= 0');
  if (!(o.minWaves >= 0)) throw new UsageError('min-waves must be >= 0');
  o.threads = Math.min(o.threads, o.connections);
  return o;
}

// Roles of a connection.
export const ROLE_PRODUCER = 1; // put only
export const ROLE_CONSUMER = 2; // reserve + delete, blocking with a timeout
export const ROLE_CYCLE = 3; //    put, then reserve, then delete, per pipeline slot
export const ROLE_DRAIN = 4; //    reserve-with-timeout 0 + delete until TIMED_OUT

export interface ConnectionPlan {
  role: number;
  /** Tube to `use`, or -1. */
  useTube: number;
  /** Tubes to `watch` (default is ignored), empty for producers. */
  watchTubes: number[];
}

/**
 * Role and tubes of connection `index` of `connections` for a load mode.
 *
 * Tubes are partitioned into groups of `watch` tubes; a consumer watches one whole group and a
 * cycling connection puts into its own group. Why partition rather than let watch sets overlap:
 * with overlapping sets a consumer can take the job another connection's reserve was waiting
 * for, and a connection whose reserve never returns stalls its pipeline; inside a closed group
 * every reserve is matched by an earlier put into the same group, so none waits for long.
 */
export function planConnection(mode: LoadMode | 'drain', index: number, o: LoadOptions): ConnectionPlan {
  const groupCount = Math.ceil(o.tubes / o.watch);
  const group = (g: number): number[] => {
    const first = g * o.watch;
    const tubes: number[] = [];
    for (let t = first; t < Math.min(first + o.watch, o.tubes); t++) tubes.push(t);
    return tubes;
  };
  switch (mode) {
    case 'put':
    case 'mem':
      return { role: ROLE_PRODUCER, useTube: index % o.tubes, watchTubes: [] };
    case 'cycle': {
      const tubes = group(index % groupCount);
      return { role: ROLE_CYCLE, useTube: tubes[Math.floor(index / groupCount) % tubes.length]!, watchTubes: tubes };
    }
    case 'mixed': {
      const producers = producerCount('mixed', o.connections);
      if (index < producers) return { role: ROLE_PRODUCER, useTube: index % o.tubes, watchTubes: [] };
      return { role: ROLE_CONSUMER, useTube: -1, watchTubes: group((index - producers) % groupCount) };
    }
    case 'reserve':
    case 'drain': {
      // Draining: every connection watches every tube, so TIMED_OUT means all of them are empty.
      return { role: ROLE_DRAIN, useTube: -1, watchTubes: allTubes(o.tubes) };
    }
  }
}

function allTubes(tubes: number): number[] {
  return Array.from({ length: tubes }, (_, i) => i);
}

export function producerCount(mode: LoadMode | 'drain', connections: number): number {
  switch (mode) {
    case 'put':
    case 'mem':
    case 'cycle':
      return connections;
    case 'mixed':
      return Math.ceil(connections / 2);
    default:
      return 0;
  }
}

/** Warnings about plans that will not measure what the user probably wants. */
export function planWarnings(o: LoadOptions): string[] {
  const warnings: string[] = [];
  const groupCount = Math.ceil(o.tubes / o.watch);
  if (o.mode === 'mixed') {
    const producers = producerCount('mixed', o.connections);
    const consumers = o.connections - producers;
    if (consumers < groupCount) warnings.push(`only ${consumers} consumers for ${groupCount} tube groups: jobs in unwatched tubes pile up until the final drain`);
    if (producers < o.tubes) warnings.push(`only ${producers} producers for ${o.tubes} tubes: some tubes stay empty`);
  }
  if ((o.mode === 'put' || o.mode === 'cycle') && o.connections < o.tubes) {
    warnings.push(`${o.connections} connections for ${o.tubes} tubes: only ${o.connections} tubes are used`);
  }
  return warnings;
}
