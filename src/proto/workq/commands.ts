// Command codes of the workq protocol, as the parser reports them to a session.
// The numbering is ours; the wire names are the workq server's (github.com/iamduo/workq).

export const CMD_ADD = 1;
export const CMD_SCHEDULE = 2;
export const CMD_RUN = 3;
export const CMD_RESULT = 4;
export const CMD_LEASE = 5;
export const CMD_COMPLETE = 6;
export const CMD_FAIL = 7;
export const CMD_DELETE = 8;
export const CMD_INSPECT_SERVER = 9;
export const CMD_INSPECT_QUEUES = 10;
export const CMD_INSPECT_QUEUE = 11;
export const CMD_INSPECT_JOBS = 12;
export const CMD_INSPECT_SCHEDULED_JOBS = 13;
export const CMD_INSPECT_JOB = 14;
export const CMD_COUNT = 15;

/** Wire name of each command code (inspect sub-commands with their object), for logs and tests. */
export const CMD_NAMES: readonly string[] = [
  '',
  'add',
  'schedule',
  'run',
  'result',
  'lease',
  'complete',
  'fail',
  'delete',
  'inspect server',
  'inspect queues',
  'inspect queue',
  'inspect jobs',
  'inspect scheduled-jobs',
  'inspect job',
];

/** Job states as `inspect` reports them (the workq server's job.State* constants). */
export const STATE_NEW = 0;
export const STATE_COMPLETED = 1;
export const STATE_FAILED = 2;
export const STATE_PENDING = 3;
export const STATE_LEASED = 4;
