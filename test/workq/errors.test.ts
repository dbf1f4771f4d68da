// workq over real sockets: every -CLIENT-ERROR the server gives for a malformed command, each
// followed by a probe that must be answered normally (the connection goes on), and that also
// shows the bad command created nothing. Texts and their order of checks are the workq 0.2
// server's (prot.ParseCmd, then the handler, then the job controller).
//
// `@ID` in an input is replaced by a fresh UUIDv4, and the probe is `inspect job <that id>`,
// which must be -NOT-FOUND: a malformed add/schedule/run must not have stored the job.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  addCmd, E_ARGS, E_FLAGS, E_ID, E_LIMIT, E_MAX_ATTEMPTS, E_MAX_FAILS, E_NAME, E_OFFSET, E_PRIORITY, E_PSIZE,
  E_RSIZE, E_TIME, E_TTL, E_TTR, E_UNKNOWN, E_WAIT, inspectQueueReply, leaseReply, NOT_FOUND, OK, SHARD_COUNTS,
  sharedWqServer, uuid, wqTime,
} from '../support/workq.ts';

/** A version-1 UUID: well formed, but not v4. */
const V1 = '6ba7b810-9dad-11d1-80b4-00c04fd430c4';
/** Version 4 but not the RFC 4122 variant. */
const BADVAR = '6ba7b810-9dad-41d1-c0b4-00c04fd430c4';
const NIL = '00000000-0000-0000-0000-000000000000';
const FUTURE = '2090-01-01T00:00:00Z';

