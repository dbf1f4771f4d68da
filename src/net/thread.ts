// A connection thread (a "site"): runs one shard and serves the beanstalk connections the main
// thread hands it (src/net/threads.ts). A command on its own shard's tubes is applied in the same
// turn, with no hop; the other shards are behind the mesh's rings, and the other sites' requests
// to this shard arrive the same way. The routing state every thread shares (job ids, the job →
// shard map, the tube registry, the counters) is in shared memory made by the main thread.

import { parentPort, workerData } from 'node:worker_threads';
import { makeLogger } from '../log.ts';
import { BeanstalkServer, ServerCounters } from '../proto/beanstalk/server.ts';
import { startReclaimTimer } from '../shared/reclaim.ts';
import { Router } from '../route/router.ts';
import { SiteConnections } from './site.ts';
import { siteRow, type HandedHandle, type HandedSocket, type SiteData, type SiteMessage } from './threads.ts';

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
  busyPollSpinUs: d.busyPollSpinUs,
  busyPollLongUs: d.busyPollLongUs,
  busyPollLongPreemptions: d.busyPollLongPreemptions,
  mesh: { mesh: d.mesh, site: d.site },
  shared: d.shared,
});
router.onFatal = (shard, err) => send({ type: 'fatal', shard, err: err.stack ?? err.message });
const beanstalk = new BeanstalkServer(router, ServerCounters.attach(d.counters, siteRow(d.site)), d.identity);
const handed = new SiteConnections(beanstalk, log);
const stopReclaim = startReclaimTimer((r) => log.debug(r, 'memory given back'), () => beanstalk.workDone());

port.on('message', (m: HandedSocket | HandedHandle | 'close') => {
  if (m === 'close') {
    stopReclaim();
    handed.destroyAll();
    beanstalk.closeAll();
    void router.close().then(() => {
      send({ type: 'closed' });
      port.close();
    });
    return;
  }
  handed.take(m);
});

send({ type: 'ready' });
