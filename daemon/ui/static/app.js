// cycled dashboard. Plain JavaScript, no dependencies, no build step.
//
// Invariants:
// - Data is bounded: at most MAX_TICKS summaries are kept (the oldest are dropped), the
//   breaker and blackboard lists are replaced, never appended to.
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
'use strict';

(() => {
  const VIEW = 200; // ticks shown by the heat map and the timing chart
  const MAX_TICKS = 2000; // summaries kept in memory (live ones and older pages)
  const PAGE = 200; // older ticks fetched per page
  const POLL_MS = 1000; // refresh of /breakers and /blackboard
  const ROW_H = 14; // heat map row height, CSS pixels

  // STATUS gives every module status its colour, its shape and its glyph. h is the bar
  // height (the more serious, the taller); outline draws a frame only; hatch a diagonal;
  // notch a gap across the bar.
  const STATUS = {
    ok: { c: 'ok', h: 0.35, g: '✓' },
    probe_ok: { c: 'probe', h: 0.35, g: 'p', notch: true },
    retried: { c: 'retried', h: 0.6, g: 'r' },
    not_due: { c: 'idle', h: 0.15, g: '·' },
    skipped: { c: 'skip', h: 1, g: '–', hatch: true },
    rejected: { c: 'warn', h: 0.8, g: 'R', outline: true },
    shed: { c: 'skip', h: 0.8, g: 's', outline: true },
    busy: { c: 'warn', h: 1, g: 'b' },
    open: { c: 'open', h: 1, g: '○', outline: true },
    timed_out: { c: 'bad', h: 1, g: 'T', notch: true },
    probe_failed: { c: 'bad', h: 1, g: 'P', hatch: true },
    failed: { c: 'bad', h: 1, g: '✕' },
  };
  const UNKNOWN = { c: 'skip', h: 0.5, g: '?' };
  const TIER_STATUS = { ok: 'ok', degraded: 'warn', failed: 'bad', skipped: 'skip' };

  const S = {
    ticks: [], // summaries, ascending tick_id, each with _m: Map(module name → line)
    boot: '', // the daemon process that produced S.ticks (from event ids and ETags)
    lastId: 0,
    viewEnd: null, // index after the last tick shown; null follows the newest tick
    noOlder: false,
    loadingOlder: false,
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
    if (parts.has('breakers')) renderBreakers();
    if (parts.has('countdown')) renderCountdowns();
    if (parts.has('board')) renderBoard();
    if (parts.has('modules')) renderModules();
  }

  // onVisibility draws everything once when the tab is shown, and refreshes what a
  // hidden tab stopped polling.
  function onVisibility() {
    if (document.hidden) return;
    clearTimeout(ticksTimer);
    ticksTimer = 0;
    dirty.add('ticks');
    mark('conn', 'breakers', 'board', 'modules', 'countdown');
    pollPanels();
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
    S.ticks = [];
    S.lastId = 0;
    S.viewEnd = null;
    S.noOlder = false;
  }

  function prepare(sum) {
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
      setTimeout(loadOlder, 0);
    }
    if (boot) S.boot = boot;
    if (sum.tick_id <= S.lastId) return;
    S.ticks.push(prepare(sum));
    S.lastId = sum.tick_id;
    if (S.ticks.length > MAX_TICKS + 100) {
      const drop = S.ticks.length - MAX_TICKS;
      S.ticks.splice(0, drop);
      S.noOlder = false;
      if (S.viewEnd !== null) S.viewEnd = Math.max(Math.min(VIEW, S.ticks.length), S.viewEnd - drop);
    }
    mark('ticks');
  }

  // addOlder merges a page of older summaries (newest first, as GET /ticks answers).
  function addOlder(list) {
    const first = S.ticks.length ? S.ticks[0].tick_id : Infinity;
    const older = list.filter((s) => s.tick_id < first).reverse().map(prepare);
    if (!older.length) return 0;
    const room = MAX_TICKS - S.ticks.length;
    const take = room > 0 ? older.slice(Math.max(0, older.length - room)) : [];
    S.ticks.unshift(...take);
    if (S.viewEnd !== null) S.viewEnd += take.length;
    if (!S.lastId && S.ticks.length) S.lastId = S.ticks[S.ticks.length - 1].tick_id;
    mark('ticks');
    return take.length;
  }

  async function loadOlder() {
    if (S.loadingOlder || S.noOlder) return;
    S.loadingOlder = true;
    try {
      const before = S.ticks.length ? S.ticks[0].tick_id : 0;
      if (before === 1) { S.noOlder = true; return; }
      const q = before ? `?limit=${PAGE}&before=${before}` : `?limit=${PAGE}`;
      const r = await getJSON('/ticks' + q);
      const n = addOlder(r.ticks || []);
      if (!r.next_before || (before && n === 0) || S.ticks.length >= MAX_TICKS) S.noOlder = true;
    } catch (e) {
      // the connection status says why; scrolling again retries
    } finally {
      S.loadingOlder = false;
    }
  }

  // visible returns the ticks shown: up to cols of them, ending at S.viewEnd.
  function visible(cols) {
    const end = S.viewEnd === null ? S.ticks.length : Math.min(S.viewEnd, S.ticks.length);
    return S.ticks.slice(Math.max(0, end - cols), end);
  }

  // ---- network ------------------------------------------------------------------------

  async function getJSON(path, timeoutMs = 10000) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      const r = await fetch(path, { cache: 'no-store', signal: ctl.signal });
      if (!r.ok) throw new Error(`${path}: ${r.status}`);
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
      else if (m.type === 'breaker') refreshBreakers();
      if (m.state && S.conn !== m.state) { S.conn = m.state; mark('conn'); }
    };
    loadOlder();
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
      if (!S.ticks.length) loadOlder();
    };
    es.onerror = () => streamFailed(es);
    es.addEventListener('tick', (e) => {
      const boot = bootOf(e.lastEventId);
      forward(e.data, boot);
      ingest(JSON.parse(e.data), boot);
    });
    es.addEventListener('breaker', () => { flushForward(); share({ type: 'breaker' }); refreshBreakers(); });
    es.addEventListener('emergency', () => mark('ticks'));
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
    if (key === S.rowsKey) return S.rows;
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
      : el('div', { title: r.module }, r.module)));
    return rows;
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
    setText($('hm-range'), ticks.length
      ? `ticks ${ticks[0].tick_id}–${ticks[ticks.length - 1].tick_id}${S.viewEnd === null ? ' (live)' : ' (paused: history)'} · ${S.ticks.length} loaded`
      : 'waiting for ticks…');
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
        if (m) drawCell(ctx, x, y, w, ROW_H, STATUS[m.status] || UNKNOWN);
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

  function renderTooltip() {
    const tip = $('tooltip');
    const h = S.hover && hit(S.hover.x, S.hover.y);
    if (!h || !h.row) { setHidden(tip, true); return; }
    const s = h.tick;
    const dl = el('dl');
    const add = (k, v) => { if (v !== '' && v !== undefined && v !== null) dl.append(el('dt', null, k), el('dd', null, v)); };
    let title;
    if (h.row.tier !== undefined) {
      const t = (s.tiers || []).find((x) => x.index === h.row.index);
      title = `tick ${s.tick_id} · tier ${h.row.tier}`;
      if (t) {
        add('status', t.status);
        add('budget use', `${ms(t.elapsed_ms)} of ${ms(t.budget_ms)} (${((100 * t.elapsed_ms) / (t.budget_ms || 1)).toFixed(0)}%)`);
        if (t.budget_exhausted) add('budget', 'exhausted');
        add('reason', t.reason);
      }
    } else {
      const m = s._m.get(h.row.module);
      title = `tick ${s.tick_id} · ${h.row.module}`;
      if (m) tooltipModule(m, add);
      else add('status', 'not in this tick');
    }
    tip.replaceChildren(el('strong', null, title), dl);
    tip.hidden = false;
    const r = $('heatmap').getBoundingClientRect();
    const px = r.left + S.hover.x + 14;
    const py = r.top + S.hover.y + 14;
    tip.style.left = Math.min(px, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = (py + tip.offsetHeight > window.innerHeight ? py - tip.offsetHeight - 24 : py) + 'px';
  }

  function tooltipModule(m, add) {
    add('status', `${(STATUS[m.status] || UNKNOWN).g} ${m.status}`);
    add('attempts', m.attempts);
    add('latency', ms(m.latency_ms));
    add('fault kind', m.fault_kind);
    add('error', m.error);
    add('circuit', `${m.breaker || ''} ${m.circuit_state || ''}`.trim());
    const sv = m.served || {};
    const flags = [sv.stale && 'stale', sv.expired && 'expired', sv.derived_from_stale && 'derived from stale'].filter(Boolean).join(', ');
    add('served', `${sv.key || ''} from ${sv.source || '–'}${sv.source && sv.source !== 'live' ? ', age ' + age(sv.age_ms || 0) : ''}${flags ? ' (' + flags + ')' : ''}`);
  }

  // ---- tick details -------------------------------------------------------------------

  function openTick(s) {
    const kv = (k, v) => el('tr', null, el('th', null, k), el('td', null, v));
    const head = el('table', null, el('tbody', null,
      kv('finish', s.finish), kv('severity', s.overall_severity),
      kv('scheduled', s.scheduled_at), kv('started', s.started_at), kv('finished', s.finished_at),
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
      el('tbody', null, ...(s.modules || []).map((m) => el('tr', null, el('td', null, m.name), el('td', null, m.tier),
        el('td', null, `${(STATUS[m.status] || UNKNOWN).g} ${m.status}`), el('td', null, m.attempts), el('td', null, ms(m.latency_ms)),
        el('td', null, m.fault_kind), el('td', null, m.served ? `${m.served.source}${m.served.stale ? ' (stale)' : ''}${m.served.expired ? ' (expired)' : ''}` : ''),
        el('td', { class: 'key' }, m.error)))));
    const raw = { ...s };
    delete raw._m;
    $('td-title').textContent = `Tick ${s.tick_id}`;
    $('td-body').replaceChildren(head, el('h3', null, 'Tiers'), el('div', { class: 'scroll' }, tiers),
      el('h3', null, 'Modules'), el('div', { class: 'scroll' }, mods),
      el('details', null, el('summary', null, 'JSON'), el('pre', null, JSON.stringify(raw, null, 2))));
    const d = $('tick-dialog');
    if (!d.open) d.showModal();
  }

  // ---- timing chart -------------------------------------------------------------------

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
    const last = ticks[ticks.length - 1];
    const period = S.periodMs || inferPeriod(ticks);
    const budget = last ? (last.tiers || []).reduce((a, t) => a + (t.budget_ms || 0), 0) : 0;
    // Log scale from 10 µs to the largest of the values and lines: start lags are
    // microseconds, durations milliseconds, budgets hundreds of milliseconds.
    let hi = Math.max(period, budget, 1);
    for (const s of ticks) hi = Math.max(hi, s.wall_ms, s.start_lag_ms);
    const lo = 0.01;
    const top = 14, bottom = cssH - 16;
    const yOf = (v) => bottom - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi * 1.2) - Math.log10(lo))) * (bottom - top);
    timingGrid(ctx, cssW, yOf, lo, hi);
    const hline = (v, col, dash, label) => {
      if (!v) return;
      ctx.strokeStyle = col; ctx.setLineDash(dash); ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(0, yOf(v)); ctx.lineTo(cssW, yOf(v)); ctx.stroke();
      ctx.setLineDash([]); ctx.fillStyle = col; ctx.textAlign = 'right'; ctx.textBaseline = 'bottom';
      ctx.fillText(`${label} ${ms(v)}`, cssW - 2, yOf(v) - 1);
    };
    hline(period, colours.fg, [6, 4], 'period');
    hline(budget, colours.bad, [2, 3], 'budgets');
    // The same time axis as the heat map: g.cols slots, oldest on the left.
    const x = (i) => ((i + 0.5) * cssW) / (g.cols || VIEW);
    series(ctx, ticks, x, yOf, 'wall_ms', colours.probe);
    series(ctx, ticks, x, yOf, 'start_lag_ms', colours.warn);
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    let overruns = 0, skipped = 0;
    ticks.forEach((s, i) => {
      if (s.overrun) { overruns++; ctx.fillStyle = colours.bad; ctx.fillText('▲', x(i), 0); }
      if (s.skipped_grid_points > 0) { skipped += s.skipped_grid_points; ctx.fillStyle = colours.open; ctx.fillText('◆', x(i), cssH - 13); }
    });
    const lags = ticks.map((s) => s.start_lag_ms).sort((a, b) => a - b);
    const p = (q) => (lags.length ? lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] : undefined);
    setText($('tm-stats'), ticks.length
      ? `lag p50 ${ms(p(0.5))} · p99 ${ms(p(0.99))} · overruns ${overruns} · skipped grid points ${skipped}` : '');
  }

  function timingGrid(ctx, w, yOf, lo, hi) {
    ctx.font = '10px system-ui, sans-serif';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'bottom';
    for (let v = lo; v <= hi * 1.2; v *= 10) {
      ctx.fillStyle = colours.line;
      ctx.fillRect(0, Math.round(yOf(v)), w, 1);
      ctx.fillStyle = colours.muted;
      ctx.fillText(v < 1 ? `${Math.round(v * 1000)} µs` : `${Math.round(v)} ms`, 2, yOf(v) - 1);
    }
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

  function renderBoard() {
    const b = S.board;
    if (!b) return;
    $('bb-tick').textContent = `after tick ${b.tick_id}`;
    $('blackboard').tBodies[0].replaceChildren(...(b.entries || []).map((e) => el('tr', { 'data-key': e.key },
      el('td', { class: 'key', title: e.module ? `written by ${e.module}` : '' }, e.key),
      el('td', { class: `src-${e.source}` }, e.source === 'live' ? '● live' : e.source === 'last_good' ? '◐ last good' : '○ none'),
      el('td', null, e.stale ? el('span', { class: 'badge src-last_good' }, 'stale') : '',
        e.expired ? el('span', { class: 'badge src-none' }, 'expired') : '',
        e.derived_from_stale ? el('span', { class: 'badge' }, 'derived') : ''),
      el('td', null, e.source === 'none' && !e.expired ? '–' : age(e.age_ms || 0)))));
  }

  function renderModules() {
    const sel = $('fi-module');
    const current = sel.value;
    const names = S.modules.filter((m) => m.kind === 'builtin').map((m) => m.name).sort();
    if (names.join(',') === [...sel.options].map((o) => o.value).join(',')) return;
    sel.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    if (names.includes(current)) sel.value = current;
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
    $('hm-wrap').addEventListener('wheel', (e) => {
      const dx = Math.abs(e.deltaX) > Math.abs(e.deltaY) ? e.deltaX : e.shiftKey ? e.deltaY : 0;
      if (!dx) return;
      e.preventDefault();
      shiftView(Math.sign(dx) * Math.max(1, Math.round(Math.abs(dx) / 10)));
    }, { passive: false });
    $('hm-older').addEventListener('click', () => shiftView(-Math.round(VIEW / 2)));
    $('hm-newer').addEventListener('click', () => shiftView(Math.round(VIEW / 2)));
    $('hm-live').addEventListener('click', () => { S.viewEnd = null; mark('ticks'); });
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
    const end = S.viewEnd === null ? S.ticks.length : S.viewEnd;
    let next = Math.max(Math.min(cols, S.ticks.length), Math.min(S.ticks.length, end + n));
    if (n < 0 && next - cols <= 0) loadOlder();
    S.viewEnd = next >= S.ticks.length ? null : next;
    mark('ticks', 'hover');
  }

  function legend() {
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
    mark('conn', 'ticks');
    loadConfig();
    refreshModules();
    pollPanels();
    setInterval(pollPanels, POLL_MS);
    setInterval(() => { if (!document.hidden) refreshModules(); }, 10000);
    setInterval(() => { if (S.countdownRunning && !document.hidden) mark('countdown'); }, 100);
    if (FORCE_POLL) {
      T.mode = 'poll';
      loadOlder();
      pollLoop();
    } else if (window.BroadcastChannel && navigator.locks) {
      startShared();
    } else {
      connectSSE();
    }
  }

  start();
})();
