// CPU time of each thread of this process, from Linux's /proc/self/task/<tid>/stat (proc(5)):
// which shard thread is busy, which idles, and what the connections' thread costs. Elsewhere
// (no /proc) there is nothing to report.


/**
 * The unit of utime / stime in /proc: USER_HZ, which the kernel fixes at 100 for what it shows
 * user space whatever its own tick rate (sysconf(_SC_CLK_TCK); Node does not expose sysconf).
 */
export const USER_HZ = 100;

export interface ThreadCpu {
  readonly tid: number;
  /** The thread's name (comm): up to 15 bytes, set by the thread itself; may hold any byte but NUL. */
  readonly name: string;
  readonly userSeconds: number;
  readonly systemSeconds: number;
}

/**
 * Parses one /proc/<pid>/task/<tid>/stat line: `tid (comm) state ppid ...`, utime and stime being
 * fields 14 and 15. comm may hold spaces and parentheses, so the fields are counted from the last ')'.
 */
export function parseTaskStat(line: string): { name: string; userTicks: number; systemTicks: number } | null {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const rest = line.slice(close + 2).split(' '); // rest[0] is field 3 (state)
  const userTicks = Number(rest[14 - 3]);
  const systemTicks = Number(rest[15 - 3]);
  if (!Number.isFinite(userTicks) || !Number.isFinite(systemTicks)) return null;
  return { name: line.slice(open + 1, close), userTicks, systemTicks };
}

/** Every thread's CPU time, or null where /proc/self/task is not there. Asynchronous: a scrape never stalls the connections' thread on file reads. */
export async function threadCpu(): Promise<ThreadCpu[] | null> {
  if (process.platform !== 'linux') return null;
  // Taken at the first scrape, not at start: fs/promises brings readline with it (~2 MiB).
  const fs = process.getBuiltinModule('node:fs/promises');
  let tids: string[];
  try {
    tids = await fs.readdir('/proc/self/task');
  } catch {
    return null;
  }
  const out: ThreadCpu[] = [];
  await Promise.all(
    tids.map(async (tid) => {
      let line: string;
      try {
        line = await fs.readFile(`/proc/self/task/${tid}/stat`, 'utf8');
      } catch {
        return; // the thread ended between readdir and here
      }
      const p = parseTaskStat(line.trimEnd());
      if (p !== null) out.push({ tid: Number(tid), name: p.name, userSeconds: p.userTicks / USER_HZ, systemSeconds: p.systemTicks / USER_HZ });
    }),
  );
  return out.sort((a, b) => a.tid - b.tid);
}
