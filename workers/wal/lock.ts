// The directory lock: two servers must never write the same log directory.
//
// DIR/lock is created with O_EXCL and holds "<pid> <start>\n", where <start> is the process start
// time from /proc/<pid>/stat (empty where /proc is missing). A lock is held while that process
// lives: process.kill(pid, 0) succeeds (or fails with EPERM) and, when both start times are
// known, they match. So a lock left by a crashed server is taken over, also when its pid has been
// reused since (a restarted container's server is pid 1 again) — while a second lockDir() in the
// same live process fails like any other.
//
// Unlike beanstalkd's fcntl lock, nothing releases it at exit: call unlock() when shutting down
// (a crash leaves a stale lock, which the next start takes over).

const fs = process.getBuiltinModule('node:fs'); // not an ESM import: see src/server.ts
import { join } from 'node:path';

/** Another live process holds the directory. */
export class WalLockedError extends Error {
  readonly dir: string;
  readonly pid: number;
  constructor(dir: string, pid: number, lockPath: string) {
    super(`wal: directory ${dir} is in use by process ${pid} (lock file ${lockPath}); ` +
      'stop that server or give this one another directory');
    this.name = 'WalLockedError';
    this.dir = dir;
    this.pid = pid;
  }
}

export interface DirLock {
  readonly dir: string;
  readonly path: string;
  /** Removes the lock file if it is still ours. Idempotent. */
  unlock(): void;
}

/** Start time of a process (clock ticks since boot) from /proc, or '' if unknown. */
function startTimeOf(pid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? ''; // field 22 of the whole line
  } catch {
    return '';
  }
}

function parseLock(text: string): { pid: number; start: string } | null {
  const m = /^(\d+)(?: (\d*))?\n$/.exec(text);
  if (!m) return null;
  return { pid: Number(m[1]), start: m[2] ?? '' };
}

/** A killed process that nobody has reaped yet (state Z or X) holds nothing any more. */
function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}

function isAlive(pid: number, start: string): boolean {
  if (pid <= 0) return false;
  if (isZombie(pid)) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    // EPERM: it exists, owned by someone else.
  }
  if (start === '') return true;
  const now = startTimeOf(pid);
  return now === '' || now === start;
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Takes DIR/lock (creating DIR if needed). Throws WalLockedError if a live process holds it; a
 * lock whose process is gone is taken over.
 */
export function lockDir(dir: string): DirLock {
  fs.mkdirSync(dir, { recursive: true });
  const path = join(dir, 'lock');
  const mine = `${process.pid} ${startTimeOf(process.pid)}\n`;
  let unreadable = 0;
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      const fd = fs.openSync(path, 'wx', 0o644);
      try {
        fs.writeSync(fd, mine);
      } finally {
        fs.closeSync(fd);
      }
      let held = true;
      return {
        dir,
        path,
        unlock(): void {
          if (!held) return;
          held = false;
          try {
            if (fs.readFileSync(path, 'latin1') === mine) fs.unlinkSync(path);
          } catch {
            // already gone
          }
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let text: string;
    try {
      text = fs.readFileSync(path, 'latin1');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // released meanwhile
      throw e;
    }
    const holder = parseLock(text);
    if (holder === null && ++unreadable < 10) {
      sleepMs(10); // another process may be between creating the file and writing its pid
      continue;
    }
    if (holder !== null && isAlive(holder.pid, holder.start)) throw new WalLockedError(dir, holder.pid, path);
    try {
      fs.unlinkSync(path); // stale (or unreadable for 100 ms): take it over
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  throw new Error(`wal: could not take ${path}: it keeps changing`);
}
