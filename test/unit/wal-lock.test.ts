// The WAL directory lock: a held lock refuses a second server (also in the same process) with a
// clear message; a lock left by a dead process, or by an earlier process that had the same pid,
// is taken over; unlock releases it.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { spawnSync, spawn } from 'node:child_process';
import { lockDir, WalLockedError } from '../../workers/wal/lock.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-lock-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A pid that was just used by a process that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  return r.pid!;
}

describe('wal directory lock', () => {
  it('refuses a second lock on the same directory, naming the holder', () => {
    const lock = lockDir(dir);
    expect(fs.readFileSync(join(dir, 'lock'), 'latin1')).toMatch(new RegExp(`^${process.pid} \\d*\\n$`));
    let err: unknown;
    try {
      lockDir(dir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WalLockedError);
    expect((err as Error).message).toContain(`in use by process ${process.pid}`);
    expect((err as Error).message).toContain(join(dir, 'lock'));
    lock.unlock();
    expect(fs.existsSync(join(dir, 'lock'))).toBe(false);
    lockDir(dir).unlock();
    lock.unlock(); // idempotent, and does not remove someone else's lock
  });

  it('takes over a stale lock whose process is gone', () => {
    fs.writeFileSync(join(dir, 'lock'), `${deadPid()} 12345\n`);
    const lock = lockDir(dir);
    expect(fs.readFileSync(join(dir, 'lock'), 'latin1').startsWith(`${process.pid} `)).toBe(true);
    lock.unlock();
  });

  it('takes over a lock from an earlier process with the same pid (start time differs)', () => {
    if (!fs.existsSync(`/proc/${process.pid}/stat`)) return; // only where start times are known
    fs.writeFileSync(join(dir, 'lock'), `${process.pid} 1\n`);
    lockDir(dir).unlock();
  });

  it('refuses a lock held by another live process', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      fs.writeFileSync(join(dir, 'lock'), `${child.pid} \n`); // start time unknown: pid alone decides
      expect(() => lockDir(dir)).toThrow(new RegExp(`in use by process ${child.pid}`));
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    lockDir(dir).unlock(); // now it is stale
  });

  it('takes over an unreadable lock file after a short wait, and creates a missing directory', () => {
    fs.writeFileSync(join(dir, 'lock'), 'garbage');
    const t0 = Date.now();
    lockDir(dir).unlock();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(50);
    const sub = join(dir, 'a', 'b');
    lockDir(sub).unlock();
  });
});
