// How many times the kernel has taken the calling thread off its CPU for another task while it
// could have gone on running (an involuntary context switch): Linux's /proc/thread-self/status,
// its `nonvoluntary_ctxt_switches` line. A polling thread (src/route/router.ts) reads it once a
// period to tell whether other tasks want its core (src/shared/pollwindow.ts). Time the
// hypervisor takes from the whole machine does not show here.

import fs from 'node:fs';

/** Where the kernel keeps the calling thread's counters (Linux 3.17+). */
export const THREAD_STATUS_FILE = '/proc/thread-self/status';

const KEY = Buffer.from('nonvoluntary_ctxt_switches:');

/** The calling thread's involuntary context switches, read again from the file at each call. */
export class Preemptions {
  private fd: number;
  /** The file is ~1.4 KB; read whole, with room to spare. */
  private readonly buf = Buffer.alloc(4096);

  /**
   * Opens `file` for the thread that calls this (the file names the thread at its opening, so
   * reads answer for it whichever thread makes them); null where it cannot be read.
   */
  static open(file = THREAD_STATUS_FILE): Preemptions | null {
    let fd: number;
    try {
      fd = fs.openSync(file, 'r');
    } catch {
      return null;
    }
    const p = new Preemptions(fd);
    if (Number.isNaN(p.count())) {
      p.close();
      return null;
    }
    return p;
  }

  private constructor(fd: number) {
    this.fd = fd;
  }

  /** How many times the thread was preempted since it started; NaN once closed or unreadable. */
  count(): number {
    if (this.fd < 0) return NaN;
    try {
      return parseInvoluntarySwitches(this.buf, fs.readSync(this.fd, this.buf, 0, this.buf.length, 0));
    } catch {
      return NaN;
    }
  }

  close(): void {
    if (this.fd < 0) return;
    fs.closeSync(this.fd);
    this.fd = -1;
  }
}

/** The number on the `nonvoluntary_ctxt_switches:` line of `buf[0, n)`; NaN if there is none. */
export function parseInvoluntarySwitches(buf: Buffer, n: number): number {
  const at = buf.subarray(0, n).indexOf(KEY);
  if (at < 0) return NaN;
  let i = at + KEY.length;
  while (i < n && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
  let v = 0;
  let digits = 0;
  for (; i < n; i++) {
    const d = buf[i] - 0x30;
    if (d < 0 || d > 9) break;
    v = v * 10 + d;
    digits++;
  }
  return digits === 0 ? NaN : v;
}
