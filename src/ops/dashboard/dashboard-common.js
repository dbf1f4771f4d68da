// What the dashboard's panels share (dashboard.js: tubes; dashboard-workq.js: workq queues):
// elements built with text only, the token kept in sessionStorage and asked for by the page's one
// token form, the JSON API's GETs and token-carrying POSTs, and a page of a job list (the latest
// request's answer only, the rows or a line saying there are none, body previews). Loaded before both.
'use strict';
window.shardstalkUi = (function () {
  const TOKEN_KEY = 'shardstalk-token';
  const $ = (id) => document.getElementById(id);
  let pendingAction = null; // run again once a token is given

  /** An element whose text (never markup) is `text`. */
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY); }

  function headers(withBody) {
    const h = {};
    const t = token();
    if (t) h.Authorization = 'Bearer ' + t;
    if (withBody) h['Content-Type'] = 'application/json';
    return h;
  }

  /** Shows the token form; `retry` runs once a token is given. */
  function askToken(retry) {
    pendingAction = retry;
    $('token-form').hidden = false;
    $('token').focus();
  }

  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = $('token').value.trim();
    if (v === '') return;
    sessionStorage.setItem(TOKEN_KEY, v);
    $('token').value = '';
    $('token-form').hidden = true;
    const retry = pendingAction;
    pendingAction = null;
    if (retry) retry();
  });

  /** GET path: its JSON; throws an Error carrying the status otherwise (401: the token form opens). */
  async function getJson(path) {
    const res = await fetch(path, { headers: headers(false), cache: 'no-store' });
    if (res.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      if ($('token-form').hidden) askToken(null);
      const err = new Error('the API wants the token');
      err.status = 401;
      throw err;
    }
    const body = await res.json();
    if (!res.ok) {
      const err = new Error(body.error || 'HTTP ' + res.status);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  /**
   * POST path with body (JSON); asks for the token first when none is kept, and again on 401.
   * `say(text, error)` shows the outcome; on success `done(answer)` gives the text and `after()`
   * refreshes what it changed.
   */
  async function post(path, body, say, done, after) {
    const run = () => post(path, body, say, done, after);
    if (!token()) { askToken(run); return; }
    let res;
    try {
      res = await fetch(path, { method: 'POST', headers: headers(true), body: JSON.stringify(body), cache: 'no-store' });
    } catch (err) {
      say(String(err), true);
      return;
    }
    if (res.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      say('the token was refused: enter it again', true);
      askToken(run);
      return;
    }
    let answer = {};
    try { answer = await res.json(); } catch { answer = {}; }
    if (!res.ok) { say(answer.error || 'HTTP ' + res.status, true); return; }
    say(done(answer), false);
    after();
  }

  /**
   * A loader of pages: `load(url)` GETs one and resolves with it, or with null if a newer page
   * was asked for meanwhile (its answer wins) or the request failed (`say` tells why).
   */
  function pageLoader(say) {
    let seq = 0;
    return async (url) => {
      const mine = ++seq;
      let page;
      try {
        page = await getJson(url);
      } catch (err) {
        if (mine === seq) say(err.message, true);
        return null;
      }
      return mine === seq ? page : null;
    };
  }

  /** Fills `tbody` with a row per job (`rowOf`), or with one line of `cols` cells saying `emptyText`. */
  function fillJobs(tbody, jobs, rowOf, emptyText, cols) {
    tbody.replaceChildren();
    if (jobs.length === 0) {
      const tr = el('tr', null, 'empty');
      const td = el('td', emptyText);
      td.colSpan = cols;
      tr.appendChild(td);
      tbody.appendChild(tr);
      return;
    }
    for (const j of jobs) tbody.appendChild(rowOf(j));
  }

  /** A job body's preview as a table cell, text only: its encoding if not text, the data, a mark if cut short. */
  function previewCell(preview) {
    const body = el('td', null, 'body');
    if (preview.encoding !== 'text') body.appendChild(el('span', preview.encoding, 'enc'));
    body.appendChild(el('span', preview.data));
    if (preview.truncated) body.appendChild(el('span', ' …', 'more'));
    return body;
  }

  return { $, el, headers, askToken, getJson, post, pageLoader, fillJobs, previewCell };
})();
