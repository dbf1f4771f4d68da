import { describe, expect, it } from 'vitest';
import { LoggedReplies } from '../../workers/wal/logged.ts';

describe('LoggedReplies', () => {
  it('without a log keeps nothing, however many changes are made', () => {
    const l = new LoggedReplies(false);
    for (let i = 0; i < 100_000; i++) l.mark(i * 32);
    expect(l.size).toBe(0);
    const buf = new Uint8Array(64);
    l.flagAll(buf, 5);
    expect(buf.every((b) => b === 0)).toBe(true);
  });

  it('with a log flags exactly the marked replies of the batch, then forgets them', () => {
    const l = new LoggedReplies(true);
    l.mark(0);
    l.mark(64);
    expect(l.size).toBe(2);
    const buf = new Uint8Array(128);
    l.flagAll(buf, 5);
    expect([...buf.keys()].filter((i) => buf[i] === 1)).toEqual([5, 69]);
    l.clear();
    expect(l.size).toBe(0);
    const again = new Uint8Array(128);
    l.flagAll(again, 5);
    expect(again.every((b) => b === 0)).toBe(true);
  });
});
