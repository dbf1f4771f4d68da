// What a thread that serves connections spends per command when every command comes in a read
// of its own (most clients: one command, then wait for its reply), without the socket: the
// parser, the session, the router, the shard on this thread, the replies' bytes. Ten producers
// put, ten consumers reserve and delete (cycle-c's fixed-rate load, 100-byte bodies), each command
// handed to its connection as one read, and the turn ended as the event loop ends it (an
// immediate). What a socket costs on top is not here: at 20,000 jobs/s on this VM the server
// spends ~5 µs of user time per command, of which this is about a fifth (the rest is Node's read,
// write and turn: tools/node-floor.ts), and ~9 µs of system time (bench/RESULTS.md, session 24).
// Run: node bench/micro/command-path.bench.ts [--quick]

import { Bench, type Task } from 'tinybench';
import { openBeanstalk } from '../../src/net/listener.ts';
import type { Transport } from '../../src/proto/connection.ts';
import { startServer } from '../../src/server.ts';

const PAIRS = 10;
const BODY = 'x'.repeat(100);

export interface CommandPathRow {
  task: string;
  'commands/s': number;
  'ns/command': number;
  samples: number;
}

/** A connection's far end: reads each reply as it comes (no string per reply: the bench measures the server). */
class Peer implements Transport {
  /** Bytes received since take(). */
  bytes = 0;
  /** The first byte of what came since take(), and the id of a RESERVED or INSERTED in it. */
  first = 0;
  id = 0;
  write(data: Buffer): boolean {
    if (this.bytes === 0) {
      this.first = data[0];
      let p = data.indexOf(32) + 1; // the id after "RESERVED " or "INSERTED "
      let id = 0;
      while (p > 0 && data[p] >= 48 && data[p] <= 57) id = id * 10 + data[p++] - 48;
      this.id = id;
    }
    this.bytes += data.length;
    return true;
  }
  end(): void {}
  pauseReading(): void {}
  resumeReading(): void {}
  bufferedOut(): number {
    return 0;
  }
  take(): void {
    this.bytes = 0;
  }
}

interface Conn {
  receive(chunk: Buffer, len?: number): void;
  close(): void;
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Ends turns until `done` holds (a reply may take more than one: the shard's reply, then its write). */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await turn();
    if (done()) return;
  }
  throw new Error(`command-path bench: no ${what} after 10 turns`);
}

export async function run({ quick }: { quick: boolean }): Promise<CommandPathRow[]> {
  const s = await startServer({ port: 0, shards: 1, logLevel: 'silent', workq: null, busyPollUs: 0 });
  try {
    const open = openBeanstalk(s.beanstalk);
    const producers = Array.from({ length: PAIRS }, () => new Peer());
    const consumers = Array.from({ length: PAIRS }, () => new Peer());
    const pConns: Conn[] = producers.map((p) => open(s.router.newConnId(), p));
    const cConns: Conn[] = consumers.map((c) => open(s.router.newConnId(), c));
    const put = Buffer.from(`put 1024 0 60 100\r\n${BODY}\r\n`, 'latin1');
    const reserve = Buffer.from('reserve\r\n', 'latin1');
    const deletes = new Array<Buffer>(PAIRS);
    const reserved = `RESERVED 1 100\r\n${BODY}\r\n`.length; // a RESERVED's bytes, less its id's digits but one
    for (const c of cConns) c.receive(reserve);
    await turn();

    // One job per pair: 10 puts, then the 10 deletes of what the waiting reserves got, then 10
    // reserves that wait again: 30 commands, each its own read.
    const cycle = async (): Promise<void> => {
      for (const p of pConns) p.receive(put);
      await until(() => producers.every((p) => p.bytes > 0) && consumers.every((c) => c.bytes >= reserved), 'INSERTED and RESERVED');
      for (let i = 0; i < PAIRS; i++) {
        const p = producers[i];
        const c = consumers[i];
        if (p.first !== 73 || p.id === 0) throw new Error('command-path bench: a put was not answered INSERTED');
        if (c.first !== 82 || c.id === 0) throw new Error('command-path bench: a reserve was not answered RESERVED');
        deletes[i] = Buffer.from(`delete ${c.id}\r\n`, 'latin1');
        p.take();
        c.take();
      }
      for (let i = 0; i < PAIRS; i++) cConns[i].receive(deletes[i]);
      await until(() => consumers.every((c) => c.bytes > 0), 'DELETED');
      for (const c of consumers) {
        if (c.first !== 68 || c.bytes !== 9) throw new Error('command-path bench: a delete was not answered DELETED');
        c.take();
      }
      for (const c of cConns) c.receive(reserve);
      await turn();
    };

    // Quick mode runs with the unit tests (so the bench cannot rot).
    const bench = new Bench({ name: 'command-path', time: quick ? 25 : 2000, warmupTime: quick ? 5 : 500, iterations: quick ? 8 : 64, throws: true });
    bench.add(`${PAIRS} producers, ${PAIRS} consumers: put, reserve, delete, one read each`, cycle);
    await bench.run();
    for (const c of [...pConns, ...cConns]) c.close();
    return bench.tasks.map((t) => row(t, 3 * PAIRS));
  } finally {
    await s.close();
  }
}

function row(task: Task, commandsPerIteration: number): CommandPathRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`command-path bench: task ${task.name} ended ${r.state}`);
  // The median iteration: a young collection or a slice of another process lands on a few
  // iterations and moves the mean by a third here.
  const perSec = (commandsPerIteration * 1000) / (r.latency.p50 ?? r.period);
  return {
    task: task.name,
    'commands/s': Math.round(perSec),
    'ns/command': Math.round((1e9 / perSec) * 100) / 100,
    samples: r.latency.samplesCount,
  };
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
