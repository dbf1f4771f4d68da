// Driving a ShardCore (workers/core.ts) directly in unit tests: one request at a time.

import type { ShardCore } from '../../workers/core.ts';
import { RecordWriter } from '../../src/shared/records.ts';

/** A fixed clock for those tests (ms). */
export const T0 = 1_700_000_000_000;

/** Applies one request `build` writes to the core, then its clock; returns its reply's offset in core.out (reset first). */
export function applyToCore(core: ShardCore, build: (w: RecordWriter) => void, now = T0): number {
  const w = new RecordWriter(1024);
  build(w);
  core.out.reset();
  core.handle(w.buf, 0, now);
  core.afterBatch(now);
  return 0;
}
