// What the generator reads about a server process from /proc, and how it finds the process.
// Off the hot path: plain strings are fine here.

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { ReplyScanner, REPLY_NAMES, REPLY_OK, REPLY_WQ_JOB, type ReplySink } from './scanner.ts';
import { WorkqReplyScanner } from './workq.ts';

let clockTicksPerS: number | null = null;

/** USER_HZ: the unit of utime/stime in /proc/PID/stat (100 on every usual Linux). */
function clockTicks(): number {
  if (clockTicksPerS === null) {
    try {
      clockTicksPerS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicksPerS = 100;
    }
  }
  return clockTicksPerS;
}

/** User + system CPU seconds used so far by process `pid` (all its threads); null if unreadable. */
export function processCpuS(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may contain spaces: count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return (utime + stime) / clockTicks();
  } catch {
    return null;
  }
}

/** Resident set size of `pid` in bytes (VmRSS), null if unreadable. */
export function processRssBytes(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** A server's RSS counts as settled once it has held within 1% for this long. */
export const RSS_SETTLE_MS = 3000;
/** … or once this much time has passed. */
export const RSS_SETTLE_MAX_MS = 10_000;

/**
 * The RSS of `pid` once it has held within 1% for RSS_SETTLE_MS (at most RSS_SETTLE_MAX_MS), or
 * null if it cannot be read. A server gives back what its start or a burst left a second or two
 * after it goes quiet (shardstalk: src/shared/reclaim.ts), so a reading taken the moment RSS first
 * stops moving would miss that.
 */
export async function steadyRssBytes(pid: number): Promise<number | null> {
  let last = processRssBytes(pid);
  let stableSince = 0;
  for (let waited = 0; waited < RSS_SETTLE_MAX_MS && last !== null; ) {
    await new Promise((r) => setTimeout(r, 250));
    waited += 250;
    const now = processRssBytes(pid);
    if (now === null) return last;
    if (Math.abs(now - last) > last * 0.01) stableSince = waited;
    else if (waited - stableSince >= RSS_SETTLE_MS) return now;
    last = now;
  }
  return last;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1';
}

/**
 * Sends one command and returns the reply's body (for OK replies, workq: a job's payload) and its
 * name. For `stats` and similar one-off queries; the load path never uses it.
 */
export function queryServer(host: string, port: number, command: string, timeoutMs = 5000, protocol: 'beanstalk' | 'workq' = 'beanstalk'): Promise<{ kind: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    const sink: ReplySink = {
      onReply(kind, _arg, body, bodyStart, bodyKeptBytes) {
        socket.destroy();
        const text = kind === REPLY_OK || kind === REPLY_WQ_JOB ? Buffer.from(body.subarray(bodyStart, bodyStart + bodyKeptBytes)).toString('utf8') : '';
        resolve({ kind: REPLY_NAMES[kind]!, body: text });
      },
    };
    const scanner = protocol === 'workq' ? new WorkqReplyScanner(sink, 1 << 20) : new ReplyScanner(sink, 1 << 20);
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`${command}: no reply within ${timeoutMs} ms`)));
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => scanner.feed(chunk, 0, chunk.length));
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`${command}: connection closed without a reply`)));
  });
}

/** Parses beanstalk's `stats` YAML (flat "key: value" lines). */
export function parseStats(yaml: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of yaml.split('\n')) {
    const m = /^([\w-]+):\s*(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!.replace(/^"(.*)"$/, '$1');
  }
  return out;
}

/**
 * PID of a server on this machine: from beanstalk's `stats`, else (workq has no pid in any reply)
 * the process holding the listening socket; null if remote or not found.
 */
export async function discoverServerPid(host: string, port: number, protocol: 'beanstalk' | 'workq' = 'beanstalk'): Promise<number | null> {
  if (!isLoopback(host)) return null;
  if (protocol === 'beanstalk') {
    try {
      const { kind, body } = await queryServer(host, port, 'stats');
      if (kind !== 'OK') return null;
      const pid = Number(parseStats(body)['pid']);
      return Number.isInteger(pid) && pid > 0 && processCpuS(pid) !== null ? pid : null;
    } catch {
      return null;
    }
  }
  return pidListeningOn(port);
}

/**
 * The process with a TCP socket listening on `port`: its inode from /proc/net/tcp{,6}, then the
 * process whose fd links to it. Only processes we may inspect (our own user's) are found.
 */
export function pidListeningOn(port: number): number | null {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[3] === '0A' && f[1]!.endsWith(`:${hexPort}`)) inodes.add(`socket:[${f[9]}]`);
    }
  }
  if (inodes.size === 0) return null;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${entry}/fd/${fd}`))) return Number(entry);
      } catch {
        // closed meanwhile
      }
    }
  }
  return null;
}

/** Busy and steal CPU seconds of the whole machine so far, from /proc/stat; null if unreadable. */
export function machineCpuS(): { busyS: number; stealS: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]!;
    return { busyS: busy / clockTicks(), stealS: (f[7] ?? 0) / clockTicks() };
  } catch {
    return null;
  }
}
