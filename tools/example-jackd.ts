// An existing npm beanstalk client (jackd) driving shardstalk unchanged:
//   node tools/example-jackd.ts [port]        (start the server first: make run ARGS="--shards 4")
// Puts jobs into several tubes, reserves across them, releases, buries, kicks and deletes.

import jackd, { type JackdClient } from 'jackd';

// jackd is CommonJS with `module.exports = JackdClient`: at run time the default import is the class.
const Jackd = jackd as unknown as typeof JackdClient;

export async function jackdTour(port: number, log: (line: string) => void = console.log): Promise<string[]> {
  const seen: string[] = [];
  const producer = new Jackd();
  const worker = new Jackd();
  await producer.connect({ host: '127.0.0.1', port });
  await worker.connect({ host: '127.0.0.1', port });
  try {
    const tubes = ['emails', 'images', 'pdf', 'sms'];
    for (const t of tubes) await worker.watch(t);
    await worker.ignore('default');
    for (const [i, t] of tubes.entries()) {
      await producer.use(t);
      // Lower number = more urgent: the billing job (pri 1) must come out first wherever it lives.
      const id = await producer.put(`job for ${t}`, { priority: 100 - i * 33, ttr: 30 });
      log(`put ${id} into ${t}`);
    }
    let job = await worker.reserve();
    seen.push(`reserved ${job.id} ${job.payload.toString()}`);
    await worker.release(job.id, { priority: 500 });
    seen.push(`released ${job.id}`);
    job = await worker.reserve();
    seen.push(`reserved ${job.id} ${job.payload.toString()}`);
    await worker.bury(job.id, 10);
    seen.push(`buried ${job.id}`);
    await producer.use('pdf');
    const kicked = await producer.kick(10);
    seen.push(`kicked ${kicked}`);
    for (let i = 0; i < 4; i++) {
      job = await worker.reserve();
      seen.push(`reserved ${job.id} ${job.payload.toString()}`);
      await worker.delete(job.id);
      seen.push(`deleted ${job.id}`);
    }
    for (const line of seen) log(line);
    return seen;
  } finally {
    await producer.disconnect();
    await worker.disconnect();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await jackdTour(Number(process.argv[2] ?? 11300));
}
