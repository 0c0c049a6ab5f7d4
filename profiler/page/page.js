(function () {
'use strict';
var D = JSON.parse(document.getElementById('profile-data').textContent);
var T = D.target, S = D.summary, NT = T.num_tiles;
var CLASS_COLORS = {compute: '#43a047', exchange: '#8e24aa', sync: '#f9a825', host: '#00acc1',
                    streaming: '#1e88e5', control: '#757575'};
function classColor(c) { return CLASS_COLORS[c] || '#9e9e9e'; }  // a class of a program kind of one's own
// step kind -> class (from the document's steps), the classes in order and their labels, sent with the data
var KIND_CLASS = D.kindClass, CLASSES = D.classes, CLASS_LABELS = D.classLabels;
// the execution trace colours code loads apart from the other streaming-memory transfers
var TRACE_COLORS = {compute: '#43a047', exchange: '#8e24aa', sync: '#f9a825', host: '#00acc1',
                    'remote load/store': '#1e88e5', 'code load': '#e53935', control: '#757575'};
function traceKey(kind) {
  if (kind === 'code_load') return 'code load';
  if (kind === 'remote_load' || kind === 'remote_store') return 'remote load/store';
  return KIND_CLASS[kind] || 'control';
}
var counters = {};
var SVGNS = 'http://www.w3.org/2000/svg';

function unrle(r) {
  var n = 0, i, j, k = 0;
  for (i = 1; i < r.length; i += 2) n += r[i];
  var out = new Float64Array(n);
  for (i = 0; i < r.length; i += 2) { for (j = 0; j < r[i + 1]; j++) out[k++] = r[i]; }
  return out;
}
function fmtInt(n) { return Math.round(n).toLocaleString('en-US'); }
function fmtBytes(n) {
  var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0, s = n < 0 ? '-' : ''; n = Math.abs(n);
  while (n >= 1024 && i < 3) { n /= 1024; i++; }
  return s + (i ? n.toFixed(2) : Math.round(n)) + ' ' + u[i];
}
function fmtSec(s) {
  if (s === null || s === undefined) return '-';
  if (s < 1e-3) return (s * 1e6).toFixed(2) + ' \u00b5s';
  if (s < 1) return (s * 1e3).toFixed(2) + ' ms';
  return s.toFixed(3) + ' s';
}
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svg(tag, attrs, text) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
var tip = document.getElementById('tooltip');
function showTip(ev, text) {
  tip.textContent = text; tip.style.display = 'block';
  var x = ev.clientX + 14, y = ev.clientY + 14;
  if (x + 320 > window.innerWidth) x = ev.clientX - 330;
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
function hideTip() { tip.style.display = 'none'; }
// viridis-like colour ramp
var RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function ramp(v) {
  if (!(v > 0)) v = 0; if (v > 1) v = 1;
  var p = v * (RAMP.length - 1), i = Math.min(Math.floor(p), RAMP.length - 2), f = p - i;
  var a = RAMP[i], b = RAMP[i + 1];
  return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}
function hexRgb(h) { return [parseInt(h.substr(1, 2), 16), parseInt(h.substr(3, 2), 16), parseInt(h.substr(5, 2), 16)]; }
function mix(c, w, f) { return [Math.round(c[0] * (1 - f) + w[0] * f), Math.round(c[1] * (1 - f) + w[1] * f), Math.round(c[2] * (1 - f) + w[2] * f)]; }

function safely(name, fn) {
  try { fn(); } catch (e) { window.__reportError(name + ': ' + (e && e.stack ? e.stack : e)); }
}

// ---------------------------------------------------------------- header
function header() {
  var sub = document.getElementById('subtitle');
  sub.textContent = T.name + ' \u00b7 ' + T.ipus + ' IPU \u00b7 ' + fmtInt(NT) + ' tiles \u00b7 ' +
    fmtBytes(T.bytes_per_tile) + ' per tile \u00b7 ' + (T.clock_hz / 1e9).toFixed(2) + ' GHz' +
    (D.info.script ? ' \u00b7 ' + D.info.script : '') + (D.file ? ' \u00b7 ' + D.file : '');
  var c = S.cycles, m = S.memory, w = S.wall;
  var cards = [
    ['total cycles', fmtInt(c.total)],
    ['time at clock', fmtSec(c.seconds_at_clock)],
    ['steps executed', fmtInt(c.steps_executed)],
    ['memory used', fmtBytes(m.total) + ' (' + (100 * m.used_fraction).toFixed(2) + '%)'],
    ['memory free', fmtBytes(m.free)],
    ['fullest tile', fmtBytes(m.max_tile.bytes) + ' (tile ' + m.max_tile.tile + ')'],
    ['always live', fmtBytes(m.always_live)],
    ['not-always-live peak', fmtBytes(m.not_always_live_peak)],
    ['compile / run wall', fmtSec(w.compile_seconds) + ' / ' + fmtSec(w.run_seconds)]
  ];
  var box = document.getElementById('cards');
  cards.forEach(function (kv) {
    var d = el('div', {'class': 'card'});
    d.appendChild(el('div', {'class': 'v'}, kv[1]));
    d.appendChild(el('div', {'class': 'k'}, kv[0]));
    box.appendChild(d);
  });
  counters.cards = cards.length;
}

// ---------------------------------------------------------------- heat map
var tileCats = {};
function heatmap() {
  D.categories.forEach(function (c) { tileCats[c] = unrle(D.mem[c]); });
  var metrics = {'total': unrle(D.total), 'always live': unrle(D.alwaysLive)};
  D.categories.forEach(function (c) { metrics[c] = tileCats[c]; });
  var isBytes = {};
  Object.keys(metrics).forEach(function (k) { isBytes[k] = true; });
  if (D.code) {
    var cRes = unrle(D.code.resident), cLoad = unrle(D.code.loaded_peak), cAll = unrle(D.code.all_resident);
    var cWith = new Float64Array(NT), cSaved = new Float64Array(NT);
    for (var q = 0; q < NT; q++) { cWith[q] = cRes[q] + cLoad[q]; cSaved[q] = cAll[q] - cWith[q]; }
    metrics['code: resident + loaded peak'] = cWith;
    metrics['code: all resident'] = cAll;
    metrics['code: saved by loading'] = cSaved;
    ['code: resident + loaded peak', 'code: all resident', 'code: saved by loading'].forEach(function (k) { isBytes[k] = true; });
  }
  if (D.busy.compute) { metrics['compute busy cycles'] = unrle(D.busy.compute); }
  if (D.busy.transfer) { metrics['exchange/host busy cycles'] = unrle(D.busy.transfer); }
  var sel = document.getElementById('heat-metric'), scaleSel = document.getElementById('heat-scale');
  Object.keys(metrics).forEach(function (k) { sel.appendChild(el('option', {value: k}, k)); });
  var cv = document.getElementById('heatmap'), ctx = cv.getContext('2d');
  var cols = Math.max(1, Math.ceil(Math.sqrt(NT * cv.width / cv.height)));
  var rows = Math.ceil(NT / cols);
  var cell = Math.max(2, Math.floor(Math.min(cv.width / cols, 400 / rows)));
  cv.height = rows * cell + 2;
  var cur = 'total';
  function draw() {
    var vals = metrics[cur], bytes = !!isBytes[cur];
    var hi = 0, i;
    for (i = 0; i < NT; i++) if (vals[i] > hi) hi = vals[i];
    if (bytes && scaleSel.value === 'capacity') hi = T.bytes_per_tile;
    if (!(hi > 0)) hi = 1;
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, cv.width, cv.height);
    for (i = 0; i < NT; i++) {
      var c = ramp(vals[i] / hi);
      ctx.fillStyle = 'rgb(' + c[0] + ',' + c[1] + ',' + c[2] + ')';
      ctx.fillRect((i % cols) * cell + 1, Math.floor(i / cols) * cell + 1, Math.max(1, cell - (cell > 4 ? 1 : 0)), Math.max(1, cell - (cell > 4 ? 1 : 0)));
    }
    var lg = document.getElementById('heat-legend');
    lg.innerHTML = '';
    var grad = el('span');
    grad.style.cssText = 'display:inline-block;width:160px;height:12px;background:linear-gradient(90deg,' +
      RAMP.map(function (c) { return 'rgb(' + c.join(',') + ')'; }).join(',') + ')';
    lg.appendChild(el('span', null, '0')); lg.appendChild(grad);
    lg.appendChild(el('span', null, bytes ? fmtBytes(hi) : fmtInt(hi) + ' cycles'));
    counters.heatmapCells = NT;
  }
  sel.addEventListener('change', function () { cur = sel.value; draw(); });
  scaleSel.addEventListener('change', draw);
  cv.addEventListener('mousemove', function (ev) {
    var r = cv.getBoundingClientRect(), sx = cv.width / r.width;
    var x = Math.floor(((ev.clientX - r.left) * sx - 1) / cell), y = Math.floor(((ev.clientY - r.top) * sx - 1) / cell);
    var t = y * cols + x;
    if (x < 0 || x >= cols || t < 0 || t >= NT) { hideTip(); return; }
    var lines = ['tile ' + t + (T.ipus > 1 ? ' (IPU ' + Math.floor(t / T.tiles_per_ipu) + ')' : ''),
                 'total ' + fmtBytes(metrics['total'][t]) + ' of ' + fmtBytes(T.bytes_per_tile)];
    D.categories.forEach(function (c) { if (tileCats[c][t]) lines.push('  ' + c + ' ' + fmtBytes(tileCats[c][t])); });
    if (metrics['compute busy cycles']) lines.push('compute busy ' + fmtInt(metrics['compute busy cycles'][t]) + ' cycles');
    showTip(ev, lines.join('\n'));
  });
  cv.addEventListener('mouseleave', hideTip);
  draw();
}

// ---------------------------------------------------------------- liveness
function liveness() {
  var L = D.liveness, vals = L.values, n = vals.length;
  var W = 1100, H = 260, ml = 80, mr = 20, mt = 14, mb = 34;
  var box = document.getElementById('liveness');
  var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'liveness-svg'});
  box.appendChild(s);
  var hi = 1, i;
  for (i = 0; i < n; i++) if (vals[i] > hi) hi = vals[i];
  function X(p) { return ml + (n > 1 ? p / (n - 1) : 0.5) * (W - ml - mr); }
  function Y(v) { return mt + (1 - v / hi) * (H - mt - mb); }
  // axes and grid
  for (i = 0; i <= 4; i++) {
    var v = hi * i / 4, y = Y(v);
    s.appendChild(svg('line', {x1: ml, x2: W - mr, y1: y, y2: y, stroke: '#eee'}));
    s.appendChild(svg('text', {x: ml - 6, y: y + 4, 'text-anchor': 'end'}, fmtBytes(v)));
  }
  s.appendChild(svg('text', {x: (ml + W - mr) / 2, y: H - 6, 'text-anchor': 'middle'}, 'program position (0 \u2013 ' + Math.max(0, n - 1) + ')'));
  if (n === 0) { s.appendChild(svg('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle'}, 'no program steps')); counters.livenessPoints = 0; return; }
  var d = 'M' + X(0) + ',' + Y(0);
  for (i = 0; i < n; i++) {
    if (n > 1) { d += 'L' + X(i) + ',' + Y(vals[i]); }
    else { d += 'L' + (X(0) - 20) + ',' + Y(vals[0]) + 'L' + (X(0) + 20) + ',' + Y(vals[0]); }
  }
  d += 'L' + (n > 1 ? X(n - 1) : X(0) + 20) + ',' + Y(0) + 'Z';
  if (n === 1) d = d.replace('M' + X(0), 'M' + (X(0) - 20));
  s.appendChild(svg('path', {d: d, fill: 'rgba(66,133,244,.25)', stroke: '#4285f4', 'stroke-width': 1.5}));
  var pk = L.peak || {};
  if (pk.position !== undefined && n) {
    var px = X(pk.position), py = Y(vals[pk.position]);
    s.appendChild(svg('circle', {cx: px, cy: py, r: 4, fill: '#d93025'}));
    s.appendChild(svg('text', {x: Math.min(px + 8, W - 200), y: Math.max(py - 6, 12), fill: '#d93025'},
      'peak ' + fmtBytes(pk.bytes) + (pk.name ? ' at ' + pk.name : '')));
  }
  var marker = svg('line', {x1: 0, x2: 0, y1: mt, y2: H - mb, stroke: '#999', 'stroke-dasharray': '3,3', visibility: 'hidden'});
  s.appendChild(marker);
  var hit = svg('rect', {x: ml, y: mt, width: W - ml - mr, height: H - mt - mb, fill: 'transparent'});
  s.appendChild(hit);
  hit.addEventListener('mousemove', function (ev) {
    var r = s.getBoundingClientRect(), x = (ev.clientX - r.left) * W / r.width;
    var p = n > 1 ? Math.round((x - ml) / (W - ml - mr) * (n - 1)) : 0;
    p = Math.max(0, Math.min(n - 1, p));
    marker.setAttribute('x1', X(p)); marker.setAttribute('x2', X(p)); marker.setAttribute('visibility', 'visible');
    var sid = L.steps ? L.steps[p] : null, st = sid !== null && sid !== undefined ? D.steps[sid] : null;
    showTip(ev, 'position ' + p + (st ? '\nstep ' + st[0] + ' ' + st[1] + ' ' + st[2] + (st[3] ? '\nop ' + st[3] : '') : '') +
      '\nnot always live ' + fmtBytes(vals[p]) + '\nplus always live ' + fmtBytes(L.always) + ' = ' + fmtBytes(vals[p] + L.always));
  });
  hit.addEventListener('mouseleave', function () { hideTip(); marker.setAttribute('visibility', 'hidden'); });
  counters.livenessPoints = n;
}

