// Beanstalk parser throughput, same thread, no I/O: a pipelined put/reserve/delete transcript
// parsed in one chunk and in 1500-byte chunks (a typical TCP segment), with a sink that only
// counts. Run: node bench/micro/parser.bench.ts [--quick]

import { Bench, type Task } from 'tinybench';
import { Parser, type ParserSink } from '../../src/proto/beanstalk/parser.ts';

const CYCLES = 1000; // put + reserve + delete each

export interface ParserBenchRow {
  task: string;
  'commands/s': number;
  'ns/command': number;
  samples: number;
}

class CountingSink implements ParserSink {
  commands = 0;
  count(): void {}
  command(): boolean {
    this.commands++;
    return true;
  }
  putStart(): void {}
  putBody(): boolean {
    this.commands++;
    return true;
  }
  reply(): boolean {
    return true;
  }
}

function row(task: Task, commandsPerIteration: number): ParserBenchRow {
  const r = task.result;
  if (r.state !== 'completed') throw new Error(`parser bench: task ${task.name} ended ${r.state}`);
  const perSec = (commandsPerIteration * 1000) / r.period;
  return {
    task: task.name,
    'commands/s': Math.round(perSec),
    'ns/command': Math.round((1e9 / perSec) * 100) / 100,
    samples: r.latency.samplesCount,
  };
}

export async function run({ quick }: { quick: boolean }): Promise<ParserBenchRow[]> {
  const body = 'x'.repeat(100);
  let text = '';
  for (let i = 1; i <= CYCLES; i++) text += `put 1024 0 60 100\r\n${body}\r\nreserve-with-timeout 0\r\ndelete ${i}\r\n`;
  const transcript = Buffer.from(text, 'latin1');
  const segments: Buffer[] = [];
  for (let off = 0; off < transcript.length; off += 1500) segments.push(transcript.subarray(off, off + 1500));
  const commandsPerIteration = CYCLES * 3;
  const sink = new CountingSink();
  const parser = new Parser(sink);
  const check = (): void => {
    if (sink.commands !== commandsPerIteration) throw new Error(`parser bench: ${sink.commands} commands, expected ${commandsPerIteration}`);
    sink.commands = 0;
  };

  // Quick mode runs with the unit tests (so the bench cannot rot): ~100 ms for the whole file.
  const bench = new Bench({ name: 'parser', time: quick ? 25 : 1000, warmupTime: quick ? 5 : 250, iterations: quick ? 8 : 64, throws: true });
  bench
    .add('pipelined put/reserve/delete, one chunk', () => {
      parser.push(transcript);
      check();
    })
    .add('pipelined put/reserve/delete, 1500-byte chunks', () => {
      for (const s of segments) parser.push(s);
      check();
    });
  await bench.run();
  return bench.tasks.map((t) => row(t, commandsPerIteration));
}

if (import.meta.main) {
  console.table(await run({ quick: process.argv.includes('--quick') }));
}
