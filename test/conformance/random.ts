// Seeded random sessions: valid and invalid commands over 3 connections and 10 tube names, no
// sleeps. Everything is drawn from the seed, so a failing seed replays exactly.
//
// Only commands whose replies do not depend on timing are generated: no blocking reserve (only
// reserve-with-timeout 0), TTRs of 100 s or more (so no DEADLINE_SOON and no TTR expiry), delays
// and pauses of 0 or 1000 s. stats values that tick with the clock are normalised by the runner
// (TIMING_STATS_KEYS).

import type { Script, Step } from './runner.ts';
import { mulberry32 as prng } from '../support/prng.ts';


export const RANDOM_CONNS = ['a', 'b', 'c'] as const;
export const RANDOM_TUBES = ['default', 'alpha', 'beta', 'q.1', 'q_2', 'jobs/x', 'a-b', '(p)', 'z$', 'long-tube-name;0123456789'];
/** The random sessions run with a small job size limit so that JOB_TOO_BIG comes up. */
export const RANDOM_MAX_JOB_SIZE = 48;

/** Lines that are wrong in one way or another, each answered by exactly one reply. */
const BAD_LINES = [
  'reservex', 'reserve ', 'peek', 'peek ', 'put', 'put 1', 'statsx', 'stats-tube', 'stats-job',
  'delete x', 'delete -1', 'delete 18446744073709551616', 'release 1', 'bury 1', 'touch x',
  'kick x', 'kick ', 'kick-job', 'use -bad', 'use ', 'watch bad!', 'ignore ', 'use ' + 'n'.repeat(201),
  'list-tubesx', 'pause-tube', 'pause-tube default -1', 'reserve-with-timeout 99999999999999999999',
  'reserve-job x', 'bogus', '', 'STATS', ' use default', 'use de\0fault', 'x'.repeat(300),
  'peek-ready 1', 'list-tube-used x',
];

/** Odd but valid commands with deterministic answers. */
const ODD_LINES = [
  'reserve-with-timeout x', 'reserve-with-timeout 4294967296', 'kick 4294967297', 'kick +1',
  'kick 1x', 'kick -1', 'pause-tubedefault 0', 'delete 0001', 'stats-job  1', 'peek 18446744073709551615',
];

const BODY_BYTES = 'abcxyz019 \r\n\0\xff-';

export function generateSession(seed: number, stepsWanted = 300): Script {
  const rnd = prng(seed);
  const int = (n: number) => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const chance = (p: number) => rnd() < p;
  let putsIssued = 0;
  const jobId = () => 1 + int(putsIssued + 3);
  const tube = () => pick(RANDOM_TUBES);
  const pri = () => pick([0, 0, 1, 5, 5, 1023, 1024, 4294967295]);
  const delay = () => (chance(0.15) ? 1000 : 0);
  const ttr = () => pick([100, 300, 4294967295]);
  const body = (len: number, safe = false) => {
    let s = '';
    const alphabet = safe ? 'abcxyz019' : BODY_BYTES;
    for (let i = 0; i < len; i++) s += alphabet[int(alphabet.length)];
    return s;
  };

  /** One generated unit: bytes to send and how many replies they produce. */
  type Unit = { data: string; replies: number; quit?: boolean };
  const line = (l: string): Unit => ({ data: `${l}\r\n`, replies: 1 });

  const generators: Array<[number, () => Unit]> = [
    [14, () => {
      putsIssued++;
      const r = rnd();
      if (r < 0.05) {
        // bad trailer: EXPECTED_CRLF (the id is used up)
        const b = body(int(6));
        return { data: `put ${pri()} 0 ${ttr()} ${b.length}\r\n${b}XY`, replies: 1 };
      }
      if (r < 0.08) {
        // trailing garbage: BAD_FORMAT, then the body line is read as a command (UNKNOWN_COMMAND)
        putsIssued--;
        const b = body(1 + int(5), true);
        return { data: `put ${pri()} 0 ${ttr()} ${b.length} junk\r\n${b}\r\n`, replies: 2 };
      }
      if (r < 0.14) {
        // too big: JOB_TOO_BIG, body skipped
        putsIssued--;
        const b = body(RANDOM_MAX_JOB_SIZE + 1 + int(20));
        return { data: `put ${pri()} 0 ${ttr()} ${b.length}\r\n${b}\r\n`, replies: 1 };
      }
      const b = body(chance(0.1) ? RANDOM_MAX_JOB_SIZE : int(12));
      return { data: `put ${pri()} ${delay()} ${ttr()} ${b.length}\r\n${b}\r\n`, replies: 1 };
    }],
    [10, () => line('reserve-with-timeout 0')],
    [3, () => line(`reserve-job ${jobId()}`)],
    [6, () => line(`delete ${jobId()}`)],
    [5, () => line(`release ${jobId()} ${pri()} ${delay()}`)],
    [4, () => line(`bury ${jobId()} ${pri()}`)],
    [3, () => line(`touch ${jobId()}`)],
    [3, () => line(`kick ${int(4)}`)],
    [3, () => line(`kick-job ${jobId()}`)],
    [3, () => line(`peek ${jobId()}`)],
    [3, () => line(pick(['peek-ready', 'peek-delayed', 'peek-buried']))],
    [6, () => line(`use ${tube()}`)],
    [6, () => line(`watch ${tube()}`)],
    [5, () => line(`ignore ${tube()}`)],
    [2, () => line('list-tubes')],
    [1, () => line('list-tube-used')],
    [2, () => line('list-tubes-watched')],
    [3, () => line(`stats-job ${jobId()}`)],
    [3, () => line(`stats-tube ${tube()}`)],
    [1, () => line('stats')],
    [2, () => line(`pause-tube ${tube()} ${chance(0.5) ? 0 : 1000}`)],
    [4, () => line(pick(BAD_LINES))],
    [2, () => line(pick(ODD_LINES))],
    [1, () => ({ data: 'quit\r\n', replies: 0, quit: true })],
  ];
  const total = generators.reduce((s, [w]) => s + w, 0);
  const one = (): Unit => {
    let r = rnd() * total;
    for (const [w, g] of generators) {
      if ((r -= w) < 0) return g();
    }
    return generators[0]![1]();
  };

  const steps: Step[] = [];
  while (steps.length < stepsWanted) {
    const conn = pick(RANDOM_CONNS);
    // sometimes pipeline two or three commands in one write
    const units = [one()];
    if (!units[0]!.quit && chance(0.15)) {
      for (let k = 1 + int(2); k > 0; k--) {
        const u = one();
        if (u.quit) break;
        units.push(u);
      }
    }
    const data = units.map((u) => u.data).join('');
    const replies = units.reduce((s, u) => s + u.replies, 0);
    steps.push({ conn, send: data });
    if (replies > 0) steps.push({ conn, read: replies });
    if (units[0]!.quit) steps.push({ conn, closed: true });
  }
  steps.push({ conn: 'a', cmd: 'stats' });
  steps.push({ conn: 'a', cmd: 'list-tubes' });
  return { name: `random session, seed ${seed}`, server: { maxJobSize: RANDOM_MAX_JOB_SIZE }, steps };
}
