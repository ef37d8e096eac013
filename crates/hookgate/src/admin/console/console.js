// hookgate console: a small client of the operator API (/api/v1/...) and of /metrics, as an
// ES module (with ./dom.js, the page's building blocks, and ./metrics.js, the /metrics reader).
//
// Rules these files keep (a unit test of the binary checks the words):
// - the token lives in `state.token` only: never in storage, a cookie or the address bar;
//   it travels as `Authorization: Bearer`, with `credentials: 'omit'`;
// - everything that comes from the server is rendered as text (textContent, text nodes,
//   attribute values through setAttribute), never parsed as markup;
// - no inline code: the page's Content-Security-Policy allows only these files.

import { $, el, clear, show, when, isTime, statusClass, setStatus, table, pretty } from './dom.js';
import { parseMetrics, sum, buckets, quantile, seconds } from './metrics.js';

const state = {
  token: null,
  // The filter of the events list as query parameters (no cursor, no limit).
  filter: {},
  limit: 50,
  cursor: null,
  nextCursor: null,
  eventId: null,
  event: null,
  jobs: new Map(),
  metricsPrev: null,
  timers: new Map(),
};

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// One call of the API with the token. Answers `{status, data, text, contentType}`; a non-2xx
// answer throws ApiError with the server's `{"error": ...}` text. A 401 during a session
// signs out (the token was removed or rotated).
async function api(method, path, body, token) {
  const headers = { Authorization: 'Bearer ' + (token || state.token), Accept: 'application/json' };
  const init = { method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'the gateway did not answer (' + e.message + ')');
  }
  const text = await res.text();
  const contentType = res.headers.get('content-type') || '';
  let data = null;
  if (contentType.includes('json') && text) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = null;
    }
  }
  if (!res.ok) {
    const message = data && typeof data.error === 'string' ? data.error : text.slice(0, 300) || res.statusText;
    if (res.status === 401 && !token) {
      signOut('The gateway refused the token (401): sign in again.');
    }
    throw new ApiError(res.status, message);
  }
  return { status: res.status, data, text, contentType };
}

function explain(e) {
  if (!(e instanceof ApiError)) return String(e && e.message ? e.message : e);
  if (e.status === 403) return 'Not allowed for this token (403): ' + e.message;
  if (e.status === 0) return e.message;
  return e.status + ': ' + e.message;
}

function notice(text) {
  const n = $('notice');
  n.textContent = text || '';
  n.hidden = !text;
}

// --- timers: every poll belongs to a view and stops when the view changes ---------------

function every(name, ms, fn) {
  stop(name);
  const id = setInterval(fn, ms);
  state.timers.set(name, id);
}

function stop(name) {
  if (state.timers.has(name)) {
    clearInterval(state.timers.get(name));
    state.timers.delete(name);
  }
}

function stopAll() {
  for (const name of [...state.timers.keys()]) stop(name);
}

// --- sign in / out ---------------------------------------------------------------------

async function signIn(ev) {
  ev.preventDefault();
  const input = $('token');
  const token = input.value.trim();
  input.value = '';
  const error = $('login-error');
  error.hidden = true;
  if (!token) return;
  $('login-submit').disabled = true;
  try {
    // Any read proves the token; a token without `read` (403) may still operate.
    await api('GET', '/api/v1/events?limit=1', undefined, token);
    state.token = token;
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) {
      state.token = token;
      notice('This token has no read scope: the lists stay empty.');
    } else if (e instanceof ApiError && e.status === 401) {
      error.textContent = 'Token refused: the gateway does not know this token.';
      error.hidden = false;
    } else {
      error.textContent = 'Sign-in failed: ' + explain(e);
      error.hidden = false;
    }
  } finally {
    $('login-submit').disabled = false;
  }
  if (state.token) {
    document.body.dataset.signedIn = 'yes';
    if (!location.hash || location.hash === '#/login') location.hash = '#/events';
    else route();
  }
}