// ---------------------------------------------------------------- BSP trace
function bsp() {
  var tr = D.trace, ids = tr.ids, starts = tr.starts, n = ids.length;
  var cv = document.getElementById('bsp'), ctx = cv.getContext('2d');
  var W = cv.width, H = cv.height, ml = 70, mt = 22, mb = 30, laneH = 12;
  var PW = W - ml - 10, PH = H - mt - mb - laneH - 4, top = mt + laneH + 4;
  var note = document.getElementById('bsp-note');
  var lg = document.getElementById('bsp-legend');
  Object.keys(TRACE_COLORS).forEach(function (c) {
    var s = el('span'); var i = el('i'); i.style.background = TRACE_COLORS[c]; s.appendChild(i);
    s.appendChild(document.createTextNode(c)); lg.appendChild(s);
  });
  var s2 = el('span'); var i2 = el('i'); i2.style.background = '#e6e6e6'; s2.appendChild(i2);
  s2.appendChild(document.createTextNode('waiting for the slowest tile')); lg.appendChild(s2);
  var s3 = el('span'); var i3 = el('i'); i3.style.background = 'rgb(' + mix(hexRgb(TRACE_COLORS['code load']), [255, 255, 255], 0.7).join(',') + ')';
  s3.appendChild(i3); s3.appendChild(document.createTextNode('pale: waiting for streaming memory (gateway link)')); lg.appendChild(s3);
  if (n === 0) {
    ctx.fillStyle = '#777'; ctx.font = '14px sans-serif';
    ctx.fillText('no execution trace in this profile', W / 2 - 110, H / 2);
    counters.bspColumns = 0; return;
  }
  var cyc = new Float64Array(n), end = 0, k;
  for (k = 0; k < n; k++) { cyc[k] = D.steps[ids[k]][4]; if (starts[k] + cyc[k] > end) end = starts[k] + cyc[k]; }
  var t0 = starts[0], t1 = Math.max(end, t0 + 1);
  var rows = Math.min(NT, PH), per = Math.ceil(NT / rows); rows = Math.ceil(NT / per);
  var grouped = {};
  function groupedTc(idx) {
    if (grouped[idx]) return grouped[idx];
    var a = unrle(D.tcTable[idx]), g = new Float64Array(rows);
    for (var t = 0; t < a.length; t++) { var r = Math.floor(t / per); if (a[t] > g[r]) g[r] = a[t]; }
    grouped[idx] = g; return g;
  }
  var clsRgb = {};
  Object.keys(TRACE_COLORS).forEach(function (c) { clsRgb[c] = hexRgb(TRACE_COLORS[c]); });
  var idle = [230, 230, 230], white = [255, 255, 255];
  var view = [t0, t1];
  // prefix maximum of end cycles: find the entries that cover a cycle even when branches overlap
  function stepAt(c) {
    var lo = 0, hi = n - 1, k = -1;
    while (lo <= hi) { var m = (lo + hi) >> 1; if (starts[m] <= c) { k = m; lo = m + 1; } else hi = m - 1; }
    if (k < 0) return -1;
    // several entries may start at the same cycle (diverged branches): take the one still running
    var j = k;
    while (j >= 0 && j > k - 8) { if (c < starts[j] + cyc[j]) return j; j--; }
    return -1;
  }
  function draw() {
    var a = view[0], b = view[1], span = b - a;
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
    var img = ctx.createImageData(PW, PH + laneH + 4);
    var data = img.data, x, y, rowOf = new Int32Array(PH);
    for (y = 0; y < PH; y++) rowOf[y] = Math.min(rows - 1, Math.floor(y * rows / PH));
    var drawn = 0;
    for (x = 0; x < PW; x++) {
      var c = a + (x + 0.5) * span / PW, e = stepAt(c), col, busy = null, local = 0, cls = null, wait = idle;
      if (e >= 0) {
        var st = D.steps[ids[e]]; cls = traceKey(st[1]); col = clsRgb[cls] || [120, 120, 120];
        local = c - starts[e];
        if (st[5] !== null && st[5] !== undefined) busy = groupedTc(st[5]);
        // a streaming transfer bound by the gateway link: the tiles wait for the link, not for a tile
        if (KIND_CLASS[st[1]] === 'streaming') wait = mix(col, white, 0.7);
        drawn++;
      }
      for (y = 0; y < laneH; y++) {
        var p = (y * PW + x) * 4, cc = e >= 0 ? col : white;
        data[p] = cc[0]; data[p + 1] = cc[1]; data[p + 2] = cc[2]; data[p + 3] = 255;
      }
      for (y = 0; y < PH; y++) {
        var q = ((y + laneH + 4) * PW + x) * 4, cc2;
        if (e < 0) cc2 = white;
        else if (busy === null) cc2 = (cls === 'sync' || cls === 'control') ? col : mix(col, white, 0.35);
        else cc2 = local < busy[rowOf[y]] ? col : wait;
        data[q] = cc2[0]; data[q + 1] = cc2[1]; data[q + 2] = cc2[2]; data[q + 3] = 255;
      }
    }
    ctx.putImageData(img, ml, mt);
    // axes
    ctx.fillStyle = '#333'; ctx.font = '11px sans-serif'; ctx.textAlign = 'right';
    ctx.fillText('steps', ml - 6, mt + laneH - 2);
    for (var r = 0; r <= 4; r++) {
      var tile = Math.min(NT - 1, Math.round((NT - 1) * r / 4)), yy = top + (tile / Math.max(1, NT - 1)) * (PH - 1);
      ctx.fillText('tile ' + tile, ml - 6, yy + 4);
    }
    ctx.textAlign = 'center';
    for (var i = 0; i <= 8; i++) {
      var xx = ml + i * PW / 8, cv2 = a + i * span / 8;
      ctx.fillRect(xx, top + PH, 1, 4);
      ctx.fillText(fmtInt(cv2), Math.min(Math.max(xx, ml + 24), W - 30), top + PH + 16);
    }
    ctx.textAlign = 'left';
    ctx.fillText('cycles (' + fmtSec((b - a) / T.clock_hz) + ' shown at ' + (T.clock_hz / 1e9).toFixed(2) + ' GHz)', ml, H - 2);
    counters.bspColumns = drawn;
    note.textContent = (per > 1 ? 'Each row is ' + per + ' tiles (the busiest of them). ' : '') +
      fmtInt(n) + ' executed steps' + (tr.truncated ? ' (the trace is truncated: ' + fmtInt(tr.length) + ' in the run)' : '') + '.';
  }
  function cycleAt(px) { return view[0] + (px - ml) / PW * (view[1] - view[0]); }
  cv.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var r = cv.getBoundingClientRect(), px = (ev.clientX - r.left) * W / r.width, c = cycleAt(px);
    var f = ev.deltaY < 0 ? 0.8 : 1.25, a = c - (c - view[0]) * f, b = c + (view[1] - c) * f;
    if (b - a < 4) return;
    view = [Math.max(t0 - (t1 - t0), a), Math.min(t1 + (t1 - t0), b)]; draw();
  }, {passive: false});
  var drag = null;
  cv.addEventListener('mousedown', function (ev) { drag = {x: ev.clientX, v: view.slice()}; });
  window.addEventListener('mouseup', function () { drag = null; });
  cv.addEventListener('mousemove', function (ev) {
    var r = cv.getBoundingClientRect(), sx = W / r.width, px = (ev.clientX - r.left) * sx, py = (ev.clientY - r.top) * sx;
    if (drag) {
      var dc = (ev.clientX - drag.x) * sx / PW * (drag.v[1] - drag.v[0]);
      view = [drag.v[0] - dc, drag.v[1] - dc]; draw(); hideTip(); return;
    }
    if (px < ml || px > ml + PW || py < mt || py > top + PH) { hideTip(); return; }
    var c = cycleAt(px), e = stepAt(c);
    if (e < 0) { hideTip(); return; }
    var st = D.steps[ids[e]], lines = [st[2], st[1] + (st[8] ? ' \u00b7 ' + st[8] : '') + (st[3] ? ' \u00b7 op ' + st[3] : ''),
      'start ' + fmtInt(starts[e]) + ', ' + fmtInt(st[4]) + ' cycles'];
    if (py >= top && st[5] !== null && st[5] !== undefined) {
      var row = Math.min(rows - 1, Math.floor((py - top) * rows / PH)), g = groupedTc(st[5]);
      lines.push('tiles ' + row * per + (per > 1 ? '\u2013' + Math.min(NT - 1, row * per + per - 1) : '') + ': busy ' + fmtInt(g[row]) + ' cycles');
    }
    showTip(ev, lines.join('\n'));
  });
  cv.addEventListener('mouseleave', hideTip);
  cv.addEventListener('dblclick', function () { view = [t0, t1]; draw(); });
  document.getElementById('bsp-reset').addEventListener('click', function () { view = [t0, t1]; draw(); });
  draw();
}

