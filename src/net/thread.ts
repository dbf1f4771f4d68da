// A connection thread (a "site"): runs one shard and serves the beanstalk connections the main
// thread hands it (src/net/threads.ts). A command on its own shard's tubes is applied in the same
// turn, with no hop; the other shards are behind the mesh's rings, and the other sites' requests
// to this shard arrive the same way. The routing state every thread shares (job ids, the job →
// shard map, the tube registry, the counters) is in shared memory made by the main thread.

import { parentPort, workerData } from 'node:worker_threads';
import type net from 'node:net';
import { makeLogger } from '../log.ts';
import { BeanstalkServer, ServerCounters } from '../proto/beanstalk/server.ts';
import { startReclaimTimer } from '../shared/reclaim.ts';
import { Router } from '../route/router.ts';
import { openBeanstalk, RawConnections, serveHandle, serveSocket } from './listener.ts';
import { isRawHandle, rawBinding } from './raw.ts';
import { siteRow, type HandedHandle, type SiteData, type SiteMessage } from './threads.ts';

const d = workerData as SiteData;
const port = parentPort as NonNullable<typeof parentPort>;
const log = makeLogger(d.logLevel).child({ site: d.site });
const send = (m: SiteMessage): void => port.postMessage(m);

const router = new Router({
  shards: d.mesh.shards,
  jobSizeMax: d.jobSizeMax,
  wal: d.wal,
  logLevel: d.logLevel,
  walFaults: d.walFaults,
  backlogBytes: d.backlogBytes,
  busyPollUs: d.busyPollUs,
  mesh: { mesh: d.mesh, site: d.site },
  shared: d.shared,
});
router.onFatal = (shard, err) => send({ type: 'fatal', shard, err: err.stack ?? err.message });
const beanstalk = new BeanstalkServer(router, ServerCounters.attach(d.counters, siteRow(d.site)));
const open = openBeanstalk(beanstalk);
const sockets = new Set<net.Socket>();
const raws = new RawConnections(log);
const stopReclaim = startReclaimTimer((r) => log.debug(r, 'memory given back'), () => beanstalk.workDone());

port.on('message', (m: { socket?: net.Socket } | HandedHandle | 'close') => {
  if (m === 'close') {
    stopReclaim();
    for (const s of sockets) s.destroy();
    raws.destroyAll();
    beanstalk.closeAll();
    void router.close().then(() => {
      send({ type: 'closed' });
      port.close();
    });
    return;
  }
  if ('handle' in m) {
    // Placed by its first line (src/net/placement.ts): those bytes are this connection's first
    // read. The main thread placed it only because this Node serves bare handles (same checks here).
    if (rawBinding() === null || !isRawHandle(m.handle)) {
      log.error('a connection handed over by its handle cannot be served bare here; closed');
      (m.handle as { close?: () => void }).close?.();
      return;
    }
    serveHandle(m.handle, router.newConnId(), log, open, raws, Buffer.from(m.first.buffer, m.first.byteOffset, m.first.byteLength));
    return;
  }
  const socket = m.socket;
  if (socket === undefined) return;
  // Served bare (src/net/raw.ts), the socket object is dropped and `raws` has the connection.
  if (serveSocket(socket, router.newConnId(), log, open, raws) === 'raw') return;
  sockets.add(socket);
  socket.on('close', () => sockets.delete(socket));
});

send({ type: 'ready' });
