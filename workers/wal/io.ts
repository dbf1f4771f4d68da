// The file-system calls the write-ahead log makes, behind one small object so tests can count
// them (one writeSync per batch, fdatasyncs per sync mode) and inject faults (ENOSPC, EIO).
// Everything is synchronous: the log runs on a shard thread that has no event-loop work, and a
// batch's replies must not be published before its records are written (and, if asked, synced).

const fs = process.getBuiltinModule('node:fs'); // not an ESM import: see src/server.ts

export interface WalIo {
  /** fs.openSync. Flags used: 'wx' (new segment, O_EXCL), 'r' (replay), 'r+' (cut a torn tail). */
  openSync(path: string, flags: string, mode?: number): number;
  closeSync(fd: number): void;
  /** Positional write; returns the bytes written (may be short; the caller loops). */
  writeSync(fd: number, buf: Uint8Array, off: number, len: number, position: number): number;
  /** Positional read; returns the bytes read (0 at end of file). */
  readSync(fd: number, buf: Uint8Array, off: number, len: number, position: number): number;
  fdatasyncSync(fd: number): void;
  /** Used on directories only (so a new segment's name is durable). */
  fsyncSync(fd: number): void;
  ftruncateSync(fd: number, len: number): void;
  /** Size in bytes of the open file. */
  fileSize(fd: number): number;
  /** Names in dir; [] if dir does not exist. */
  readdir(dir: string): string[];
  unlinkSync(path: string): void;
  mkdirp(dir: string): void;
}

/** The real file system. */
export const nodeIo: WalIo = {
  openSync: (path, flags, mode) => fs.openSync(path, flags, mode),
  closeSync: (fd) => fs.closeSync(fd),
  writeSync: (fd, buf, off, len, position) => fs.writeSync(fd, buf, off, len, position),
  readSync: (fd, buf, off, len, position) => fs.readSync(fd, buf, off, len, position),
  fdatasyncSync: (fd) => fs.fdatasyncSync(fd),
  fsyncSync: (fd) => fs.fsyncSync(fd),
  ftruncateSync: (fd, len) => fs.ftruncateSync(fd, len),
  fileSize: (fd) => fs.fstatSync(fd).size,
  readdir: (dir) => {
    try {
      return fs.readdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
  },
  unlinkSync: (path) => fs.unlinkSync(path),
  mkdirp: (dir) => {
    fs.mkdirSync(dir, { recursive: true });
  },
};

/** The errno code of a thrown fs error ('ENOSPC', 'EIO', ...), or 'EUNKNOWN'. */
export function errnoCode(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
}