// ---------------------------------------------------------------- code memory
function legendItem(box, color, text, dashed) {
  var s = el('span'), i = el('i');
  if (dashed) { i.style.cssText = 'background:none;border:1px dashed ' + color + ';'; } else { i.style.background = color; }
  s.appendChild(i); s.appendChild(document.createTextNode(text)); box.appendChild(s);
}
function pct(a, b) { return b ? (100 * a / b).toFixed(1) + '%' : '-'; }
function codeMemory() {
  var C = D.code;
  if (!C) { counters.codeTileColumns = 0; return; }
  document.getElementById('code-section').style.display = '';
  var sm = C.summary, pk = C.peak_tile, b = C.busiest_tile, lc = C.load_cycles || {};
  var totalCycles = 0; Object.keys(S.cycles.by_class).forEach(function (k) { totalCycles += S.cycles.by_class[k]; });
  var cards = [
    ['busiest tile, all code resident', fmtBytes(pk.all_resident.bytes) + ' (tile ' + pk.all_resident.tile + ')'],
    ['busiest tile, with code loading', fmtBytes(pk.with_loading.bytes) + ' (tile ' + pk.with_loading.tile + ')'],
    ['saved on the busiest tile', fmtBytes(pk.saved) + ' (' + pct(pk.saved, pk.all_resident.bytes) + ')'],
    ['saved over all tiles', fmtBytes(C.totals.saved) + ' (' + pct(C.totals.saved, C.totals.all_resident) + ')'],
    ['always live / loaded peak', fmtBytes(C.totals.resident) + ' / ' + fmtBytes(C.totals.loaded_peak)],
    ['code-load cycles', fmtInt(lc.executed_cycles || 0) + ' (' + pct(lc.executed_cycles || 0, totalCycles) + ', ' +
      fmtInt(lc.executions || 0) + ' loads)']
  ];
  var box = document.getElementById('code-cards');
  cards.forEach(function (kv) {
    var d = el('div', {'class': 'card'});
    d.appendChild(el('div', {'class': 'v'}, kv[1])); d.appendChild(el('div', {'class': 'k'}, kv[0]));
    box.appendChild(d);
  });
  codeTiles(C); codeLive(C); codeTables(C, totalCycles);
}
function codeTiles(C) {
  var res = unrle(C.resident), load = unrle(C.loaded_peak), all = unrle(C.all_resident);
  var lg = document.getElementById('code-tiles-legend');
  legendItem(lg, '#5c6bc0', 'always live (resident)'); legendItem(lg, '#e53935', 'loaded (peak live)');
  legendItem(lg, '#555', 'all code resident', true);
  var W = 1100, H = 220, ml = 70, mr = 10, mt = 10, mb = 30, PW = W - ml - mr, PH = H - mt - mb;
  var cols = Math.min(NT, 550), per = Math.ceil(NT / cols); cols = Math.ceil(NT / per);
  var pick = new Int32Array(cols), hiAll = new Float64Array(cols), hi = 1, c, t;
  for (c = 0; c < cols; c++) {
    var best = c * per, bv = -1;
    for (t = c * per; t < Math.min(NT, c * per + per); t++) {
      if (res[t] + load[t] > bv) { bv = res[t] + load[t]; best = t; }
      if (all[t] > hiAll[c]) hiAll[c] = all[t];
    }
    pick[c] = best;
    if (hiAll[c] > hi) hi = hiAll[c]; if (bv > hi) hi = bv;
  }
  var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'code-tiles-svg'});
  document.getElementById('code-tiles').appendChild(s);
  function Y(v) { return mt + (1 - v / hi) * PH; }
  for (var i = 0; i <= 4; i++) {
    var y = Y(hi * i / 4);
    s.appendChild(svg('line', {x1: ml, x2: W - mr, y1: y, y2: y, stroke: '#eee'}));
    s.appendChild(svg('text', {x: ml - 6, y: y + 4, 'text-anchor': 'end'}, fmtBytes(hi * i / 4)));
  }
  var bw = PW / cols, outline = '';
  for (c = 0; c < cols; c++) {
    t = pick[c];
    var x = ml + c * bw, yr = Y(res[t]), yl = Y(res[t] + load[t]);
    if (res[t] > 0) s.appendChild(svg('rect', {x: x, y: yr, width: Math.max(bw - (bw > 3 ? 1 : 0), 0.6), height: mt + PH - yr, fill: '#5c6bc0'}));
    if (load[t] > 0) s.appendChild(svg('rect', {x: x, y: yl, width: Math.max(bw - (bw > 3 ? 1 : 0), 0.6), height: yr - yl, fill: '#e53935'}));
    outline += (c ? 'L' : 'M') + x + ',' + Y(hiAll[c]) + 'L' + (x + bw) + ',' + Y(hiAll[c]);
  }
  s.appendChild(svg('path', {d: outline, fill: 'none', stroke: '#555', 'stroke-dasharray': '4,3', 'stroke-width': 1}));
  s.appendChild(svg('text', {x: ml + PW / 2, y: H - 6, 'text-anchor': 'middle'},
    'tiles 0 \u2013 ' + (NT - 1) + (per > 1 ? ' (' + per + ' tiles per column)' : '')));
  var hit = svg('rect', {x: ml, y: mt, width: PW, height: PH, fill: 'transparent'});
  s.appendChild(hit);
  hit.addEventListener('mousemove', function (ev) {
    var r = s.getBoundingClientRect(), px = (ev.clientX - r.left) * W / r.width;
    var cc = Math.max(0, Math.min(cols - 1, Math.floor((px - ml) / bw))), tt = pick[cc];
    showTip(ev, 'tile ' + tt + (per > 1 ? ' (most code of tiles ' + cc * per + '\u2013' + Math.min(NT - 1, cc * per + per - 1) + ')' : '') +
      '\nresident ' + fmtBytes(res[tt]) + '\nloaded peak ' + fmtBytes(load[tt]) +
      '\nwith loading ' + fmtBytes(res[tt] + load[tt]) + '\nall resident ' + fmtBytes(all[tt]) +
      '\nsaved ' + fmtBytes(all[tt] - res[tt] - load[tt]));
  });
  hit.addEventListener('mouseleave', hideTip);
  counters.codeTileColumns = cols;
}
function codeLive(C) {
  var sel = document.getElementById('code-live-which'), lg = document.getElementById('code-live-legend');
  legendItem(lg, '#e53935', 'loaded code live'); legendItem(lg, '#555', 'every loaded function resident', true);
  legendItem(lg, '#b71c1c', 'code load');
  var loadPos = [], steps = D.liveness.steps || [];
  for (var p = 0; p < steps.length; p++) {
    var sid = steps[p];
    if (sid !== null && sid !== undefined && D.steps[sid] && D.steps[sid][1] === 'code_load') loadPos.push(p);
  }
  var res = unrle(C.resident), all = unrle(C.all_resident), b = C.busiest_tile.tile, loadedAll = 0;
  for (var t = 0; t < NT; t++) loadedAll += all[t] - res[t];
  function draw(which) {
    var box = document.getElementById('code-live'); box.innerHTML = '';
    var vals = which === 'busiest' ? C.live_busiest : C.live, n = vals.length;
    var level = which === 'busiest' ? all[b] - res[b] : loadedAll;
    var W = 1100, H = 220, ml = 80, mr = 20, mt = 14, mb = 34, i;
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'code-live-svg'});
    box.appendChild(s);
    var hi = Math.max(level, 1);
    for (i = 0; i < n; i++) if (vals[i] > hi) hi = vals[i];
    function X(q) { return ml + (n > 1 ? q / (n - 1) : 0.5) * (W - ml - mr); }
    function Y(v) { return mt + (1 - v / hi) * (H - mt - mb); }
    for (i = 0; i <= 4; i++) {
      var y = Y(hi * i / 4);
      s.appendChild(svg('line', {x1: ml, x2: W - mr, y1: y, y2: y, stroke: '#eee'}));
      s.appendChild(svg('text', {x: ml - 6, y: y + 4, 'text-anchor': 'end'}, fmtBytes(hi * i / 4)));
    }
    s.appendChild(svg('text', {x: (ml + W - mr) / 2, y: H - 6, 'text-anchor': 'middle'},
      'program position (0 \u2013 ' + Math.max(0, n - 1) + ')' + (which === 'busiest' ? ', tile ' + b : ', summed over tiles')));
    loadPos.forEach(function (q) {
      if (q < n) s.appendChild(svg('line', {x1: X(q), x2: X(q), y1: mt, y2: H - mb, stroke: '#b71c1c', 'stroke-width': 1, opacity: 0.5}));
    });
    if (n) {
      var d = 'M' + X(0) + ',' + Y(0);
      for (i = 0; i < n; i++) d += 'L' + X(i) + ',' + Y(vals[i]) + (n > 1 && i < n - 1 ? 'L' + X(i + 1) + ',' + Y(vals[i]) : '');
      d += 'L' + X(n - 1) + ',' + Y(0) + 'Z';
      s.appendChild(svg('path', {d: d, fill: 'rgba(229,57,53,.25)', stroke: '#e53935', 'stroke-width': 1.2}));
    }
    var ly = Y(level);
    s.appendChild(svg('line', {x1: ml, x2: W - mr, y1: ly, y2: ly, stroke: '#555', 'stroke-dasharray': '5,4'}));
    s.appendChild(svg('text', {x: W - mr - 4, y: ly - 4, 'text-anchor': 'end'}, 'all resident ' + fmtBytes(level)));
    var hit = svg('rect', {x: ml, y: mt, width: W - ml - mr, height: H - mt - mb, fill: 'transparent'});
    s.appendChild(hit);
    hit.addEventListener('mousemove', function (ev) {
      var r = s.getBoundingClientRect(), x = (ev.clientX - r.left) * W / r.width;
      var q = n > 1 ? Math.round((x - ml) / (W - ml - mr) * (n - 1)) : 0;
      q = Math.max(0, Math.min(n - 1, q));
      var sid = steps[q], st = sid !== null && sid !== undefined ? D.steps[sid] : null;
      showTip(ev, 'position ' + q + (st ? '\nstep ' + st[0] + ' ' + st[1] + ' ' + st[2] : '') +
        '\nloaded code live ' + fmtBytes(vals[q]) + ' of ' + fmtBytes(level));
    });
    hit.addEventListener('mouseleave', hideTip);
    counters.codeLivePoints = n;
  }
  sel.addEventListener('change', function () { draw(sel.value); });
  draw('all');
  counters.codeLoadMarks = loadPos.length;
}
function fillTable(t, head, rows, left) {
  var tr = el('tr');
  head.forEach(function (h, i) { tr.appendChild(el('th', {'class': left.indexOf(i) >= 0 ? 'l' : ''}, h)); });
  t.appendChild(tr);
  rows.forEach(function (r) {
    var row = el('tr');
    r.forEach(function (v, i) { row.appendChild(el('td', {'class': left.indexOf(i) >= 0 ? 'l' : ''}, v)); });
    t.appendChild(row);
  });
}
function codeTables(C, totalCycles) {
  fillTable(document.getElementById('code-functions'), ['function', 'code', 'max tile', 'tiles', 'live (program positions)'],
    (C.functions || []).map(function (f) {
      var iv = f.intervals.slice(0, 8).map(function (x) { return x[0] + '\u2013' + x[1]; }).join(', ');
      if (f.intervals.length > 8) iv += ', \u2026 (' + f.intervals.length + ' in all)';
      return [f.name, fmtBytes(f.bytes), fmtBytes(f.max_tile), fmtInt(f.tiles), iv || 'never'];
    }), [0, 4]);
  var loads = C.load_steps || [];
  var rows = loads.map(function (x) {
    return [String(x.step), x.name, fmtBytes(x.bytes), fmtBytes(x.max_tile_bytes), fmtInt(x.cycles),
      fmtInt(x.sync_cycles) + ' + ' + fmtInt(x.transfer_cycles), fmtInt(x.executions), fmtInt(x.executed_cycles),
      pct(x.executed_cycles, totalCycles)];
  });
  fillTable(document.getElementById('code-loads'), ['step', 'name', 'bytes', 'max tile', 'cycles', 'sync + transfer',
    'runs', 'executed cycles', '%'], rows, [1]);
  counters.codeLoadRows = rows.length;
}

