// Worker threads that test shared structures: each reports once, with a message.

import { Worker } from 'node:worker_threads';

/**
 * Starts the worker at `url` with `data`. `result` is its first message; it rejects if the
 * worker throws or exits before sending one (`what` names the worker in that error).
 */
export function startWorker<T>(url: URL, data: unknown, what: string): { worker: Worker; result: Promise<T> } {
  const worker = new Worker(url, { workerData: data });
  const result = new Promise<T>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`${what} exited with code ${code} before reporting`)));
  });
  return { worker, result };
}
