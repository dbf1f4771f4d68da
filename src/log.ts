// The one logger: pino, structured JSON; readable lines when a person is watching a terminal.

import { createRequire } from 'node:module';
import pino, { type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';

export type { Logger };

export function makeLogger(level: string): Logger {
  if (level === 'silent') return pino({ level: 'silent' });
  if (process.stderr.isTTY) {
    // pino-pretty as a stream on this thread, loaded only here: as a pino transport it ran on a
    // worker thread of its own for every logger (a Node instance each, about 15 MiB resident),
    // and a terminal gets a few lines, written synchronously so that none is lost at exit.
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
    return pino({ level }, pretty({ destination: 2, sync: true, translateTime: 'SYS:HH:MM:ss.l' }));
  }
  return pino({ level }, pino.destination(2));
}