// ---------------------------------------------------------------- ops
function opsChart() {
  var sel = document.getElementById('ops-by');
  sel.addEventListener('change', function () { drawOps(sel.value); });
  drawOps('op');
}
function drawOps(by) {
  var ops = D.ops[by].slice(0, 30), box = document.getElementById('ops');
  box.innerHTML = '';
  if (!ops.length) { box.textContent = 'no executed steps'; counters.opBars = 0; return; }
  var W = 1100, rowH = 20, ml = 300, mr = 170, H = ops.length * rowH + 30;
  var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'ops-svg'});
  box.appendChild(s);
  var hi = ops[0].cycles || 1, total = 0;
  Object.keys(S.cycles.by_class).forEach(function (k) { total += S.cycles.by_class[k]; });
  var classes = CLASSES;
  var bars = 0;
  ops.forEach(function (o, i) {
    var y = 6 + i * rowH, x = ml;
    var label = o.op + (o.type && o.type !== o.op ? ' (' + o.type + ')' : '') + (o.ops > 1 ? ' \u00d7' + o.ops : '');
    if (label.length > 46) label = label.substr(0, 44) + '\u2026';
    s.appendChild(svg('text', {x: ml - 8, y: y + 13, 'text-anchor': 'end'}, label));
    classes.forEach(function (c) {
      var v = o.by_class[c] || 0; if (!v) return;
      var w = v / hi * (W - ml - mr);
      var r = svg('rect', {x: x, y: y + 2, width: Math.max(w, 0.5), height: rowH - 5, fill: classColor(c)});
      r.appendChild(svg('title', null, o.op + ' \u00b7 ' + c + ': ' + fmtInt(v) + ' cycles'));
      s.appendChild(r); x += w; bars++;
    });
    s.appendChild(svg('text', {x: x + 6, y: y + 13}, fmtInt(o.cycles) + ' (' + (100 * o.cycles / (total || 1)).toFixed(1) + '%)'));
  });
  var ly = H - 10, lx = ml;
  classes.filter(function (c, i) { return i < 4 || S.cycles.by_class[c]; }).forEach(function (c) {
    s.appendChild(svg('rect', {x: lx, y: ly - 9, width: 10, height: 10, fill: classColor(c)}));
    var label = CLASS_LABELS[c] || c;
    s.appendChild(svg('text', {x: lx + 14, y: ly}, label)); lx += 30 + 7 * label.length;
  });
  counters.opBars = bars;
}

