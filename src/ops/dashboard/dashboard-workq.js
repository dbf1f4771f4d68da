// shardstalk's dashboard, workq panel (#14): shown only when GET /api/workq/queues answers (404
// when the server has no workq listener). Polls the queues with their ready and scheduled
// lengths every second (as dashboard.js polls the tubes); a click on a queue lists its ready or
// scheduled jobs a page at a time with their payload previews, each with a delete button (POST
// /api/workq/jobs/:id/delete with the page's token, through dashboard-common.js). Data from the
// server is only ever set as textContent.
'use strict';
(function () {
  const POLL_MS = 1000;
  const PAGE = 20;

  const { $, el, getJson, post, pageLoader, fillJobs, previewCell } = window.shardstalkUi;
  const panel = $('workq');
  const queuesBody = document.querySelector('#wq-queues tbody');
  const jobsBody = document.querySelector('#wq-jobs tbody');
  /** name → { row, ready: td, scheduled: td } */
  const rows = new Map();
  let selected = null;
  let listState = 'ready';
  let cursor = '';
  let nextCursor = null;

  function message(text, error) {
    const m = $('wq-message');
    m.textContent = text;
    m.classList.toggle('error', !!error);
  }

  // ---- queues ----

  function queueRow(name) {
    let r = rows.get(name);
    if (r) return r;
    const row = el('tr');
    row.dataset.queue = name;
    row.appendChild(el('td', name, 'name'));
    const ready = el('td', '', 'ready');
    const scheduled = el('td', '', 'scheduled');
    row.appendChild(ready);
    row.appendChild(scheduled);
    row.addEventListener('click', () => select(name));
    r = { row, ready, scheduled };
    rows.set(name, r);
    return r;
  }

  function setCell(td, text) {
    if (td.textContent === text) return;
    const first = td.textContent === '';
    td.textContent = text;
    if (!first) {
      td.classList.remove('changed');
      void td.offsetWidth;
      td.classList.add('changed');
    }
  }

  let off = false;
  async function poll() {
    let body;
    try {
      body = await getJson('/api/workq/queues');
    } catch (err) {
      if (err.status === 404) { off = true; panel.hidden = true; }
      return;
    }
    panel.hidden = false;
    const seen = new Set();
    let selectedChanged = false;
    for (const q of body.queues) {
      seen.add(q.name);
      const r = queueRow(q.name);
      const ready = String(q.ready);
      const scheduled = String(q.scheduled);
      if (q.name === selected && (r.ready.textContent !== ready || r.scheduled.textContent !== scheduled)) selectedChanged = true;
      setCell(r.ready, ready);
      setCell(r.scheduled, scheduled);
    }
    for (const [name, r] of rows) if (!seen.has(name)) { r.row.remove(); rows.delete(name); }
    body.queues.forEach((q) => queuesBody.appendChild(rows.get(q.name).row));
    $('wq-count').textContent = body.queues.length + ' queue' + (body.queues.length === 1 ? '' : 's');
    if (selected !== null && !seen.has(selected)) select(null);
    else if (selectedChanged) loadJobs();
  }

  function tick() {
    poll().finally(() => { if (!off) setTimeout(tick, POLL_MS); });
  }

  // ---- one queue ----

  function select(name) {
    selected = name;
    for (const [n, r] of rows) r.row.classList.toggle('selected', n === name);
    $('wq-detail').hidden = name === null;
    if (name === null) return;
    $('wq-detail-name').textContent = name;
    message('', false);
    cursor = '';
    loadJobs();
  }

  const loadPage = pageLoader(message);
  async function loadJobs() {
    if (selected === null) return;
    for (const b of document.querySelectorAll('button.wq-state')) b.classList.toggle('active', b.dataset.state === listState);
    const q = new URLSearchParams({ state: listState, limit: String(PAGE) });
    if (cursor !== '') q.set('cursor', cursor);
    const page = await loadPage('/api/workq/queues/' + encodeURIComponent(selected) + '/jobs?' + q);
    if (page === null) return; // failed, or a newer request answers
    nextCursor = page.next;
    $('wq-next-page').disabled = nextCursor === null;
    $('wq-first-page').disabled = cursor === '';
    fillJobs(jobsBody, page.jobs, jobRow, 'no ' + listState + ' jobs' + (cursor === '' ? '' : ' after this point'), 9);
  }

  function jobRow(j) {
    const tr = el('tr');
    tr.dataset.id = j.id;
    tr.appendChild(el('td', j.id, 'uuid'));
    tr.appendChild(el('td', j.priority));
    tr.appendChild(el('td', j.attempts + (j['max-attempts'] ? ' / ' + j['max-attempts'] : '')));
    tr.appendChild(el('td', j.ttr + ' ms'));
    tr.appendChild(el('td', j.ttl + ' ms'));
    tr.appendChild(el('td', j.created));
    tr.appendChild(el('td', j.time === null ? '' : j.time));
    tr.appendChild(previewCell(j.preview));
    const acts = el('td');
    const d = el('button', 'delete', 'wq-job-delete danger');
    d.type = 'button';
    d.addEventListener('click', () => {
      if (confirm('Delete workq job ' + j.id + '?')) del(j.id);
    });
    acts.appendChild(d);
    tr.appendChild(acts);
    return tr;
  }

  function del(id) {
    post('/api/workq/jobs/' + encodeURIComponent(id) + '/delete', {}, message, () => 'deleted workq job ' + id, () => { poll(); loadJobs(); });
  }

  for (const b of document.querySelectorAll('button.wq-state')) {
    b.addEventListener('click', () => { listState = b.dataset.state; cursor = ''; loadJobs(); });
  }
  $('wq-next-page').addEventListener('click', () => { if (nextCursor !== null) { cursor = nextCursor; loadJobs(); } });
  $('wq-first-page').addEventListener('click', () => { cursor = ''; loadJobs(); });

  tick();
})();
