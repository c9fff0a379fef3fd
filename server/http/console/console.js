// KLS web console: a single-page app over the HTTP/JSON API (/v1/...),
// served by kls-server itself. Hash routes:
//   #/jobs  #/jobs/<id>  #/kernels  #/kernels/<name>/<version>
//   #/datasets  #/datasets/<id>  #/server
// Everything from the server is rendered with textContent / createElement
// (item keys, names and error messages are text, never markup), and the page
// runs under a strict Content-Security-Policy (no inline scripts or styles).
// Bearer tokens: a 401 shows a token prompt; the token is kept in
// sessionStorage and sent on every call (also on the job watch stream, read
// with fetch() rather than EventSource, which cannot send headers).

import {
  drawBarChart, drawColorBar, drawHeatmap, drawLineChart, drawScatter, formatNumber, svgEl,
} from './charts.js';

const TOKEN_KEY = 'kls.console.token';
const POLL_MS = 2000;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const JOB_STATES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];

const view = document.getElementById('view');
const banner = document.getElementById('banner');

// ---- DOM helpers ------------------------------------------------------------

/**
 * h('a', {href: '#/jobs', class: 'x'}, 'text', child, ...): an element whose
 * string children become text nodes. Attributes starting with "on" are event
 * listeners; `dataset` is an object of data-* values; false / null skip.
 */
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'value') e.value = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function svg(id, cls = 'chart') {
  return svgEl('svg', { id, class: cls, role: 'img' });
}

function card(title, attrs, ...children) {
  const c = h('section', { class: 'card', ...attrs });
  if (title) c.append(h('h2', {}, title));
  return append(c, children);
}

/** A definition list from [label, value(, field)] rows; values may be nodes. */
function dl(id, rows) {
  const list = h('dl', { id, class: 'facts' });
  for (const [label, value, field] of rows) {
    if (value === undefined) continue;
    list.append(h('dt', {}, label), h('dd', { dataset: { field: field || label } }, value ?? '—'));
  }
  return list;
}

/** Stat tiles: [label, value, field] rows in a strip. */
function tiles(id, rows) {
  return h('div', { id, class: 'tiles' }, rows.map(([label, value, field]) =>
    h('div', { class: 'tile', dataset: { field } }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value))));
}

function link(href, text) {
  return h('a', { href }, text);
}

function enc(s) {
  return encodeURIComponent(s);
}

function num(v) {
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
}

function count(v) {
  return num(v).toLocaleString('en-US');
}

function stateBadge(state) {
  return h('span', { class: `badge state-${String(state).toLowerCase()}`, dataset: { state } }, state);
}

function timeText(ms) {
  const t = num(ms);
  if (!t) return '—';
  const d = new Date(t);
  const pad = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function duration(seconds) {
  const s = Math.max(0, num(seconds));
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

function age(ms) {
  const t = num(ms);
  return t ? duration((Date.now() - t) / 1000) : '—';
}

function bytes(v) {
  const b = num(v);
  if (b >= 1 << 30) return `${formatNumber(b / (1 << 30))} GiB`;
  if (b >= 1 << 20) return `${formatNumber(b / (1 << 20))} MiB`;
  if (b >= 1 << 10) return `${formatNumber(b / (1 << 10))} KiB`;
  return `${b} B`;
}

function kernelHref(name, version) {
  return `#/kernels/${enc(name)}/${enc(version)}`;
}

// ---- API --------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const b = body && typeof body === 'object' ? body : {};
    super(b.message || `HTTP ${status}`);
    this.status = status;
    this.code = b.code || (status ? `HTTP_${status}` : 'NETWORK');
    this.requestId = b.request_id || '';
  }
  describe() {
    return `${this.status ? `${this.status} ` : ''}${this.code}: ${this.message}`;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

function authHeaders() {
  const t = token();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

/** GET `path` (body undefined) or POST `body` as JSON; the parsed answer. */
async function api(path, body, signal) {
  const init = { headers: { Accept: 'application/json', ...authHeaders() }, signal };
  if (body !== undefined) {
    init.method = 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'UNAVAILABLE', message: `cannot reach the server (${e.message})` });
  }
  const text = await r.text();
  let data = {};
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { message: text.slice(0, 500) };
    }
  }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

/**
 * Jobs.Watch as Server-Sent Events over fetch (so the token goes along):
 * calls onJob(job) for each "message" event; resolves at "end" or when the
 * stream closes; rejects with an ApiError for "error" events and HTTP errors.
 */
async function watchJob(id, onJob, signal) {
  const r = await fetch(`/v1/jobs/watch?id=${enc(id)}`, {
    headers: { Accept: 'text/event-stream', ...authHeaders() }, signal,
  });
  if (!r.ok) {
    let body = {};
    try { body = await r.json(); } catch { /* not JSON */ }
    throw new ApiError(r.status, body);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return 'closed';
    buf += value.replace(/\r\n?/g, '\n');
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':') || line === '') continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = val;
        else if (field === 'data') data.push(val);
      }
      if (data.length === 0) continue;
      const payload = JSON.parse(data.join('\n'));
      if (event === 'message' && payload.job) onJob(payload.job);
      else if (event === 'end') { reader.cancel().catch(() => {}); return 'end'; }
      else if (event === 'error') { reader.cancel().catch(() => {}); throw new ApiError(0, payload); }
    }
  }
}

const MAX_JOB_PAGES = 10;

/**
 * Every job, oldest first (following pages, at most 10 × 1000), optionally
 * filtered; `jobs.truncated` is set when there were more.
 */
async function listJobs(signal, { state = '', datasetId = '' } = {}) {
  const jobs = [];
  let pageToken = '';
  for (let page = 0; page < MAX_JOB_PAGES; ++page) {
    const q = new URLSearchParams({ pageSize: '1000' });
    if (state) q.set('state', state);
    if (datasetId) q.set('datasetId', datasetId);
    if (pageToken) q.set('pageToken', pageToken);
    const r = await api(`/v1/jobs/list?${q}`, undefined, signal);
    jobs.push(...(r.jobs || []));
    pageToken = r.nextPageToken || '';
    if (!pageToken) break;
  }
  jobs.truncated = Boolean(pageToken);
  return jobs;
}

// ---- banner, auth status, token prompt --------------------------------------

function showBanner(text, kind = 'error') {
  banner.replaceChildren(
    h('span', { id: 'banner-text' }, text),
    h('button', { type: 'button', class: 'link-button', id: 'banner-close', onclick: hideBanner }, 'dismiss'),
  );
  banner.className = `banner ${kind}`;
  banner.dataset.kind = kind;
}

function hideBanner() {
  banner.className = 'banner hidden';
  banner.replaceChildren();
  delete banner.dataset.kind;
}

function updateAuthStatus() {
  const el = document.getElementById('auth-status');
  if (token()) {
    el.replaceChildren(
      h('span', { class: 'muted' }, 'token set'),
      h('button', {
        type: 'button', id: 'token-forget', class: 'link-button',
        onclick: () => { sessionStorage.removeItem(TOKEN_KEY); updateAuthStatus(); route(); },
      }, 'forget'),
    );
  } else {
    el.replaceChildren(h('span', { class: 'muted' }, 'no token'));
  }
}