// ---------------------------------------------------------------- categories and histogram
function categories() {
  var box = document.getElementById('categories'), cats = S.memory.by_category, keys = Object.keys(cats);
  var W = 520, rowH = 22, ml = 110, H = keys.length * rowH + 10;
  var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H}); box.appendChild(s);
  var hi = 1; keys.forEach(function (k) { if (cats[k] > hi) hi = cats[k]; });
  keys.forEach(function (k, i) {
    var y = 4 + i * rowH, w = cats[k] / hi * (W - ml - 110);
    s.appendChild(svg('text', {x: ml - 6, y: y + 14, 'text-anchor': 'end'}, k));
    s.appendChild(svg('rect', {x: ml, y: y + 3, width: Math.max(w, 0.5), height: rowH - 7, fill: '#5c6bc0'}));
    s.appendChild(svg('text', {x: ml + w + 6, y: y + 14}, fmtBytes(cats[k])));
  });
  counters.categoryBars = keys.length;
}
function histogram() {
  var box = document.getElementById('histogram'), h = D.hist;
  var W = 520, H = 230, ml = 50, mb = 40, mt = 20;
  var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H}); box.appendChild(s);
  var hi = 1; h.forEach(function (b) { if (b[2] > hi) hi = b[2]; });
  var bw = (W - ml - 10) / Math.max(1, h.length);
  h.forEach(function (b, i) {
    var bh = b[2] / hi * (H - mt - mb), x = ml + i * bw, y = H - mb - bh;
    var r = svg('rect', {x: x + 1, y: y, width: Math.max(1, bw - 2), height: bh, fill: '#26a69a'});
    r.appendChild(svg('title', null, fmtBytes(b[0]) + ' \u2013 ' + fmtBytes(b[1]) + ': ' + b[2] + ' tiles'));
    s.appendChild(r);
    if (b[2]) s.appendChild(svg('text', {x: x + bw / 2, y: y - 3, 'text-anchor': 'middle'}, String(b[2])));
  });
  [0, Math.floor(h.length / 2), h.length].forEach(function (i) {
    var v = i < h.length ? h[i][0] : (h.length ? h[h.length - 1][1] : 0);
    s.appendChild(svg('text', {x: ml + i * bw, y: H - mb + 14, 'text-anchor': 'middle'}, fmtBytes(v)));
  });
  s.appendChild(svg('text', {x: (W + ml) / 2, y: H - 8, 'text-anchor': 'middle'}, 'bytes per tile \u2192 number of tiles'));
  counters.histogramBars = h.length;
}

