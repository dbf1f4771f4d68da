#!/usr/bin/env node
// shardstalk-bench: load-test any beanstalk (or workq) server.
//
//   shardstalk-bench [put|reserve|cycle|mixed|mem] [--protocol beanstalk|workq] [options]
//
// Exit codes: 0 passed; 1 the run failed (lost or duplicated jobs, protocol or connection
// errors); 2 bad usage; 3 could not connect.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { COMMAND_WORDS, DEFAULT_OPTIONS, MODES, PROTOCOLS, UsageError, WINDOW_GROWTH_MAX, type LoadMode, type LoadOptions, type Protocol } from './loadgen/options.ts';
import { WORKQ_DEFAULT_PORT } from './loadgen/workq.ts';
import { runLoad, SetupFailure, type LoadResult } from './loadgen/run.ts';
import { barChart, lineChart } from './report/svg.ts';
import { formatReport, ProgressBar } from './report/text.ts';

export const USAGE = `Usage: shardstalk-bench [MODE] [options]

Load-tests a beanstalk server (or a workq server: --protocol workq) and reports throughput,
latency per command, generator CPU, and whether every acknowledged job was reserved and deleted
exactly once.

Modes:
  put       producers only (put)
  reserve   pre-fill -n jobs, then drain them (reserve-with-timeout 0 + delete); measures the drain
  cycle     each connection pipelines put → reserve → delete (default)
  mixed     half the connections put, half reserve + delete
  mem       put -n jobs (default 1,000,000) and report the server's RSS growth per job

  With --protocol workq the same modes run workq's commands: put is \`add <id> <name> <ttr-ms>
  <ttl-ms> <size>\`, reserve is \`lease <names...> <timeout-ms>\`, delete is \`complete <id> 0\`
  (empty result); tubes are job names. cycle pipelines add → lease → complete on each
  connection; reserve mode (drain) is lease + complete. Job ids are UUIDv4s derived from the run
  nonce and the job's sequence number, and every lease is checked against its payload.

Options:
      --protocol P         beanstalk (default) or workq
  -H, --host HOST          server address (default ${DEFAULT_OPTIONS.host})
  -p, --port PORT          server port (default ${DEFAULT_OPTIONS.port}; workq ${WORKQ_DEFAULT_PORT})
  -c, --connections N      connections (default ${DEFAULT_OPTIONS.connections})
  -P, --pipeline N         commands in flight per connection (default ${DEFAULT_OPTIONS.pipeline})
  -d, --duration S         measured seconds (default 5 unless -n is given)
  -n, --jobs N             jobs to complete (reserve/mem: jobs to pre-fill)
  -s, --size BYTES         job body size, >= 20 (default ${DEFAULT_OPTIONS.bodyBytes})
      --tubes N            tubes to spread jobs over (default 1)
      --watch N            tubes each consumer watches (default 1)
      --rate JOBS_PER_S    open-loop put rate over all producers; latency counts from the
                           intended send time (default: closed loop, as fast as possible)
      --threads N          generator worker threads (default 1; the server needs the other core)
      --warmup S           seconds of load before measuring, -d runs (default ${DEFAULT_OPTIONS.warmupS})
      --min-waves N        -d is a minimum: measure until N × (connections × pipeline) jobs are
                           done, at most ${WINDOW_GROWTH_MAX} × -d, so lockstep pipelines can't skew the
                           rate (default ${DEFAULT_OPTIONS.minWaves}; 0: exactly -d)
      --drain              after a put run, reserve + delete everything and verify it
      --pid PID            server PID for its CPU and RSS (found when local: via \`stats\`;
                           workq: the process listening on the port, from /proc)
      --pri N, --ttr S     put priority and TTR (default ${DEFAULT_OPTIONS.pri}, ${DEFAULT_OPTIONS.ttrS}; workq: TTR only)
      --ttl S              workq: the jobs' TTL; the server keeps completed jobs until then
                           (default ${DEFAULT_OPTIONS.ttlS})
      --reserve-timeout S  consumers' reserve-with-timeout / lease timeout (default ${DEFAULT_OPTIONS.reserveTimeoutS})
      --json               print the result as JSON on stdout
      --svg DIR            write throughput-over-time and latency charts into DIR
      --no-progress        no progress bar (it is shown only when stdout is a terminal)
  -h, --help               this text

Examples:
  shardstalk-bench put -c 100 -P 16 -d 10
  shardstalk-bench cycle -c 1000 -P 1 --tubes 64 --json > result.json
  shardstalk-bench mem -n 1000000 -p 11300
  shardstalk-bench cycle --protocol workq -p 9922 -c 100 -P 16 -d 10`;

interface CliArgs {
  options: Partial<LoadOptions>;
  json: boolean;
  svgDir: string | null;
  progress: boolean;
  help: boolean;
}

function num(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v.replace(/_/g, ''));
  if (!Number.isFinite(n)) throw new UsageError(`--${name} expects a number, got "${v}"`);
  return n;
}