function signOut(message) {
  state.token = null;
  state.event = null;
  state.jobs.clear();
  state.metricsPrev = null;
  stopAll();
  document.body.dataset.signedIn = 'no';
  route();
  if (message) {
    const error = $('login-error');
    error.textContent = message;
    error.hidden = false;
  }
}

// --- routing -----------------------------------------------------------------------------

function showView(name) {
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + name;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === name || (name === 'event' && a.dataset.view === 'events'));
  }
  $('nav').hidden = !state.token;
  $('logout').hidden = !state.token;
}

function route() {
  stopAll();
  if (!state.token) {
    showView('login');
    $('token').focus();
    return;
  }
  const hash = location.hash.replace(/^#\/?/, '');
  const [view, ...rest] = hash.split('/');
  if (view === 'events' && rest.length > 0 && rest[0] !== '') {
    showView('event');
    openEvent(decodeURIComponent(rest.join('/')));
  } else if (view === 'jobs') {
    showView('jobs');
    openJobs();
  } else if (view === 'rejections') {
    showView('rejections');
    loadRejections();
  } else if (view === 'audit') {
    showView('audit');
    loadAudit();
  } else if (view === 'live') {
    showView('live');
    openLive();
  } else {
    showView('events');
    loadEvents();
  }
}

// --- events list -------------------------------------------------------------------------

function readFilters() {
  const form = $('filters');
  const filter = {};
  for (const field of form.elements) {
    if (!field.name || field.name === 'limit') continue;
    const value = field.value.trim();
    if (value) filter[field.name] = value;
  }
  state.filter = filter;
  const limit = parseInt($('f-limit').value, 10);
  state.limit = Number.isFinite(limit) && limit > 0 ? limit : 50;
}

function eventsQuery() {
  const q = new URLSearchParams(state.filter);
  q.set('limit', String(state.limit));
  if (state.cursor) q.set('cursor', state.cursor);
  return q.toString();
}

async function loadEvents() {
  const body = $('events-table').tBodies[0];
  const summary = $('events-summary');
  summary.textContent = 'Loading…';
  let page;
  try {
    page = (await api('GET', '/api/v1/events?' + eventsQuery())).data || {};
  } catch (e) {
    summary.textContent = '';
    clear(body);
    notice('Events: ' + explain(e));
    return;
  }
  notice('');
  const events = Array.isArray(page.events) ? page.events : [];
  state.nextCursor = page.next_cursor || null;
  clear(body);
  for (const ev of events) {
    const id = show(ev.id);
    const link = el('a', { href: '#/events/' + encodeURIComponent(id), className: 'event-link' }, id);
    const status = el('span', { className: statusClass(ev.status) }, show(ev.status).toUpperCase());
    body.append(
      el('tr', { dataset: { id } },
        el('td', { className: 'when' }, when(ev.received_at)),
        el('td', { className: 'event-status' }, status),
        el('td', null, show(ev.provider)),
        el('td', null, show(ev.endpoint_id)),
        el('td', { className: 'event-type' }, show(ev.event_type)),
        el('td', { className: 'id' }, link)),
    );
  }
  const filtered = Object.keys(state.filter).length > 0 ? ' matching the filter' : '';
  summary.textContent = events.length === 0
    ? 'No events' + filtered + '.'
    : events.length + ' event' + (events.length === 1 ? '' : 's') + filtered
      + (state.cursor ? ' (a later page)' : '') + (state.nextCursor ? '; more on the next page.' : '.');
  $('next-page').disabled = !state.nextCursor;
  $('job-filter').textContent = JSON.stringify(state.filter);
}

// --- one event ---------------------------------------------------------------------------

function destinationOf(delivery) {
  return delivery.destination || delivery.destination_id || delivery.name || null;
}

function renderEvent(ev) {
  state.event = ev;
  $('event-id').textContent = show(ev.id);
  setStatus($('event-status'), ev.status);
  const meta = $('event-meta').tBodies[0];
  clear(meta);
  for (const [k, v] of Object.entries(ev)) {
    if (k === 'attempts' || k === 'deliveries') continue;
    meta.append(el('tr', null, el('th', null, k), el('td', null, isTime(k) ? when(v) : show(v))));
  }
  // The gateway keeps an event's attempt count and last error, not a history.
  const attempts = ev.attempts && typeof ev.attempts === 'object' ? ev.attempts : [];
  const deliveries = Array.isArray(ev.deliveries) ? ev.deliveries : [];
  table($('event-attempts'), attempts);
  table($('event-deliveries'), deliveries);

  const select = $('redeliver-destination');
  const previous = select.value;
  clear(select);
  const names = [...new Set(deliveries.map(destinationOf).filter((d) => d))];
  for (const name of names) select.append(el('option', { value: String(name) }, String(name)));
  if (names.includes(previous)) select.value = previous;
  const status = show(ev.status).toUpperCase();
  const failedDelivery = deliveries.some((d) => show(d.status).toUpperCase() === 'FAILED');
  $('retry-event').disabled = !(status === 'FAILED' || failedDelivery);
  $('replay-event').disabled = !(status === 'PROCESSED' || status === 'IGNORED');
  $('redeliver-event').disabled = names.length === 0;
  select.disabled = names.length === 0;
}

async function fetchEvent(id) {
  return (await api('GET', '/api/v1/events/' + encodeURIComponent(id))).data || {};
}

async function openEvent(id) {
  state.eventId = id;
  state.event = null;
  $('event-id').textContent = id;
  $('event-status').textContent = '…';
  $('operation-result').textContent = '';
  const payload = $('payload');
  payload.hidden = true;
  payload.textContent = '';
  try {
    renderEvent(await fetchEvent(id));
    notice('');
  } catch (e) {
    notice('Event: ' + explain(e));
  }
}

// After an operation: follow the event until it has left RECEIVED and none of its
// deliveries is PENDING (or a minute passed).
function follow(id, before) {
  const started = Date.now();
  every('event', 700, async () => {
    if (state.eventId !== id) return stop('event');
    let ev;
    try {
      ev = await fetchEvent(id);
    } catch (e) {
      stop('event');
      notice('Event: ' + explain(e));
      return;
    }
    if (state.eventId !== id) return;
    renderEvent(ev);
    const now = show(ev.status).toUpperCase();
    const pending = (ev.deliveries || []).some((d) => show(d.status).toUpperCase() === 'PENDING');
    const settled = now !== 'RECEIVED' && !pending && (now !== before || Date.now() - started > 5000);
    if (settled || Date.now() - started > 60000) {
      stop('event');
      $('operation-result').textContent = now === before
        ? 'Status stays ' + now + '.'
        : 'Status changed from ' + before + ' to ' + now + '.';
    }
  });
}

async function operate(kind) {
  const ev = state.event;
  if (!ev) return;
  const id = show(ev.id);
  const before = show(ev.status).toUpperCase();
  const result = $('operation-result');
  let path = '/api/v1/events/' + encodeURIComponent(id) + '/' + (kind === 'retry' ? 'retry' : 'replay');
  // Retry takes no body (a FAILED event, else its FAILED deliveries); replay takes `{}`
  // (through processing) or a destination to re-deliver to.
  let body;
  if (kind === 'redeliver') {
    body = { destination: $('redeliver-destination').value };
    if ($('redeliver-fresh-key').checked) body.fresh_key = true;
  } else if (kind === 'replay') {
    body = {};
  }
  for (const b of ['retry-event', 'replay-event', 'redeliver-event']) $(b).disabled = true;
  result.textContent = kind + ': sending…';
  try {
    const answer = await api('POST', path, body);
    const said = answer.data && typeof answer.data === 'object' ? ' ' + JSON.stringify(answer.data) : '';
    result.textContent = kind + ': accepted by the gateway (' + answer.status + ')' + said + '; following the event…';
    follow(id, before);
  } catch (e) {
    result.textContent = kind + ' refused: ' + explain(e);
    renderEvent(ev);
  }
}

async function showPayload() {
  const ev = state.event;
  if (!ev) return;
  const out = $('payload');
  out.hidden = false;
  out.textContent = 'Decrypting…';
  try {
    const answer = await api('GET', '/api/v1/events/' + encodeURIComponent(show(ev.id)) + '/payload');
    out.textContent = payloadText(answer);
  } catch (e) {
    out.textContent = e instanceof ApiError && e.status === 403
      ? 'This token has no decrypt scope (403).'
      : 'Payload: ' + explain(e);
  }
}

// The payload answer `{"id", "encoding", "body"}` as text: `utf8` bodies as they are (JSON
// pretty-printed), `base64` ones decoded when their bytes are UTF-8, else left in base64.
function payloadText(answer) {
  const d = answer.data;
  if (!d || typeof d !== 'object' || typeof d.body !== 'string') return answer.text;
  if (d.encoding === 'base64') {
    try {
      const bytes = Uint8Array.from(atob(d.body), (c) => c.charCodeAt(0));
      return pretty(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    } catch (e) {
      return '(binary, base64) ' + d.body;
    }
  }
  return pretty(d.body);
}

// --- bulk jobs ---------------------------------------------------------------------------

function jobProgress(job) {
  const p = job.progress || {};
  return { total: Number(p.total) || 0, done: Number(p.done) || 0, failed: Number(p.failed) || 0 };
}

function finished(job) {
  return ['done', 'failed', 'cancelled'].includes(String(job.state));
}

function renderJobs() {
  const body = $('jobs-table').tBodies[0];
  clear(body);
  const jobs = [...state.jobs.values()].reverse();
  if (jobs.length === 0) {
    body.append(el('tr', null, el('td', { className: 'muted' }, 'No jobs yet.')));
    return;
  }
  for (const job of jobs) {
    const p = jobProgress(job);
    const bar = el('progress', { max: Math.max(p.total, 1), value: p.done + p.failed });
    const controls = el('td', null);
    if (!finished(job)) {
      const pausing = String(job.state) !== 'paused';
      controls.append(
        el('button', { type: 'button', className: 'secondary job-control', dataset: { job: job.id, op: pausing ? 'pause' : 'resume' } }, pausing ? 'Pause' : 'Resume'),
        ' ',
        el('button', { type: 'button', className: 'secondary job-control', dataset: { job: job.id, op: 'cancel' } }, 'Cancel'),
      );
    }
    body.append(el('tr', { dataset: { job: show(job.id) } },
      el('td', { className: 'id' }, show(job.id)),
      el('td', null, show(job.action)),
      el('td', null, el('span', { className: statusClass(job.state) + ' job-state' }, show(job.state))),
      el('td', null, bar),
      el('td', { className: 'job-counts' }, p.done + ' / ' + p.total + ' (' + p.failed + ' failed)'),
      controls));
  }
}

async function refreshJobs() {
  // The list of every job when the API has one; otherwise the jobs of this session.
  try {
    const list = (await api('GET', '/api/v1/jobs')).data;
    const jobs = Array.isArray(list) ? list : list && Array.isArray(list.jobs) ? list.jobs : null;
    if (jobs) for (const job of jobs) state.jobs.set(show(job.id), job);
  } catch (e) {
    if (!(e instanceof ApiError) || (e.status !== 404 && e.status !== 405)) notice('Jobs: ' + explain(e));
  }
  await Promise.all([...state.jobs.values()].filter((j) => !finished(j)).map(async (j) => {
    try {
      const job = (await api('GET', '/api/v1/jobs/' + encodeURIComponent(show(j.id)))).data;
      if (job) state.jobs.set(show(job.id), job);
    } catch (e) {
      notice('Job ' + show(j.id) + ': ' + explain(e));
    }
  }));
  renderJobs();
}

function openJobs() {
  $('job-filter').textContent = JSON.stringify(state.filter);
  renderJobs();
  refreshJobs();
  every('jobs', 1000, refreshJobs);
}

async function createJob(ev) {
  ev.preventDefault();
  const error = $('job-error');
  error.hidden = true;
  const body = { action: $('job-action').value, filter: { ...state.filter } };
  const destination = $('job-destination').value.trim();
  if (destination) body.destination = destination;
  if ($('job-fresh-key').checked) body.fresh_key = true;
  try {
    const created = (await api('POST', '/api/v1/jobs', body)).data || {};
    const id = show(created.id);
    state.jobs.set(id, { id, action: body.action, filter: body.filter, state: 'pending', progress: { total: 0, done: 0, failed: 0 } });
    await refreshJobs();
  } catch (e) {
    error.textContent = 'Job refused: ' + explain(e);
    error.hidden = false;
  }
}

async function controlJob(button) {
  const { job, op } = button.dataset;
  button.disabled = true;
  try {
    await api('POST', '/api/v1/jobs/' + encodeURIComponent(job) + '/' + op, {});
  } catch (e) {
    notice('Job ' + job + ' ' + op + ': ' + explain(e));
  }
  await refreshJobs();
}

// --- rejections --------------------------------------------------------------------------

async function loadRejections() {
  const q = new URLSearchParams({ limit: '100' });
  for (const [field, name] of [['r-endpoint', 'endpoint'], ['r-cause', 'cause']]) {
    const value = $(field).value.trim();
    if (value) q.set(name, value);
  }
  let data;
  try {
    data = (await api('GET', '/api/v1/rejections?' + q.toString())).data || {};
    notice('');
  } catch (e) {
    notice('Rejections: ' + explain(e));
    return;
  }
  // Each entry: when, endpoint, cause (and reason), header names with redacted values,
  // body size and keyed digest; never the body.
  const entries = Array.isArray(data.rejections) ? data.rejections : [];
  table($('rejections-table'), entries.map((r) => ({
    at: r.at,
    endpoint: r.endpoint,
    cause: r.cause,
    reason: r.reason,
    headers: (Array.isArray(r.headers) ? r.headers : []).map((h) => show(h.name) + ': ' + show(h.value)).join('\n'),
    body_size: r.body_size,
    body_digest: r.body_digest,
  })));
  const counts = $('rejection-counts').tBodies[0];
  clear(counts);
  const perCause = Array.isArray(data.counts) ? data.counts : [];
  if (perCause.length === 0) counts.append(el('tr', null, el('td', { className: 'muted' }, 'none')));
  for (const c of perCause) {
    counts.append(el('tr', { dataset: { cause: show(c.cause) } },
      el('td', null, show(c.cause)), el('td', null, show(c.seen)), el('td', null, show(c.logged))));
  }
}

// --- audit log ---------------------------------------------------------------------------

async function loadAudit() {
  let data;
  try {
    data = (await api('GET', '/api/v1/audit?limit=200')).data || {};
    notice('');
  } catch (e) {
    notice('Audit: ' + explain(e));
    return;
  }
  const entries = Array.isArray(data.entries) ? data.entries : [];
  table($('audit-table'), entries.map((a) => ({
    at: a.at, token: a.token, action: a.action, target: a.target, result: a.result,
    filter: a.filter, detail: a.detail,
  })));
  for (const td of $('audit-table').querySelectorAll('tbody td:nth-child(5)')) {
    td.className = td.textContent === 'ok' ? 'status status-ok' : 'status status-failed';
  }
}

// --- live rates from /metrics --------------------------------------------------------------

async function pollMetrics() {
  let text;
  try {
    const res = await fetch('/metrics', { credentials: 'omit', cache: 'no-store', headers: { Authorization: 'Bearer ' + state.token } });
    if (!res.ok) throw new Error('/metrics answered ' + res.status);
    text = await res.text();
  } catch (e) {
    notice('Live: ' + (e && e.message ? e.message : e));
    return;
  }
  const samples = parseMetrics(text);
  const now = {
    at: performance.now(),
    outcomes: new Map(),
    processed: sum(samples, 'hookgate_events_processed_total'),
    delivered: sum(samples, 'hookgate_deliveries_total', (l) => l.result === 'delivered'),
    ack: buckets(samples, 'hookgate_ack_latency_seconds'),
  };
  for (const s of samples) {
    if (s.name === 'hookgate_requests_total') {
      const o = s.labels.outcome || 'unknown';
      now.outcomes.set(o, (now.outcomes.get(o) || 0) + s.value);
    }
  }
  const prev = state.metricsPrev;
  state.metricsPrev = now;
  const dt = prev ? (now.at - prev.at) / 1000 : 0;
  const rate = (a, b) => (prev && dt > 0 ? Math.max(0, (a - b) / dt).toFixed(1) : '–');
  const requests = [...now.outcomes.values()].reduce((a, b) => a + b, 0);
  const prevRequests = prev ? [...prev.outcomes.values()].reduce((a, b) => a + b, 0) : 0;
  $('rate-accepted').textContent = rate(now.outcomes.get('accepted') || 0, prev ? prev.outcomes.get('accepted') || 0 : 0);
  $('rate-requests').textContent = rate(requests, prevRequests);
  $('rate-processed').textContent = rate(now.processed, prev ? prev.processed : 0);
  $('rate-delivered').textContent = rate(now.delivered, prev ? prev.delivered : 0);
  // Latency of the last interval when it had answers, else since the start.
  let window = now.ack;
  if (prev && prev.ack.length === now.ack.length) {
    const delta = now.ack.map(([le, c], i) => [le, c - prev.ack[i][1]]);
    if (delta.length && delta[delta.length - 1][1] > 0) window = delta;
  }
  $('ack-p50').textContent = seconds(quantile(0.5, window));
  $('ack-p99').textContent = seconds(quantile(0.99, window));
  $('gauge-received').textContent = String(sum(samples, 'hookgate_inbox_received'));
  $('gauge-failed').textContent = String(sum(samples, 'hookgate_inbox_failed'));
  const body = $('outcomes-table').tBodies[0];
  clear(body);
  for (const [outcome, total] of [...now.outcomes.entries()].sort()) {
    body.append(el('tr', null, el('td', null, outcome), el('td', null, String(total)),
      el('td', null, rate(total, prev ? prev.outcomes.get(outcome) || 0 : 0))));
  }
}

function openLive() {
  pollMetrics();
  every('live', 2000, pollMetrics);
}

// --- wiring ------------------------------------------------------------------------------

function start() {
  document.body.dataset.signedIn = 'no';
  $('login-form').addEventListener('submit', signIn);
  $('logout').addEventListener('click', () => {
    // Logging out forgets the place too; a 401 keeps it, to come back after signing in.
    history.replaceState(null, '', location.pathname);
    signOut('');
  });
  $('filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    readFilters();
    state.cursor = null;
    loadEvents();
  });
  $('clear-filters').addEventListener('click', () => {
    $('filters').reset();
    readFilters();
    state.cursor = null;
    loadEvents();
  });
  $('job-from-filter').addEventListener('click', () => {
    readFilters();
    location.hash = '#/jobs';
  });
  $('next-page').addEventListener('click', () => {
    if (!state.nextCursor) return;
    state.cursor = state.nextCursor;
    loadEvents();
  });
  $('first-page').addEventListener('click', () => {
    state.cursor = null;
    loadEvents();
  });
  $('retry-event').addEventListener('click', () => operate('retry'));
  $('replay-event').addEventListener('click', () => operate('replay'));
  $('redeliver-event').addEventListener('click', () => operate('redeliver'));
  $('show-payload').addEventListener('click', showPayload);
  $('job-form').addEventListener('submit', createJob);
  $('jobs-table').addEventListener('click', (ev) => {
    const button = ev.target.closest('button.job-control');
    if (button) controlJob(button);
  });
  $('rejection-filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadRejections();
  });
  $('refresh-audit').addEventListener('click', loadAudit);
  window.addEventListener('hashchange', route);
  route();
}

// A module script runs once the document is parsed.
start();