// ---------------------------------------------------------------- tables
function tables() {
  var t = document.getElementById('steps-table');
  var head = el('tr');
  ['step', 'name', 'kind', 'op', 'runs', 'cycles', '%', 'cycles each'].forEach(function (h, i) {
    head.appendChild(el('th', {'class': i === 1 || i === 3 || i === 2 ? 'l' : ''}, h));
  });
  t.appendChild(head);
  var total = 0; Object.keys(S.cycles.by_class).forEach(function (k) { total += S.cycles.by_class[k]; });
  var rows = D.steps.filter(function (r) { return r[6] > 0; }).sort(function (a, b) { return b[7] - a[7]; }).slice(0, 25);
  rows.forEach(function (r) {
    var tr = el('tr');
    [String(r[0]), r[2], r[1], r[3], fmtInt(r[6]), fmtInt(r[7]), (100 * r[7] / (total || 1)).toFixed(1), fmtInt(r[4])].forEach(function (v, i) {
      tr.appendChild(el('td', {'class': i === 1 || i === 3 || i === 2 ? 'l' : ''}, v));
    });
    t.appendChild(tr);
  });
  var w = document.getElementById('worst-table');
  var h2 = el('tr');
  ['tile', 'total', '% of tile', 'categories', 'largest tensors'].forEach(function (h, i) { h2.appendChild(el('th', {'class': i > 2 ? 'l' : ''}, h)); });
  w.appendChild(h2);
  D.worst.forEach(function (r) {
    var tr = el('tr');
    var cats = Object.keys(r.categories).sort(function (a, b) { return r.categories[b] - r.categories[a]; })
      .slice(0, 4).map(function (c) { return c + ' ' + fmtBytes(r.categories[c]); }).join(', ');
    var big = (r.largest || []).slice(0, 3).map(function (x) { return x[0] + ' ' + fmtBytes(x[1]); }).join(', ');
    [String(r.tile), fmtBytes(r.total), (100 * r.total / T.bytes_per_tile).toFixed(1), cats, big].forEach(function (v, i) {
      tr.appendChild(el('td', {'class': i > 2 ? 'l' : ''}, v));
    });
    w.appendChild(tr);
  });
  counters.stepRows = rows.length;
}

safely('header', header);
safely('heatmap', heatmap);
safely('liveness', liveness);
safely('bsp', bsp);
safely('code', codeMemory);
safely('ops', opsChart);
safely('categories', categories);
safely('histogram', histogram);
safely('tables', tables);
var st = document.getElementById('status');
Object.keys(counters).forEach(function (k) { st.setAttribute('data-' + k.replace(/[A-Z]/g, function (m) { return '-' + m.toLowerCase(); }), String(counters[k])); });
st.setAttribute('data-errors', String(window.__errors.length));
st.setAttribute('data-rendered', window.__errors.length ? 'errors' : 'ok');
})();