/** Parses argv (without node and the script). */
export function parseCli(argv: string[]): CliArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        protocol: { type: 'string' },
        host: { type: 'string', short: 'H' },
        port: { type: 'string', short: 'p' },
        connections: { type: 'string', short: 'c' },
        pipeline: { type: 'string', short: 'P' },
        duration: { type: 'string', short: 'd' },
        jobs: { type: 'string', short: 'n' },
        size: { type: 'string', short: 's' },
        tubes: { type: 'string' },
        watch: { type: 'string' },
        rate: { type: 'string' },
        threads: { type: 'string' },
        warmup: { type: 'string' },
        'min-waves': { type: 'string' },
        drain: { type: 'boolean' },
        pid: { type: 'string' },
        pri: { type: 'string' },
        ttr: { type: 'string' },
        ttl: { type: 'string' },
        'reserve-timeout': { type: 'string' },
        mode: { type: 'string' },
        json: { type: 'boolean' },
        svg: { type: 'string' },
        'no-progress': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const v = parsed.values;
  if (parsed.positionals.length > 1) throw new UsageError(`one mode expected, got: ${parsed.positionals.join(' ')}`);
  const mode = (parsed.positionals[0] ?? v.mode) as LoadMode | undefined;
  if (mode !== undefined && !MODES.includes(mode)) throw new UsageError(`unknown mode "${mode}" (${MODES.join(', ')})`);
  const protocol = v.protocol as Protocol | undefined;
  if (protocol !== undefined && !PROTOCOLS.includes(protocol)) throw new UsageError(`unknown protocol "${protocol}" (${PROTOCOLS.join(', ')})`);
  const options: Partial<LoadOptions> = {};
  const set = <K extends keyof LoadOptions>(key: K, value: LoadOptions[K] | undefined): void => {
    if (value !== undefined) options[key] = value;
  };
  set('mode', mode);
  set('protocol', protocol);
  set('host', v.host);
  set('port', num('port', v.port));
  set('connections', num('connections', v.connections));
  set('pipeline', num('pipeline', v.pipeline));
  set('durationS', num('duration', v.duration));
  set('jobs', num('jobs', v.jobs));
  set('bodyBytes', num('size', v.size));
  set('tubes', num('tubes', v.tubes));
  set('watch', num('watch', v.watch));
  set('rate', num('rate', v.rate));
  set('threads', num('threads', v.threads));
  set('warmupS', num('warmup', v.warmup));
  set('minWaves', num('min-waves', v['min-waves']));
  set('drain', v.drain);
  set('serverPid', num('pid', v.pid));
  set('pri', num('pri', v.pri));
  set('ttrS', num('ttr', v.ttr));
  set('ttlS', num('ttl', v.ttl));
  set('reserveTimeoutS', num('reserve-timeout', v['reserve-timeout']));
  return { options, json: v.json === true, svgDir: v.svg ?? null, progress: v['no-progress'] !== true, help: v.help === true };
}

/** Throughput over time and latency per command, as two SVG files in `dir`. */
export function writeRunCharts(result: LoadResult, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const o = result.options;
  const config = `${result.mode} c=${o.connections} P=${o.pipeline} s=${o.bodyBytes}B tubes=${o.tubes} → ${result.target}`;
  const timelinePath = path.join(dir, 'timeline.svg');
  const warmup = o.warmupS;
  writeFileSync(
    timelinePath,
    lineChart({
      title: 'Throughput over time',
      subtitle: config,
      xLabel: 'seconds since start (shaded: measured window)',
      yLabel: 'per second',
      shade: result.mode === 'reserve' ? undefined : [warmup, warmup + result.elapsedS],
      series: [
        { name: 'jobs/s', points: result.timeline.map((s) => [s.tS, s.jobsPerSec]) },
        { name: 'commands/s', points: result.timeline.map((s) => [s.tS, s.commandsPerSec]), dashed: true },
      ],
    }),
  );
  const latencyPath = path.join(dir, 'latency.svg');
  const words = COMMAND_WORDS[o.protocol];
  const commands = Object.entries(result.latencyUs)
    .filter(([, l]) => l.count > 0)
    .map(([name, l]) => [words[name as keyof typeof words], l] as const);
  writeFileSync(
    latencyPath,
    barChart({
      title: 'Latency per command',
      subtitle: config,
      yLabel: 'microseconds (log scale)',
      labels: true,
      log: true,
      categories: commands.map(([name]) => name),
      series: [
        { name: 'p50', values: commands.map(([, l]) => l.p50Us) },
        { name: 'p99', values: commands.map(([, l]) => l.p99Us) },
        { name: 'p99.9', values: commands.map(([, l]) => l.p999Us) },
      ],
    }),
  );
  return [timelinePath, latencyPath];
}

export async function main(argv: string[]): Promise<number> {
  let args: CliArgs;
  try {
    args = parseCli(argv);
  } catch (err) {
    process.stderr.write(`shardstalk-bench: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const bar = args.progress && process.stdout.isTTY ? new ProgressBar(process.stdout) : null;
  const abort = new AbortController();
  let interrupts = 0;
  const onSigint = (): void => {
    // First Ctrl-C ends the run gracefully and still reports; the second one quits.
    if (++interrupts > 1) process.exit(130);
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  let result: LoadResult;
  try {
    result = await runLoad(args.options, { signal: abort.signal, onProgress: bar ? (p) => bar.update(p) : undefined });
  } catch (err) {
    bar?.clear();
    if (err instanceof UsageError) {
      process.stderr.write(`shardstalk-bench: ${err.message}\n`);
      return 2;
    }
    if (err instanceof SetupFailure) {
      process.stderr.write(`shardstalk-bench: ${(err as Error).message}\n`);
      return 3;
    }
    throw err;
  } finally {
    process.off('SIGINT', onSigint);
  }
  bar?.clear();
  if (args.svgDir !== null) {
    const files = writeRunCharts(result, args.svgDir);
    if (!args.json) process.stdout.write(`charts: ${files.join(', ')}\n`);
  }
  process.stdout.write(args.json ? `${JSON.stringify(result, null, 2)}\n` : `${formatReport(result)}\n`);
  return result.ok ? 0 : 1;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`shardstalk-bench: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
