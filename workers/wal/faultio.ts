// A WalIo wrapper for tests: counts every call and injects errors (ENOSPC, EIO...) on chosen
// operations, optionally after a partial write, as a full disk does.

import { nodeIo, type WalIo } from './io.ts';

export type WalIoOp = keyof WalIo;

interface Fault {
  code: string;
  times: number;
  /** writeSync only: each failure is preceded by a short write of this many bytes (the call
   *  returns that count), as a filling disk does. */
  partialBytes: number;
  shortDone: boolean;
}

export class FaultIo implements WalIo {
  /** Calls per operation (failed ones included). */
  readonly counts: Record<WalIoOp, number> = {
    openSync: 0, closeSync: 0, writeSync: 0, readSync: 0, fdatasyncSync: 0, fsyncSync: 0,
    ftruncateSync: 0, fileSize: 0, readdir: 0, unlinkSync: 0, mkdirp: 0,
  };
  /** Called after each successful fdatasyncSync with its fd (tests track what is durable). */
  onDatasync: ((fd: number) => void) | null = null;
  /** Called after each successful writeSync. */
  onWrite: ((fd: number, len: number, position: number) => void) | null = null;

  private readonly base: WalIo;
  private readonly faults = new Map<WalIoOp, Fault>();

  constructor(base: WalIo = nodeIo) {
    this.base = base;
  }

  /** The next `times` calls of op throw an error with this errno code. writeSync with
   *  partialBytes: each failing call is preceded by one that writes only partialBytes. */
  fail(op: WalIoOp, code: string, times = 1, partialBytes = 0): void {
    this.faults.set(op, { code, times, partialBytes, shortDone: false });
  }

  /** Cancels every pending fault. */
  heal(): void {
    this.faults.clear();
  }

  resetCounts(): void {
    for (const k of Object.keys(this.counts) as WalIoOp[]) this.counts[k] = 0;
  }

  private check(op: WalIoOp): Fault | null {
    this.counts[op]++;
    const f = this.faults.get(op);
    if (!f) return null;
    if (f.partialBytes > 0 && !f.shortDone) {
      f.shortDone = true;
      return f;
    }
    f.shortDone = false;
    if (--f.times <= 0) this.faults.delete(op);
    return f;
  }

  private static error(op: string, code: string): Error {
    return Object.assign(new Error(`${code}: injected fault, ${op}`), { code });
  }

  openSync(path: string, flags: string, mode?: number): number {
    const f = this.check('openSync');
    if (f) throw FaultIo.error('open', f.code);
    return this.base.openSync(path, flags, mode);
  }
  closeSync(fd: number): void {
    const f = this.check('closeSync');
    if (f) throw FaultIo.error('close', f.code);
    this.base.closeSync(fd);
  }
  writeSync(fd: number, buf: Uint8Array, off: number, len: number, position: number): number {
    const f = this.check('writeSync');
    if (f) {
      if (f.shortDone) return this.base.writeSync(fd, buf, off, Math.min(len, f.partialBytes), position);
      throw FaultIo.error('write', f.code);
    }
    const n = this.base.writeSync(fd, buf, off, len, position);
    this.onWrite?.(fd, n, position);
    return n;
  }
  readSync(fd: number, buf: Uint8Array, off: number, len: number, position: number): number {
    const f = this.check('readSync');
    if (f) throw FaultIo.error('read', f.code);
    return this.base.readSync(fd, buf, off, len, position);
  }
  fdatasyncSync(fd: number): void {
    const f = this.check('fdatasyncSync');
    if (f) throw FaultIo.error('fdatasync', f.code);
    this.base.fdatasyncSync(fd);
    this.onDatasync?.(fd);
  }
  fsyncSync(fd: number): void {
    const f = this.check('fsyncSync');
    if (f) throw FaultIo.error('fsync', f.code);
    this.base.fsyncSync(fd);
  }
  ftruncateSync(fd: number, len: number): void {
    const f = this.check('ftruncateSync');
    if (f) throw FaultIo.error('ftruncate', f.code);
    this.base.ftruncateSync(fd, len);
  }
  fileSize(fd: number): number {
    const f = this.check('fileSize');
    if (f) throw FaultIo.error('fstat', f.code);
    return this.base.fileSize(fd);
  }
  readdir(dir: string): string[] {
    const f = this.check('readdir');
    if (f) throw FaultIo.error('readdir', f.code);
    return this.base.readdir(dir);
  }
  unlinkSync(path: string): void {
    const f = this.check('unlinkSync');
    if (f) throw FaultIo.error('unlink', f.code);
    this.base.unlinkSync(path);
  }
  mkdirp(dir: string): void {
    const f = this.check('mkdirp');
    if (f) throw FaultIo.error('mkdir', f.code);
    this.base.mkdirp(dir);
  }
}
