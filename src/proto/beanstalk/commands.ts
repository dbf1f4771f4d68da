// Command codes of the beanstalk protocol, as the parser reports them to a session.
// The numbering is ours; the wire names are beanstalkd's.

export const CMD_PUT = 1;
export const CMD_PEEK = 2;
export const CMD_PEEK_READY = 3;
export const CMD_PEEK_DELAYED = 4;
export const CMD_PEEK_BURIED = 5;
export const CMD_RESERVE = 6;
export const CMD_RESERVE_TIMEOUT = 7;
export const CMD_RESERVE_JOB = 8;
export const CMD_DELETE = 9;
export const CMD_RELEASE = 10;
export const CMD_BURY = 11;
export const CMD_KICK = 12;
export const CMD_KICK_JOB = 13;
export const CMD_TOUCH = 14;
export const CMD_STATS = 15;
export const CMD_STATS_JOB = 16;
export const CMD_STATS_TUBE = 17;
export const CMD_USE = 18;
export const CMD_WATCH = 19;
export const CMD_IGNORE = 20;
export const CMD_LIST_TUBES = 21;
export const CMD_LIST_TUBE_USED = 22;
export const CMD_LIST_TUBES_WATCHED = 23;
export const CMD_QUIT = 24;
export const CMD_PAUSE_TUBE = 25;
export const CMD_COUNT = 26;

/** The `cmd-*` keys of `stats`, in beanstalkd's order, with the command each one counts. */
export const STATS_CMD_KEYS: ReadonlyArray<readonly [string, number]> = [
  ['cmd-put', CMD_PUT],
  ['cmd-peek', CMD_PEEK],
  ['cmd-peek-ready', CMD_PEEK_READY],
  ['cmd-peek-delayed', CMD_PEEK_DELAYED],
  ['cmd-peek-buried', CMD_PEEK_BURIED],
  ['cmd-reserve', CMD_RESERVE],
  ['cmd-reserve-with-timeout', CMD_RESERVE_TIMEOUT],
  ['cmd-delete', CMD_DELETE],
  ['cmd-release', CMD_RELEASE],
  ['cmd-use', CMD_USE],
  ['cmd-watch', CMD_WATCH],
  ['cmd-ignore', CMD_IGNORE],
  ['cmd-bury', CMD_BURY],
  ['cmd-kick', CMD_KICK],
  ['cmd-touch', CMD_TOUCH],
  ['cmd-stats', CMD_STATS],
  ['cmd-stats-job', CMD_STATS_JOB],
  ['cmd-stats-tube', CMD_STATS_TUBE],
  ['cmd-list-tubes', CMD_LIST_TUBES],
  ['cmd-list-tube-used', CMD_LIST_TUBE_USED],
  ['cmd-list-tubes-watched', CMD_LIST_TUBES_WATCHED],
  ['cmd-pause-tube', CMD_PAUSE_TUBE],
];
