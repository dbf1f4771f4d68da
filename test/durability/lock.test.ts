// The directory lock: a second server on the same -b DIR refuses to start and disturbs nothing;
// once the holder is gone (a clean stop, or a SIGKILL that leaves DIR/lock behind), a new one starts.

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.ts';
import { connect } from '../support/client.ts';
import { cleanedAfterEach, expectStartFailure, jobOf, makeDir, nodeBin, putId, spawnServer, walFiles } from './support.ts';

const { dirs, children } = cleanedAfterEach();

describe('directory lock', () => {
  it('a second server on the same directory refuses with a clear message; after SIGKILL of the first, a new one starts', async () => {
    const dir = makeDir('lock');
    dirs.push(dir);
    const a = await spawnServer({ dir, shards: 2 });
    children.push(a);
    const c = await connect(a.port);
    const first = await putId(c, 'before the second start');

    // Another process: refused, naming the directory and the holder.
    const b = await expectStartFailure({ dir, shards: 1 });
    expect(b.code).not.toBe(0);
    expect(b.stderr).toContain(`directory ${dir} is in use by process ${a.pid}`);
    // In this process too.
    await expect(startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: dir }))
      .rejects.toThrow(`is in use by process ${a.pid}`);

    // The refused starts changed nothing: the first server goes on, its log intact.
    const second = await putId(c, 'after the refused starts');
    expect(fs.readFileSync(join(dir, 'lock'), 'latin1')).toMatch(new RegExp(`^${a.pid} `));
    expect(walFiles(dir).every((f) => f.generation === 1)).toBe(true);
    c.destroy();

    await a.kill();
    expect(fs.existsSync(join(dir, 'lock')), 'SIGKILL leaves the lock file').toBe(true);
    const d = await spawnServer({ dir, shards: 3 });
    children.push(d);
    const c2 = await connect(d.port);
    expect(jobOf(await c2.request(`peek ${first}`))?.body).toBe('before the second start');
    expect(jobOf(await c2.request(`peek ${second}`))?.body).toBe('after the refused starts');
    expect(fs.readFileSync(join(dir, 'lock'), 'latin1')).toMatch(new RegExp(`^${d.pid} `));
    c2.destroy();
    await d.stop();
    expect(fs.existsSync(join(dir, 'lock')), 'a clean stop (SIGTERM) removes the lock').toBe(false);
  });

  it('in one process: a second startServer on the same directory is refused until the first closes', async () => {
    const dir = makeDir('lock-inproc');
    dirs.push(dir);
    const a = await startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: dir });
    try {
      await expect(startServer({ port: 0, shards: 2, logLevel: 'silent', binlogDir: dir }))
        .rejects.toThrow(`directory ${dir} is in use by process ${process.pid}`);
    } finally {
      await a.close();
    }
    const b = await startServer({ port: 0, shards: 2, logLevel: 'silent', binlogDir: dir });
    await b.close();
  });

  it('a stale lock is taken over: its process is gone, its pid belongs to another process now, or it is empty', async () => {
    const gone = spawnSync(nodeBin(), ['-e', '0']).pid!;
    const stale = [
      `${gone} 1\n`, // that process has exited
      `${process.pid} 1\n`, // a live pid, but started at another time: reused
      '', // a crash between creating the file and writing it
    ];
    for (const text of stale) {
      const dir = makeDir('lock-stale');
      dirs.push(dir);
      fs.writeFileSync(join(dir, 'lock'), text);
      const s = await spawnServer({ dir, shards: 1 });
      children.push(s);
      expect(fs.readFileSync(join(dir, 'lock'), 'latin1'), `lock was ${JSON.stringify(text)}`).toMatch(new RegExp(`^${s.pid} `));
      await s.stop();
    }
  });
});