function renderTokenPrompt(err) {
  const rejected = Boolean(token());
  if (rejected) sessionStorage.removeItem(TOKEN_KEY);  // it was not accepted: ask again
  updateAuthStatus();
  view.dataset.state = 'auth';
  const input = h('input', {
    id: 'token-input', type: 'password', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'bearer token', required: true, 'aria-label': 'bearer token',
  });
  const form = h('form', { id: 'token-prompt', class: 'card token-card' },
    h('h2', {}, 'Bearer token required'),
    h('p', {}, 'This server checks bearer tokens. Enter a token with the read scope (write to cancel jobs or set aliases). ',
      'It is kept for this browser tab only (sessionStorage) and sent as "Authorization: Bearer …" on every API call.'),
    h('p', { id: 'token-message', class: rejected ? 'error-text' : 'muted', dataset: { status: err.status, code: err.code } },
      rejected ? `The token was not accepted — ${err.describe()}` : err.describe()),
    h('div', { class: 'form-row' }, input, h('button', { type: 'submit', id: 'token-submit', class: 'primary' }, 'Use token')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    updateAuthStatus();
    hideBanner();
    route();
  });
  view.replaceChildren(form);
  input.focus();
}

/** An error that ends a page: token prompt for 401, else an error card. */
function pageError(ctx, err) {
  if (ctx.signal.aborted || err?.name === 'AbortError') return;
  if (err instanceof ApiError && err.status === 401) {
    ctx.stop();
    renderTokenPrompt(err);
    return;
  }
  console.warn('console:', err);
  const e = err instanceof ApiError ? err : new ApiError(0, { code: 'CLIENT', message: String(err?.message || err) });
  view.dataset.state = 'error';
  const box = card('Could not load this page', { id: 'error-card', class: 'card error-card', dataset: { status: e.status, code: e.code } },
    h('p', { class: 'error-code' }, `${e.status ? `HTTP ${e.status} · ` : ''}${e.code}`),
    h('p', { class: 'error-message' }, e.message),
    e.requestId ? h('p', { class: 'muted' }, `request id ${e.requestId}`) : null,
    e.status === 403 ? h('p', {}, 'The token lacks the scope this needs. ',
      h('button', { type: 'button', class: 'link-button', onclick: () => renderTokenPrompt(e) }, 'Use another token')) : null);
  view.replaceChildren(box);
  showBanner(e.describe());
}

/** A failed action (cancel, alias, top-k): shown in the banner and `into`. */
function actionError(err, into) {
  if (err?.name === 'AbortError') return;
  const e = err instanceof ApiError ? err : new ApiError(0, { code: 'CLIENT', message: String(err?.message || err) });
  showBanner(e.describe());
  if (into) {
    into.replaceChildren(h('span', { class: 'error-text', dataset: { status: e.status, code: e.code } }, e.describe()));
  }
}

// ---- router -----------------------------------------------------------------