const CASES: Array<[string, string, string[]]> = [
  // ---- framing ----
  ['empty line', '\r\n', [E_UNKNOWN]],
  ['spaces only', '   \r\n', [E_UNKNOWN]],
  ['unknown command', 'foo bar\r\n', [E_UNKNOWN]],
  ['commands are case sensitive', 'ADD @ID q 1000 1000 0\r\n', [E_UNKNOWN]],
  ['leading space', ' inspect server\r\n', [E_UNKNOWN]],
  ['bad flag before the name is looked at', 'foo -=1\r\n', [E_FLAGS]],
  ['flag without a value', 'delete @ID -x=\r\n', [E_FLAGS]],
  ['flag with two =', 'delete @ID -x==1\r\n', [E_FLAGS]],
  ['repeated flag; the payload is then read as commands', 'add @ID q 10 100 1 -priority=1 -priority=2\r\na\r\n', [E_FLAGS, E_UNKNOWN]],
  // ---- argument counts ----
  ['add, no args', 'add\r\n', [E_ARGS]],
  ['add, no size', 'add @ID q 10 100\r\n', [E_ARGS]],
  ['add, a flag without = is an argument', 'add @ID q 10 100 1 -max-attempts\r\na\r\n', [E_ARGS, E_UNKNOWN]],
  ['schedule, no size', `schedule @ID q 10 1000 ${FUTURE}\r\n`, [E_ARGS]],
  ['run, no size', 'run @ID q 10 1000\r\n', [E_ARGS]],
  ['complete, no size', 'complete @ID\r\n', [E_ARGS]],
  ['fail, extra arg', 'fail @ID 1 2\r\n', [E_ARGS]],
  ['delete, no id', 'delete\r\n', [E_ARGS]],
  ['delete, two ids', 'delete @ID @ID\r\n', [E_ARGS]],
  ['result, no timeout', 'result @ID\r\n', [E_ARGS]],
  ['lease, no timeout', 'lease q\r\n', [E_ARGS]],
  ['lease, nothing', 'lease\r\n', [E_ARGS]],
  ['inspect, nothing', 'inspect\r\n', [E_ARGS]],
  // ---- sizes: answered at once; the payload bytes are then read as commands ----
  ['add, size not a number', 'add @ID q 10 100 *\r\nab\r\n', [E_PSIZE, E_UNKNOWN]],
  ['add, negative size', 'add @ID q 10 100 -8\r\nab\r\n', [E_PSIZE, E_UNKNOWN]],
  ['schedule, negative size', `schedule @ID q 10 100 ${FUTURE} -1\r\na\r\n`, [E_PSIZE, E_UNKNOWN]],
  ['run, size not a number', 'run @ID q 10 100 *\r\n', [E_PSIZE]],
  ['complete, negative size', 'complete @ID -1\r\n', [E_PSIZE]],
  ['fail, negative size: "result" size', 'fail @ID -1\r\n', [E_RSIZE]],
  // ---- the two bytes after the payload must be \r\n (they are consumed either way) ----
  ['add, payload longer than its size', 'add @ID q 10 100 3\r\nabcXY', [E_PSIZE]],
  ['add, payload one byte over: trailer "b\\r", then an empty line', 'add @ID q 10 100 1\r\nab\r\r\n', [E_PSIZE, E_UNKNOWN]],
  ['complete, result longer than its size', 'complete @ID 1\r\nabc\r\n', [E_PSIZE, E_UNKNOWN]],
  ['fail, result longer than its size', 'fail @ID 1\r\nabc\r\n', [E_RSIZE, E_UNKNOWN]],
  // ---- add: the handler, then the controller (after the payload) ----
  ['add, four flags', 'add @ID q 1000 60000 1 -a=1 -b=1 -c=1 -d=1\r\na\r\n', [E_ARGS]],
  ['add, not a uuid', 'add not-a-uuid-at-all-but-long-enough q 10 1000 1\r\na\r\n', [E_ID]],
  ['add, v1 uuid', `add ${V1} q 10 1000 1\r\na\r\n`, [E_ID]],
  ['add, wrong variant', `add ${BADVAR} q 10 1000 1\r\na\r\n`, [E_ID]],
  ['add, nil uuid', `add ${NIL} q 10 1000 1\r\na\r\n`, [E_ID]],
  ['add, bad name', 'add @ID q/1 10 100 1\r\na\r\n', [E_NAME]],
  ['add, name of 256 bytes', `add @ID ${'n'.repeat(256)} 10 100 1\r\na\r\n`, [E_NAME]],
  ['add, TTR 0', 'add @ID q 0 100 1\r\na\r\n', [E_TTR]],
  ['add, TTR over 24 h', 'add @ID q 86400001 100 1\r\na\r\n', [E_TTR]],
  ['add, TTR negative', 'add @ID q -10 100 1\r\na\r\n', [E_TTR]],
  ['add, TTR not a number', 'add @ID q x 100 1\r\na\r\n', [E_TTR]],
  ['add, TTL 0', 'add @ID q 10 0 1\r\na\r\n', [E_TTL]],
  ['add, TTL over 30 days', 'add @ID q 10 2592000001 1\r\na\r\n', [E_TTL]],
  ['add, TTL not a number', 'add @ID q 10 x 1\r\na\r\n', [E_TTL]],
  ['add, max-attempts 256', 'add @ID q 10 100 1 -max-attempts=256\r\na\r\n', [E_MAX_ATTEMPTS]],
  ['add, max-attempts negative', 'add @ID q 10 100 1 -max-attempts=-1\r\na\r\n', [E_MAX_ATTEMPTS]],
  ['add, max-fails not a number', 'add @ID q 10 100 1 -max-fails=x\r\na\r\n', [E_MAX_FAILS]],
  ['add, priority over int32', 'add @ID q 10 100 1 -priority=2147483648\r\na\r\n', [E_PRIORITY]],
  ['add, priority not an integer', 'add @ID q 10 100 1 -priority=1.5\r\na\r\n', [E_PRIORITY]],
  ['add, a bad TTL is found before a bad flag', 'add @ID q 10 x 1 -priority=x\r\na\r\n', [E_TTL]],
  // ---- schedule ----
  ['schedule, four flags', `schedule @ID q 10 100 ${FUTURE} 1 -a=1 -b=1 -c=1 -d=1\r\na\r\n`, [E_ARGS]],
  ['schedule, time without Z', 'schedule @ID q 10 100 2090-01-01T00:00:00 1\r\na\r\n', [E_TIME]],
  ['schedule, date only', 'schedule @ID q 10 100 2090-01-01 1\r\na\r\n', [E_TIME]],
  ['schedule, time + TTL already past', 'schedule @ID q 10 100 2016-06-13T14:08:18Z 1\r\na\r\n', [E_TIME]],
  ['schedule, bad name', `schedule @ID q! 10 100 ${FUTURE} 1\r\na\r\n`, [E_NAME]],
  ['schedule, v1 uuid', `schedule ${V1} q 10 100 ${FUTURE} 1\r\na\r\n`, [E_ID]],
  ['schedule, TTR 0', `schedule @ID q 0 100 ${FUTURE} 1\r\na\r\n`, [E_TTR]],
  ['schedule, TTL 0', `schedule @ID q 10 0 ${FUTURE} 1\r\na\r\n`, [E_TTL]],
  // ---- run ----
  ['run, two flags', 'run @ID q 10 100 1 -priority=1 -max-attempts=1\r\na\r\n', [E_ARGS]],
  ['run, wait timeout over 24 h', 'run @ID q 10 86400001 1\r\na\r\n', [E_WAIT]],
  ['run, wait timeout negative', 'run @ID q 10 -1 1\r\na\r\n', [E_WAIT]],
  ['run, priority not a number', 'run @ID q 10 100 1 -priority=x\r\na\r\n', [E_PRIORITY]],
  ['run, TTR not a number', 'run @ID q x 100 1\r\na\r\n', [E_TTR]],
  ['run, TTR 0', 'run @ID q 0 100 1\r\na\r\n', [E_TTR]],
  ['run, bad name', 'run @ID q! 10 100 1\r\na\r\n', [E_NAME]],
  ['run, v1 uuid', `run ${V1} q 10 100 1\r\na\r\n`, [E_ID]],
  // ---- result ----
  ['result, flag', 'result @ID 1 -x=1\r\n', [E_ARGS]],
  ['result, not a uuid', 'result * 1\r\n', [E_ID]],
  ['result, v1 uuid', `result ${V1} 1\r\n`, [E_ID]],
  ['result, timeout not a number', 'result @ID x\r\n', [E_WAIT]],
  ['result, timeout negative', 'result @ID -1\r\n', [E_WAIT]],
  ['result, timeout over 24 h', 'result @ID 86400001\r\n', [E_WAIT]],
  // ---- lease ----
  ['lease, flag', 'lease q 1 -x=1\r\n', [E_ARGS]],
  ['lease, bad name', 'lease q q! 1000\r\n', [E_NAME]],
  ['lease, timeout not a number', 'lease q x\r\n', [E_WAIT]],
  ['lease, timeout over 24 h', 'lease q 86400001\r\n', [E_WAIT]],
  ['lease, timeout over uint32', 'lease q 4294967296\r\n', [E_WAIT]],
  // ---- complete, fail ----
  ['complete, flag', 'complete @ID 1 -x=1\r\na\r\n', [E_ARGS]],
  ['complete, not a uuid', 'complete * 1\r\na\r\n', [E_ID]],
  ['complete, v1 uuid', `complete ${V1} 1\r\na\r\n`, [E_ID]],
  ['fail, flag', 'fail @ID 1 -x=1\r\na\r\n', [E_ARGS]],
  ['fail, v1 uuid', `fail ${V1} 1\r\na\r\n`, [E_ID]],
  // ---- delete ----
  ['delete, flag', 'delete @ID -x=1\r\n', [E_ARGS]],
  ['delete, not a uuid', 'delete *\r\n', [E_ID]],
  // ---- inspect ----
  ['inspect, unknown object', 'inspect foo\r\n', [E_UNKNOWN]],
  ['inspect, object case', 'inspect Server\r\n', [E_UNKNOWN]],
  ['inspect server, extra arg', 'inspect server x\r\n', [E_ARGS]],
  ['inspect server, flag', 'inspect server -x=1\r\n', [E_ARGS]],
  ['inspect queues, no limit', 'inspect queues 0\r\n', [E_ARGS]],
  ['inspect queues, offset not a number', 'inspect queues x 10\r\n', [E_OFFSET]],
  ['inspect queues, offset negative', 'inspect queues -1 10\r\n', [E_OFFSET]],
  ['inspect queues, limit 0', 'inspect queues 0 0\r\n', [E_LIMIT]],
  ['inspect queues, limit 101', 'inspect queues 0 101\r\n', [E_LIMIT]],
  ['inspect queue, no name', 'inspect queue\r\n', [E_ARGS]],
  ['inspect queue, bad name', 'inspect queue q!\r\n', [E_NAME]],
  ['inspect jobs, no limit', 'inspect jobs q 0\r\n', [E_ARGS]],
  ['inspect jobs, bad name', 'inspect jobs q! 0 1\r\n', [E_NAME]],
  ['inspect jobs, offset not a number', 'inspect jobs q x 1\r\n', [E_OFFSET]],
  ['inspect jobs, limit 101', 'inspect jobs q 0 101\r\n', [E_LIMIT]],
  ['inspect scheduled-jobs, limit 0', 'inspect scheduled-jobs q 0 0\r\n', [E_LIMIT]],
  ['inspect job, no id', 'inspect job\r\n', [E_ARGS]],
  ['inspect job, not a uuid', 'inspect job *\r\n', [E_ID]],
  ['inspect job, extra arg', 'inspect job @ID x\r\n', [E_ARGS]],
];

