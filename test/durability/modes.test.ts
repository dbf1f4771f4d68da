// Each fsync mode (-f 0, -f 50, -F) starts, serves, counts its records in stats, and keeps every
// acknowledged job through a SIGKILL of the process (every batch is written before its replies
// go out; the modes differ only in what a crash of the machine can lose).

import { describe, expect, it } from 'vitest';
import { connect } from '../support/client.ts';
import { cleanedAfterEach, jobOf, makeDir, putId, spawnServer, stats, statsJob, tubePerShard } from './support.ts';

const { dirs, children } = cleanedAfterEach();

const MODES: Array<[string, string[]]> = [['-f 0', ['-f', '0']], ['-f 50', ['-f', '50']], ['-F', ['-F']]];
const SEGMENT = 8192;

describe('fsync modes', () => {
  for (const [name, fsync] of MODES) {
    it(`${name}: serves, stats show the log moving, a SIGKILL loses nothing acknowledged`, async () => {
      const dir = makeDir('mode');
      dirs.push(dir);
      const a = await spawnServer({ dir, shards: 2, fsync, segmentBytes: SEGMENT });
      children.push(a);
      const c = await connect(a.port);
      const s0 = await stats(c);
      expect(s0['binlog-records-written']).toBe('0');
      expect(s0['binlog-records-migrated']).toBe('0');
      expect(s0['binlog-oldest-index']).toBe('1');
      expect(s0['binlog-current-index']).toBe('1');
      expect(s0['binlog-max-size']).toBe(String(SEGMENT));

      const live = new Map<number, { body: string; state: string }>();
      let records = 0;
      const tubes = tubePerShard(2, 'mode');
      for (let i = 0; i < 60; i++) {
        const tube = tubes[i % 2];
        await c.request(`use ${tube}`);
        const body = `${name} job ${i} `.padEnd(400, '.');
        const id = await putId(c, body);
        records++; // FULL
        live.set(id, { body, state: 'ready' });
        if (i % 3 === 0) {
          expect(await c.request(`delete ${id}`)).toBe('DELETED\r\n');
          records++; // DELETE
          live.delete(id);
        } else if (i % 5 === 0) {
          expect(jobOf(await c.request(`reserve-job ${id}`))?.id).toBe(id); // not logged
          expect(await c.request(`bury ${id} 1`)).toBe('BURIED\r\n');
          records++; // UPDATE
          live.get(id)!.state = 'buried';
        }
      }
      const s1 = await stats(c);
      expect(Number(s1['binlog-records-written']) - Number(s1['binlog-records-migrated']), 'one record per change').toBe(records);
      expect(Number(s1['binlog-current-index']), 'segments rotated').toBeGreaterThan(1);
      for (const id of live.keys()) expect(Number((await statsJob(c, id))!.file)).toBeGreaterThanOrEqual(1);
      c.destroy();

      await a.kill();
      const b = await spawnServer({ dir, shards: 1, fsync, segmentBytes: SEGMENT });
      children.push(b);
      const d = await connect(b.port);
      for (const [id, j] of live) {
        expect(jobOf(await d.request(`peek ${id}`))?.body, `job ${id}`).toBe(j.body);
        expect((await statsJob(d, id))?.state).toBe(j.state);
      }
      const s2 = await stats(d);
      expect(Number(s2['current-jobs-ready']) + Number(s2['current-jobs-buried'])).toBe(live.size);
      // The start rewrote every live job into the new generation.
      expect(Number(s2['binlog-records-written'])).toBe(live.size);
      d.destroy();
    });
  }
});