const ROUTES = [
  [/^#\/jobs\/?$/, 'jobs', jobsPage],
  [/^#\/jobs\/([^/]+)$/, 'job', jobPage],
  [/^#\/kernels\/?$/, 'kernels', kernelsPage],
  [/^#\/kernels\/([^/]+)\/(\d+)$/, 'kernel', kernelPage],
  [/^#\/datasets\/?$/, 'datasets', datasetsPage],
  [/^#\/datasets\/([^/]+)$/, 'dataset', datasetPage],
  [/^#\/server\/?$/, 'server', serverPage],
];

let current = null;

function route() {
  if (current) current.stop();
  const hash = location.hash && location.hash !== '#' && location.hash !== '#/' ? location.hash : '#/jobs';
  let page = null, params = [], name = 'not-found';
  for (const [re, n, fn] of ROUTES) {
    const m = re.exec(hash);
    if (m) {
      page = fn;
      name = n;
      params = m.slice(1).map((p) => decodeURIComponent(p));
      break;
    }
  }
  const ctrl = new AbortController();
  const cleanups = [];
  const ctx = {
    signal: ctrl.signal,
    start: performance.now(),
    get alive() { return !ctrl.signal.aborted; },
    onStop(fn) { cleanups.push(fn); },
    stop() {
      if (ctrl.signal.aborted) return;
      ctrl.abort();
      for (const f of cleanups) { try { f(); } catch { /* ignore */ } }
    },
    /** Runs fn every ms (after each run ends) until the page changes. */
    every(ms, fn) {
      let timer = 0;
      const tick = async () => {
        if (!ctx.alive) return;
        try {
          await fn();
        } catch (err) {
          if (!ctx.alive || err?.name === 'AbortError') return;
          if (err instanceof ApiError && err.status === 401) { pageError(ctx, err); return; }
          showBanner(`refresh failed — ${err instanceof ApiError ? err.describe() : err}`);
        }
        if (ctx.alive) timer = setTimeout(tick, ms);
      };
      timer = setTimeout(tick, ms);
      cleanups.push(() => clearTimeout(timer));
    },
  };
  current = ctx;
  hideBanner();  // a message belongs to the page it came from
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', name.startsWith(a.dataset.route));
  }
  view.dataset.page = name;
  view.dataset.state = 'loading';
  view.replaceChildren(h('p', { class: 'muted loading' }, 'Loading…'));
  if (!page) {
    view.dataset.state = 'error';
    view.replaceChildren(card('Not found', { id: 'error-card' }, h('p', {}, `No page ${hash}.`)));
    return;
  }
  Promise.resolve()
    .then(() => page(ctx, ...params))
    .then(() => { if (ctx.alive && view.dataset.state === 'loading') view.dataset.state = 'ready'; })
    .catch((err) => pageError(ctx, err));
}

function pageHeader(title, ...extra) {
  return h('div', { class: 'page-header' }, h('h1', {}, title), ...extra);
}

function liveIndicator(id) {
  return h('span', { id, class: 'live', dataset: { live: '1' } }, h('span', { class: 'live-dot' }), 'live');
}

function setLive(el, on, text) {
  if (!el) return;
  el.dataset.live = on ? '1' : '0';
  el.classList.toggle('off', !on);
  el.lastChild.textContent = text || (on ? 'live' : 'stopped');
}

// ---- jobs -------------------------------------------------------------------

function progressCell(job) {
  const p = job.progress || {};
  const it = num(p.iteration), max = num(p.maxIterations);
  if (job.state === 'RUNNING') {
    const bar = h('progress', { max: max || 1, value: max ? Math.min(it, max) : 0 });
    return h('div', { class: 'progress-wrap' }, bar,
      h('span', { class: 'progress-text' }, max ? `${count(it)} / ${count(max)}` : `iteration ${count(it)}`));
  }
  if (job.state === 'QUEUED') return h('span', { class: 'muted' }, 'waiting');
  if (job.state === 'FAILED') return h('span', { class: 'error-text clip', title: job.error || '' }, job.error || 'failed');
  const parts = [job.termination || job.state.toLowerCase()];
  if (it) parts.push(`${count(it)} it`);
  return h('span', { class: 'muted' }, parts.join(' · '));
}

function jobRow(job) {
  const kernel = job.state === 'SUCCEEDED' && num(job.kernelVersion)
    ? link(kernelHref(job.kernelName, job.kernelVersion), `${job.kernelName} v${job.kernelVersion}`)
    : job.kernelName || '—';
  return h('tr', { dataset: { jobId: job.id, state: job.state } },
    h('td', { class: 'state' }, stateBadge(job.state)),
    h('td', { class: 'mono' }, link(`#/jobs/${enc(job.id)}`, job.id)),
    h('td', {}, job.method || '—'),
    h('td', { class: 'mono' }, job.datasetId ? link(`#/datasets/${enc(job.datasetId)}`, job.datasetId) : '—'),
    h('td', {}, kernel),
    h('td', { class: 'progress-cell' }, progressCell(job)),
    h('td', { class: 'num' }, String(job.attempts ?? 0)),
    h('td', { class: 'mono' }, job.owner || '—'),
    h('td', { class: 'num', title: timeText(job.createdUnixMs) }, age(job.createdUnixMs)));
}

async function jobsPage(ctx) {
  const filter = h('select', { id: 'jobs-state-filter', 'aria-label': 'state filter' },
    h('option', { value: '' }, 'all states'), JOB_STATES.map((s) => h('option', { value: s }, s.toLowerCase())));
  const summary = h('span', { id: 'jobs-count', class: 'muted' });
  const live = liveIndicator('jobs-live');
  const tbody = h('tbody');
  const table = h('table', { id: 'jobs-table', class: 'data' },
    h('thead', {}, h('tr', {}, ['State', 'Job', 'Method', 'Data set', 'Kernel', 'Progress', 'Attempts', 'Owner', 'Age']
      .map((c) => h('th', { class: ['Attempts', 'Age'].includes(c) ? 'num' : '' }, c)))),
    tbody);
  const empty = h('p', { id: 'jobs-empty', class: 'muted hidden' }, 'No jobs yet. Submit one with kls submit or POST /v1/jobs/submit.');
  const refresh = async () => {
    const jobs = await listJobs(ctx.signal, { state: filter.value });
    if (!ctx.alive) return;
    const truncated = jobs.truncated;
    jobs.reverse();  // newest first
    const shown = jobs.slice(0, 500);
    tbody.replaceChildren(...shown.map(jobRow));
    const byState = {};
    for (const j of jobs) byState[j.state] = (byState[j.state] || 0) + 1;
    summary.textContent = `${jobs.length} job${jobs.length === 1 ? '' : 's'}` +
      (Object.keys(byState).length ? ` — ${JOB_STATES.filter((s) => byState[s]).map((s) => `${byState[s]} ${s.toLowerCase()}`).join(', ')}` : '') +
      (jobs.length > shown.length ? ` (newest ${shown.length} shown)` : '') +
      (truncated ? ` — only the oldest ${count(jobs.length)} were read; filter by state to see others` : '');
    empty.classList.toggle('hidden', jobs.length > 0);
    table.dataset.updated = String(Date.now());
  };
  filter.addEventListener('change', () => refresh().catch((e) => actionError(e)));
  await refresh();
  view.replaceChildren(
    pageHeader('Jobs', live),
    card(null, { class: 'card table-card' },
      h('div', { class: 'toolbar' }, summary, h('label', { class: 'muted' }, 'show ', filter)),
      h('div', { class: 'table-wrap' }, table), empty));
  ctx.every(POLL_MS, refresh);
  ctx.onStop(() => setLive(live, false));
}

/** summary_json as rows: nested objects flattened to dotted keys. */
function summaryTable(id, json) {
  if (!json) return h('p', { id, class: 'muted' }, 'No summary.');
  let obj;
  try {
    obj = JSON.parse(json);
  } catch {
    return h('pre', { id, class: 'json' }, json);
  }
  const rows = [];
  const walk = (prefix, v) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 0) rows.push([prefix, '{}']);
      for (const k of keys) walk(prefix ? `${prefix}.${k}` : k, v[k]);
    } else if (Array.isArray(v)) {
      const text = JSON.stringify(v);
      rows.push([prefix, text.length > 200 ? `${text.slice(0, 200)}… (${v.length} entries)` : text]);
    } else {
      rows.push([prefix, typeof v === 'number' ? formatNumber(v) : String(v)]);
    }
  };
  walk('', obj);
  return h('table', { id, class: 'kv' }, h('tbody', {}, rows.map(([k, v]) =>
    h('tr', { dataset: { key: k } }, h('th', {}, k), h('td', { class: 'mono' }, v)))));
}

/** method auto's leaderboard (summary member "auto"), best first; null when the summary has none. */
function leaderboardView(id, json) {
  let auto;
  try {
    auto = JSON.parse(json || '{}').auto;
  } catch {
    return null;
  }
  if (!auto || !Array.isArray(auto.candidates)) return null;
  // Scored on all folds first, then screened out on fold 0 (core/npkl/auto_select.h).
  const scored = (r) => (r.status === 'scored' ? 2 : r.status === 'screened' ? 1 : 0);
  const hasScore = (r) => r.status === 'scored' || r.status === 'screened';
  const rows = [...auto.candidates].sort((a, b) => scored(b) - scored(a) || (b.mean ?? 0) - (a.mean ?? 0));
  const key = (r) => `${r.name}@${r.scaling}`;
  return h('div', { id },
    h('p', { class: 'muted small' }, `${auto.score} score, ${auto.folds} folds; chosen ${auto.chosen}` +
      (auto.budget_reached ? `; the budget of ${formatNumber(auto.budget_seconds)} s stopped the rest` : '')),
    h('div', { class: 'table-wrap' }, h('table', { class: 'data compact' },
      h('thead', {}, h('tr', {}, ['', 'candidate', 'scaling', 'kind', 'value', 'mean ± sd', 'seconds', 'status'].map((t) => h('th', {}, t)))),
      h('tbody', {}, rows.map((r) => h('tr', { dataset: { candidate: key(r), chosen: key(r) === auto.chosen ? '1' : '0' } },
        h('td', {}, key(r) === auto.chosen ? '★' : ''),
        h('td', {}, r.name), h('td', {}, r.scaling), h('td', {}, r.kind),
        h('td', { class: 'mono' }, hasScore(r) ? formatNumber(r.value) : '–'),
        h('td', { class: 'mono' }, hasScore(r) ? `${r.mean.toFixed(4)} ± ${r.sd.toFixed(4)}` : '–'),
        h('td', { class: 'mono' }, formatNumber(r.seconds)),
        h('td', {}, r.error ? `${r.status}: ${r.error}` : r.status)))))));
}

function certificateView(id, cert) {
  if (!cert || Object.keys(cert).length === 0) {
    return h('div', { id, dataset: { certified: 'none' } }, h('p', { class: 'muted' }, 'No certificate (imported kernel, or not finished).'));
  }
  const certified = Boolean(cert.certified);
  return h('div', { id, dataset: { certified: certified ? '1' : '0' } },
    h('p', {}, h('span', { class: `badge ${certified ? 'ok' : 'warn'}` }, certified ? 'certified optimal' : 'not certified')),
    dl(`${id}-facts`, [
      ['relative duality gap', cert.gap !== undefined ? formatNumber(cert.gap) : 'not computed', 'gap'],
      ['lower bound', cert.lowerBound !== undefined ? formatNumber(cert.lowerBound) : 'not computed', 'lowerBound'],
      ['KKT residual', cert.kktResidual !== undefined ? formatNumber(cert.kktResidual) : 'not computed', 'kktResidual'],
    ]));
}

const MAX_CURVE_POINTS = 2000;

/**
 * A job's convergence history: the stored / server-side points, then the
 * progress seen on the watch stream; thinned like the server's (at most
 * 2000 points, every other one dropped and the stride doubled), so a long
 * run stays cheap to draw. The latest report is always the last point.
 */
class Curve {
  constructor() {
    this.points = [];
    this.stride = 1;
    this.provisional = false;  // the last point is off the stride (kept as the latest report)
  }
  setHistory(points) {
    const lastIt = points.length ? points[points.length - 1].iteration : 0;
    const live = this.points.filter((p) => p.iteration > lastIt);
    this.points = points.slice();
    this.stride = 1;
    this.provisional = false;
    for (const p of live) this.add(p);
  }
  add(p) {
    let last = this.points[this.points.length - 1];
    if (last && p.iteration <= last.iteration) {
      if (p.iteration === last.iteration) this.points[this.points.length - 1] = p;
      return;
    }
    if (this.provisional) this.points.pop();
    last = this.points[this.points.length - 1];
    this.points.push(p);
    this.provisional = Boolean(last) && p.iteration - last.iteration < this.stride;
    if (this.points.length > MAX_CURVE_POINTS) {
      const end = this.points[this.points.length - 1];
      this.points = this.points.filter((_, i) => i % 2 === 0);
      this.provisional = this.points[this.points.length - 1] !== end;
      if (this.provisional) this.points.push(end);
      this.stride *= 2;
    }
  }
}

function normalizePoint(p) {
  return {
    iteration: num(p.iteration),
    objective: Number(p.objective ?? 0),
    primalResidual: Number(p.primalResidual ?? 0),
    dualResidual: Number(p.dualResidual ?? 0),
    // The iterate's certified relative gap, where the solver has one (unset: NaN).
    gap: p.gap == null ? NaN : Number(p.gap),
    elapsedSeconds: Number(p.elapsedSeconds ?? 0),
  };
}

function drawConvergence(svgEl_, note, points) {
  const x = points.map((p) => p.iteration);
  drawLineChart(svgEl_, {
    width: 820, height: 320, yScale: 'log', xLabel: 'iteration', yLabel: 'value (log scale)',
    series: [
      { name: 'objective', cls: 's0', x, y: points.map((p) => p.objective) },
      { name: 'primal_residual', cls: 's1', x, y: points.map((p) => p.primalResidual) },
      { name: 'dual_residual', cls: 's2', x, y: points.map((p) => p.dualResidual) },
      // The gap series only for solvers that certify every iteration.
      ...(points.some((p) => Number.isFinite(p.gap))
        ? [{ name: 'gap', cls: 's3', x, y: points.map((p) => p.gap) }] : []),
    ],
  });
  svgEl_.dataset.points = String(points.length);
  svgEl_.dataset.lastIteration = String(points.length ? points[points.length - 1].iteration : 0);
  const off = [...svgEl_.querySelectorAll('path.series')]
    .filter((p) => num(p.dataset.skipped) > 0)
    .map((p) => `${p.dataset.series} at ${count(p.dataset.skipped)} point${num(p.dataset.skipped) === 1 ? '' : 's'}`);
  note.textContent = `${count(points.length)} point${points.length === 1 ? '' : 's'}` +
    (points.length ? `, iterations ${count(points[0].iteration)}–${count(points[points.length - 1].iteration)}` : '') +
    (off.length ? ` · values ≤ 0 are not drawn on the log axis: ${off.join(', ')}` : '');
}

function jobFacts(job) {
  const started = num(job.startedUnixMs), finished = num(job.finishedUnixMs);
  return dl('job-fields', [
    ['state', stateBadge(job.state), 'state'],
    ['method', job.method || '—', 'method'],
    ['data set', job.datasetId ? link(`#/datasets/${enc(job.datasetId)}`, job.datasetId) : '—', 'datasetId'],
    ['kernel', job.state === 'SUCCEEDED' && num(job.kernelVersion)
      ? link(kernelHref(job.kernelName, job.kernelVersion), `${job.kernelName} v${job.kernelVersion}`)
      : (job.kernelName || '—'), 'kernel'],
    ['termination', job.termination || '—', 'termination'],
    ['priority', String(job.priority ?? 0), 'priority'],
    ['attempts', `${job.attempts ?? 0} (${job.countedFailures ?? 0} counted failures)`, 'attempts'],
    ['owner', job.owner || '—', 'owner'],
    ['lease expires', num(job.leaseExpiresUnixMs) ? timeText(job.leaseExpiresUnixMs) : '—', 'leaseExpires'],
    ['created', `${timeText(job.createdUnixMs)} (${age(job.createdUnixMs)} ago)`, 'created'],
    ['started', timeText(job.startedUnixMs), 'started'],
    ['finished', timeText(job.finishedUnixMs), 'finished'],
    ['run time', started ? duration(((finished || Date.now()) - started) / 1000) : '—', 'runTime'],
  ]);
}

function progressFacts(job) {
  const p = job.progress || {};
  const it = num(p.iteration), max = num(p.maxIterations);
  return dl('job-progress', [
    ['iteration', max ? `${count(it)} of at most ${count(max)}` : count(it), 'iteration'],
    ['objective', formatNumber(Number(p.objective ?? 0)), 'objective'],
    ['primal_residual', formatNumber(Number(p.primalResidual ?? 0)), 'primalResidual'],
    ['dual_residual', formatNumber(Number(p.dualResidual ?? 0)), 'dualResidual'],
    ['elapsed', duration(p.elapsedSeconds), 'elapsedSeconds'],
  ]);
}

async function jobPage(ctx, id) {
  let job = await api(`/v1/jobs/get?id=${enc(id)}`, undefined, ctx.signal);
  const curve = new Curve();
  const live = liveIndicator('job-live');
  const badgeSlot = h('span', { id: 'job-state' }, stateBadge(job.state));
  const cancelResult = h('span', { id: 'job-cancel-result', class: 'muted' });
  const cancel = h('button', { type: 'button', id: 'job-cancel', class: 'danger' }, 'Cancel job');
  const factsSlot = h('div', {}, jobFacts(job));
  const progressSlot = h('div', {}, progressFacts(job));
  const errorCard = card('Error', { id: 'job-error-card', class: 'card error-card' }, h('pre', { id: 'job-error', class: 'wrap' }, job.error || ''));
  const certSlot = h('div', {}, certificateView('job-certificate', job.certificate));
  const summarySlot = h('div', {}, summaryTable('job-summary', job.summaryJson));
  const leaderboardSlot = h('div', {});
  const leaderboardCard = card('Leaderboard (method auto)', { id: 'job-leaderboard-card', class: 'card hidden' }, leaderboardSlot);
  const chart = svg('convergence');
  const note = h('p', { id: 'convergence-note', class: 'muted small' });

  const renderJob = () => {
    badgeSlot.replaceChildren(stateBadge(job.state));
    view.dataset.jobState = job.state;
    factsSlot.replaceChildren(jobFacts(job));
    progressSlot.replaceChildren(progressFacts(job));
    errorCard.classList.toggle('hidden', !job.error);
    errorCard.querySelector('#job-error').textContent = job.error || '';
    certSlot.replaceChildren(certificateView('job-certificate', job.certificate));
    summarySlot.replaceChildren(summaryTable('job-summary', job.summaryJson));
    const board = leaderboardView('job-leaderboard', job.summaryJson);
    leaderboardCard.classList.toggle('hidden', !board);
    leaderboardSlot.replaceChildren(...(board ? [board] : []));
    cancel.classList.toggle('hidden', TERMINAL.has(job.state));
  };
  let drawn = 0, pending = 0;
  const renderCurve = () => { pending = 0; drawn = performance.now(); drawConvergence(chart, note, curve.points); };
  // Progress can arrive a thousand times a second: draw at most 4 times a second.
  const schedule = () => {
    if (pending || !ctx.alive) return;
    pending = setTimeout(() => { if (ctx.alive) { renderCurve(); renderJob(); } }, Math.max(0, 250 - (performance.now() - drawn)));
  };
  ctx.onStop(() => clearTimeout(pending));

  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    cancelResult.textContent = 'cancelling…';
    try {
      job = await api('/v1/jobs/cancel', { id }, ctx.signal);
      cancelResult.textContent = `cancel sent: ${job.state.toLowerCase()}`;
      renderJob();
    } catch (e) {
      actionError(e, cancelResult);
    } finally {
      cancel.disabled = false;
    }
  });

  const loadHistory = async () => {
    const hist = await api(`/v1/jobs/history?id=${enc(id)}`, undefined, ctx.signal);
    curve.setHistory((hist.points || []).map(normalizePoint));
    chart.dataset.complete = hist.complete ? '1' : '0';
  };
  await loadHistory();
  renderCurve();
  view.replaceChildren(
    pageHeader(`Job ${job.id}`, badgeSlot, live, h('span', { class: 'spacer' }), cancelResult, cancel),
    errorCard,
    h('div', { class: 'grid wide' },
      card('Convergence', { id: 'convergence-card' },
        h('p', { class: 'muted small' }, 'Objective, the solver\'s primal_residual / dual_residual and, where it certifies every iteration, its relative gap (Progress fields) per iteration, log scale.'),
        h('div', { class: 'chart-wrap' }, chart), note),
      h('div', { class: 'stack-col' },
        card('Latest progress', { id: 'job-progress-card' }, progressSlot),
        card('Certificate', { id: 'job-certificate-card' }, certSlot))),
    leaderboardCard,
    h('div', { class: 'grid two' },
      card('Job', { id: 'job-card' }, factsSlot),
      card('Summary', { id: 'job-summary-card' }, summarySlot)));
  renderJob();

  if (TERMINAL.has(job.state)) {
    setLive(live, false, 'finished');
    return;
  }
  // Live: the watch stream (every progress report), falling back to polling.
  const finish = async () => {
    job = await api(`/v1/jobs/get?id=${enc(id)}`, undefined, ctx.signal);
    await loadHistory();
    if (!ctx.alive) return;
    renderCurve();
    renderJob();
  };
  const poll = () => {
    setLive(live, true, 'live (polling)');
    ctx.every(POLL_MS, async () => {
      if (TERMINAL.has(job.state)) return;
      job = await api(`/v1/jobs/get?id=${enc(id)}`, undefined, ctx.signal);
      await loadHistory();
      if (!ctx.alive) return;
      renderCurve();
      renderJob();
      if (TERMINAL.has(job.state)) setLive(live, false, 'finished');
    });
  };
  (async () => {
    try {
      await watchJob(id, (j) => {
        job = j;
        if (j.progress && num(j.progress.iteration) > 0) curve.add(normalizePoint(j.progress));
        schedule();
      }, ctx.signal);
      if (!ctx.alive) return;
      await finish();
      setLive(live, false, TERMINAL.has(job.state) ? 'finished' : 'stopped');
      if (!TERMINAL.has(job.state)) poll();
    } catch (err) {
      if (!ctx.alive || err?.name === 'AbortError') return;
      if (err instanceof ApiError && err.status === 401) { pageError(ctx, err); return; }
      console.warn('console: job watch failed, polling instead:', err);
      poll();
    }
  })();
  ctx.onStop(() => setLive(live, false));
}

// ---- kernels ----------------------------------------------------------------

function certText(cert) {
  if (!cert || cert.certified === undefined && cert.gap === undefined) return h('span', { class: 'muted' }, '—');
  if (cert.certified) return h('span', { class: 'badge ok', title: `gap ${formatNumber(cert.gap)}` }, `certified · gap ${formatNumber(cert.gap)}`);
  return h('span', { class: 'badge warn' }, cert.gap !== undefined ? `gap ${formatNumber(cert.gap)}` : 'not certified');
}

async function kernelsPage(ctx) {
  const r = await api('/v1/kernels/list', undefined, ctx.signal);
  const kernels = r.kernels || [];
  const byName = new Map();
  for (const k of kernels) {
    if (!byName.has(k.name)) byName.set(k.name, []);
    byName.get(k.name).push(k);
  }
  const names = [...byName.keys()].sort();
  const tbody = h('tbody');
  for (const name of names) {
    const versions = byName.get(name).sort((a, b) => num(b.version) - num(a.version));
    versions.forEach((k, i) => {
      tbody.append(h('tr', { dataset: { kernelName: k.name, kernelVersion: k.version }, class: i === 0 ? 'group-start' : '' },
        h('td', { class: 'name' }, i === 0 ? h('strong', {}, k.name) : h('span', { class: 'muted' }, k.name)),
        h('td', {}, link(kernelHref(k.name, k.version), `v${k.version}`), i === 0 ? h('span', { class: 'badge subtle' }, 'latest') : null),
        h('td', {}, k.method || '—'),
        h('td', { class: 'num' }, count(k.numPoints)),
        h('td', { class: 'num' }, String(k.rank ?? 0)),
        h('td', { class: 'mono' }, k.datasetId ? link(`#/datasets/${enc(k.datasetId)}`, k.datasetId) : '—'),
        h('td', { class: 'mono' }, k.jobId ? link(`#/jobs/${enc(k.jobId)}`, k.jobId) : h('span', { class: 'muted' }, 'imported')),
        h('td', {}, certText(k.certificate)),
        h('td', { class: 'num', title: timeText(k.createdUnixMs) }, age(k.createdUnixMs))));
    });
  }
  const table = h('table', { id: 'kernels-table', class: 'data' },
    h('thead', {}, h('tr', {}, ['Name', 'Version', 'Method', 'Items', 'Rank', 'Data set', 'Job', 'Certificate', 'Age']
      .map((c) => h('th', { class: ['Items', 'Rank', 'Age'].includes(c) ? 'num' : '' }, c)))),
    tbody);

  // Aliases: Kernels.List does not return them; resolve one with Kernels.Get.
  const nameInput = h('input', { id: 'alias-lookup-name', list: 'kernel-names', placeholder: 'kernel name', value: names[0] || '', required: true });
  const aliasInput = h('input', { id: 'alias-lookup-alias', placeholder: 'alias, e.g. prod', required: true });
  const result = h('p', { id: 'alias-lookup-result', class: 'muted' });
  const form = h('form', { id: 'alias-lookup', class: 'form-row' }, nameInput, aliasInput,
    h('button', { type: 'submit' }, 'Resolve'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    result.textContent = 'resolving…';
    try {
      const q = new URLSearchParams({ 'kernel.name': nameInput.value.trim(), 'kernel.alias': aliasInput.value.trim() });
      const k = await api(`/v1/kernels/get?${q}`, undefined, ctx.signal);
      result.replaceChildren(`${aliasInput.value.trim()} → `, link(kernelHref(k.name, k.version), `${k.name} v${k.version}`));
      result.className = '';
    } catch (e) {
      actionError(e, result);
    }
  });
  view.replaceChildren(
    pageHeader('Kernels', h('span', { id: 'kernels-count', class: 'muted' },
      `${names.length} name${names.length === 1 ? '' : 's'}, ${kernels.length} version${kernels.length === 1 ? '' : 's'}`)),
    card(null, { class: 'card table-card' }, h('div', { class: 'table-wrap' }, table),
      kernels.length ? null : h('p', { class: 'muted' }, 'No kernels yet: a succeeded job stores one, or import one.')),
    card('Aliases', { id: 'aliases-card' },
      h('p', { class: 'muted small' }, 'Kernels.List returns names and versions only, not aliases; an alias of a name resolves here (Kernels.Get), and a version\'s page sets one.'),
      h('datalist', { id: 'kernel-names' }, names.map((n) => h('option', { value: n }))),
      form, result));
}

function labelLegend(labels) {
  const seen = new Map();
  labels.forEach((l) => seen.set(String(l), (seen.get(String(l)) || 0) + 1));
  const keys = [...seen.keys()].sort((a, b) => Number(a) - Number(b));
  return h('div', { class: 'legend-row', id: 'scatter-legend' },
    keys.slice(0, 30).map((l) => h('span', { class: 'legend-item' },
      h('span', { class: `swatch c${((Number(l) % 10) + 10) % 10}` }), `label ${l} (${seen.get(l)})`)),
    keys.length > 30 ? h('span', { class: 'muted' }, `… ${keys.length - 30} more labels (colours repeat every 10)`) : null);
}

async function kernelPage(ctx, name, version) {
  const ref = { name, version: String(version) };
  const insp = await api('/v1/kernels/inspect', { kernel: ref, sample: 1000, heatmap: 200, spectrum: 64, seed: '1' }, ctx.signal);
  const info = insp.info || {};
  const items = (insp.items || []).map(num);
  const keys = insp.keys || [];
  const labels = insp.hasLabels ? (insp.labels || []).map(num) : null;
  const x = (insp.x || []).map(Number), y = (insp.y || []).map(Number);
  const eig = (insp.eigenvalues || []).map(Number);
  const trace = Number(insp.trace || 0);
  const hmItems = (insp.heatmapItems || []).map(num);
  const hmLabels = insp.hasLabels ? (insp.heatmapLabels || []).map(num) : null;
  const hm = (insp.heatmap || []).map(Number);
  const keyOf = (pos) => (keys.length ? keys[pos] : '');
  const labelOfItem = new Map();
  items.forEach((it, i) => labelOfItem.set(it, labels ? labels[i] : null));
  const keyOfItem = new Map();
  if (keys.length) items.forEach((it, i) => keyOfItem.set(it, keys[i]));

  // Header and facts.
  const versionsSlot = h('span', { id: 'kernel-versions', class: 'versions' });
  const spectrumSum = eig.reduce((a, b) => a + b, 0);
  const facts = dl('kernel-info', [
    ['name', info.name, 'name'],
    ['version', String(info.version), 'version'],
    ['method', info.method || '—', 'method'],
    ['items', count(info.numPoints), 'numPoints'],
    ['rank', String(info.rank ?? 0), 'rank'],
    ['data set', info.datasetId ? link(`#/datasets/${enc(info.datasetId)}`, info.datasetId) : '—', 'datasetId'],
    ['job', info.jobId ? link(`#/jobs/${enc(info.jobId)}`, info.jobId) : 'imported', 'jobId'],
    ['created', timeText(info.createdUnixMs), 'created'],
    ['trace of K', formatNumber(trace), 'trace'],
    ['labels', insp.hasLabels ? 'from the data set' : 'none', 'hasLabels'],
  ]);

  // Spectrum.
  const spectrum = svg('spectrum');
  drawBarChart(spectrum, {
    values: eig, labels: eig.map((_, i) => i + 1), titles: eig.map((_, i) => `λ${i + 1}`),
    yScale: 'log', xLabel: 'eigenvalue index', yLabel: 'eigenvalue (log scale)', barClass: 'bar', width: 600, height: 280,
  });
  const spectrumNote = h('p', { class: 'muted small', id: 'spectrum-note' },
    `${eig.length} leading eigenvalue${eig.length === 1 ? '' : 's'} of K; they hold ${trace > 0 ? formatNumber((100 * spectrumSum) / trace) : '—'}% of the trace.`);

  // Scatter.
  const scatter = svg('scatter');
  const scatterReadout = h('p', { id: 'scatter-readout', class: 'readout' }, 'Hover a point for its item; click it to query its neighbours.');
  const describeItem = (item) => {
    const key = keyOfItem.get(item);
    const label = labelOfItem.get(item);
    return `item ${item}${key ? ` · key ${key}` : ''}${label !== null && label !== undefined ? ` · label ${label}` : ''}`;
  };

  // Heat map.
  const canvas = h('canvas', { id: 'heatmap', class: 'heatmap', width: 1, height: 1, 'aria-label': 'heat map of K' });
  const colorbar = svg('heatmap-colorbar', 'colorbar-svg');
  const heatReadout = h('p', { id: 'heatmap-readout', class: 'readout' }, 'Hover a cell for K(i, j).');

  // Top-k explorer.
  const query = h('input', { id: 'topk-query', list: 'topk-keys', placeholder: keys.length ? 'item index or key' : 'item index', value: items.length ? (keys.length ? keys[0] : String(items[0])) : '0', required: true, 'aria-label': 'item' });
  const by = h('select', { id: 'topk-by', 'aria-label': 'query by' },
    h('option', { value: 'auto' }, 'index or key'), h('option', { value: 'index' }, 'index'), h('option', { value: 'key' }, 'key'));
  const kInput = h('input', { id: 'topk-k', type: 'number', min: 1, max: 10000, value: '10', 'aria-label': 'k' });
  const metric = h('select', { id: 'topk-metric', 'aria-label': 'metric' },
    h('option', { value: 'INNER_PRODUCT' }, 'inner product K(i, j)'), h('option', { value: 'COSINE' }, 'cosine'));
  const excludeSelf = h('input', { id: 'topk-exclude-self', type: 'checkbox' });
  const topkStatus = h('p', { id: 'topk-status', class: 'muted' });
  const topkBody = h('tbody');
  const topkTable = h('table', { id: 'topk-table', class: 'data compact' },
    h('thead', {}, h('tr', {}, h('th', { class: 'num' }, '#'), h('th', { class: 'num' }, 'item'), h('th', {}, 'key'),
      h('th', {}, 'label'), h('th', { class: 'num' }, 'score'), h('th', {}, ''))),
    topkBody);
  const topkForm = h('form', { id: 'topk-form', class: 'form-row wrap' },
    h('label', {}, 'query ', query), h('label', {}, 'by ', by), h('label', {}, 'k ', kInput), h('label', {}, 'score ', metric),
    h('label', { class: 'check' }, excludeSelf, ' exclude the item itself'),
    h('button', { type: 'submit', id: 'topk-submit', class: 'primary' }, 'Find neighbours'));
  const runTopK = async () => {
    const q = query.value.trim();
    const mode = by.value === 'auto' ? (/^\d+$/.test(q) ? 'index' : 'key') : by.value;
    const body = { kernel: ref, k: Math.max(1, Math.min(10000, num(kInput.value) || 10)), metric: metric.value, excludeSelf: excludeSelf.checked };
    if (mode === 'index') body.item = num(q);
    else body.itemKey = q;
    topkStatus.className = 'muted';
    topkStatus.textContent = 'querying…';
    const t0 = performance.now();
    try {
      const r = await api('/v1/queries/top-k', body, ctx.signal);
      const res = r.items || [];
      const top = res.length ? Math.max(...res.map((s) => Math.abs(Number(s.score)))) : 1;
      topkBody.replaceChildren(...res.map((s, i) => {
        const label = labelOfItem.get(num(s.index));
        const barSvg = svgEl('svg', { class: 'score-bar', viewBox: '0 0 100 10', preserveAspectRatio: 'none' });
        svgEl('rect', { x: 0, y: 1, height: 8, width: Math.max(0.5, (100 * Math.abs(Number(s.score))) / (top || 1)), class: Number(s.score) < 0 ? 'neg' : 'pos' }, barSvg);
        return h('tr', { dataset: { index: s.index } },
          h('td', { class: 'num' }, String(i + 1)),
          h('td', { class: 'num' }, String(s.index ?? 0)),
          h('td', { class: 'key' }, s.itemKey || ''),
          h('td', {}, label === undefined || label === null ? '' : String(label)),
          h('td', { class: 'num mono' }, formatNumber(Number(s.score))),
          h('td', { class: 'bar-cell' }, barSvg));
      }));
      topkTable.dataset.count = String(res.length);
      topkStatus.textContent = `${res.length} neighbour${res.length === 1 ? '' : 's'} of ${mode} ${q} in ${Math.round(performance.now() - t0)} ms`;
    } catch (e) {
      topkBody.replaceChildren();
      topkTable.dataset.count = '0';
      actionError(e, topkStatus);
    }
  };
  topkForm.addEventListener('submit', (ev) => { ev.preventDefault(); runTopK(); });
  const datalist = h('datalist', { id: 'topk-keys' }, keys.slice(0, 1000).map((k) => h('option', { value: k })));

  // Alias (write scope).
  const aliasInput = h('input', { id: 'alias-name', placeholder: 'alias, e.g. prod', required: true, 'aria-label': 'alias' });
  const aliasResult = h('span', { id: 'alias-result', class: 'muted' });
  const aliasForm = h('form', { id: 'alias-form', class: 'form-row' }, aliasInput,
    h('button', { type: 'submit', id: 'alias-submit' }, `Point alias at v${info.version}`));
  aliasForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    aliasResult.className = 'muted';
    aliasResult.textContent = 'setting…';
    try {
      await api('/v1/kernels/set-alias', { name: info.name, alias: aliasInput.value.trim(), version: String(info.version) }, ctx.signal);
      aliasResult.textContent = `alias ${aliasInput.value.trim()} → ${info.name} v${info.version}`;
    } catch (e) {
      actionError(e, aliasResult);
    }
  });

  const cert = info.certificate || {};
  view.replaceChildren(
    pageHeader(`Kernel ${info.name} v${info.version}`, h('span', { class: 'badge subtle' }, info.method || 'kernel'), versionsSlot),
    tiles('kernel-tiles', [
      ['items', count(info.numPoints), 'numPoints'],
      ['rank', String(info.rank ?? 0), 'rank'],
      ['trace of K', formatNumber(trace), 'trace'],
      ['top eigenvalue', trace > 0 && eig.length ? `${formatNumber((100 * eig[0]) / trace)}% of trace` : '—', 'lambda1'],
      ['duality gap', cert.gap !== undefined ? formatNumber(cert.gap) : '—', 'gap'],
      ['certificate', cert.certified ? 'certified' : (Object.keys(cert).length ? 'not certified' : 'none'), 'certified'],
    ]),
    h('div', { class: 'grid two' },
      card('Principal coordinates', { id: 'scatter-card' },
        h('p', { class: 'muted small', id: 'scatter-note' },
          `${items.length} of ${count(info.numPoints)} items at K's top two principal coordinates${labels ? ', coloured by label' : ''}.`),
        h('div', { class: 'chart-wrap' }, scatter), labels ? labelLegend(labels) : null, scatterReadout),
      card('Heat map of K', { id: 'heatmap-card' },
        h('p', { class: 'muted small', id: 'heatmap-note' },
          `K on a sub-sample of ${hmItems.length} items${hmLabels ? ', sorted by label (white lines separate labels)' : ''}.`),
        h('div', { class: 'heatmap-wrap' }, canvas), colorbar, heatReadout)),
    h('div', { class: 'grid two' },
      card('Top-k explorer', { id: 'topk-card' }, topkForm, datalist, topkStatus, h('div', { class: 'table-wrap' }, topkTable)),
      card('Eigenvalue spectrum', { id: 'spectrum-card' }, spectrumNote, h('div', { class: 'chart-wrap' }, spectrum))),
    h('div', { class: 'grid two' },
      card('Kernel', { id: 'kernel-card' }, facts, h('h3', {}, 'Alias'), aliasForm, h('p', {}, aliasResult)),
      h('div', { class: 'stack-col' },
        card('Certificate', { id: 'kernel-certificate-card' }, certificateView('kernel-certificate', info.certificate)),
        card('Summary', { id: 'kernel-summary-card' }, summaryTable('kernel-summary', info.summaryJson)))));

  // Charts that need layout last: the scatter first (it makes the page usable).
  drawScatter(scatter, {
    x, y, labels, xLabel: 'first principal coordinate', yLabel: 'second principal coordinate',
    onHover: (i) => { scatterReadout.textContent = i < 0 ? 'Hover a point for its item; click it to query its neighbours.' : describeItem(items[i]); },
    onClick: (i) => {
      by.value = 'index';
      query.value = String(items[i]);
      runTopK();
    },
  });
  scatter.dataset.drawnMs = String(Math.round(performance.now()));
  scatter.dataset.routeMs = String(Math.round(performance.now() - ctx.start));
  const m = hmItems.length;
  const { lo, hi } = drawHeatmap(canvas, {
    m, values: hm, labels: hmLabels,
    onHover: (i, j) => {
      heatReadout.textContent = i < 0 ? 'Hover a cell for K(i, j).'
        : `K(${hmItems[i]}, ${hmItems[j]}) = ${formatNumber(hm[i * m + j])}` +
          (hmLabels ? ` · labels ${hmLabels[i]}, ${hmLabels[j]}` : '');
    },
  });
  drawColorBar(colorbar, lo, hi);
  view.dataset.state = 'ready';

  // Other versions of this name, after the page is usable.
  api(`/v1/kernels/list?name=${enc(name)}`, undefined, ctx.signal).then((r) => {
    const vs = (r.kernels || []).map((k) => num(k.version)).sort((a, b) => a - b);
    if (vs.length > 1) {
      versionsSlot.replaceChildren('versions ', ...vs.map((v) => (v === num(info.version)
        ? h('strong', { class: 'version current' }, `v${v}`)
        : h('a', { class: 'version', href: kernelHref(name, v) }, `v${v}`))));
    }
  }).catch(() => {});
  if (items.length) runTopK();
}

