// Pre-encoded replies: constant answers are Buffers made once, never per command.

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

export const REPLY_OUT_OF_MEMORY = b('OUT_OF_MEMORY\r\n');
export const REPLY_INTERNAL_ERROR = b('INTERNAL_ERROR\r\n');
export const REPLY_DRAINING = b('DRAINING\r\n');
export const REPLY_BAD_FORMAT = b('BAD_FORMAT\r\n');
export const REPLY_UNKNOWN_COMMAND = b('UNKNOWN_COMMAND\r\n');
export const REPLY_EXPECTED_CRLF = b('EXPECTED_CRLF\r\n');
export const REPLY_JOB_TOO_BIG = b('JOB_TOO_BIG\r\n');
export const REPLY_NOT_FOUND = b('NOT_FOUND\r\n');
export const REPLY_DEADLINE_SOON = b('DEADLINE_SOON\r\n');
export const REPLY_TIMED_OUT = b('TIMED_OUT\r\n');
export const REPLY_DELETED = b('DELETED\r\n');
export const REPLY_RELEASED = b('RELEASED\r\n');
export const REPLY_BURIED = b('BURIED\r\n');
export const REPLY_KICKED = b('KICKED\r\n');
export const REPLY_TOUCHED = b('TOUCHED\r\n');
export const REPLY_NOT_IGNORED = b('NOT_IGNORED\r\n');
export const REPLY_PAUSED = b('PAUSED\r\n');
export const CRLF = b('\r\n');
/** Reply words followed by a job (`completeJob`). */
export const RESERVED_ = b('RESERVED ');
export const FOUND_ = b('FOUND ');

/** A YAML document reply (`OK <bytes>\r\n<yaml>\r\n`), as stats and list commands send it. */
export function okYaml(yaml: string): Buffer {
  const body = Buffer.from(yaml, 'latin1');
  const head = `OK ${body.length}\r\n`;
  const out = Buffer.allocUnsafe(head.length + body.length + 2);
  out.write(head, 0, 'latin1');
  body.copy(out, head.length);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}

export function yamlList(names: readonly string[]): string {
  let s = '---\n';
  for (const n of names) s += `- ${n}\n`;
  return s;
}
