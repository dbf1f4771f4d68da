// shardstalk's dashboard (#14): polls GET /api/tubes every second, highlights changed counts,
// draws each tube's ready count over the last minutes, lists a tube's jobs by state a page at a
// time, and runs the admin actions through the JSON API's POST endpoints with the token. Data
// from the server is only ever set as textContent (never as markup). No framework, no build.
'use strict';
(function () {
  const POLL_MS = 1000;
  const HISTORY = 300; // samples kept per tube: 5 minutes at one a second
  const PAGE = 20;
  const COLUMNS = [
    ['ready', 'current-jobs-ready'],
    ['reserved', 'current-jobs-reserved'],
    ['delayed', 'current-jobs-delayed'],
    ['buried', 'current-jobs-buried'],
    ['urgent', 'current-jobs-urgent'],
    ['waiting', 'current-waiting'],
  ];
  const SVG = 'http://www.w3.org/2000/svg';

  const { $, el, getJson, post, pageLoader, fillJobs, previewCell } = window.shardstalkUi;
  const tubesBody = document.querySelector('#tubes tbody');
  const jobsBody = document.querySelector('#jobs tbody');
  /** name → { row, cells: {col: td}, values: {col: text}, history: number[], line: polyline } */
  const rows = new Map();
  let selected = null; // tube name
  let listState = 'ready';
  let cursor = ''; // the page shown starts after this cursor ('' = first page)
  let nextCursor = null;

  function message(text, error) {
    const m = $('message');
    m.textContent = text;
    m.classList.toggle('error', !!error);
  }

  /** POST path with body, with the token (asked for when needed); then counts and jobs again. */
  function act(path, body, done) {
    post(path, body, message, done, () => { poll(true); loadJobs(); });
  }

  // ---- tubes ------------------------------------------------------------------------------

  function tubeRow(name) {
    let r = rows.get(name);
    if (r) return r;
    const row = el('tr');
    row.dataset.tube = name;
    row.appendChild(el('td', name, 'name'));
    const cells = {};
    for (const [col] of COLUMNS.concat([['paused'], ['rate']])) {
      const td = el('td', '', col);
      cells[col] = td;
      row.appendChild(td);
    }
    const chart = el('td', '', 'chart');
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 ' + HISTORY + ' 28');
    svg.setAttribute('preserveAspectRatio', 'none');
    const line = document.createElementNS(SVG, 'polyline');
    const title = document.createElementNS(SVG, 'title');
    svg.appendChild(title);
    svg.appendChild(line);
    chart.appendChild(svg);
    row.appendChild(chart);
    row.addEventListener('click', () => select(name));
    r = { row, cells, values: {}, history: [], line, title, total: null, at: 0 };
    rows.set(name, r);
    return r;
  }

  function setCell(r, col, text) {
    const td = r.cells[col];
    if (r.values[col] === text) return;
    const first = !(col in r.values);
    r.values[col] = text;
    td.textContent = text;
    if (!first) {
      td.classList.remove('changed');
      void td.offsetWidth; // restart the highlight
      td.classList.add('changed');
    }
  }

  function drawSpark(r) {
    const h = r.history;
    const max = Math.max(1, ...h);
    // The samples kept span the width (the first minutes fill it too); y from 0 to the highest.
    const step = h.length > 1 ? HISTORY / (h.length - 1) : 0;
    const pts = h.map((v, i) => (i * step).toFixed(1) + ',' + (27 - (v / max) * 26).toFixed(1));
    r.line.setAttribute('points', pts.join(' '));
    r.title.textContent = 'ready: now ' + h[h.length - 1] + ', highest ' + max + ' (last ' + h.length + ' s)';
  }

  let polling = false;
  async function poll(once) {
    if (polling) return;
    polling = true;
    try {
      const body = await getJson('/api/tubes');
      const seen = new Set();
      const names = body.tubes.map((t) => t.name).sort();
      let selectedChanged = false;
      for (const name of names) {
        const t = body.tubes.find((x) => x.name === name);
        const r = tubeRow(name);
        seen.add(name);
        for (const [col, key] of COLUMNS) {
          const v = String(t.stats[key] ?? '');
          if (name === selected && r.values[col] !== undefined && r.values[col] !== v) selectedChanged = true;
          setCell(r, col, v);
        }
        // Puts a second: the growth of total-jobs (every job ever put in the tube) since the last poll.
        const total = Number(t.stats['total-jobs'] ?? 0);
        const now = performance.now();
        if (r.total !== null && now > r.at) {
          const rate = Math.max(0, total - r.total) / ((now - r.at) / 1000);
          r.cells.rate.textContent = rate < 10 ? rate.toFixed(1) : String(Math.round(rate));
        }
        r.total = total;
        r.at = now;
        const left = Number(t.stats['pause-time-left'] ?? 0);
        setCell(r, 'paused', left > 0 ? left + ' s' : 'no');
        if (!once) {
          r.history.push(Number(t.stats['current-jobs-ready'] ?? 0));
          if (r.history.length > HISTORY) r.history.shift();
          drawSpark(r);
        }
      }
      // Keep the rows in name order; drop tubes that went away.
      for (const [name, r] of rows) {
        if (!seen.has(name)) { r.row.remove(); rows.delete(name); }
      }
      names.forEach((name) => tubesBody.appendChild(rows.get(name).row));
      $('status').textContent = names.length + ' tube' + (names.length === 1 ? '' : 's') + ', updated ' + new Date().toLocaleTimeString();
      $('status').classList.remove('error');
      if (selected !== null && !seen.has(selected)) select(null);
      else if (selectedChanged) loadJobs();
    } catch (err) {
      $('status').textContent = 'cannot reach the server: ' + err.message;
      $('status').classList.add('error');
    } finally {
      polling = false;
    }
  }

  function tick() {
    poll(false).finally(() => setTimeout(tick, POLL_MS));
  }

  // ---- one tube ---------------------------------------------------------------------------

  function select(name) {
    selected = name;
    for (const [n, r] of rows) r.row.classList.toggle('selected', n === name);
    $('detail').hidden = name === null;
    if (name === null) return;
    $('detail-name').textContent = name;
    message('', false);
    cursor = '';
    loadJobs();
  }

  function showState() {
    for (const b of document.querySelectorAll('button.state')) b.classList.toggle('active', b.dataset.state === listState);
  }

  const loadPage = pageLoader(message);
  async function loadJobs() {
    if (selected === null) return;
    showState();
    const q = new URLSearchParams({ state: listState, limit: String(PAGE) });
    if (cursor !== '') q.set('cursor', cursor);
    const page = await loadPage('/api/tubes/' + encodeURIComponent(selected) + '/jobs?' + q);
    if (page === null) return; // failed, or a newer request answers
    nextCursor = page.next;
    $('next-page').disabled = nextCursor === null;
    $('first-page').disabled = cursor === '';
    fillJobs(jobsBody, page.jobs, jobRow, 'no ' + listState + ' jobs' + (cursor === '' ? '' : ' after this point'), 10);
  }

  function jobRow(j) {
    const tr = el('tr');
    tr.dataset.id = String(j.id);
    tr.appendChild(el('td', j.id));
    tr.appendChild(el('td', j.pri));
    tr.appendChild(el('td', j.age + ' s'));
    tr.appendChild(el('td', j.state === 'ready' || j.state === 'buried' ? '' : j['time-left'] + ' s'));
    tr.appendChild(el('td', j.reserves));
    tr.appendChild(el('td', j.buries));
    tr.appendChild(el('td', j.kicks));
    tr.appendChild(el('td', j['body-bytes']));
    tr.appendChild(previewCell(j.preview));
    const acts = el('td');
    if (j.state === 'buried' || j.state === 'delayed') {
      const k = el('button', 'kick', 'job-kick');
      k.type = 'button';
      k.addEventListener('click', () => act('/api/jobs/' + j.id + '/kick', {}, () => 'kicked job ' + j.id));
      acts.appendChild(k);
    }
    if (j.state !== 'reserved') {
      const d = el('button', 'delete', 'job-delete danger');
      d.type = 'button';
      d.addEventListener('click', () => {
        if (confirm('Delete job ' + j.id + '?')) act('/api/jobs/' + j.id + '/delete', {}, () => 'deleted job ' + j.id);
      });
      acts.appendChild(d);
    }
    tr.appendChild(acts);
    return tr;
  }

  const tubePath = (what) => '/api/tubes/' + encodeURIComponent(selected) + '/' + what;

  $('kick').addEventListener('click', () => {
    const n = Math.max(1, Math.floor(Number($('kick-count').value) || 1));
    act(tubePath('kick'), { count: n }, (a) => 'kicked ' + a.kicked + ' job' + (a.kicked === 1 ? '' : 's') + ' in ' + a.tube);
  });
  $('pause').addEventListener('click', () => {
    const s = Math.max(1, Math.floor(Number($('pause-seconds').value) || 1));
    act(tubePath('pause'), { seconds: s }, (a) => 'paused ' + a.tube + ' for ' + a.paused + ' s');
  });
  $('resume').addEventListener('click', () => {
    act(tubePath('pause'), { seconds: 0 }, (a) => 'resumed ' + a.tube);
  });
  $('clear').addEventListener('click', () => {
    const states = [...document.querySelectorAll('input.clear-state:checked')].map((c) => c.value);
    if (states.length === 0) { message('choose the states to clear', true); return; }
    if (!confirm('Delete every ' + states.join(', ') + ' job in ' + selected + '?')) return;
    act(tubePath('clear'), { states }, (a) => 'deleted ' + a.deleted + ' job' + (a.deleted === 1 ? '' : 's') + ' from ' + a.tube);
  });
  $('move').addEventListener('click', () => {
    const states = [...document.querySelectorAll('input.move-state:checked')].map((c) => c.value);
    const to = $('move-to').value.trim();
    if (states.length === 0) { message('choose the states to move', true); return; }
    if (to === '') { message('name the tube to move to', true); return; }
    if (!confirm('Move every ' + states.join(', ') + ' job in ' + selected + ' to ' + to + '?')) return;
    act(tubePath('move'), { to, states }, (a) => 'moved ' + a.moved + ' job' + (a.moved === 1 ? '' : 's') + ' from ' + a.tube + ' to ' + a.to);
  });
  for (const b of document.querySelectorAll('button.state')) {
    b.addEventListener('click', () => { listState = b.dataset.state; cursor = ''; loadJobs(); });
  }
  $('next-page').addEventListener('click', () => { if (nextCursor !== null) { cursor = nextCursor; loadJobs(); } });
  $('first-page').addEventListener('click', () => { cursor = ''; loadJobs(); });

  tick();
})();
