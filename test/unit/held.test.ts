// HeldJobs (src/proto/beanstalk/held.ts): the jobs a connection holds, checked against a plain
// list through random adds, removes and touches.

import { describe, expect, it } from 'vitest';
import { HeldJobs } from '../../src/proto/beanstalk/held.ts';
import { mulberry32 } from '../support/prng.ts';

describe('HeldJobs', () => {
  it('agrees with a plain list through random adds, removes and touches', () => {
    const rand = mulberry32(7);
    const held = new HeldJobs();
    let model: { id: number; d: number }[] = [];
    let next = 1;
    for (let step = 0; step < 20_000; step++) {
      const r = rand();
      if (r < 0.4 && model.length < 12) {
        const d = Math.floor(rand() * 1e6) + 0.5;
        held.add(next, d);
        model.push({ id: next++, d });
      } else if (r < 0.8) {
        const id = model.length > 0 && rand() < 0.9 ? model[Math.floor(rand() * model.length)].id : next + 5;
        expect(held.remove(id)).toBe(model.some((j) => j.id === id));
        model = model.filter((j) => j.id !== id);
      } else if (model.length > 0) {
        const j = model[Math.floor(rand() * model.length)];
        j.d = Math.floor(rand() * 1e6);
        held.touched(j.id, j.d);
      }
      expect(held.count).toBe(model.length);
      expect(held.soonestDeadline()).toBe(model.reduce((m, j) => Math.min(m, j.d), Infinity));
      const odd = (id: number): boolean => id % 2 === 1;
      expect(held.soonestDeadline(odd)).toBe(model.filter((j) => odd(j.id)).reduce((m, j) => Math.min(m, j.d), Infinity));
      if (model.length > 0) expect(held.has(model[model.length - 1].id)).toBe(true);
      expect(held.has(next)).toBe(false);
    }
  });
});