// ---- data sets ----------------------------------------------------------------

async function datasetsPage(ctx) {
  const r = await api('/v1/datasets/list', undefined, ctx.signal);
  const sets = (r.datasets || []).slice().sort((a, b) => num(b.createdUnixMs) - num(a.createdUnixMs));
  const table = h('table', { id: 'datasets-table', class: 'data' },
    h('thead', {}, h('tr', {}, ['Name', 'Id', 'Items', 'Features', 'Classes', 'Constraints', 'Attributes', 'Age']
      .map((c) => h('th', { class: ['Items', 'Features', 'Classes', 'Constraints', 'Age'].includes(c) ? 'num' : '' }, c)))),
    h('tbody', {}, sets.map((d) => h('tr', { dataset: { datasetId: d.id } },
      h('td', { class: 'name' }, link(`#/datasets/${enc(d.id)}`, d.name || d.id)),
      h('td', { class: 'mono' }, d.id),
      h('td', { class: 'num' }, count(d.numPoints)),
      h('td', { class: 'num' }, count(d.dim)),
      h('td', { class: 'num' }, d.numClasses ? count(d.numClasses) : '—'),
      h('td', { class: 'num' }, count(d.numConstraints)),
      h('td', { class: 'mono' }, h('span', { class: 'clip', title: d.attributes || '' }, d.attributes || '—')),
      h('td', { class: 'num', title: timeText(d.createdUnixMs) }, age(d.createdUnixMs))))));
  view.replaceChildren(
    pageHeader('Data sets', h('span', { id: 'datasets-count', class: 'muted' }, `${sets.length} data set${sets.length === 1 ? '' : 's'}`)),
    card(null, { class: 'card table-card' }, h('div', { class: 'table-wrap' }, table),
      sets.length ? null : h('p', { class: 'muted' }, 'No data sets yet: upload one with kls upload or POST /v1/datasets/upload.')));
}

