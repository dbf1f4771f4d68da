// Piscina task: one slice of a run's connections on this worker thread (see slice.ts).
import { runSlice, type SliceResult, type SliceTask } from './slice.ts';

export default function runTask(task: SliceTask): Promise<SliceResult> {
  return runSlice(task);
}
