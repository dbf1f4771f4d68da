// What the JSON API's beanstalk and workq halves share (./api.ts, ./workq-api.ts): the error a
// handler throws for an HTTP status, and a job body's preview.

export class ApiError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

/** A body preview safe in JSON and in a page: printable ASCII (and tab, CR, LF) as text, else base64. */
export function preview(bytes: Buffer, bodyBytes: number): { encoding: 'text' | 'base64'; data: string; truncated: boolean } {
  let printable = true;
  for (const c of bytes) {
    if (!((c >= 0x20 && c <= 0x7e) || c === 0x09 || c === 0x0a || c === 0x0d)) {
      printable = false;
      break;
    }
  }
  return {
    encoding: printable ? 'text' : 'base64',
    data: bytes.toString(printable ? 'latin1' : 'base64'),
    truncated: bodyBytes > bytes.length,
  };
}