async function datasetPage(ctx, id) {
  const d = await api(`/v1/datasets/get?id=${enc(id)}`, undefined, ctx.signal);
  const sizes = (d.classSizes || []).map(num);
  const must = num(d.mustLink), cannot = num(d.cannotLink);
  const facts = dl('dataset-info', [
    ['name', d.name || '—', 'name'],
    ['id', d.id, 'id'],
    ['items', count(d.numPoints), 'numPoints'],
    ['features', count(d.dim), 'dim'],
    ['classes', d.numClasses ? count(d.numClasses) : 'unlabelled', 'numClasses'],
    ['constraints', count(d.numConstraints), 'numConstraints'],
    ['attributes', d.attributes || '—', 'attributes'],
    ['attributes version', count(d.attributesVersion), 'attributesVersion'],
    ['created', timeText(d.createdUnixMs), 'created'],
  ]);
  const classes = svg('class-sizes');
  const classNote = h('p', { class: 'muted small' });
  if (sizes.length) {
    drawBarChart(classes, {
      values: sizes, labels: sizes.map((_, i) => i), titles: sizes.map((_, i) => `label ${i}`),
      xLabel: 'label', yLabel: 'items', barClass: (i) => `bar class-bar c${i % 10}`, width: 600, height: 260,
    });
    const total = sizes.reduce((a, b) => a + b, 0);
    classNote.textContent = `${sizes.length} classes, ${count(total)} labelled items; largest ${count(Math.max(...sizes))}, smallest ${count(Math.min(...sizes))}.`;
  } else {
    classes.dataset.count = '0';
    classNote.textContent = d.numClasses ? 'Too many classes to count per class.' : 'This data set has no labels.';
  }
  // Constraints: one stacked bar, must-link then cannot-link.
  const cons = svgEl('svg', { id: 'constraints-bar', class: 'stack', viewBox: '0 0 400 18', preserveAspectRatio: 'none' });
  const total = must + cannot;
  if (total > 0) {
    svgEl('rect', { x: 0, y: 0, height: 18, width: (400 * must) / total, class: 'must' }, cons);
    svgEl('rect', { x: (400 * must) / total, y: 0, height: 18, width: (400 * cannot) / total, class: 'cannot' }, cons);
  }
  const gen = d.generated || {};
  const constraints = h('div', { id: 'constraints', dataset: { mustLink: must, cannotLink: cannot } },
    dl('constraints-facts', [
      ['must-link', count(must), 'mustLink'],
      ['cannot-link', count(cannot), 'cannotLink'],
      ['total stored', count(d.numConstraints), 'numConstraints'],
      gen.protocol ? ['generated by', `protocol ${gen.protocol}, seed ${gen.seed}${num(gen.components) ? `, ${count(gen.components)} components` : ''}`, 'generated'] : ['generated by', undefined],
    ]),
    total > 0 ? h('div', { class: 'stack-wrap' }, cons,
      h('div', { class: 'legend-row' }, h('span', { class: 'legend-item' }, h('span', { class: 'swatch must' }), 'must-link'),
        h('span', { class: 'legend-item' }, h('span', { class: 'swatch cannot' }), 'cannot-link'))) : null,
    h('p', { class: 'muted small' }, 'Must-link counts include self pairs (i, i).'));
  const kernelsSlot = h('div', { id: 'dataset-kernels' }, h('p', { class: 'muted' }, 'Loading…'));
  const jobsSlot = h('div', { id: 'dataset-jobs' }, h('p', { class: 'muted' }, 'Loading…'));
  view.replaceChildren(
    pageHeader(`Data set ${d.name || d.id}`),
    h('div', { class: 'grid two' },
      card('Data set', { id: 'dataset-card' }, facts),
      card('Constraints', { id: 'constraints-card' }, constraints)),
    h('div', { class: 'grid two' },
      card('Labels', { id: 'class-sizes-card' }, classNote, h('div', { class: 'chart-wrap' }, classes)),
      card('Kernels and jobs', { id: 'dataset-links-card' }, h('h3', {}, 'Kernels'), kernelsSlot, h('h3', {}, 'Jobs'), jobsSlot)));
  view.dataset.state = 'ready';
  const [kl, jl] = await Promise.allSettled([
    api('/v1/kernels/list', undefined, ctx.signal), listJobs(ctx.signal, { datasetId: d.id })]);
  if (!ctx.alive) return;
  if (kl.status === 'fulfilled') {
    const ks = (kl.value.kernels || []).filter((k) => k.datasetId === d.id);
    kernelsSlot.replaceChildren(ks.length
      ? h('ul', { class: 'plain' }, ks.map((k) => h('li', {}, link(kernelHref(k.name, k.version), `${k.name} v${k.version}`), ` · ${k.method}`)))
      : h('p', { class: 'muted' }, 'None.'));
  } else {
    kernelsSlot.replaceChildren(h('p', { class: 'error-text' }, String(kl.reason?.message || kl.reason)));
  }
  if (jl.status === 'fulfilled') {
    const js = jl.value.slice().reverse().slice(0, 20);
    jobsSlot.replaceChildren(js.length
      ? h('ul', { class: 'plain' }, js.map((j) => h('li', {}, stateBadge(j.state), ' ', link(`#/jobs/${enc(j.id)}`, j.id), ` · ${j.method}`)))
      : h('p', { class: 'muted' }, 'None.'));
  } else {
    jobsSlot.replaceChildren(h('p', { class: 'error-text' }, String(jl.reason?.message || jl.reason)));
  }
}

