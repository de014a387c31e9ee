// cycled dashboard. Plain JavaScript, no dependencies, no build step.
//
// Invariants:
// - Data is bounded: at most MAX_TICKS summaries are kept (the oldest are dropped), and
//   as many of a search's matches; the timeline keeps MAX_EVENTS events; the breaker and
//   blackboard lists are replaced, never appended to.
// - Rendering happens in requestAnimationFrame only, at most once per frame (and the
//   tick-driven parts at most every TICKS_RENDER_MS): event handlers change state and
//   mark what is dirty. A hidden tab renders nothing and polls nothing: it only keeps
//   its data, and draws once when it is shown again (docs/decisions.md, "Dashboard
//   cost in the browser").
// - The heat map is drawn incrementally: new ticks shift the canvas and draw their own
//   columns only; a change of geometry, rows or colours redraws it whole.
// - The DOM is written only where its content changed (setText, setHidden).
// - Status is never shown by colour alone: every status also has a shape (bar height,
//   outline, hatch, notch) and a glyph, and the tooltip spells it out.
// - Text from the daemon is put in the page with textContent, never as HTML.
// - The URL's hash carries the view (selected tick, module view, filter, paused window):
//   it is written from the state, and read once at start and on a hash change.
'use strict';

(() => {
  const VIEW = 200; // ticks shown by the heat map and the timing chart
  const MAX_TICKS = 2000; // summaries kept in memory (live ones and older pages)
  const PAGE = 200; // older ticks fetched per page
  const POLL_MS = 1000; // refresh of /breakers and /blackboard
  const ROW_H = 14; // heat map row height, CSS pixels
  const MAX_EVENTS = 300; // events kept by the timeline (the oldest are dropped)
  const EVENTS_POLL_MS = 3000; // refresh of GET /events when the recorder runs
  const FILTER_REFRESH_MS = 1000; // a search is asked again at most this often as ticks come
  const MODULE_LINES = 60; // lines of the module view

  // STATUS is the page's one table of module statuses: every status of the summary with
  // its colour class c, its shape and its glyph g; h is the bar height (the more serious,
  // the taller); outline draws a frame only; hatch a diagonal; notch a gap across the bar.
  // unsearchable marks the statuses whose lines the recorder does not index (the API's
  // search refuses them; the Go status table's searchable column).
  // An entry with derived is not a status of the summary but one the page shows instead
  // of another (derived says when); a check against the Go vocabulary skips it.
  const STATUS = {
    ok: { c: 'ok', h: 0.35, g: '✓', unsearchable: true },
    probe_ok: { c: 'probe', h: 0.35, g: 'p', notch: true },
    retried: { c: 'retried', h: 0.6, g: 'r' },
    not_due: { c: 'idle', h: 0.15, g: '·', unsearchable: true },
    skipped: { c: 'skip', h: 1, g: '–', hatch: true },
    rejected: { c: 'warn', h: 0.8, g: 'R', outline: true },
    shed: { c: 'skip', h: 0.8, g: 's', outline: true },
    busy: { c: 'warn', h: 1, g: 'b' },
    open: { c: 'open', h: 1, g: '○', outline: true },
    timed_out: { c: 'bad', h: 1, g: 'T', notch: true },
    probe_failed: { c: 'bad', h: 1, g: 'P', hatch: true },
    failed: { c: 'bad', h: 1, g: '✕' },
    idle: { c: 'idle', h: 0.15, g: '·', unsearchable: true, derived: 'skipped: an emergency-only module outside emergency mode, where nothing is expected of it' },
  };
  const UNKNOWN = { c: 'skip', h: 0.5, g: '?' };
  const TIER_STATUS = { ok: 'ok', degraded: 'warn', failed: 'bad', skipped: 'skip' };

  // statusOf returns the status the page shows for module line m of summary s: idle for
  // an emergency-only module outside emergency mode (its line says skipped while its tier
  // ran and the tick was not in emergency mode), else the line's own status.
  function statusOf(m, s) {
    if (m.status === 'skipped' && !s.emergency_mode) {
      const t = (s.tiers || []).find((x) => x.index === m.tier_index);
      if (t && t.status !== 'skipped') return 'idle';
    }
    return m.status;
  }
  const styleOf = (name) => STATUS[name] || UNKNOWN;

  // who names the operator of an admin action: the admin token's name when the daemon has
  // named tokens, else its fingerprint; and the client's address.
  const who = (d) => `${d.name || d.token || 'no token'} from ${d.remote || '?'}`;

  // EVENTS turns an event of the timeline (a recorded one from GET /events, or one of the
  // stream's, named as the recorder names it) into its severity, glyph and text, and who
  // acted for admin actions. null: not shown (the decision rules are for replay; a step
  // tick is a tick, not an action to investigate; a successful emergency reset is shown
  // by its own event).
  const EVENTS = {
    breaker: (d) => ({ sev: d.to === 'open' ? 'bad' : d.to === 'half_open' ? 'warn' : 'ok', g: d.to === 'open' ? '○' : d.to === 'half_open' ? '◐' : '●',
      text: `breaker ${d.breaker}: ${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ''}` }),
    emergency_entered: (d) => ({ sev: 'bad', g: '⚠', text: `emergency entered: ${d.reason || 'safety tier failed'}${d.latched ? ' (latched)' : ''}` }),
    emergency_left: () => ({ sev: 'ok', g: '✓', text: 'emergency ended' }),
    emergency_reset: (d) => ({ sev: 'warn', g: '↺', text: 'emergency reset by an operator', who: who(d) }),
    shed: (d) => ({ sev: d.shed ? 'warn' : 'ok', g: d.shed ? '▼' : '▲',
      text: `${d.shed ? 'shed' : 'restored'} step ${d.level}${(d.modules || []).length ? ': ' + d.modules.join(', ') : ''}${d.reason ? ` (${d.reason})` : ''}` }),
    config_reload: (d) => ({ sev: d.ok ? 'info' : 'bad', g: '⟳',
      text: d.ok ? `configuration reloaded${d.trigger ? ` (${d.trigger})` : ''}` : `reload rejected: ${d.error || 'invalid configuration'}` }),
    config_applied: (d) => ({ sev: 'info', g: '⚙', text: `configuration generation ${d.generation} applied` }),
    module_registered: (d) => ({ sev: 'info', g: '+', text: `module ${d.module} registered${d.tier ? ` in ${d.tier}` : ''}` }),
    module_removed: (d) => ({ sev: 'info', g: '−', text: `module ${d.module} removed` }),
    module_added: (d) => ({ sev: 'info', g: '+', text: `module ${d.module} added${d.tier ? ` in ${d.tier}` : ''} (generation ${d.generation})` }),
    admin: (d) => (d.route === 'POST /ticks' || (d.route === 'POST /emergency/reset' && d.status < 300) ? null
      : { sev: d.status < 300 ? 'info' : 'warn', g: '✎', text: `${d.route}: ${d.status}${d.path && d.path !== d.route.split(' ')[1] ? ` (${d.path})` : ''}`, who: who(d) }),
    recorder_started: (d) => ({ sev: 'info', g: '▶', text: `daemon started (run ${d.run_id || '?'})` }),
    recorder_stopped: () => ({ sev: 'info', g: '■', text: 'daemon stopped' }),
    decision_rules: () => null,
  };

  const S = {
    ticks: [], // summaries, ascending tick_id, each with _m: Map(module name → line)
    boot: '', // the daemon process that produced S.ticks (from event ids and ETags)
    lastId: 0,
    viewEnd: null, // index after the last tick shown; null follows the newest tick
    noOlder: false,
    breakers: [],
    breakersAt: 0, // performance.now() of the /breakers answer
    board: null,
    modules: [],
    periodMs: 0,
    recoverAfter: 0,
    conn: 'connecting',
    hover: null, // {x, y} in the heat map canvas, CSS pixels
    rows: [],
    rowsKey: '',
    // The selection, carried by the URL's hash (see hashOf, applyHash).
    sel: { tick: 0, module: '', details: false },
    hashReady: false, // the hash the page opened with is applied: the view may be written
    filter: { severity: '', module: '', status: '', since: '', until: '' }, // since, until: RFC 3339
    filt: null, // the search's answer while a filter is set: {ticks, noOlder, loaded, error}
    events: [], // the timeline, ascending time, at most MAX_EVENTS
    evKeys: new Set(),
    evMode: '', // 'recorder' (GET /events), 'stream' (since the page opened), '' not known yet
    evAfter: 0,
  };

  const $ = (id) => document.getElementById(id);
  let colours = {};

  let coloursGen = 0; // changes with the colours: the heat map is then redrawn whole
  function readColours() {
    coloursGen++;
    const cs = getComputedStyle(document.documentElement);
    for (const k of ['ok', 'retried', 'warn', 'bad', 'open', 'probe', 'idle', 'skip', 'fg', 'muted', 'line', 'card']) {
      colours[k] = cs.getPropertyValue('--' + k).trim() || '#888';
    }
  }

  // ---- rendering loop -------------------------------------------------------------

  // The tick-driven parts (heat map, timing chart, banner) are drawn at most every
  // TICKS_RENDER_MS: at 100 Hz a frame per tick would cost the machine's CPU (which the
  // daemon's tick may need) for changes no one can follow. The rest (hover, countdowns,
  // tables) is drawn at the next frame.
  const TICKS_RENDER_MS = 200;
  const dirty = new Set();
  let frame = 0;
  let ticksTimer = 0;
  let ticksDrawn = 0;
  function mark(...parts) {
    if (document.hidden) { // drawn when shown again: see onVisibility
      for (const p of parts) dirty.add(p);
      return;
    }
    for (const p of parts) {
      if (p !== 'ticks') dirty.add(p);
      else if (!ticksTimer && !dirty.has('ticks')) {
        const wait = Math.max(0, ticksDrawn + TICKS_RENDER_MS - performance.now());
        ticksTimer = setTimeout(() => { ticksTimer = 0; dirty.add('ticks'); request(); }, wait);
      }
    }
    if (dirty.size) request();
  }
  function request() {
    if (!frame && !document.hidden) frame = requestAnimationFrame(render);
  }
  function render() {
    frame = 0;
    if (document.hidden) return; // dirty stays marked until the tab is shown
    const parts = new Set(dirty);
    dirty.clear();
    if (parts.has('conn')) renderConn();
    if (parts.has('ticks')) { ticksDrawn = performance.now(); renderHeatmap(); renderTiming(); renderEmergency(); renderLatest(); }
    if (parts.has('ticks') || parts.has('hover')) renderTooltip();
    if (parts.has('ticks') || parts.has('modview')) renderModuleView();
    if (parts.has('ticks') || parts.has('events')) renderEvents();
    if (parts.has('breakers')) renderBreakers();
    if (parts.has('countdown')) renderCountdowns();
    if (parts.has('board') || parts.has('modules')) renderBoard();
    if (parts.has('modules')) renderModules();
    if (parts.has('filter')) renderFilters();
    writeHash();
  }

  // onVisibility draws everything once when the tab is shown, and refreshes what a
  // hidden tab stopped polling.
  function onVisibility() {
    if (document.hidden) return;
    clearTimeout(ticksTimer);
    ticksTimer = 0;
    dirty.add('ticks');
    mark('conn', 'breakers', 'board', 'modules', 'countdown', 'events', 'filter');
    pollPanels();
    pollEvents();
    scheduleSearch();
    refreshModules();
    refreshRole();
  }

  // setText and setHidden write the DOM only when the value changes: an unchanged
  // write still costs a style and layout pass.
  function setText(e, v) {
    if (e.textContent !== v) e.textContent = v;
  }
  function setHidden(e, v) {
    if (e.hidden !== v) e.hidden = v;
  }
  function setData(e, k, v) {
    if (e.dataset[k] !== v) e.dataset[k] = v;
  }

  // el builds an element: el('td', {class: 'x'}, 'text', child).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  const ms = (v) => (v === undefined || v === null ? '–' : v < 1 ? (v * 1000).toFixed(0) + ' µs' : v < 100 ? v.toFixed(2) + ' ms' : v.toFixed(0) + ' ms');
  const age = (v) => (v < 1000 ? v.toFixed(0) + ' ms' : (v / 1000).toFixed(1) + ' s');

  // ---- data ---------------------------------------------------------------------------

  function resetData() {
    if (S.filt) {
      S.filt = { ticks: [], noOlder: false, loaded: false, error: '' };
      refreshSearch();
    }
    S.ticks = [];
    S.lastId = 0;
    S.viewEnd = null;
    S.noOlder = false;
  }

  function prepare(sum) {
    sum._t = Date.parse(sum.started_at); // ms since the epoch, for the time axes
    sum._m = new Map();
    for (const m of sum.modules || []) sum._m.set(m.name, m);
    return sum;
  }

  // ingest takes a summary from the stream or a long-poll. boot names the daemon process:
  // a new process whose tick ids do not continue the old ones (no recorder) starts over.
  function ingest(sum, boot) {
    if (boot && S.boot && boot !== S.boot && sum.tick_id <= S.lastId) {
      resetData();
      message('info', 'The daemon restarted: showing its new ticks.');
      setTimeout(() => loadOlder(S), 0);
    }
    if (boot) S.boot = boot;
    if (sum.tick_id <= S.lastId) return;
    const prev = S.ticks[S.ticks.length - 1];
    S.ticks.push(prepare(sum));
    if (prev && S.evMode !== 'recorder' && prev.generation !== sum.generation && prev.tick_id + 1 === sum.tick_id) changeEvents(prev, sum);
    S.lastId = sum.tick_id;
    if (S.ticks.length > MAX_TICKS + 100) {
      const drop = S.ticks.length - MAX_TICKS;
      S.ticks.splice(0, drop);
      S.noOlder = false;
      if (S.viewEnd !== null && !S.filt) S.viewEnd = Math.max(Math.min(VIEW, S.ticks.length), S.viewEnd - drop);
    }
    scheduleSearch();
    mark('ticks');
  }

  // A list of ticks is S itself (every tick loaded) or S.filt (the search's answer while
  // a filter is set): both have ticks (ascending tick_id, at most MAX_TICKS) and noOlder.
  // cur is the list the heat map shows.
  const cur = () => S.filt || S;

  // filterQuery returns the API's search parameters of the filter ('' without one).
  function filterQuery() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(S.filter)) if (v) q.set(k, v);
    return q.toString();
  }

  // addOlder merges a page of older summaries (newest first, as GET /ticks answers) into
  // the list L.
  function addOlder(L, list) {
    const first = L.ticks.length ? L.ticks[0].tick_id : Infinity;
    const older = list.filter((s) => s.tick_id < first).reverse().map(prepare);
    if (!older.length) return 0;
    const room = MAX_TICKS - L.ticks.length;
    const take = room > 0 ? older.slice(Math.max(0, older.length - room)) : [];
    L.ticks.unshift(...take);
    if (S.viewEnd !== null && L === cur()) S.viewEnd += take.length;
    if (L === S && !S.lastId && S.ticks.length) S.lastId = S.ticks[S.ticks.length - 1].tick_id;
    mark('ticks');
    return take.length;
  }

  // loadOlder loads a page of ticks older than those of the list L (the one shown by
  // default); one load per list at a time: a second call gets the first one's promise.
  const loading = new Map();
  function loadOlder(L = cur()) {
    if (!loading.has(L)) loading.set(L, loadOlderPage(L).finally(() => loading.delete(L)));
    return loading.get(L);
  }

  async function loadOlderPage(L) {
    if (L.noOlder) return;
    try {
      const before = L.ticks.length ? L.ticks[0].tick_id : 0;
      if (before === 1) { L.noOlder = true; return; }
      const q = new URLSearchParams(L === S ? '' : filterQuery());
      q.set('limit', PAGE);
      if (before) q.set('before', before);
      const r = await getJSON('/ticks?' + q);
      if (L !== S && L !== S.filt) return; // the filter changed meanwhile
      const n = addOlder(L, r.ticks || []);
      if (!r.next_before || (before && n === 0) || L.ticks.length >= MAX_TICKS) L.noOlder = true;
    } catch (e) {
      if (L !== S) { L.error = e.message; mark('filter'); }
      // else the connection status says why; scrolling again retries
    }
  }

  // visible returns the ticks shown: up to cols of them, ending at S.viewEnd.
  function visible(cols) {
    const L = cur();
    const end = S.viewEnd === null ? L.ticks.length : Math.min(S.viewEnd, L.ticks.length);
    return L.ticks.slice(Math.max(0, end - cols), end);
  }

  // ---- search (filters) -----------------------------------------------------------------

  // FILTERS are the search's parameters the page offers (GET /ticks).
  const FILTERS = ['severity', 'module', 'status', 'since', 'until'];

  // setFilter shows the ticks that pass filter f, as the API's search (GET /ticks with
  // severity, module, status, since and until) answers them; an empty filter shows every
  // tick again.
  function setFilter(f) {
    const next = {};
    for (const k of FILTERS) next[k] = f[k] || '';
    if (JSON.stringify(next) === JSON.stringify(S.filter)) return;
    S.filter = next;
    S.filt = filterQuery() ? { ticks: [], noOlder: false, loaded: false, error: '' } : null;
    S.viewEnd = null;
    searchAt = 0;
    if (S.filt) refreshSearch();
    mark('ticks', 'filter', 'hover');
  }

  // scheduleSearch asks the search again (refreshSearch) as ticks come, at most every
  // FILTER_REFRESH_MS; a hidden tab does not ask (onVisibility does when it is shown).
  let searchTimer = 0;
  let searchAt = 0;
  function scheduleSearch() {
    if (!S.filt || searchTimer || document.hidden) return;
    searchTimer = setTimeout(() => { searchTimer = 0; refreshSearch(); }, Math.max(0, searchAt + FILTER_REFRESH_MS - performance.now()));
  }

  // refreshSearch asks the search for its newest page and appends the matches newer than
  // those shown; one search at a time: a second call gets the first one's promise.
  let searching = null;
  function refreshSearch() {
    if (!searching) {
      searching = searchOnce().finally(() => {
        searching = null;
        if (S.filt && !S.filt.loaded && !S.filt.error) refreshSearch(); // the filter changed meanwhile
      });
    }
    return searching;
  }

  async function searchOnce() {
    const f = S.filt;
    if (!f) return;
    searchAt = performance.now();
    const last = f.ticks.length ? f.ticks[f.ticks.length - 1].tick_id : 0;
    try {
      const r = await getJSON(`/ticks?${filterQuery()}&limit=${PAGE}`);
      if (f !== S.filt) return;
      f.error = '';
      const newer = (r.ticks || []).filter((s) => s.tick_id > last).reverse().map(prepare);
      if (!f.loaded) { f.loaded = true; f.noOlder = !r.next_before; }
      f.ticks.push(...newer);
      if (f.ticks.length > MAX_TICKS) {
        const drop = f.ticks.length - MAX_TICKS;
        f.ticks.splice(0, drop);
        f.noOlder = false;
        if (S.viewEnd !== null) S.viewEnd = Math.max(Math.min(VIEW, f.ticks.length), S.viewEnd - drop);
      }
      mark('ticks', 'filter');
    } catch (e) {
      if (f === S.filt) { f.error = e.message; mark('filter'); }
    }
  }

  // ---- network ------------------------------------------------------------------------

  async function getJSON(path, timeoutMs = 10000) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      const r = await fetch(path, { cache: 'no-store', signal: ctl.signal });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        throw new Error((body.error && body.error.message) || `${path}: ${r.status}`);
      }
      return await r.json();
    } finally {
      clearTimeout(t);
    }
  }

  function setConn(state) {
    if (S.conn === state) return;
    S.conn = state;
    mark('conn');
    share({ type: 'state', state });
  }

  // Tabs share one stream. A browser opens at most six HTTP/1.1 connections to a host,
  // so one stream per tab would leave a seventh dashboard (and every request of the
  // others) waiting. The tab that holds the Web Lock (the leader) follows the stream and
  // passes on what it receives over a BroadcastChannel; the other tabs listen. When the
  // leader's tab closes, its lock passes to another tab, which resumes the stream from
  // its own last tick.
  const CHANNEL = 'cycled.dashboard.stream';

  function share(msg) {
    if (T.leader && T.bc) T.bc.postMessage({ ...msg, state: S.conn });
  }

  function startShared() {
    T.bc = new BroadcastChannel(CHANNEL);
    T.bc.onmessage = (e) => {
      const m = e.data || {};
      if (T.leader) {
        if (m.type === 'hello') share({ type: 'beat' }); // a new tab learns the state at once
        return;
      }
      if (m.type === 'tick') ingest(typeof m.sum === 'string' ? JSON.parse(m.sum) : m.sum, m.boot);
      else if (m.type === 'ticks') for (const raw of m.sums) ingest(JSON.parse(raw), m.boot);
      else if (m.type === 'event') streamEvent(m.name, m.data);
      if (m.state && S.conn !== m.state) { S.conn = m.state; mark('conn'); }
    };
    // The callback's promise never settles: the lock is held until the tab closes.
    navigator.locks.request(CHANNEL, () => new Promise(() => {
      T.leader = true;
      connectSSE();
    }));
    // A follower learns the state from the leader's messages; say so meanwhile.
    T.bc.postMessage({ type: 'hello' });
    setInterval(() => share({ type: 'beat' }), 2000);
  }

  // forward passes the stream's summaries on to the other tabs in batches, one message
  // every FORWARD_MS at most, as the JSON text received: a message per tick would wake
  // every tab (and the browser process that carries the channel) at the tick rate.
  const FORWARD_MS = 50;
  const fwd = { sums: [], boot: '', timer: 0 };
  function forward(raw, boot) {
    if (!T.bc) return;
    if (fwd.sums.length && boot !== fwd.boot) flushForward();
    fwd.sums.push(raw);
    fwd.boot = boot;
    if (!fwd.timer) fwd.timer = setTimeout(flushForward, FORWARD_MS);
  }
  function flushForward() {
    clearTimeout(fwd.timer);
    fwd.timer = 0;
    if (!fwd.sums.length) return;
    share({ type: 'ticks', sums: fwd.sums, boot: fwd.boot });
    fwd.sums = [];
  }

  const bootOf = (id) => (id || '').replace(/^W\//, '').replace(/"/g, '').split('-')[0];

  // The transport: the SSE stream, or long-polling /ticks/latest when the stream cannot
  // be used (no EventSource, ?transport=poll, or a stream that never opens while the API
  // answers, as behind a buffering proxy).
  const T = { es: null, mode: 'sse', failures: 0, timer: 0, openTimer: 0, leader: false, bc: null };

  function connectSSE() {
    clearTimeout(T.timer);
    if (T.es) T.es.close();
    const q = S.boot && S.lastId ? '?last_event_id=' + encodeURIComponent(S.boot + '-' + S.lastId) : '';
    const es = new EventSource('/ticks/stream' + q);
    T.es = es;
    // A stream that does not open in time is retried by us, not left to the browser.
    T.openTimer = setTimeout(() => { if (es.readyState !== EventSource.OPEN) streamFailed(es); }, 8000);
    es.onopen = () => {
      clearTimeout(T.openTimer);
      T.failures = 0;
      setConn('live');
      if (!S.ticks.length) loadOlder(S);
    };
    es.onerror = () => streamFailed(es);
    es.addEventListener('tick', (e) => {
      const boot = bootOf(e.lastEventId);
      forward(e.data, boot);
      ingest(JSON.parse(e.data), boot);
    });
    for (const name of ['breaker', 'emergency', 'shed']) {
      es.addEventListener(name, (e) => {
        flushForward();
        share({ type: 'event', name, data: e.data });
        streamEvent(name, e.data);
      });
    }
  }

  async function streamFailed(es) {
    if (es !== T.es) return;
    clearTimeout(T.openTimer);
    es.close();
    T.es = null;
    setConn('disconnected');
    T.failures++;
    if (T.failures >= 3 && (await apiAnswers())) {
      T.mode = 'poll'; // the API answers but the stream does not: long-poll instead
      pollLoop();
      return;
    }
    T.timer = setTimeout(connectSSE, Math.min(1000 * T.failures, 5000));
  }

  async function apiAnswers() {
    try {
      const r = await fetch('/readyz', { cache: 'no-store' });
      return r.status === 200 || r.status === 503;
    } catch (e) {
      return false;
    }
  }

  const sleep = (d) => new Promise((res) => setTimeout(res, d));

  async function pollLoop() {
    let backoff = 500;
    let since = performance.now();
    while (T.mode === 'poll') {
      try {
        await pollOnce();
        backoff = 500;
        setConn('polling');
      } catch (e) {
        setConn('disconnected');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
      // Try the stream again now and then: it may work once a proxy is fixed.
      if (!FORCE_POLL && performance.now() - since > 60000) {
        since = performance.now();
        T.mode = 'sse';
        T.failures = 0;
        connectSSE();
      }
    }
  }

  async function pollOnce() {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), 35000);
    try {
      const r = await fetch(`/ticks/latest?after=${S.lastId}&wait=25s`, { cache: 'no-store', signal: ctl.signal });
      if (r.status === 503) { await sleep(1000); return; }
      if (!r.ok) throw new Error('/ticks/latest: ' + r.status);
      const boot = bootOf(r.headers.get('ETag'));
      const sum = await r.json();
      const gap = sum.tick_id - S.lastId - 1;
      if (boot === S.boot && S.lastId && gap > 0) {
        // The long-poll answers the latest tick only: fetch the ones in between.
        const page = await getJSON(`/ticks?limit=${Math.min(gap, VIEW)}&before=${sum.tick_id}`);
        for (const s of (page.ticks || []).reverse()) { share({ type: 'tick', sum: s, boot }); ingest(s, boot); }
      }
      share({ type: 'tick', sum, boot });
      ingest(sum, boot);
    } finally {
      clearTimeout(t);
    }
  }

  // pollPanels refreshes the breakers and the blackboard; a hidden tab does not ask
  // (onVisibility asks when it is shown).
  function pollPanels() {
    if (document.hidden) return;
    refreshBreakers();
    refreshBoard();
  }

  let breakersBusy = false;
  async function refreshBreakers() {
    // Breaker events can come every tick: one request at a time, none while hidden.
    if (breakersBusy || document.hidden) return;
    breakersBusy = true;
    try {
      const r = await getJSON('/breakers');
      S.breakers = r.breakers || [];
      S.breakersAt = performance.now();
      mark('breakers');
    } catch (e) { /* shown by the connection status */ } finally {
      breakersBusy = false;
    }
  }

  async function refreshBoard() {
    try {
      S.board = await getJSON('/blackboard');
      mark('board');
    } catch (e) { /* shown by the connection status */ }
  }

  async function refreshModules() {
    try {
      const r = await getJSON('/modules');
      S.modules = r.modules || [];
      mark('modules');
    } catch (e) { /* retried by the timer */ }
  }

  async function loadConfig() {
    try {
      const r = await getJSON('/config');
      const c = r.config || r;
      S.periodMs = parseDuration(c.cycle && c.cycle.period);
      S.recoverAfter = (c.emergency && c.emergency.recover_after) || 0;
      setEvMode(c.recorder && c.recorder.enabled ? 'recorder' : 'stream');
      mark('ticks');
    } catch (e) { /* the period is then inferred from the ticks */ }
  }

  // parseDuration reads a Go duration ("100ms", "1m0s", "1.5s") in milliseconds.
  function parseDuration(s) {
    if (typeof s !== 'string') return 0;
    const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, 'µs': 1e-3, ns: 1e-6 };
    let total = 0;
    for (const [, n, u] of s.matchAll(/([\d.]+)(h|ms|m|s|us|µs|ns)/g)) total += parseFloat(n) * units[u];
    return total;
  }

  // ---- events (the timeline) --------------------------------------------------------

  // streamEvent takes an event of the stream (breaker, emergency, shed). With the
  // recorder the timeline shows what GET /events answers, asked at once (the recorder
  // does not keep shed steps: those come from the stream); without it, the stream's
  // events since the page opened.
  function streamEvent(name, raw) {
    let d;
    try { d = typeof raw === 'string' ? JSON.parse(raw) : raw; } catch (e) { return; }
    if (name === 'breaker') refreshBreakers();
    if (name === 'emergency') mark('ticks');
    if (!d) return;
    const kind = name === 'emergency' ? (d.entered ? 'emergency_entered' : 'emergency_left') : name;
    if (S.evMode === 'recorder' && name !== 'shed') { soonEvents(); return; }
    addEvents([{ key: `s:${kind}:${d.tick_id}:${d.breaker || d.level || ''}:${d.to || d.shed || ''}`, at: d.at, tick: d.tick_id, kind, data: d }]);
  }

  // changeEvents adds to the timeline, without the recorder, what a new generation of the
  // configuration between two consecutive ticks shows (a reload or a runtime
  // registration): the modules added and removed, else the generation applied.
  function changeEvents(prev, s) {
    const evs = [];
    const ev = (kind, data) => evs.push({ key: `g:${s.tick_id}:${kind}:${data.module || ''}`, at: s.started_at, tick: s.tick_id, kind, data });
    for (const [n, m] of s._m) if (!prev._m.has(n)) ev('module_added', { module: n, tier: m.tier, generation: s.generation });
    for (const n of prev._m.keys()) if (!s._m.has(n)) ev('module_removed', { module: n });
    if (!evs.length) ev('config_applied', { generation: s.generation });
    addEvents(evs);
  }

  let evGen = 0;
  // addEvents adds events ({key, at, tick, kind, data}) not yet shown to the timeline,
  // which keeps the newest MAX_EVENTS.
  function addEvents(list) {
    let added = 0;
    for (const e of list) {
      if (S.evKeys.has(e.key)) continue;
      const f = EVENTS[e.kind];
      const v = f ? f(e.data || {}) : { sev: 'info', g: '•', text: e.kind };
      if (!v) continue;
      S.evKeys.add(e.key);
      S.events.push({ key: e.key, at: Date.parse(e.at) || Date.now(), tick: e.tick || 0, kind: e.kind, ...v });
      added++;
    }
    if (!added) return;
    S.events.sort((x, y) => x.tick - y.tick || x.at - y.at);
    if (S.events.length > MAX_EVENTS) {
      for (const e of S.events.splice(0, S.events.length - MAX_EVENTS)) S.evKeys.delete(e.key);
    }
    evGen++;
    mark('events');
  }

  // setEvMode says where the timeline's events come from (the configuration's
  // recorder.enabled decides): 'recorder' or 'stream'.
  function setEvMode(mode) {
    if (S.evMode === mode) return;
    S.evMode = mode;
    if (mode === 'recorder') { // the stream's events so far are recorded too (but shed steps)
      S.events = S.events.filter((e) => e.kind === 'shed');
      S.evKeys = new Set(S.events.map((e) => e.key));
      pollEvents();
    }
    evGen++;
    mark('events');
  }

  // pollEvents reads the recorded events after the last one read, a page of up to 1000
  // at a time (at most 20 pages a call: the rest come with the next call).
  let evBusy = false;
  let evTimer = 0;
  async function pollEvents() {
    if (evBusy || document.hidden || S.evMode !== 'recorder') return;
    evBusy = true;
    try {
      for (let page = 0; page < 20; page++) {
        const r = await fetch(`/events?after=${S.evAfter}&limit=1000`, { cache: 'no-store' });
        if (r.status === 501) { setEvMode('stream'); return; } // the recorder is off after all
        if (!r.ok) return;
        const body = await r.json();
        const evs = body.events || [];
        addEvents(evs.map((e) => ({ key: 'r:' + e.id, at: e.at, tick: e.tick_id, kind: e.kind, data: e.data })));
        S.evAfter = body.next_after || S.evAfter;
        if (evs.length < 1000) break;
      }
    } catch (e) { /* retried by the timer */ } finally {
      evBusy = false;
    }
  }
  function soonEvents() {
    clearTimeout(evTimer);
    evTimer = setTimeout(pollEvents, 300); // the recorder commits every 100 ms by default
  }

  let evDrawn = '';
  function renderEvents() {
    const key = `${evGen}|${S.sel.tick}`;
    if (key === evDrawn) return;
    evDrawn = key;
    setText($('ev-source'), S.evMode === 'recorder' ? 'recorded' : S.evMode === 'stream' ? 'since this page opened (no recorder)' : '');
    const items = [];
    for (let i = S.events.length - 1; i >= 0; i--) { // newest first
      const e = S.events[i];
      items.push(el('li', { class: 'ev-' + e.sev, 'data-kind': e.kind, 'data-tick': e.tick, 'aria-current': e.tick === S.sel.tick ? 'true' : null },
        el('button', { type: 'button', title: `Show tick ${e.tick} in the heat map`, onclick: () => selectTick(e.tick, true) },
          el('span', { class: 'ev-g', 'aria-hidden': 'true' }, e.g),
          el('span', { class: 'ev-text' }, e.text),
          el('span', { class: 'ev-meta' }, `${clock(e.at, 1000)} · tick ${e.tick}${e.who ? ' · ' + e.who : ''}`))));
    }
    $('events').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'no events yet')]));
  }

  // ---- selection and the URL -----------------------------------------------------------

  // selectTick selects tick id (its column is outlined, its events marked); with move the
  // heat map moves to it, centred, loading older pages when it is older than those loaded,
  // and pauses there.
  async function selectTick(id, move) {
    S.sel.tick = id;
    mark('ticks', 'events', 'modview');
    if (!move) return;
    const L = cur();
    for (let i = 0; i < MAX_TICKS / PAGE && !L.noOlder && (!L.ticks.length || L.ticks[0].tick_id > id); i++) await loadOlder(L);
    if (L === cur() && S.sel.tick === id) moveTo(id, true);
  }

  // moveTo pauses the window where it shows tick id: centred, or ending at it (at the
  // newest tick not after it).
  function moveTo(id, center) {
    const L = cur();
    const cols = (S.geom && S.geom.cols) || VIEW;
    let i = L.ticks.findIndex((s) => s.tick_id >= id);
    if (i < 0) i = L.ticks.length - 1;
    else if (!center && L.ticks[i].tick_id > id) i--;
    if (i < 0) return;
    const end = center ? Math.min(L.ticks.length, Math.max(cols, i + Math.ceil(cols / 2))) : i + 1;
    S.viewEnd = Math.max(Math.min(cols, L.ticks.length), end);
    mark('ticks', 'hover');
  }

  // The URL's hash carries the view: tick (the selected tick), details (its dialog is
  // open), mod (the module view), severity, module, status, since and until (the filter),
  // end (the last tick of a paused window; without it the window follows the newest tick). A copied
  // URL opens the same view; it is written with replaceState (no history entry per click).
  function hashOf() {
    const q = new URLSearchParams();
    if (S.sel.tick) q.set('tick', S.sel.tick);
    if (S.sel.tick && S.sel.details) q.set('details', '1');
    if (S.sel.module) q.set('mod', S.sel.module);
    for (const [k, v] of Object.entries(S.filter)) if (v) q.set(k, v);
    const g = S.geom;
    if (S.viewEnd !== null && g && g.ticks.length) q.set('end', g.ticks[g.ticks.length - 1].tick_id);
    return q.toString();
  }

  // writeHash writes the view into the URL, at most every 250 ms (browsers limit the
  // rate of replaceState), and not before the URL the page opened with was applied.
  let hashWritten = null;
  let hashAt = 0;
  let hashTimer = 0;
  function writeHash() {
    if (!S.hashReady || hashTimer) return;
    const wait = hashAt + 250 - performance.now();
    if (wait > 0) { hashTimer = setTimeout(() => { hashTimer = 0; mark('url'); }, wait); return; }
    const h = hashOf();
    if (h === hashWritten) return;
    hashWritten = h;
    hashAt = performance.now();
    history.replaceState(null, '', h ? '#' + h : location.pathname + location.search);
  }

  // applyHash opens the view the URL's hash names (see hashOf).
  async function applyHash() {
    S.hashReady = false;
    const q = new URLSearchParams(location.hash.slice(1));
    const f = {};
    for (const k of FILTERS) f[k] = q.get(k);
    setFilter(f);
    if (S.filt) await refreshSearch();
    if (S.filt && !S.filt.loaded) await refreshSearch(); // a search of an earlier filter was running
    S.sel.module = q.get('mod') || '';
    S.sel.tick = Number(q.get('tick')) || 0;
    S.sel.details = q.get('details') === '1';
    const end = Number(q.get('end')) || 0;
    const L = cur();
    const oldest = Math.min(...[end, S.sel.tick].filter(Boolean));
    for (let i = 0; i < MAX_TICKS / PAGE && Number.isFinite(oldest) && !L.noOlder && (!L.ticks.length || L.ticks[0].tick_id > oldest); i++) await loadOlder(L);
    if (end) moveTo(end, false);
    else S.viewEnd = null;
    if (S.sel.details && S.sel.tick) {
      const s = L.ticks.find((x) => x.tick_id === S.sel.tick) || S.ticks.find((x) => x.tick_id === S.sel.tick);
      if (s) openTick(s);
      else getJSON('/ticks/' + S.sel.tick).then((x) => openTick(prepare(x))).catch(() => { S.sel.details = false; });
    } else if ($('tick-dialog').open) $('tick-dialog').close();
    hashWritten = location.hash.slice(1);
    S.hashReady = true;
    mark('ticks', 'events', 'modview', 'filter', 'url');
  }

  // openModule opens the module view of name (closes it when it is open).
  function openModule(name) {
    S.sel.module = S.sel.module === name ? '' : name;
    mark('modview', 'ticks', 'url');
    if (S.sel.module) requestAnimationFrame(() => $('module-view').scrollIntoView({ block: 'nearest' }));
  }

  // ---- module view ------------------------------------------------------------------------

  let mvDrawn = '';
  function renderModuleView() {
    const name = S.sel.module;
    setHidden($('module-view'), !name);
    if (!name) { mvDrawn = ''; return; }
    const lines = []; // [summary, line], newest first
    for (let i = S.ticks.length - 1; i >= 0 && lines.length < MODULE_LINES; i--) {
      const m = S.ticks[i]._m.get(name);
      if (m) lines.push([S.ticks[i], m]);
    }
    const info = S.modules.find((m) => m.name === name);
    const key = `${name}|${lines.length ? lines[0][0].tick_id : 0}|${lines.length}|${S.sel.tick}|${info ? JSON.stringify(info.breaker || {}) : ''}`;
    if (key === mvDrawn) return;
    mvDrawn = key;
    setText($('mv-title'), `Module ${name}`);
    setText($('mv-info'), info ? [`tier ${info.tier}`, info.kind, info.spec && info.spec.emergency ? 'emergency-only' : '',
      `policy ${info.policy}`, info.breaker ? `breaker ${info.breaker.name} ${info.breaker.state}` : ''].filter(Boolean).join(' · ') : '');
    const strip = [];
    for (let i = lines.length - 1; i >= 0; i--) {
      const [s, m] = lines[i];
      const st = statusOf(m, s);
      strip.push(el('span', { class: 'st-' + styleOf(st).c, title: `tick ${s.tick_id}: ${st}` }, styleOf(st).g));
    }
    $('mv-strip').replaceChildren(...strip);
    const lat = lines.filter(([, m]) => m.attempts > 0).map(([, m]) => m.latency_ms).sort((a, b) => a - b);
    const q = (p) => (lat.length ? ms(lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]) : '–');
    const src = {};
    for (const [s, m] of lines) {
      const k = statusOf(m, s) === 'idle' ? 'idle' : (m.served && m.served.source) || 'none';
      src[k] = (src[k] || 0) + 1;
    }
    setText($('mv-stats'), `last ${lines.length} ticks · latency p50 ${q(0.5)} · p99 ${q(0.99)} · max ${lat.length ? ms(lat[lat.length - 1]) : '–'} · served ` +
      (Object.entries(src).map(([k, n]) => `${k.replace('_', ' ')} ${n}`).join(', ') || '–'));
    $('mv-lines').tBodies[0].replaceChildren(...lines.map(([s, m]) => {
      const st = statusOf(m, s);
      return el('tr', { 'aria-current': s.tick_id === S.sel.tick ? 'true' : null },
        el('td', null, el('button', { type: 'button', class: 'small', onclick: () => selectTick(s.tick_id, true) }, String(s.tick_id))),
        el('td', null, clock(s._t, 1)),
        el('td', null, `${styleOf(st).g} ${st.replace('_', ' ')}`),
        el('td', null, m.attempts),
        el('td', null, m.attempts ? ms(m.latency_ms) : '–'),
        el('td', { class: 'name' }, servedText(m, st)),
        el('td', { class: 'key' }, m.error));
    }));
  }

  // servedText says what a module line served: never "from none, age 0 ms" (nothing
  // served has no age unless what expired had one).
  function servedText(m, st) {
    const sv = m.served;
    if (!sv || !sv.source) return '';
    if (st === 'idle') return `${sv.key}: idle (runs only in emergency mode)`;
    const flags = [sv.stale && 'stale', sv.derived_from_stale && 'derived from stale'].filter(Boolean).join(', ');
    const f = flags ? ` (${flags})` : '';
    switch (sv.source) {
      case 'live': return `${sv.key}: live${f}`;
      case 'last_good': return `${sv.key}: last good, age ${age(sv.age_ms || 0)}${f}`;
      case 'none': return sv.expired ? `${sv.key}: nothing (its last value expired, age ${age(sv.age_ms || 0)})` : `${sv.key}: nothing (no value yet)`;
      default: return `${sv.key}: ${sv.source}${f}`;
    }
  }

  // toLocalInput and fromLocalInput convert between an RFC 3339 time (the API's, the
  // URL's) and the value of a datetime-local input (the browser's local time).
  function toLocalInput(v) {
    const t = Date.parse(v);
    if (!v || !t) return '';
    const d = new Date(t);
    const ms = d.getMilliseconds() ? '.' + pad(d.getMilliseconds(), 3) : '';
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${ms}`;
  }
  function fromLocalInput(v) {
    const t = v ? new Date(v).getTime() : NaN;
    return Number.isFinite(t) ? new Date(t).toISOString() : '';
  }

  // ---- time axis --------------------------------------------------------------------------

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  // clock formats the local wall-clock time of t (ms since the epoch) to the precision
  // of step: milliseconds below a second, seconds below a minute, else minutes.
  function clock(t, step) {
    const d = new Date(t);
    const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    if (step >= 60e3) return hm;
    const hms = `${hm}:${pad(d.getSeconds())}`;
    return step >= 1000 ? hms : `${hms}.${pad(d.getMilliseconds(), 3)}`;
  }

  const STEPS = [10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 21600e3, 43200e3, 86400e3];

  // timeAxis returns the labels of a wall-clock axis over ticks (column i is centred at
  // x(i)), left to right: one at each column whose start crosses a round step, the
  // smallest step whose labels fit, and one at the first column when it leaves room for
  // the next; none nearer than a label's width and a margin to the one before it, none
  // past right. Labels are about charPx wide per character.
  function timeAxis(ticks, x, right, charPx = 6.2) {
    if (!ticks.length) return [];
    const t = ticks.map((s) => s._t);
    const span = Math.max(1, t[t.length - 1] - t[0]);
    const width = Math.max(1, x(ticks.length - 1) - x(0));
    const labelW = (step) => clock(0, step).length * charPx;
    const step = STEPS.find((st) => (span / st) * (labelW(st) + 12) <= width) || STEPS[STEPS.length - 1];
    const w = labelW(step);
    const gap = w + 12;
    const label = (i) => ({ x: x(i), text: clock(t[i], step), tick: ticks[i].tick_id });
    const marks = [];
    for (let i = 1; i < ticks.length; i++) if (Math.floor(t[i] / step) !== Math.floor(t[i - 1] / step)) marks.push(i);
    const out = [];
    if (!marks.length || x(marks[0]) - x(0) >= gap) out.push(label(0));
    for (const i of marks) {
      const xi = x(i);
      if ((out.length && xi - out[out.length - 1].x < gap) || xi + w > right) continue;
      out.push(label(i));
    }
    return out;
  }

  // renderAxis writes the heat map's time axis (DOM: readable, selectable). As ticks come
  // its labels move left: the spans are kept and moved by a transform (no layout), and
  // written only where they changed.
  function renderAxis(ticks, g) {
    const labels = timeAxis(ticks, (i) => i * g.cellW + g.cellW / 2, g.cssW);
    const axis = $('hm-axis');
    while (axis.children.length > labels.length) axis.lastChild.remove();
    while (axis.children.length < labels.length) axis.append(el('span'));
    labels.forEach((l, i) => {
      const e = axis.children[i];
      setText(e, l.text);
      setData(e, 'tick', String(l.tick));
      const tf = `translateX(${Math.round(l.x)}px)`;
      if (e.style.transform !== tf) e.style.transform = tf;
    });
  }

  // ---- heat map -----------------------------------------------------------------------

  // layout returns the rows: each tier, then its modules, in tier order.
  function layout(ticks) {
    const tiers = new Map();
    const mods = new Map();
    for (let i = ticks.length - 1; i >= 0; i--) {
      const s = ticks[i];
      for (const t of s.tiers || []) if (!tiers.has(t.index)) tiers.set(t.index, t);
      for (const m of s.modules || []) if (!mods.has(m.name)) mods.set(m.name, m.tier_index);
    }
    const key = [...tiers.keys()].join(',') + '|' + [...mods].map(([n, t]) => t + ':' + n).sort().join(',');
    if (key === S.rowsKey) { markLabel(); return S.rows; }
    const rows = [];
    for (const idx of [...tiers.keys()].sort((a, b) => a - b)) {
      const t = tiers.get(idx);
      rows.push({ tier: t.name, index: idx, budget: t.budget_ms });
      const names = [...mods].filter(([, ti]) => ti === idx).map(([n]) => n).sort();
      for (const n of names) rows.push({ module: n, index: idx });
    }
    S.rows = rows;
    S.rowsKey = key;
    const labels = $('hm-labels');
    labels.replaceChildren(...rows.map((r) => r.tier !== undefined
      ? el('div', { class: 'tier', title: `tier ${r.index}: ${r.tier}, budget ${ms(r.budget)}` }, `${r.tier} `, el('small', null, ms(r.budget)))
      : el('div', { title: r.module, 'data-module': r.module, role: 'button', tabindex: '0', 'aria-label': `${r.module}: open its view` }, r.module)));
    labelsSel = '';
    return rows;
  }

  // markLabel marks the label of the module whose view is open.
  let labelsSel = '';
  function markLabel() {
    if (labelsSel === S.sel.module) return;
    labelsSel = S.sel.module;
    for (const d of $('hm-labels').querySelectorAll('[data-module]')) {
      const v = d.dataset.module === S.sel.module ? 'true' : 'false';
      if (d.getAttribute('aria-current') !== v) d.setAttribute('aria-current', v);
    }
  }

  // drawCell draws one status cell at (x, y) of size w × h.
  function drawCell(ctx, x, y, w, h, st) {
    const col = colours[st.c];
    const bh = Math.max(2, Math.round((h - 2) * st.h));
    const top = y + h - 1 - bh;
    if (st.outline) {
      ctx.strokeStyle = col;
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, top + 0.5, Math.max(1, w - 1), bh - 1);
    } else {
      ctx.fillStyle = col;
      ctx.fillRect(x, top, w, bh);
    }
    if (st.hatch) {
      ctx.strokeStyle = colours.card;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, top + bh);
      ctx.lineTo(x + w, top);
      ctx.stroke();
    }
    if (st.notch) {
      ctx.fillStyle = colours.card;
      ctx.fillRect(x, top + Math.floor(bh / 2), w, 1);
    }
    if (w >= 9 && st.g) {
      ctx.fillStyle = st.h >= 0.8 && !st.outline ? '#fff' : colours.fg;
      ctx.font = `${Math.min(w, h) - 2}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillText(st.g, x + w / 2, y + h / 2);
    }
  }

  function drawTier(ctx, x, y, w, h, t) {
    if (!t) return;
    if (t.status === 'skipped') { drawCell(ctx, x, y, w, h, STATUS.skipped); return; }
    const use = t.budget_ms > 0 ? Math.min(1, t.elapsed_ms / t.budget_ms) : 0;
    // Budget use is the bar height; an exhausted budget fills the cell and gets a cap.
    drawCell(ctx, x, y, w, h, { c: TIER_STATUS[t.status] || 'skip', h: t.budget_exhausted ? 1 : Math.max(0.08, use), notch: t.status === 'failed' });
    if (t.budget_exhausted) {
      ctx.fillStyle = colours.fg;
      ctx.fillRect(x, y + 1, w, 2);
    }
  }

  // The widths of the heat map's grid cell and of the timing chart, in CSS pixels, kept
  // by a ResizeObserver: reading them in a frame would force a layout.
  const size = { hm: 0, tmW: 0, tmH: 0 };
  function watchSizes() {
    const ro = new ResizeObserver(() => {
      size.hm = $('hm-cell').clientWidth;
      size.tmW = $('timing').clientWidth;
      size.tmH = $('timing').clientHeight;
      mark('ticks');
    });
    ro.observe($('hm-cell'));
    ro.observe($('timing'));
  }

  // heatGeometry returns the heat map's columns. Cells are a whole number of CSS pixels
  // wide, at least 2 (a narrow screen, a phone, shows fewer ticks), so that the canvas
  // shifts by whole columns; the canvas is as wide as its columns.
  function heatGeometry() {
    if (!size.hm) size.hm = $('hm-cell').clientWidth;
    const cellW = Math.max(2, Math.floor(size.hm / VIEW));
    const cols = Math.max(1, Math.min(VIEW, Math.floor(size.hm / cellW)));
    return { cssW: cols * cellW, cellW, cols };
  }

  // HM is what the heat map's canvas shows: the key of its geometry, rows and colours,
  // and the summaries of its columns, oldest first.
  const HM = { key: '', cols: [] };
  let layoutKey = '';

  function renderHeatmap() {
    const canvas = $('heatmap');
    const g = heatGeometry();
    const ticks = visible(g.cols);
    const rows = layout(ticks);
    const cssH = Math.max(ROW_H, rows.length * ROW_H);
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(g.cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(g.cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
      canvas.style.width = g.cssW + 'px';
      canvas.style.height = cssH + 'px';
    }
    const ctx = canvas.getContext('2d');
    const key = `${g.cssW}x${cssH}@${dpr}|${S.rowsKey}|${coloursGen}`;
    const from = HM.key === key ? shiftHeatmap(ctx, canvas, ticks, g.cellW * dpr) : -1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (from < 0) {
      ctx.clearRect(0, 0, g.cssW, cssH);
      rows.forEach((r, ri) => {
        if (r.tier !== undefined && ri > 0) {
          ctx.fillStyle = colours.line;
          ctx.fillRect(0, ri * ROW_H, g.cssW, 1);
        }
      });
    }
    for (let ci = Math.max(0, from); ci < ticks.length; ci++) drawColumn(ctx, g, rows, ticks[ci], ci, cssH);
    HM.key = key;
    HM.cols = ticks;
    const hm = canvas.dataset;
    hm.columns = String(ticks.length);
    hm.firstTick = ticks.length ? String(ticks[0].tick_id) : '';
    hm.lastTick = ticks.length ? String(ticks[ticks.length - 1].tick_id) : '';
    S.geom = { ...g, ticks, rows };
    if (layoutKey !== S.rowsKey) { layoutKey = S.rowsKey; markLabel(); }
    renderAxis(ticks, g);
    const si = S.sel.tick ? ticks.findIndex((x) => x.tick_id === S.sel.tick) : -1;
    const sel = $('hm-sel');
    setHidden(sel, si < 0);
    setData(canvas, 'selected', si < 0 ? '' : String(S.sel.tick));
    if (si >= 0) {
      const box = `${si * g.cellW}px|${g.cellW}px|${cssH}px`;
      if (sel.dataset.box !== box) {
        sel.dataset.box = box;
        [sel.style.left, sel.style.width, sel.style.height] = box.split('|');
      }
    }
    const range = ticks.length ? `ticks ${ticks[0].tick_id}–${ticks[ticks.length - 1].tick_id}, ${clock(ticks[0]._t, 1000)}–${clock(ticks[ticks.length - 1]._t, 1000)}` : '';
    setText($('hm-range'), S.filt
      ? (ticks.length ? `${range} · ${S.filt.ticks.length} matching ticks${S.viewEnd === null ? ' (live)' : ' (paused)'}` : S.filt.loaded ? 'no matching ticks' : 'searching…')
      : ticks.length ? `${range}${S.viewEnd === null ? ' (live)' : ' (paused: history)'} · ${S.ticks.length} loaded` : 'waiting for ticks…');
    if ($('hm-live').disabled !== (S.viewEnd === null)) $('hm-live').disabled = S.viewEnd === null;
  }

  // shiftHeatmap moves the columns already drawn to where ticks puts them (to the left,
  // as new ticks arrive) and returns the index of the first column still to draw, or -1
  // when the canvas must be redrawn whole (the window moved back, or jumped).
  function shiftHeatmap(ctx, canvas, ticks, colPx) {
    const old = HM.cols;
    if (!old.length) return -1;
    const j = ticks.lastIndexOf(old[old.length - 1]); // the newest column drawn, now at j
    const shift = j - (old.length - 1); // columns to move: negative is to the left
    if (j < 0 || shift > 0 || (ticks.length && old[-shift] !== ticks[0])) return -1;
    if (shift < 0) {
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.globalCompositeOperation = 'copy';
      ctx.drawImage(canvas, shift * colPx, 0);
      ctx.restore();
    }
    return j + 1;
  }

  // drawColumn draws the cells of tick s in column ci, over what was there.
  function drawColumn(ctx, g, rows, s, ci, cssH) {
    const x = ci * g.cellW;
    const cw = g.cellW;
    const w = cw - (cw > 3 ? 1 : 0); // a gap between columns when there is room
    ctx.clearRect(x, 0, cw, cssH);
    const tiers = s.tiers || [];
    rows.forEach((r, ri) => {
      const y = ri * ROW_H;
      if (r.tier === undefined) {
        const m = s._m.get(r.module);
        if (m) drawCell(ctx, x, y, w, ROW_H, styleOf(statusOf(m, s)));
        return;
      }
      if (ri > 0) {
        ctx.fillStyle = colours.line;
        ctx.fillRect(x, y, cw, 1);
      }
      drawTier(ctx, x, y, w, ROW_H, tiers.find((t) => t.index === r.index));
    });
  }

  function hit(x, y) {
    const g = S.geom;
    if (!g) return null;
    const ci = Math.floor(x / g.cellW);
    const ri = Math.floor(y / ROW_H);
    if (ci < 0 || ci >= g.ticks.length) return null;
    return { tick: g.ticks[ci], row: g.rows[ri] };
  }

  // fullTime is the local date and time of an RFC 3339 time, to the millisecond.
  function fullTime(v) {
    const t = Date.parse(v);
    if (!t) return '';
    const d = new Date(t);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(t, 1)}`;
  }

  // renderTooltip shows the line under the pointer: a heat map cell, or a tick of the
  // timing chart.
  function renderTooltip() {
    const tip = $('tooltip');
    const dl = el('dl');
    const add = (k, v) => { if (v !== '' && v !== undefined && v !== null) dl.append(el('dt', null, k), el('dd', null, v)); };
    let title;
    let anchor;
    if (S.hover && S.hover.chart) {
      const s = timingHit(S.hover.x);
      if (!s) { setHidden(tip, true); return; }
      title = `tick ${s.tick_id}`;
      add('started', fullTime(s.started_at));
      add('duration', ms(s.wall_ms));
      add('start lag', ms(s.start_lag_ms));
      if (s.overrun) add('overrun', `${s.skipped_grid_points || 0} grid points skipped`);
      anchor = $('timing');
    } else {
      const h = S.hover && hit(S.hover.x, S.hover.y);
      if (!h || !h.row) { setHidden(tip, true); return; }
      const s = h.tick;
      if (h.row.tier !== undefined) {
        const t = (s.tiers || []).find((x) => x.index === h.row.index);
        title = `tick ${s.tick_id} · tier ${h.row.tier}`;
        add('started', fullTime(s.started_at));
        if (t) {
          add('status', t.status);
          add('budget use', `${ms(t.elapsed_ms)} of ${ms(t.budget_ms)} (${((100 * t.elapsed_ms) / (t.budget_ms || 1)).toFixed(0)}%)`);
          if (t.budget_exhausted) add('budget', 'exhausted');
          add('reason', t.reason);
        }
      } else {
        const m = s._m.get(h.row.module);
        title = `tick ${s.tick_id} · ${h.row.module}`;
        add('started', fullTime(s.started_at));
        if (m) tooltipModule(m, s, add);
        else add('status', 'not in this tick');
      }
      anchor = $('heatmap');
    }
    tip.replaceChildren(el('strong', null, title), dl);
    tip.hidden = false;
    const r = anchor.getBoundingClientRect();
    const px = r.left + S.hover.x + 14;
    const py = r.top + S.hover.y + 14;
    tip.style.left = Math.max(4, Math.min(px, window.innerWidth - tip.offsetWidth - 8)) + 'px';
    tip.style.top = (py + tip.offsetHeight > window.innerHeight ? py - tip.offsetHeight - 24 : py) + 'px';
  }

  function tooltipModule(m, s, add) {
    const st = statusOf(m, s);
    add('status', `${styleOf(st).g} ${st === 'idle' ? 'idle: emergency-only, not in emergency mode' : m.status}`);
    if (st === 'idle') return;
    add('attempts', m.attempts);
    if (m.attempts) add('latency', ms(m.latency_ms));
    add('fault kind', m.fault_kind);
    add('error', m.error);
    add('circuit', `${m.breaker || ''} ${m.circuit_state || ''}`.trim());
    add('served', servedText(m, st));
  }

  // ---- tick details -------------------------------------------------------------------

  // openTick opens the dialog of summary s and selects its tick.
  function openTick(s) {
    S.sel.tick = s.tick_id;
    S.sel.details = true;
    mark('ticks', 'events', 'modview', 'url');
    const kv = (k, v) => el('tr', null, el('th', null, k), el('td', null, v));
    // The values wrap (.td-head): a long list of degraded keys is read whole, not cut.
    const head = el('table', { class: 'td-head' }, el('tbody', null,
      kv('finish', s.finish), kv('severity', s.overall_severity),
      kv('scheduled', fullTime(s.scheduled_at)), kv('started', fullTime(s.started_at)), kv('finished', fullTime(s.finished_at)),
      kv('start lag', ms(s.start_lag_ms)), kv('wall', ms(s.wall_ms)),
      kv('overrun', s.overrun ? `yes, ${s.skipped_grid_points || 0} grid points skipped` : 'no'),
      kv('emergency', s.emergency_mode ? `active since tick ${s.emergency.since_tick}: ${s.emergency.reason}` : 'no'),
      kv('degraded keys', (s.degraded_keys || []).join(', ') || '–'),
      kv('open circuits', (s.open_circuits || []).join(', ') || '–')));
    const tiers = el('table', null,
      el('thead', null, el('tr', null, ...['tier', 'status', 'elapsed', 'budget', 'exhausted'].map((h) => el('th', null, h)))),
      el('tbody', null, ...(s.tiers || []).map((t) => el('tr', null, el('td', null, `${t.index} ${t.name}`), el('td', null, t.status),
        el('td', null, ms(t.elapsed_ms)), el('td', null, ms(t.budget_ms)), el('td', null, t.budget_exhausted ? 'yes' : '')))));
    const mods = el('table', null,
      el('thead', null, el('tr', null, ...['module', 'tier', 'status', 'att.', 'latency', 'fault', 'served', 'error'].map((h) => el('th', null, h)))),
      el('tbody', null, ...(s.modules || []).map((m) => {
        const st = statusOf(m, s);
        return el('tr', null, el('td', { class: 'name' }, m.name), el('td', null, m.tier),
          el('td', null, `${styleOf(st).g} ${st.replace('_', ' ')}`), el('td', null, m.attempts), el('td', null, m.attempts ? ms(m.latency_ms) : '–'),
          el('td', null, m.fault_kind), el('td', { class: 'name' }, servedText(m, st)),
          el('td', { class: 'key' }, m.error));
      })));
    const raw = { ...s };
    delete raw._m;
    delete raw._t;
    $('td-title').textContent = `Tick ${s.tick_id}`;
    $('td-body').replaceChildren(head, el('h3', null, 'Tiers'), el('div', { class: 'scroll' }, tiers),
      el('h3', null, 'Modules'), el('div', { class: 'scroll' }, mods),
      el('details', null, el('summary', null, 'JSON'), el('pre', null, JSON.stringify(raw, null, 2))));
    const d = $('tick-dialog');
    if (!d.open) d.showModal();
  }

  // ---- timing chart -------------------------------------------------------------------

  // renderTiming draws the timing chart: a log scale whose labels have a gutter of their
  // own on the left (the lines never run under them), the ticks of the heat map in as
  // many slots, and the wall-clock axis of the heat map below.
  function renderTiming() {
    const canvas = $('timing');
    const g = S.geom || heatGeometry();
    const ticks = g.ticks || [];
    if (!size.tmW) { size.tmW = canvas.clientWidth; size.tmH = canvas.clientHeight; }
    const cssW = size.tmW;
    const cssH = size.tmH;
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    ctx.font = '10px system-ui, sans-serif';
    const last = ticks[ticks.length - 1];
    const period = S.periodMs || inferPeriod(ticks);
    const budget = last ? (last.tiers || []).reduce((a, t) => a + (t.budget_ms || 0), 0) : 0;
    // Log scale from 10 µs to the largest of the values and lines: start lags are
    // microseconds, durations milliseconds, budgets hundreds of milliseconds.
    let hi = Math.max(period, budget, 1);
    for (const s of ticks) hi = Math.max(hi, s.wall_ms, s.start_lag_ms);
    const lo = 0.01;
    const top = 14, bottom = cssH - 30;
    const yOf = (v) => bottom - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi * 1.2) - Math.log10(lo))) * (bottom - top);
    const grid = [];
    for (let v = lo; v <= hi * 1.2; v *= 10) grid.push({ v, text: v < 1 ? `${Math.round(v * 1000)} µs` : `${Math.round(v)} ms` });
    const labelW = Math.ceil(Math.max(0, ...grid.map((l) => ctx.measureText(l.text).width)));
    const left = labelW + 6; // the plot starts right of the scale's labels
    const plotW = Math.max(1, cssW - left);
    T.timingPlot = { left, plotW, cols: g.cols || VIEW, ticks };
    for (const l of grid) {
      ctx.fillStyle = colours.line;
      ctx.fillRect(left, Math.round(yOf(l.v)), plotW, 1);
      ctx.fillStyle = colours.muted;
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      ctx.fillText(l.text, labelW + 2, yOf(l.v));
    }
    const hlines = [[period, colours.fg, [6, 4], 'period'], [budget, colours.bad, [2, 3], 'budgets']].filter((h) => h[0]);
    for (const [v, col, dash] of hlines) {
      ctx.strokeStyle = col; ctx.setLineDash(dash); ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(left, yOf(v)); ctx.lineTo(cssW, yOf(v)); ctx.stroke();
    }
    ctx.setLineDash([]);
    // The same time axis as the heat map: g.cols slots, oldest on the left.
    const x = (i) => left + ((i + 0.5) * plotW) / (g.cols || VIEW);
    series(ctx, ticks, x, yOf, 'wall_ms', colours.probe);
    series(ctx, ticks, x, yOf, 'start_lag_ms', colours.warn);
    // The lines' labels on a background of their own, over the series.
    ctx.textAlign = 'right'; ctx.textBaseline = 'bottom';
    for (const [v, col, , label] of hlines) {
      const text = `${label} ${ms(v)}`;
      const w = ctx.measureText(text).width;
      ctx.fillStyle = colours.card;
      ctx.fillRect(cssW - w - 4, yOf(v) - 12, w + 4, 11);
      ctx.fillStyle = col;
      ctx.fillText(text, cssW - 2, yOf(v) - 1);
    }
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    let overruns = 0, skipped = 0;
    ticks.forEach((s, i) => {
      if (s.overrun) { overruns++; ctx.fillStyle = colours.bad; ctx.fillText('▲', x(i), 0); }
      if (s.skipped_grid_points > 0) { skipped += s.skipped_grid_points; ctx.fillStyle = colours.open; ctx.fillText('◆', x(i), bottom + 2); }
    });
    const axis = timeAxis(ticks, x, cssW);
    ctx.textAlign = 'left';
    for (const l of axis) {
      ctx.fillStyle = colours.line;
      ctx.fillRect(Math.round(l.x), cssH - 14, 1, 14);
      ctx.fillStyle = colours.muted;
      ctx.fillText(l.text, l.x + 2, cssH - 12);
    }
    setData(canvas, 'axis', axis.map((l) => l.text).join('|'));
    setData(canvas, 'axisX', axis.map((l) => Math.round(l.x)).join('|'));
    setData(canvas, 'plotLeft', String(left));
    setData(canvas, 'scaleRight', String(labelW + 2));
    const lags = ticks.map((s) => s.start_lag_ms).sort((a, b) => a - b);
    const p = (q) => (lags.length ? lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] : undefined);
    setText($('tm-stats'), ticks.length
      ? `lag p50 ${ms(p(0.5))} · p99 ${ms(p(0.99))} · overruns ${overruns} · skipped grid points ${skipped}` : '');
  }

  // timingHit returns the tick of the timing chart's slot at x (CSS pixels), or null.
  function timingHit(x) {
    const p = T.timingPlot;
    if (!p) return null;
    const i = Math.floor(((x - p.left) * p.cols) / p.plotW);
    return i >= 0 && i < p.ticks.length ? p.ticks[i] : null;
  }

  function series(ctx, ticks, x, yOf, field, col) {
    ctx.strokeStyle = col;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ticks.forEach((s, i) => (i ? ctx.lineTo(x(i), yOf(s[field])) : ctx.moveTo(x(i), yOf(s[field]))));
    ctx.stroke();
  }

  function inferPeriod(ticks) {
    let best = 0;
    for (let i = 1; i < ticks.length; i++) {
      const d = (Date.parse(ticks[i].scheduled_at) - Date.parse(ticks[i - 1].scheduled_at)) / ((ticks[i].skipped_grid_points || 0) + 1);
      if (d > 0 && (!best || d < best)) best = d;
    }
    return best;
  }

  // ---- emergency, connection, latest ------------------------------------------------------

  function renderEmergency() {
    const last = S.ticks[S.ticks.length - 1];
    const em = last && last.emergency;
    const banner = $('emergency');
    if (em && (em.active || last.emergency_mode)) {
      setHidden(banner, false);
      if (banner.dataset.sinceTick !== String(em.since_tick)) banner.dataset.sinceTick = String(em.since_tick);
      setText($('em-reason'), em.reason || 'safety tier failed');
      const healthy = S.recoverAfter ? `${em.healthy_ticks}/${S.recoverAfter}` : String(em.healthy_ticks);
      setText($('em-detail'), `since tick ${em.since_tick} · ${em.latched ? 'LATCHED: needs an operator reset' : 'not latched'} · healthy ticks ${healthy}`);
    } else {
      setHidden(banner, true);
    }
    const lastEm = $('em-last');
    if (em && !em.active && em.reason) {
      setHidden(lastEm, false);
      setText(lastEm, `Last emergency: ${em.reason} (from tick ${em.since_tick}${em.ended_tick ? ' to ' + em.ended_tick : ''})`);
    } else {
      setHidden(lastEm, true);
    }
  }

  function renderConn() {
    const c = $('conn');
    c.dataset.state = S.conn;
    c.textContent = { live: 'live', polling: 'live (polling)', connecting: 'connecting…', disconnected: 'disconnected: reconnecting…' }[S.conn];
  }

  function renderLatest() {
    const last = S.ticks[S.ticks.length - 1];
    setText($('latest'), last ? `tick ${last.tick_id} · ${last.overall_severity} · ${last.finish}` : '');
  }

  // ---- breakers -----------------------------------------------------------------------

  function renderBreakers() {
    const tb = $('breakers').tBodies[0];
    tb.replaceChildren(...S.breakers.map((b) => {
      const probes = b.state === 'half_open' ? `${b.probes_in_flight} in flight · ${b.probe_successes}/${b.settings.half_open_successes} ok` : `${b.probe_successes}/${b.settings.half_open_successes}`;
      const cd = el('td', { class: 'countdown' });
      if (b.cooldown_remaining_ms !== undefined) cd.dataset.until = String(S.breakersAt + b.cooldown_remaining_ms);
      return el('tr', { 'data-breaker': b.name },
        el('td', null, b.name),
        el('td', { class: `state state-${b.state}` }, b.state.replace('_', '-')),
        el('td', null, `${b.consecutive_failures}/${b.settings.failure_threshold}`),
        cd,
        el('td', null, probes),
        el('td', null, b.state !== 'closed' || b.consecutive_failures > 0
          ? el('button', { type: 'button', class: 'small', 'data-admin': true, onclick: () => resetBreaker(b.name) }, 'Reset') : ''));
    }));
    renderCountdowns();
  }

  function renderCountdowns() {
    const now = performance.now();
    let running = false;
    for (const td of $('breakers').querySelectorAll('td.countdown')) {
      if (!td.dataset.until) { td.textContent = '–'; continue; }
      const left = Math.max(0, Number(td.dataset.until) - now);
      td.dataset.remainingMs = String(Math.round(left));
      td.textContent = left > 0 ? `${(left / 1000).toFixed(1)} s` : 'half-opening…';
      running = running || left > 0;
    }
    S.countdownRunning = running;
  }

  // ---- blackboard ---------------------------------------------------------------------

  // renderBoard draws the blackboard. The key of an emergency-only module outside
  // emergency mode is idle (nothing is expected of it), not an expired error.
  function renderBoard() {
    const b = S.board;
    if (!b) return;
    const last = S.ticks[S.ticks.length - 1];
    const inEmergency = !!(last && last.emergency_mode);
    const emOnly = new Set(S.modules.filter((m) => m.spec && m.spec.emergency).map((m) => m.name));
    $('bb-tick').textContent = `after tick ${b.tick_id}`;
    $('blackboard').tBodies[0].replaceChildren(...(b.entries || []).map((e) => {
      const idle = !inEmergency && emOnly.has(e.module) && e.source !== 'live';
      return el('tr', { 'data-key': e.key },
        el('td', { class: 'key', title: e.module ? `written by ${e.module}` : '' }, e.key),
        idle ? el('td', { class: 'idle', title: 'the module runs only in emergency mode' }, '· idle')
          : el('td', { class: `src-${e.source}` }, e.source === 'live' ? '● live' : e.source === 'last_good' ? '◐ last good' : '○ none'),
        el('td', null, idle ? el('span', { class: 'badge idle' }, 'emergency-only') : '',
          e.stale && !idle ? el('span', { class: 'badge src-last_good' }, 'stale') : '',
          e.expired && !idle ? el('span', { class: 'badge src-none' }, 'expired') : '',
          e.derived_from_stale ? el('span', { class: 'badge' }, 'derived') : ''),
        el('td', null, idle || (e.source === 'none' && !e.expired) ? '–' : age(e.age_ms || 0)));
    }));
  }

  // fillSelect sets the options of a select to names (after the fixed ones of first),
  // keeping its value.
  function fillSelect(sel, names, first = []) {
    const current = sel.value;
    const all = [...first, ...names.map((n) => [n, n])];
    if (all.map((o) => o[0]).join(',') === [...sel.options].map((o) => o.value).join(',')) return;
    sel.replaceChildren(...all.map(([v, t]) => el('option', { value: v }, t)));
    sel.value = all.some((o) => o[0] === current) ? current : (all[0] || [''])[0];
  }

  function renderModules() {
    fillSelect($('fi-module'), S.modules.filter((m) => m.kind === 'builtin').map((m) => m.name).sort());
    renderFilters();
  }

  // renderFilters shows the filter in its selects (the module select lists the modules
  // known and the one filtered on) and the search's state.
  function renderFilters() {
    const names = new Set(S.modules.map((m) => m.name));
    if (S.filter.module) names.add(S.filter.module);
    fillSelect($('f-module'), [...names].sort(), [['', 'any']]);
    for (const k of ['severity', 'module', 'status']) {
      const sel = $('f-' + k);
      if (sel.value !== S.filter[k]) sel.value = S.filter[k];
    }
    for (const k of ['since', 'until']) {
      const input = $('f-' + k);
      if (fromLocalInput(input.value) !== S.filter[k]) input.value = toLocalInput(S.filter[k]);
    }
    const f = S.filt;
    const form = $('filters');
    if (!!f !== form.hasAttribute('data-active')) form.toggleAttribute('data-active', !!f);
    setText($('f-state'), !f ? '' : f.error ? `search failed: ${f.error}` : f.loaded ? `showing matching ticks only (${f.ticks.length} found)` : 'searching…');
  }

  // ---- messages and admin actions ---------------------------------------------------

  function message(kind, text) {
    const m = $('message');
    m.dataset.kind = kind;
    $('message-text').textContent = text;
    m.hidden = false;
  }

  const TOKEN_KEY = 'cycled.adminToken';
  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  // admin sends an admin request. A 401 opens the token prompt with the API's message and
  // retries once the operator gave a token; every other error is shown as a message. A
  // stored token that is refused is tried once more without: a daemon with no token (on
  // loopback) refuses any Authorization header.
  async function admin(method, path, body, what) {
    let bare = false; // send no token: a daemon with none refuses any Authorization header
    let tokenRefusal = ''; // the 401 message of the stored token, shown if going bare fails too
    for (;;) {
      const headers = { 'Content-Type': 'application/json' };
      const sent = bare ? '' : token();
      if (sent) headers.Authorization = 'Bearer ' + sent;
      let r, out;
      try {
        r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
        out = await r.json().catch(() => ({}));
      } catch (e) {
        message('error', `${what}: the daemon cannot be reached`);
        return null;
      }
      if (r.ok) {
        if (bare) sessionStorage.removeItem(TOKEN_KEY); // the daemon has no token
        message('ok', `${what}: done`);
        return out;
      }
      const err = (out && out.error) || {};
      const text = `${err.message || r.statusText || 'error'} (${r.status}${err.code ? ' ' + err.code : ''}${err.field ? ', field ' + err.field : ''})`;
      if (r.status === 401 && sent) {
        // The stored token was refused: the daemon may have none (then the request
        // passes without one) or another one (then the prompt says why with this message).
        tokenRefusal = text;
        bare = true;
        continue;
      }
      if (r.status === 401) {
        bare = false;
        if (!(await askToken(tokenRefusal || text))) { message('error', `${what}: ${tokenRefusal || text}`); return null; }
        tokenRefusal = '';
        continue;
      }
      const problems = (out.error && out.error.problems) || out.problems;
      message('error', `${what}: ${text}${Array.isArray(problems) ? ': ' + problems.map((p) => `${p.path || p.field || ''} ${p.message || ''}`.trim()).join('; ') : ''}`);
      return null;
    }
  }

  // askToken shows the token prompt (with why, e.g. the API's 401 message) and resolves
  // true once a token is stored, false on cancel.
  function askToken(why) {
    const d = $('token-dialog');
    const errP = $('tk-error');
    errP.textContent = why || '';
    errP.hidden = !why;
    $('tk-input').value = '';
    return new Promise((resolve) => {
      const done = (ok) => {
        d.removeEventListener('close', onClose);
        resolve(ok);
      };
      const onClose = () => {
        if (d.returnValue === 'ok' && $('tk-input').value) {
          sessionStorage.setItem(TOKEN_KEY, $('tk-input').value);
          done(true);
        } else done(false);
      };
      d.returnValue = '';
      d.addEventListener('close', onClose);
      if (!d.open) d.showModal();
      $('tk-input').focus();
    });
  }

  async function resetBreaker(name) {
    if (await admin('POST', `/breakers/${encodeURIComponent(name)}/reset`, undefined, `Reset breaker ${name}`)) refreshBreakers();
  }

  function faultBody(restore) {
    if (restore) return { reset: true };
    const b = {};
    const num = (id) => $(id).value.trim();
    if (num('fi-rate') !== '') b.fail_rate = Number(num('fi-rate'));
    if ($('fi-kind').value) b.fail_kind = $('fi-kind').value;
    if (num('fi-attempts') !== '') b.fail_attempts = Number(num('fi-attempts'));
    if (num('fi-latency') !== '') b.latency = num('fi-latency');
    if (num('fi-hang') !== '') b.hang = num('fi-hang');
    if ($('fi-panic').checked) b.panic = true;
    return b;
  }

  async function injectFault(restore) {
    const name = $('fi-module').value;
    if (!name) { message('error', 'No builtin module to inject a fault into'); return; }
    await admin('POST', `/modules/${encodeURIComponent(name)}/faults`, faultBody(restore), `${restore ? 'Restore faults of' : 'Inject fault into'} ${name}`);
  }

  // ---- wiring -------------------------------------------------------------------------

  const FORCE_POLL = new URLSearchParams(location.search).get('transport') === 'poll' || typeof EventSource === 'undefined';

  function wire() {
    const hm = $('heatmap');
    hm.addEventListener('pointermove', (e) => { S.hover = { x: e.offsetX, y: e.offsetY }; mark('hover'); });
    hm.addEventListener('pointerleave', () => { S.hover = null; mark('hover'); });
    hm.addEventListener('click', (e) => { const h = hit(e.offsetX, e.offsetY); if (h) openTick(h.tick); });
    const tm = $('timing');
    tm.addEventListener('pointermove', (e) => { S.hover = { x: e.offsetX, y: e.offsetY, chart: true }; mark('hover'); });
    tm.addEventListener('pointerleave', () => { S.hover = null; mark('hover'); });
    // A module's label (cut on a narrow screen: its title has the whole name) opens the
    // module's view, which names it whole, by click, tap or keyboard.
    const labels = $('hm-labels');
    labels.addEventListener('click', (e) => { const d = e.target.closest('[data-module]'); if (d) openModule(d.dataset.module); });
    labels.addEventListener('keydown', (e) => {
      const d = e.target.closest('[data-module]');
      if (d && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); openModule(d.dataset.module); }
    });
    $('mv-close').addEventListener('click', () => { S.sel.module = ''; mark('modview', 'ticks', 'url'); });
    const readFilter = () => setFilter({ severity: $('f-severity').value, module: $('f-module').value, status: $('f-status').value,
      since: fromLocalInput($('f-since').value), until: fromLocalInput($('f-until').value) });
    $('filters').addEventListener('change', readFilter);
    $('filters').addEventListener('submit', (e) => { e.preventDefault(); readFilter(); });
    $('f-clear').addEventListener('click', () => setFilter({}));
    $('tick-dialog').addEventListener('close', () => { S.sel.details = false; mark('url'); });
    window.addEventListener('hashchange', () => { if (location.hash.slice(1) !== hashWritten) applyHash(); });
    $('hm-wrap').addEventListener('wheel', (e) => {
      const dx = Math.abs(e.deltaX) > Math.abs(e.deltaY) ? e.deltaX : e.shiftKey ? e.deltaY : 0;
      if (!dx) return;
      e.preventDefault();
      shiftView(Math.sign(dx) * Math.max(1, Math.round(Math.abs(dx) / 10)));
    }, { passive: false });
    $('hm-older').addEventListener('click', () => shiftView(-Math.round(VIEW / 2)));
    $('hm-newer').addEventListener('click', () => shiftView(Math.round(VIEW / 2)));
    $('hm-live').addEventListener('click', () => { S.viewEnd = null; mark('ticks', 'url'); });
    $('td-close').addEventListener('click', () => $('tick-dialog').close());
    $('message-close').addEventListener('click', () => { $('message').hidden = true; });
    $('em-reset').addEventListener('click', () => admin('POST', '/emergency/reset', undefined, 'Reset emergency'));
    $('fault-form').addEventListener('submit', (e) => { e.preventDefault(); injectFault(false); });
    $('fi-reset').addEventListener('click', () => injectFault(true));
    $('token-btn').addEventListener('click', () => askToken(''));
    $('tk-forget').addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); $('token-dialog').close(); message('ok', 'Admin token forgotten'); });
    $('tk-cancel').addEventListener('click', () => $('token-dialog').close());
    window.addEventListener('resize', () => mark('ticks'));
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => { readColours(); mark('ticks'); });
  }

  // shiftView moves the heat map window by n ticks (negative: older), loading older pages
  // from the history when the window reaches the oldest tick loaded.
  function shiftView(n) {
    const cols = (S.geom && S.geom.cols) || VIEW;
    const L = cur();
    const end = S.viewEnd === null ? L.ticks.length : S.viewEnd;
    const next = Math.max(Math.min(cols, L.ticks.length), Math.min(L.ticks.length, end + n));
    if (n < 0 && next - cols <= 0) loadOlder(L);
    S.viewEnd = next >= L.ticks.length ? null : next;
    mark('ticks', 'hover');
  }

  // legend draws the status legend from STATUS, and offers the statuses the search takes
  // (those that are searchable) in the status filter.
  function legend() {
    fillSelect($('f-status'), Object.keys(STATUS).filter((k) => !STATUS[k].unsearchable && !STATUS[k].derived), [['', 'any']]);
    const ul = $('legend');
    const items = Object.entries(STATUS).map(([name, st]) => {
      const c = el('canvas', { width: 12 * 2, height: ROW_H * 2, 'aria-hidden': 'true' });
      const ctx = c.getContext('2d');
      ctx.scale(2, 2);
      drawCell(ctx, 0, 0, 12, ROW_H, st);
      return el('li', null, c, `${st.g} ${name.replace('_', ' ')}`);
    });
    items.push(el('li', null, 'tier rows: bar height = budget use, capped bar = budget exhausted'));
    ul.replaceChildren(...items);
  }

  // The daemon's role in an active/standby group (in /healthz; absent when it runs
  // alone): a standby shows the active's ticks, and says so with who is active.
  async function refreshRole() {
    const badge = document.getElementById('ha-role');
    try {
      const r = await fetch('/healthz', { cache: 'no-store' });
      const health = await r.json();
      const h = health.ha;
      if (!h) { badge.hidden = true; return; }
      const who = h.active ? `${h.active.node}, epoch ${h.active.epoch}` : 'none known';
      badge.textContent = h.role === 'active' ? `active (epoch ${h.epoch})` : `standby — active: ${who}`;
      badge.dataset.role = h.role;
      badge.hidden = false;
    } catch (e) {
      badge.hidden = true;
    }
  }

  function start() {
    readColours();
    refreshRole();
    setInterval(() => { if (!document.hidden) refreshRole(); }, 2000);
    wire();
    legend();
    $('hm-labels').style.setProperty('--row-h', ROW_H + 'px');
    watchSizes();
    document.addEventListener('visibilitychange', onVisibility);
    mark('conn', 'ticks', 'events');
    loadConfig();
    refreshModules();
    pollPanels();
    setInterval(pollPanels, POLL_MS);
    setInterval(pollEvents, EVENTS_POLL_MS);
    // The view the URL names is opened once the first page of ticks is in.
    loadOlder(S).then(applyHash);
    setInterval(() => { if (!document.hidden) refreshModules(); }, 10000);
    setInterval(() => { if (S.countdownRunning && !document.hidden) mark('countdown'); }, 100);
    if (FORCE_POLL) {
      T.mode = 'poll';
      pollLoop();
    } else if (window.BroadcastChannel && navigator.locks) {
      startShared();
    } else {
      connectSSE();
    }
  }

  start();
})();
