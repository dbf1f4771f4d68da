// The one logger: pino, structured JSON; readable lines when a person is watching a terminal.

import pino, { type Logger } from 'pino';

export type { Logger };

export function makeLogger(level: string): Logger {
  if (level === 'silent') return pino({ level: 'silent' });
  if (process.stderr.isTTY) {
    return pino({
      level,
      transport: { target: 'pino-pretty', options: { destination: 2, translateTime: 'SYS:HH:MM:ss.l' } },
    });
  }
  return pino({ level }, pino.destination(2));
}