// ---- server -------------------------------------------------------------------

const SERVER_FIELDS = {
  version: ['version', (v) => String(v)],
  role: ['role', (v) => String(v)],
  dataDir: ['data directory', (v) => String(v)],
  uptimeSeconds: ['uptime', (v) => duration(v)],
  workerThreads: ['job workers', (v) => String(v)],
  maxMessageBytes: ['largest message', (v) => bytes(v)],
};

function serverFacts(info) {
  const rows = [];
  const walk = (prefix, v) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k, w] of Object.entries(v)) walk(prefix ? `${prefix}.${k}` : k, w);
      return;
    }
    const known = SERVER_FIELDS[prefix];
    let text;
    if (known) text = known[1](v);
    else if (Array.isArray(v)) text = v.map(String).join(', ') || '—';
    else if (/Bytes$/.test(prefix)) text = bytes(v);
    else if (/Seconds$/.test(prefix)) text = duration(v);
    else if (/UnixMs$/.test(prefix)) text = timeText(v);
    else text = typeof v === 'number' ? formatNumber(v) : String(v);
    const label = known ? known[0] : prefix.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
    rows.push([label, text, prefix]);
  };
  walk('', info);
  return dl('server-info', rows);
}

async function serverPage(ctx) {
  const info = await api('/v1/admin/get-server-info', undefined, ctx.signal);
  const infoSlot = h('div', {}, serverFacts(info));
  const jobsSlot = h('div', { id: 'server-jobs' }, h('p', { class: 'muted' }, 'Loading…'));
  const storeSlot = h('div', { id: 'server-store' }, h('p', { class: 'muted' }, 'Loading…'));
  const live = liveIndicator('server-live');
  view.replaceChildren(
    pageHeader('Server', live),
    h('div', { class: 'grid two' },
      card('Server', { id: 'server-card' }, h('p', { class: 'muted small' }, 'Admin.GetServerInfo'), infoSlot),
      card('Queue', { id: 'server-queue-card' }, h('p', { class: 'muted small' }, 'Jobs by state (Jobs.List)'), jobsSlot,
        h('h3', {}, 'Stored'), storeSlot)));
  const refresh = async () => {
    const [i, jobs, kernels, sets] = await Promise.all([
      api('/v1/admin/get-server-info', undefined, ctx.signal), listJobs(ctx.signal),
      api('/v1/kernels/list', undefined, ctx.signal), api('/v1/datasets/list', undefined, ctx.signal)]);
    if (!ctx.alive) return;
    infoSlot.replaceChildren(serverFacts(i));
    const by = {};
    for (const j of jobs) by[j.state] = (by[j.state] || 0) + 1;
    jobsSlot.replaceChildren(dl('server-job-states', JOB_STATES.map((s) => [s.toLowerCase(), count(by[s] || 0), s])));
    const names = new Set((kernels.kernels || []).map((k) => k.name));
    storeSlot.replaceChildren(dl('server-store-facts', [
      ['kernels', `${count(names.size)} names, ${count((kernels.kernels || []).length)} versions`, 'kernels'],
      ['data sets', count((sets.datasets || []).length), 'datasets'],
      ['jobs', count(jobs.length), 'jobs'],
    ]));
  };
  await refresh();
  view.dataset.state = 'ready';
  ctx.every(5000, refresh);
  ctx.onStop(() => setLive(live, false));
}

// ---- start --------------------------------------------------------------------

window.addEventListener('hashchange', route);
updateAuthStatus();
route();