describe.each(SHARD_COUNTS)('workq, %i shard(s): malformed commands', (shards) => {
  const srv = sharedWqServer(shards, { beforeAll, afterAll, afterEach });

  it.each(CASES)('%s', async (_what, input, replies) => {
    const c = await srv.conn();
    const id = uuid();
    await c.send(input.replaceAll('@ID', id) + `inspect job ${id}\r\n`);
    await c.expect(replies.join('') + NOT_FOUND);
  });

  it('all of them pipelined in one write on one connection', async () => {
    const c = await srv.conn();
    let text = '';
    let want = '';
    for (const [, input, replies] of CASES) {
      const id = uuid();
      text += input.replaceAll('@ID', id) + `inspect job ${id}\r\n`;
      want += replies.join('') + NOT_FOUND;
    }
    await c.send(text);
    await c.expect(want, 10_000);
  });

  it('names of 255 bytes and every allowed character are fine', async () => {
    const c = await srv.conn();
    const name = 'aZ09_.-'.repeat(37).slice(0, 252) + 'end';
    expect(name.length).toBe(255);
    const id = uuid();
    await c.send(addCmd(id, name, 1000, 60000, 'x'));
    await c.expect(OK);
    await c.ask(`inspect queue ${name}`, inspectQueueReply(name, 1, 0));
    await c.ask(`lease ${name} 0`, leaseReply(id, name, 1000, 'x'));
  });

  it('the largest TTR and TTL, and the int32 priority range, are accepted', async () => {
    const c = await srv.conn();
    const [a, b] = [uuid(), uuid()];
    await c.send(addCmd(a, 'limits', 86400000, 2592000000, 'x', { priority: 2147483647, maxAttempts: 255, maxFails: 255 }));
    await c.expect(OK);
    await c.send(addCmd(b, 'limits', 1, 1000000, 'y', { priority: -2147483648 }));
    await c.expect(OK);
    expect(await c.inspectJob(a)).toMatchObject({ ttr: 86400000, ttl: 2592000000, priority: 2147483647, maxAttempts: 255, maxFails: 255 });
    expect(await c.inspectJob(b)).toMatchObject({ ttr: 1, priority: -2147483648 });
  });

  it('unknown flags are accepted and ignored (add: up to three flags)', async () => {
    const c = await srv.conn();
    const id = uuid();
    await c.send(`add ${id} flags 1000 60000 1 -foo=1 -priority=4 -bar=x\r\na\r\n`);
    await c.expect(OK);
    expect(await c.inspectJob(id)).toMatchObject({ priority: 4 });
  });

  it('a schedule time far ahead is accepted and the job waits', async () => {
    const c = await srv.conn();
    const id = uuid();
    await c.send(`schedule ${id} far 1000 60000 ${wqTime(Date.now() + 86400_000)} 1\r\na\r\n`);
    await c.expect(OK);
    await c.ask('inspect queue far', inspectQueueReply('far', 0, 1));
  });
});
