// weir dashboard. Plain browser JavaScript, no build step: the file is served
// as it is from the binary. Every request goes to the REST API of the server
// that served the page, with relative URLs.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const TOKEN_KEY = 'weir.token';
  // currentInputWatermark is Long.MIN_VALUE until a watermark arrived. JSON
  // numbers lose precision past 2^53, so anything below that counts.
  const NO_WATERMARK_BELOW = -Number.MAX_SAFE_INTEGER;
  // Checkpoint details are loaded for the chart at most this many per refresh.
  const BREAKDOWNS_PER_REFRESH = 6;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const state = {
    paused: false,
    timer: null,
    running: false,
    again: false,
    authWaiting: false,
    jobs: [],
    jid: null,
    tab: 'overview',
    job: null,
    graphKey: null,
    chartKey: null,
    graphRefs: new Map(), // vertex id -> SVG elements to update
    samples: new Map(),   // vertex id -> {t, read, write}
    rates: new Map(),     // vertex id -> {in, out}
    backpressure: new Map(),
    watermarks: new Map(),
    selectedVertex: null,
    checkpoints: null,
    breakdowns: new Map(), // checkpoint id -> {status, parts|null}
    detailCid: null,
    detail: null,          // {cid, status, stats, subtasks: Map(vid -> answer)}
    detailError: null,
  };

  const $ = (sel) => document.querySelector(sel);

  // ---------------------------------------------------------------- helpers

  // el builds an element: el('td', {class: 'x'}, 'text', child). Text is
  // always added as a text node, never parsed as HTML.
  function el(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }
  function svg(tag, attrs, ...children) {
    return build(document.createElementNS(SVG_NS, tag), attrs, children);
  }
  function build(node, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // syncRows makes tbody hold one row per item, in order, reusing the rows
  // of the same key so that focus and a click in flight survive a refresh.
  function syncRows(tbody, items, key, create, update) {
    const old = new Map([...tbody.rows].map((r) => [r.dataset.key, r]));
    let prev = null;
    for (const item of items) {
      const k = String(key(item));
      let row = old.get(k);
      if (row) {
        old.delete(k);
      } else {
        row = create(item);
        row.dataset.key = k;
      }
      update(row, item);
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (row !== want) tbody.insertBefore(row, want);
      prev = row;
    }
    for (const r of old.values()) r.remove();
  }

  function setCells(row, values) {
    values.forEach((v, i) => {
      const cell = row.cells[i];
      if (v instanceof Node) {
        cell.replaceChildren(v);
      } else if (cell.textContent !== String(v)) {
        cell.textContent = String(v);
      }
    });
  }

  const num = (v) => (typeof v === 'number' && isFinite(v) ? v : (typeof v === 'string' && v !== '' && isFinite(Number(v)) ? Number(v) : null));
  const enc = encodeURIComponent;
  const pad = (n, w = 2) => String(n).padStart(w, '0');

  function fmtTime(ts, withMs) {
    ts = num(ts);
    if (ts === null || ts <= 0) return '—';
    const d = new Date(ts);
    let s = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    if (withMs) s += '.' + pad(d.getMilliseconds(), 3);
    return s;
  }

  function fmtDuration(ms) {
    ms = num(ms);
    if (ms === null || ms < 0) return '—';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
    const t = Math.floor(s);
    const d = Math.floor(t / 86400), h = Math.floor((t % 86400) / 3600), m = Math.floor((t % 3600) / 60);
    if (d) return `${d} d ${h} h`;
    if (h) return `${h} h ${m} m`;
    return `${m} m ${t % 60} s`;
  }

  function fmtBytes(b) {
    b = num(b);
    if (b === null || b < 0) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return `${i ? b.toFixed(b < 10 ? 2 : b < 100 ? 1 : 0) : b} ${units[i]}`;
  }

  function fmtRate(r) {
    if (r === null || r === undefined) return '—';
    if (r < 10) return `${r.toFixed(1)}/s`;
    if (r < 1000) return `${Math.round(r)}/s`;
    if (r < 1e6) return `${(r / 1e3).toFixed(r < 1e4 ? 2 : 1)}k/s`;
    return `${(r / 1e6).toFixed(2)}M/s`;
  }

  function fmtWatermark(w) {
    if (w === null || w === undefined) return 'no watermark';
    const sameDay = new Date(w).toDateString() === new Date().toDateString();
    return sameDay ? fmtTime(w, true).slice(11) : fmtTime(w, false);
  }

  const fmtPct = (r) => (num(r) === null ? '—' : `${Math.round(r * 100)}%`);

  // niceCeil rounds v up to 1, 2 or 5 times a power of ten, for axes.
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // niceCeilBytes is niceCeil in the binary unit of v, so that a size axis
  // reads 20 MiB rather than 19.1 MiB.
  function niceCeilBytes(v) {
    if (!(v > 0)) return 1;
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(v) / Math.log(1024))));
    return niceCeil(v / unit) * unit;
  }

  const fmtCount = (v) => (num(v) === null ? '—' : num(v).toLocaleString('en-US'));

  // ------------------------------------------------------------------- API

  class AuthError extends Error {}

  async function api(path) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    let res;
    try {
      res = await fetch(path, { headers, cache: 'no-store' });
    } catch (e) {
      throw new Error(`GET ${path}: ${e.message || 'network error'}`);
    }
    if (res.status === 401) throw new AuthError(`GET ${path}: 401`);
    const text = await res.text();
    if (!res.ok) {
      let msg = res.statusText;
      try {
        const body = JSON.parse(text);
        if (Array.isArray(body.errors)) msg = body.errors.join('; ');
        else if (typeof body.error === 'string') msg = body.error;
      } catch (_) {
        if (text.trim()) msg = text.trim().slice(0, 200);
      }
      throw new Error(`GET ${path}: ${res.status} ${msg}`);
    }
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`GET ${path}: the answer is not JSON`);
    }
  }

  const jobPath = (jid) => `jobs/${enc(jid)}`;

  // ---------------------------------------------------------------- refresh

  function schedule() {
    clearTimeout(state.timer);
    state.timer = null;
    if (!state.paused && !state.authWaiting) state.timer = setTimeout(tick, REFRESH_MS);
  }

  // tick refreshes now (also when paused: a click must still load what it
  // shows) and schedules the next refresh. It never runs twice at once.
  async function tick() {
    if (state.running) { state.again = true; return; }
    state.running = true;
    clearTimeout(state.timer);
    try {
      await refresh();
    } catch (e) {
      // A bug in rendering must not stop the refreshes.
      showErrors([`Dashboard error: ${e && e.message ? e.message : e}`]);
    } finally {
      state.running = false;
    }
    if (state.again) { state.again = false; tick(); return; }
    schedule();
  }

  async function refresh() {
    const errors = [];
    // guard turns a failed request into a line of the error banner and
    // undefined, so that one failing endpoint leaves the rest of the page.
    const guard = (p) => p.catch((e) => {
      if (e instanceof AuthError) throw e;
      errors.push(e.message || String(e));
      return undefined;
    });
    try {
      const overview = await guard(api('jobs/overview'));
      if (overview) {
        state.jobs = normalizeJobs(overview);
        chooseJob();
        renderJobs();
      }
      const jid = state.jid;
      if (jid) {
        const [job, checkpoints] = await Promise.all([
          guard(api(jobPath(jid))),
          guard(api(`${jobPath(jid)}/checkpoints`)),
        ]);
        if (jid !== state.jid) return; // another job was chosen meanwhile
        if (job) {
          const vids = (job.vertices || []).map((v) => v.id);
          const [bps, wms] = await Promise.all([
            Promise.all(vids.map((v) => guard(api(`${jobPath(jid)}/vertices/${enc(v)}/backpressure`)))),
            Promise.all(vids.map((v) => guard(api(`${jobPath(jid)}/vertices/${enc(v)}/subtasks/metrics?get=currentInputWatermark&agg=min`)))),
          ]);
          if (jid !== state.jid) return;
          vids.forEach((v, i) => {
            if (bps[i]) state.backpressure.set(v, bps[i]);
            if (wms[i]) state.watermarks.set(v, parseWatermark(wms[i]));
          });
          state.job = job;
          updateRates(job);
          renderJob();
        }
        if (checkpoints) {
          state.checkpoints = checkpoints;
          await guard(loadBreakdowns(jid, checkpoints.history || []));
          if (jid !== state.jid) return;
          renderCheckpoints();
        }
        if (state.detailCid !== null && needsDetail()) {
          await loadDetail(jid, state.detailCid).catch((e) => {
            if (e instanceof AuthError) throw e;
            state.detailError = e.message;
            errors.push(e.message);
          });
          renderDetail();
        }
      }
      showErrors(errors);
      $('#last-updated').textContent = `Updated ${fmtTime(Date.now()).slice(11)}`;
      renderStatus();
    } catch (e) {
      if (e instanceof AuthError) { askToken(); return; }
      throw e;
    }
  }

  function showErrors(errors) {
    const banner = $('#error-banner');
    const unique = [...new Set(errors)];
    if (!unique.length) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    banner.replaceChildren(
      el('strong', {}, 'Some data could not be loaded; the page shows what it had before.'),
      el('ul', {}, unique.map((m) => el('li', {}, m))),
    );
    banner.hidden = false;
  }

  function renderStatus() {
    const n = state.jobs.length;
    const running = state.jobs.filter((j) => j.state === 'RUNNING').length;
    $('#status-line').textContent = `${n} job${n === 1 ? '' : 's'}, ${running} running · ` +
      (state.paused ? 'paused' : `refreshing every ${REFRESH_MS / 1000} s`);
  }

  // ------------------------------------------------------------------ token

  function askToken() {
    state.authWaiting = true;
    clearTimeout(state.timer);
    const had = sessionStorage.getItem(TOKEN_KEY);
    sessionStorage.removeItem(TOKEN_KEY);
    $('#auth-message').textContent = had ? 'The token was refused; enter it again.' : '';
    $('#auth').hidden = false;
    $('#status-line').textContent = 'Waiting for a token';
    $('#token-input').focus();
  }

  $('#auth').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = $('#token-input').value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $('#token-input').value = '';
    $('#auth').hidden = true;
    state.authWaiting = false;
    tick();
  });

  // ------------------------------------------------------------------- jobs

  function normalizeJobs(overview) {
    const list = Array.isArray(overview) ? overview : (overview.jobs || []);
    return list.map((j) => ({
      jid: j.jid ?? j.id,
      name: j.name ?? j.jid ?? j.id,
      state: j.state ?? j.status ?? '',
      start: num(j['start-time']),
      end: num(j['end-time']),
      duration: num(j.duration),
    })).filter((j) => j.jid);
  }

  function jobDuration(j) {
    if (j.duration !== null && j.duration >= 0) return j.duration;
    if (j.start > 0) return (j.end > 0 ? j.end : Date.now()) - j.start;
    return null;
  }

  function chooseJob() {
    if (state.jid && state.jobs.some((j) => j.jid === state.jid)) return;
    const fromHash = readHash().job;
    const pick = state.jobs.find((j) => j.jid === fromHash) ||
      state.jobs.find((j) => j.state === 'RUNNING') || state.jobs[0];
    selectJob(pick ? pick.jid : null, false);
  }

  function selectJob(jid, user) {
    if (jid === state.jid) return;
    state.jid = jid;
    state.job = null;
    state.graphKey = null;
    state.graphRefs.clear();
    state.samples.clear();
    state.rates.clear();
    state.backpressure.clear();
    state.watermarks.clear();
    state.selectedVertex = null;
    state.checkpoints = null;
    state.chartKey = null;
    state.breakdowns.clear();
    const hash = readHash();
    state.detailCid = !user && hash.job === jid ? numOrNull(hash.checkpoint) : null;
    state.detail = null;
    state.detailError = null;
    $('#graph').replaceChildren();
    $('#vertex-detail').hidden = true;
    $('#checkpoint-chart').replaceChildren();
    $('#checkpoint-table tbody').replaceChildren();
    $('#checkpoint-detail').hidden = true;
    $('#job').hidden = !jid;
    writeHash();
    if (user) {
      renderJobs();
      tick();
    }
  }

  function numOrNull(v) {
    return v === undefined || v === '' ? null : num(v);
  }

  function renderJobs() {
    const tbody = $('#job-list tbody');
    $('#no-jobs').hidden = state.jobs.length > 0;
    syncRows(tbody, state.jobs, (j) => j.jid,
      (j) => {
        const row = el('tr', { 'data-job-id': j.jid },
          el('td', {}, el('button', { type: 'button', class: 'link' })), el('td'), el('td'), el('td'));
        return row;
      },
      (row, j) => {
        const selected = j.jid === state.jid;
        row.classList.toggle('selected', selected);
        const button = row.cells[0].firstChild;
        if (button.textContent !== j.name) button.textContent = j.name;
        button.setAttribute('aria-current', selected ? 'true' : 'false');
        button.title = j.jid;
        setCells(row, [button, stateBadge(j.state), fmtTime(j.start), fmtDuration(jobDuration(j))]);
      });
    const job = state.jobs.find((j) => j.jid === state.jid);
    if (job) {
      $('#job-title').textContent = job.name;
      $('#job-state').replaceChildren(stateBadge(job.state));
      $('#job-start').textContent = fmtTime(job.start);
      $('#job-duration').textContent = fmtDuration(jobDuration(job));
      $('#job-id').textContent = job.jid;
    }
  }

  function stateBadge(s) {
    return el('span', { class: `badge state-${String(s).toLowerCase()}` }, s || '—');
  }

  $('#job-list').addEventListener('click', (ev) => {
    const row = ev.target.closest('tr[data-job-id]');
    if (row) selectJob(row.dataset.jobId, true);
  });

  // ------------------------------------------------------------------ graph

  function parseWatermark(answer) {
    const list = Array.isArray(answer) ? answer : [];
    const m = list.find((x) => x && x.id === 'currentInputWatermark');
    const v = m ? num(m.min ?? m.value) : null;
    return v === null || v <= NO_WATERMARK_BELOW ? null : v;
  }

  function updateRates(job) {
    const now = Date.now();
    for (const v of job.vertices || []) {
      const m = v.metrics || {};
      const cur = { t: now, read: num(m['read-records']), write: num(m['write-records']) };
      const prev = state.samples.get(v.id);
      if (prev && cur.t > prev.t) {
        const dt = (cur.t - prev.t) / 1000;
        const rate = (a, b) => (a === null || b === null || b < a ? null : (b - a) / dt);
        state.rates.set(v.id, { in: rate(prev.read, cur.read), out: rate(prev.write, cur.write) });
      }
      state.samples.set(v.id, cur);
    }
  }

  // layoutGraph places the vertices in columns by their longest distance from
  // a source (a topological layering) and returns the boxes and edges.
  function layoutGraph(job) {
    const vertices = job.vertices || [];
    const planNodes = (job.plan && job.plan.nodes) || [];
    const nodes = planNodes.map((n) => ({
      id: n.id,
      description: n.description || '',
      inputs: (n.inputs || []).map((i) => ({ id: i.id, ship: i.ship_strategy || '' })),
    }));
    for (const v of vertices) {
      if (!nodes.some((n) => n.id === v.id)) nodes.push({ id: v.id, description: '', inputs: [] });
    }
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const level = new Map();
    const visiting = new Set();
    const levelOf = (id) => {
      if (level.has(id)) return level.get(id);
      if (visiting.has(id)) return 0; // a cycle: should not happen, but do not hang
      visiting.add(id);
      let l = 0;
      for (const i of byId.get(id).inputs) if (byId.has(i.id)) l = Math.max(l, levelOf(i.id) + 1);
      visiting.delete(id);
      level.set(id, l);
      return l;
    };
    nodes.forEach((n) => levelOf(n.id));
    const columns = [];
    for (const n of nodes) (columns[level.get(n.id)] ||= []).push(n);

    const W = 250, H = 112, GAP_X = 110, GAP_Y = 30, PAD = 20;
    const tallest = Math.max(...columns.map((c) => (c ? c.length : 0)), 1);
    const height = PAD * 2 + tallest * H + (tallest - 1) * GAP_Y;
    const pos = new Map();
    columns.forEach((col, ci) => {
      if (!col) return;
      const colH = col.length * H + (col.length - 1) * GAP_Y;
      col.forEach((n, ri) => pos.set(n.id, {
        x: PAD + ci * (W + GAP_X),
        y: (height - colH) / 2 + ri * (H + GAP_Y),
      }));
    });
    const edges = [];
    for (const n of nodes) {
      for (const i of n.inputs) if (pos.has(i.id)) edges.push({ from: i.id, to: n.id, ship: i.ship });
    }
    return {
      nodes, pos, edges, W, H,
      width: PAD * 2 + columns.length * W + (columns.length - 1) * GAP_X,
      height,
    };
  }

  function renderJob() {
    const job = state.job;
    const vertices = new Map((job.vertices || []).map((v) => [v.id, v]));
    const key = JSON.stringify([(job.plan && job.plan.nodes) || [], [...vertices.keys()]]);
    if (key !== state.graphKey) {
      drawGraph(job);
      state.graphKey = key;
    }
    for (const [id, refs] of state.graphRefs) {
      const v = vertices.get(id) || { id, name: id };
      const bp = state.backpressure.get(id);
      const level = (bp && bp.backpressureLevel) || 'unknown';
      const maxRatio = bp && bp.subtasks && bp.subtasks.length ? Math.max(...bp.subtasks.map((s) => num(s.ratio) || 0)) : null;
      const r = state.rates.get(id) || {};
      const wm = state.watermarks.has(id) ? state.watermarks.get(id) : null;
      refs.g.dataset.backpressure = level;
      refs.g.dataset.status = v.status || '';
      refs.g.setAttribute('class', `vertex bp-${level}${state.selectedVertex === id ? ' selected' : ''}`);
      refs.name.textContent = truncate(v.name || id, 27);
      refs.title.textContent = `${v.name || id}\n${refs.description}`.trim();
      refs.meta.textContent = `parallelism ${v.parallelism ?? '?'} · ${v.status || '—'}`;
      // A source reads no records from the job's channels: it only writes.
      refs.rate.textContent = refs.source ? `out ${fmtRate(r.out)}` : `in ${fmtRate(r.in)} · out ${fmtRate(r.out)}`;
      refs.wm.textContent = wm === null ? 'no watermark' : `watermark ${fmtWatermark(wm)}`;
      refs.wm.classList.toggle('muted', wm === null);
      refs.bp.textContent = `backpressure ${level === 'unknown' ? 'not sampled' : level}` +
        (maxRatio !== null ? ` (max ${fmtPct(maxRatio)})` : '');
      refs.g.setAttribute('aria-label', `${v.name || id}: parallelism ${v.parallelism ?? '?'}, backpressure ${level}`);
    }
    if (state.selectedVertex) renderVertexDetail();
  }

  function truncate(s, n) {
    s = String(s);
    return s.length > n ? `${s.slice(0, n - 1)}…` : s;
  }

  function drawGraph(job) {
    const L = layoutGraph(job);
    state.graphRefs.clear();
    const root = svg('svg', {
      width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}`,
      role: 'group', 'aria-label': 'Job graph',
    });
    root.append(svg('defs', {},
      svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse' },
        svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }))));
    for (const e of L.edges) {
      const a = L.pos.get(e.from), b = L.pos.get(e.to);
      const x1 = a.x + L.W, y1 = a.y + L.H / 2, x2 = b.x, y2 = b.y + L.H / 2;
      const mx = (x1 + x2) / 2;
      root.append(svg('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to },
        svg('path', { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, 'marker-end': 'url(#arrow)' }),
        e.ship ? svg('text', { x: mx, y: (y1 + y2) / 2 - 6, 'text-anchor': 'middle', class: 'edge-label' }, e.ship) : null));
    }
    for (const n of L.nodes) {
      const p = L.pos.get(n.id);
      const line = (i, cls) => svg('text', { x: p.x + 18, y: p.y + 24 + i * 19, class: cls });
      const refs = {
        description: n.description,
        source: n.inputs.length === 0,
        title: svg('title'),
        name: line(0, 'vertex-name'),
        meta: line(1, 'vertex-meta'),
        rate: line(2, 'vertex-rate'),
        wm: line(3, 'vertex-watermark'),
        bp: line(4, 'vertex-bp'),
      };
      refs.g = svg('g', { class: 'vertex', 'data-vertex-id': n.id, tabindex: 0, role: 'button' },
        refs.title,
        svg('rect', { x: p.x, y: p.y, width: L.W, height: L.H, rx: 6, class: 'box' }),
        svg('rect', { x: p.x, y: p.y, width: 8, height: L.H, rx: 3, class: 'bp' }),
        refs.name, refs.meta, refs.rate, refs.wm, refs.bp);
      state.graphRefs.set(n.id, refs);
      root.append(refs.g);
    }
    $('#graph').replaceChildren(root);
  }

  function chooseVertex(target) {
    const g = target.closest('.vertex[data-vertex-id]');
    if (!g) return;
    const id = g.dataset.vertexId;
    state.selectedVertex = state.selectedVertex === id ? null : id;
    if (state.job) renderJob();
    if (!state.selectedVertex) $('#vertex-detail').hidden = true;
  }
  $('#graph').addEventListener('click', (ev) => chooseVertex(ev.target));
  $('#graph').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); chooseVertex(ev.target); }
  });

  function renderVertexDetail() {
    const id = state.selectedVertex;
    const v = ((state.job && state.job.vertices) || []).find((x) => x.id === id);
    const box = $('#vertex-detail');
    if (!v) { box.hidden = true; return; }
    const m = v.metrics || {};
    const bp = state.backpressure.get(id) || {};
    box.replaceChildren(
      el('h3', {}, v.name || id),
      el('table', { class: 'metrics' },
        el('thead', {}, el('tr', {}, ['Records in', 'Records out', 'Bytes in', 'Bytes out', 'Busy', 'Idle', 'Backpressured'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, el('tr', {},
          el('td', {}, fmtCount(m['read-records'])), el('td', {}, fmtCount(m['write-records'])),
          el('td', {}, fmtBytes(m['read-bytes'])), el('td', {}, fmtBytes(m['write-bytes'])),
          el('td', {}, fmtDuration(m['accumulated-busy-time'])), el('td', {}, fmtDuration(m['accumulated-idle-time'])),
          el('td', {}, fmtDuration(m['accumulated-backpressured-time']))))),
      el('table', { class: 'backpressure-subtasks', 'data-vertex-id': id },
        el('caption', {}, `Backpressure by subtask (${bp.backpressureLevel || 'not sampled'})`),
        el('thead', {}, el('tr', {}, ['Subtask', 'Level', 'Backpressured', 'Idle', 'Busy'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, (bp.subtasks || []).map((s) => el('tr', {},
          el('td', {}, s.subtask), el('td', {}, el('span', { class: `badge bp-${s.backpressureLevel}` }, s.backpressureLevel)),
          el('td', {}, fmtPct(s.ratio)), el('td', {}, fmtPct(s.idleRatio)), el('td', {}, fmtPct(s.busyRatio)))))),
    );
    box.hidden = false;
  }

  // ------------------------------------------------------------ checkpoints

  // loadBreakdowns fetches, for each finished checkpoint not seen yet, the
  // subtask with the largest end-to-end duration: the details give the
  // slowest vertex, its subtasks give the slowest subtask and its phases.
  async function loadBreakdowns(jid, history) {
    // Forget checkpoints that left the history, so that a job running for
    // weeks does not grow the page's memory.
    const ids = new Set(history.map((c) => c.id));
    for (const id of state.breakdowns.keys()) if (!ids.has(id)) state.breakdowns.delete(id);
    const todo = history.filter((c) => c.status !== 'IN_PROGRESS' &&
      !(state.breakdowns.has(c.id) && state.breakdowns.get(c.id).status === c.status))
      .slice(0, BREAKDOWNS_PER_REFRESH);
    const results = await Promise.allSettled(todo.map(async (c) => {
      const base = `${jobPath(jid)}/checkpoints/details/${enc(c.id)}`;
      const details = await api(base);
      const tasks = Object.entries(details.tasks || {})
        .filter(([, t]) => (num(t.num_acknowledged_subtasks) || 0) > 0)
        .sort(([, a], [, b]) => (num(b.end_to_end_duration) || 0) - (num(a.end_to_end_duration) || 0));
      let parts = null;
      if (tasks.length) {
        const [vid] = tasks[0];
        const answer = await api(`${base}/subtasks/${enc(vid)}`);
        const slowest = (answer.subtasks || [])
          .filter((s) => s.status === 'completed' || num(s.end_to_end_duration) !== null)
          .sort((a, b) => (num(b.end_to_end_duration) || 0) - (num(a.end_to_end_duration) || 0))[0];
        if (slowest) {
          const vertex = ((state.job && state.job.vertices) || []).find((v) => v.id === vid);
          parts = {
            vertex: vertex ? vertex.name : vid,
            subtask: slowest.index,
            e2e: num(slowest.end_to_end_duration) || 0,
            start_delay: num(slowest.start_delay) || 0,
            alignment: num(slowest.alignment && slowest.alignment.duration) || 0,
            sync: num(slowest.checkpoint && slowest.checkpoint.sync) || 0,
            async: num(slowest.checkpoint && slowest.checkpoint.async) || 0,
          };
        }
      }
      if (jid === state.jid) state.breakdowns.set(c.id, { status: c.status, parts });
    }));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  function renderCheckpoints() {
    const cp = state.checkpoints || {};
    const counts = cp.counts || {};
    $('#checkpoint-counts').replaceChildren(...[
      ['Total', counts.total], ['Completed', counts.completed], ['Failed', counts.failed],
      ['In progress', counts.in_progress], ['Restored', counts.restored],
    ].map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', {}, v ?? '—'))));
    renderLatest(cp.latest || {});
    const history = (cp.history || []).slice().sort((a, b) => b.id - a.id);
    renderChart(history.slice().reverse());
    renderHistoryTable(history);
    renderFailures(history, (cp.latest || {}).failed);
    renderSummary(cp.summary || {});
  }

  function renderLatest(latest) {
    const items = [];
    const c = latest.completed, s = latest.savepoint, f = latest.failed, r = latest.restored;
    if (c) items.push(el('li', {}, el('strong', {}, 'Latest completed: '), `#${c.id} at ${fmtTime(c.latest_ack_timestamp)}, ${fmtBytes(c.checkpointed_size)} checkpointed, took ${fmtDuration(c.end_to_end_duration)}`, c.external_path ? el('span', { class: 'mono path' }, ` ${c.external_path}`) : null));
    if (s) items.push(el('li', {}, el('strong', {}, 'Latest savepoint: '), `#${s.id} at ${fmtTime(s.latest_ack_timestamp)}`, s.external_path ? el('span', { class: 'mono path' }, ` ${s.external_path}`) : null));
    if (f) items.push(el('li', {}, el('strong', {}, 'Latest failed: '), `#${f.id} at ${fmtTime(f.failure_timestamp)}: `, el('span', { class: 'failure' }, f.failure_message || 'no message')));
    if (r) items.push(el('li', {}, el('strong', {}, 'Restored from: '), `#${r.id} at ${fmtTime(r.restore_timestamp)}${r.is_savepoint ? ' (savepoint)' : ''}`, r.external_path ? el('span', { class: 'mono path' }, ` ${r.external_path}`) : null));
    $('#checkpoint-latest').replaceChildren(items.length ? el('ul', { class: 'latest' }, items) : '');
  }

  const SEGMENTS = ['start_delay', 'alignment', 'sync', 'async'];
  const SEGMENT_NAMES = { start_delay: 'start delay', alignment: 'alignment', sync: 'sync', async: 'async', other: 'other' };

  // renderChart draws one stacked bar per checkpoint (oldest left) for the
  // duration, and below it the checkpointed and the full state size.
  function renderChart(history) {
    const box = $('#checkpoint-chart');
    // Redraw only on a change, so that a tooltip being read stays up.
    const key = JSON.stringify([history, [...state.breakdowns]]);
    if (key === state.chartKey) return;
    state.chartKey = key;
    if (!history.length) { box.replaceChildren(); return; }
    const left = 78, right = 20, top = 30, durH = 170, gap = 44, sizeH = 110, bottom = 26;
    const step = Math.max(34, Math.min(80, 900 / history.length));
    const width = left + right + step * history.length;
    const height = top + durH + gap + sizeH + bottom;
    const dTop = top, dBase = top + durH, sTop = dBase + gap, sBase = sTop + sizeH;
    const e2e = (c) => Math.max(num(c.end_to_end_duration) || 0, (state.breakdowns.get(c.id) || {}).parts ? state.breakdowns.get(c.id).parts.e2e : 0);
    const maxDur = niceCeil(Math.max(...history.map(e2e), 1));
    const sized = history.filter((c) => c.status !== 'FAILED');
    const maxSize = niceCeilBytes(Math.max(...sized.map((c) => Math.max(num(c.state_size) || 0, num(c.checkpointed_size) || 0)), 1));
    const yDur = (ms) => dBase - (ms / maxDur) * durH;
    const ySize = (b) => sBase - (b / maxSize) * sizeH;
    const xMid = (i) => left + step * i + step / 2;

    const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'Checkpoint durations and sizes, oldest first' });
    // axes and grid lines
    for (const f of [0, 0.5, 1]) {
      root.append(
        svg('line', { x1: left, x2: width - right, y1: yDur(maxDur * f), y2: yDur(maxDur * f), class: 'grid' }),
        svg('text', { x: left - 6, y: yDur(maxDur * f) + 4, 'text-anchor': 'end', class: 'axis' }, fmtDuration(maxDur * f)),
        svg('line', { x1: left, x2: width - right, y1: ySize(maxSize * f), y2: ySize(maxSize * f), class: 'grid' }),
        svg('text', { x: left - 6, y: ySize(maxSize * f) + 4, 'text-anchor': 'end', class: 'axis' }, fmtBytes(maxSize * f)));
    }
    root.append(
      svg('text', { x: 4, y: dTop - 16, class: 'axis-title' }, 'Duration'),
      svg('text', { x: 4, y: sTop - 16, class: 'axis-title' }, 'Size'));

    const labelEvery = Math.ceil(history.length / 30);
    history.forEach((c, i) => {
      const b = state.breakdowns.get(c.id);
      const parts = b && b.parts;
      const total = e2e(c);
      const bw = step * 0.62, x = xMid(i) - bw / 2;
      const status = String(c.status || '').toLowerCase();
      const g = svg('g', {
        class: `bar status-${status}`, 'data-checkpoint-id': c.id, 'data-status': c.status,
        'data-breakdown': parts ? 'loaded' : 'none', tabindex: -1,
      });
      let tip = `Checkpoint #${c.id} ${c.status}, ${fmtDuration(total)}`;
      if (c.status === 'FAILED') {
        const h = Math.max(dBase - yDur(total), 3);
        g.append(svg('rect', { x, y: dBase - h, width: bw, height: h, class: 'seg seg-failed' }),
          svg('text', { x: xMid(i), y: dBase - h - 4, 'text-anchor': 'middle', class: 'failed-mark' }, '✕'));
        if (c.failure_message) tip += `: ${c.failure_message}`;
      } else {
        let y = dBase;
        const segs = [];
        if (parts) {
          let sum = 0;
          for (const k of SEGMENTS) { segs.push([k, parts[k]]); sum += parts[k]; }
          segs.push(['other', Math.max(total - sum, 0)]);
          tip += ` (subtask ${parts.subtask} of ${parts.vertex}: ` +
            SEGMENTS.map((k) => `${SEGMENT_NAMES[k]} ${fmtDuration(parts[k])}`).join(', ') + ')';
        } else {
          segs.push(['other', total]);
        }
        for (const [k, v] of segs) {
          const h = (v / maxDur) * durH;
          if (h <= 0) continue;
          y -= h;
          g.append(svg('rect', { x, y, width: bw, height: h, class: `seg seg-${k}` }));
        }
        if (y > dBase - 2) g.append(svg('rect', { x, y: dBase - 2, width: bw, height: 2, class: 'seg seg-other' }));
        if (c.status === 'IN_PROGRESS') {
          g.append(svg('rect', { x, y: Math.min(y, dBase - 2), width: bw, height: dBase - Math.min(y, dBase - 2), class: 'in-progress-outline' }));
        }
      }
      if (c.is_savepoint) {
        const barTop = c.status === 'FAILED' ? dBase - Math.max(dBase - yDur(total), 3) - 14 : yDur(total);
        g.append(svg('text', { x: xMid(i), y: barTop - 4, 'text-anchor': 'middle', class: 'savepoint-mark' }, 'savepoint'));
      }
      g.prepend(svg('title', {}, tip));
      root.append(g);
      if (i % labelEvery === 0) {
        root.append(svg('text', { x: xMid(i), y: sBase + 18, 'text-anchor': 'middle', class: 'axis' }, c.id));
      }
    });
    // size lines, completed and in-progress checkpoints only
    for (const [field, cls] of [['state_size', 'state'], ['checkpointed_size', 'checkpointed']]) {
      const pts = history.map((c, i) => [c, i]).filter(([c]) => c.status !== 'FAILED' && num(c[field]) !== null);
      if (pts.length > 1) {
        root.append(svg('polyline', { points: pts.map(([c, i]) => `${xMid(i)},${ySize(num(c[field]))}`).join(' '), class: `line line-${cls}` }));
      }
      for (const [c, i] of pts) {
        root.append(svg('circle', {
          cx: xMid(i), cy: ySize(num(c[field])), r: 4, class: `point point-${cls}${c.status === 'IN_PROGRESS' ? ' in-progress' : ''}`,
          'data-checkpoint-id': c.id,
        }, svg('title', {}, `#${c.id} ${cls === 'state' ? 'full state' : 'checkpointed'} ${fmtBytes(c[field])}`)));
      }
    }
    box.replaceChildren(root);
  }

  $('#checkpoint-chart').addEventListener('click', (ev) => {
    const bar = ev.target.closest('[data-checkpoint-id]');
    if (bar) openDetail(num(bar.dataset.checkpointId));
  });

  function renderHistoryTable(history) {
    $('#no-checkpoints').hidden = history.length > 0;
    syncRows($('#checkpoint-table tbody'), history, (c) => c.id,
      (c) => el('tr', { 'data-checkpoint-id': c.id },
        el('td', {}, el('button', { type: 'button', class: 'link' }, `#${c.id}`)),
        ...Array.from({ length: 9 }, () => el('td'))),
      (row, c) => {
        const status = String(c.status || '').toLowerCase();
        row.className = `status-${status}${c.id === state.detailCid ? ' selected' : ''}`;
        row.dataset.status = c.status;
        const button = row.cells[0].firstChild;
        button.setAttribute('aria-expanded', c.id === state.detailCid ? 'true' : 'false');
        button.setAttribute('aria-controls', 'checkpoint-detail');
        const acked = num(c.num_acknowledged_subtasks), all = num(c.num_subtasks);
        setCells(row, [
          button,
          el('span', { class: `badge status-${status}`, title: c.failure_message || '' }, c.status),
          c.checkpoint_type || (c.is_savepoint ? 'SAVEPOINT' : '—'),
          fmtTime(c.trigger_timestamp),
          fmtTime(c.latest_ack_timestamp),
          fmtDuration(c.end_to_end_duration),
          fmtBytes(c.checkpointed_size),
          fmtBytes(c.state_size),
          fmtBytes(c.persisted_data),
          acked !== null && all ? `${acked}/${all} (${Math.round((acked / all) * 100)}%)` : '—',
        ]);
      });
  }

  $('#checkpoint-table').addEventListener('click', (ev) => {
    const row = ev.target.closest('tr[data-checkpoint-id]');
    if (row) openDetail(num(row.dataset.checkpointId));
  });

  function renderFailures(history, latestFailed) {
    const failed = history.filter((c) => c.status === 'FAILED');
    if (latestFailed && !failed.some((c) => c.id === latestFailed.id)) failed.unshift(latestFailed);
    const list = $('#checkpoint-failures');
    if (!failed.length) {
      list.replaceChildren(el('li', { class: 'muted' }, 'No failed checkpoints.'));
      return;
    }
    list.replaceChildren(...failed.map((c) => el('li', { 'data-checkpoint-id': c.id },
      el('strong', {}, `#${c.id}`), ` failed at ${fmtTime(c.failure_timestamp)}`,
      num(c.trigger_timestamp) > 0 && num(c.failure_timestamp) > 0 ? ` after ${fmtDuration(c.failure_timestamp - c.trigger_timestamp)}` : '',
      ': ', el('span', { class: 'failure' }, c.failure_message || 'no message'))));
  }

  function renderSummary(summary) {
    const rows = [
      ['End to end duration', 'end_to_end_duration', fmtDuration],
      ['Checkpointed size', 'checkpointed_size', fmtBytes],
      ['Full state size', 'state_size', fmtBytes],
      ['Persisted in-flight data', 'persisted_data', fmtBytes],
      ['Processed during alignment', 'processed_data', fmtBytes],
      ['Buffered during alignment', 'alignment_buffered', fmtBytes],
    ];
    $('#checkpoint-summary tbody').replaceChildren(...rows.map(([label, key, fmt]) => {
      const s = summary[key] || {};
      return el('tr', { 'data-metric': key }, el('th', { scope: 'row' }, label),
        ...['min', 'avg', 'p50', 'p90', 'p99', 'max'].map((k) => el('td', {}, fmt(s[k]))));
    }));
  }

  // ------------------------------------------------------------ drill-down

  function openDetail(cid) {
    if (cid === null) return;
    if (state.detailCid === cid && state.detail) {
      $('#checkpoint-detail').scrollIntoView({ block: 'nearest' });
      return;
    }
    state.detailCid = cid;
    state.detail = null;
    state.detailError = null;
    writeHash();
    renderDetail();
    if (state.checkpoints) renderHistoryTable((state.checkpoints.history || []).slice().sort((a, b) => b.id - a.id));
    tick();
  }

  function historyEntry(cid) {
    return ((state.checkpoints && state.checkpoints.history) || []).find((c) => c.id === cid);
  }

  // needsDetail: load once, and again on each refresh while the checkpoint
  // runs, since its acknowledgements still change.
  function needsDetail() {
    if (!state.detail || state.detail.cid !== state.detailCid) return true;
    const h = historyEntry(state.detailCid);
    return state.detail.status === 'IN_PROGRESS' || (h && h.status !== state.detail.status);
  }

  async function loadDetail(jid, cid) {
    const base = `${jobPath(jid)}/checkpoints/details/${enc(cid)}`;
    const stats = await api(base);
    const vids = Object.keys(stats.tasks || {});
    const answers = await Promise.all(vids.map((v) => api(`${base}/subtasks/${enc(v)}`)));
    if (jid !== state.jid || cid !== state.detailCid) return;
    state.detail = { cid, status: stats.status, stats, subtasks: new Map(vids.map((v, i) => [v, answers[i]])) };
    state.detailError = null;
  }

  function vertexName(vid) {
    const v = ((state.job && state.job.vertices) || []).find((x) => x.id === vid);
    return v ? v.name : vid;
  }

  function renderDetail() {
    const box = $('#checkpoint-detail');
    const cid = state.detailCid;
    if (cid === null) { box.hidden = true; box.replaceChildren(); return; }
    const close = el('button', { type: 'button', id: 'checkpoint-detail-close' }, 'Close');
    close.addEventListener('click', () => {
      state.detailCid = null;
      state.detail = null;
      writeHash();
      renderDetail();
      if (state.checkpoints) renderHistoryTable((state.checkpoints.history || []).slice().sort((a, b) => b.id - a.id));
    });
    const d = state.detail;
    if (!d) {
      box.replaceChildren(el('div', { class: 'detail-head' }, el('h3', {}, `Checkpoint #${cid}`), close),
        el('p', { class: state.detailError ? 'failure' : 'muted' }, state.detailError || 'Loading…'));
      box.hidden = false;
      return;
    }
    const s = d.stats;
    const status = String(s.status || '').toLowerCase();
    const facts = [
      ['Status', el('span', { class: `badge status-${status}` }, s.status)],
      ['Type', s.checkpoint_type || (s.is_savepoint ? 'SAVEPOINT' : '—')],
      ['Triggered', fmtTime(s.trigger_timestamp)],
      ['Latest ack', fmtTime(s.latest_ack_timestamp)],
      ['End to end', fmtDuration(s.end_to_end_duration)],
      ['Checkpointed', fmtBytes(s.checkpointed_size)],
      ['Full state', fmtBytes(s.state_size)],
      ['Persisted', fmtBytes(s.persisted_data)],
      ['Processed', fmtBytes(s.processed_data)],
      ['Acknowledged', `${s.num_acknowledged_subtasks ?? '?'}/${s.num_subtasks ?? '?'}`],
    ];
    if (s.external_path) facts.push(['Path', el('span', { class: 'mono' }, s.external_path)]);
    if (s.status === 'FAILED') {
      facts.push(['Failed at', fmtTime(s.failure_timestamp)]);
      facts.push(['Failure', el('span', { class: 'failure' }, s.failure_message || 'no message')]);
    }
    const tasks = Object.entries(s.tasks || {});
    const sections = [
      el('div', { class: 'detail-head' }, el('h3', {}, `Checkpoint #${cid}`), close),
      el('dl', { class: 'meta' }, facts.map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', {}, v)))),
      el('div', { class: 'scroll' }, el('table', { id: 'checkpoint-detail-tasks' },
        el('caption', {}, 'By vertex'),
        el('thead', {}, el('tr', {}, ['Vertex', 'Status', 'Acknowledged', 'Latest ack', 'End to end', 'Checkpointed', 'Full state', 'Persisted'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, tasks.map(([vid, t]) => el('tr', { 'data-vertex-id': vid },
          el('th', { scope: 'row' }, vertexName(vid)),
          el('td', {}, el('span', { class: `badge status-${String(t.status || '').toLowerCase()}` }, t.status || '—')),
          el('td', {}, `${t.num_acknowledged_subtasks ?? '?'}/${t.num_subtasks ?? '?'}`),
          el('td', {}, fmtTime(t.latest_ack_timestamp)),
          el('td', {}, fmtDuration(t.end_to_end_duration)),
          el('td', {}, fmtBytes(t.checkpointed_size)),
          el('td', {}, fmtBytes(t.state_size)),
          el('td', {}, fmtBytes(t.persisted_data))))))),
    ];
    for (const [vid] of tasks) {
      const answer = d.subtasks.get(vid) || {};
      const heads = ['#', 'Status', 'Acknowledged', 'End to end', 'Start delay', 'Alignment', 'Sync', 'Async',
        'Checkpointed', 'Full state', 'Buffered', 'Processed', 'Persisted', 'Unaligned', 'Aborted'];
      sections.push(el('div', { class: 'scroll' }, el('table', { class: 'subtasks', 'data-vertex-id': vid },
        el('caption', {}, `Subtasks of ${vertexName(vid)}`),
        el('thead', {}, el('tr', {}, heads.map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, (answer.subtasks || []).map((st) => {
          const done = st.status === 'completed';
          const a = st.alignment || {}, c = st.checkpoint || {};
          const yesNo = (v) => (v === undefined || v === null ? '—' : v ? 'yes' : 'no');
          return el('tr', { 'data-subtask': st.index, class: done ? '' : 'pending' },
            el('td', {}, st.index),
            el('td', {}, done ? 'completed' : 'pending or failed'),
            el('td', {}, fmtTime(st.ack_timestamp)),
            el('td', {}, fmtDuration(st.end_to_end_duration)),
            el('td', {}, fmtDuration(st.start_delay)),
            el('td', {}, fmtDuration(a.duration)),
            el('td', {}, fmtDuration(c.sync)),
            el('td', {}, fmtDuration(c.async)),
            el('td', {}, fmtBytes(st.checkpointed_size)),
            el('td', {}, fmtBytes(st.state_size)),
            el('td', {}, fmtBytes(a.buffered)),
            el('td', {}, fmtBytes(a.processed)),
            el('td', {}, fmtBytes(a.persisted)),
            el('td', {}, yesNo(st.unaligned_checkpoint)),
            el('td', {}, yesNo(st.aborted)));
        })))));
    }
    box.replaceChildren(...sections);
    box.hidden = false;
  }

  // ------------------------------------------------------ tabs, hash, pause

  function selectTab(tab, focus) {
    state.tab = tab;
    for (const t of ['overview', 'checkpoints']) {
      const button = $(`#tab-${t}`);
      const on = t === tab;
      button.setAttribute('aria-selected', on ? 'true' : 'false');
      button.tabIndex = on ? 0 : -1;
      $(`#panel-${t}`).hidden = !on;
      if (on && focus) button.focus();
    }
    writeHash();
  }
  $('#tab-overview').addEventListener('click', () => selectTab('overview'));
  $('#tab-checkpoints').addEventListener('click', () => selectTab('checkpoints'));
  document.querySelector('.tabs').addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') {
      selectTab(state.tab === 'overview' ? 'checkpoints' : 'overview', true);
    }
  });

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    return { job: p.get('job') || undefined, tab: p.get('tab') || undefined, checkpoint: p.get('checkpoint') || undefined };
  }

  function writeHash() {
    const p = new URLSearchParams();
    if (state.jid) p.set('job', state.jid);
    if (state.tab !== 'overview') p.set('tab', state.tab);
    if (state.detailCid !== null) p.set('checkpoint', String(state.detailCid));
    const h = p.toString();
    if (location.hash.slice(1) !== h) history.replaceState(null, '', h ? `#${h}` : location.pathname + location.search);
  }

  $('#pause').addEventListener('click', () => {
    state.paused = !state.paused;
    const b = $('#pause');
    b.textContent = state.paused ? 'Resume' : 'Pause';
    b.setAttribute('aria-pressed', state.paused ? 'true' : 'false');
    renderStatus();
    if (state.paused) clearTimeout(state.timer);
    else tick();
  });

  const initial = readHash();
  if (initial.tab === 'checkpoints') selectTab('checkpoints');
  tick();
})();
