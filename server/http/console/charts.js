// Small hand-written charts for the KLS console: SVG line, bar and scatter
// plots with linear or log axes, and a canvas heat map. No chart library (the
// console is compiled into kls-server and works without a network), no
// inline styles (the console's Content-Security-Policy forbids them): colours
// come from classes in console.css, geometry from SVG attributes.

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element with attributes (null / undefined ones are left out). */
export function svgEl(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  if (parent) parent.appendChild(e);
  return e;
}

function svgText(parent, x, y, text, attrs = {}) {
  const t = svgEl('text', { x: round2(x), y: round2(y), ...attrs }, parent);
  t.textContent = text;
  return t;
}

function round2(v) {
  return Math.round(v * 100) / 100;
}

/** A number for people: 4 significant digits, exponent form when tiny or huge. */
export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(2).replace('e+', 'e');
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  return String(Number(v.toPrecision(4)));
}

// ---- scales and ticks -------------------------------------------------------

/** Tick step of about (b − a) / count: 1, 2 or 5 times a power of ten. */
function niceStep(a, b, count) {
  const raw = (b - a) / Math.max(1, count);
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const r = raw / mag;
  return mag * (r >= 7.5 ? 10 : r >= 3.5 ? 5 : r >= 1.5 ? 2 : 1);
}

/** [a, b] widened to whole tick steps (a point domain gets a unit around it). */
export function niceDomain(a, b, count = 5) {
  if (!(b > a)) {
    const pad = a === 0 ? 1 : Math.abs(a) * 0.5;
    a -= pad;
    b += pad;
  }
  const step = niceStep(a, b, count);
  return [Math.floor(a / step + 1e-9) * step, Math.ceil(b / step - 1e-9) * step];
}

/** Ticks at multiples of a nice step inside [a, b]. */
export function linearTicks(a, b, count = 5) {
  const step = niceStep(a, b, count);
  const ticks = [];
  const first = Math.ceil(a / step - 1e-9);
  const last = Math.floor(b / step + 1e-9);
  for (let i = first; i <= last && ticks.length < 50; ++i) {
    ticks.push(Number((i * step).toPrecision(12)));
  }
  return ticks;
}

/** [10^floor(log10 a), 10^ceil(log10 b)] for 0 < a <= b. */
export function logDomain(a, b) {
  let lo = Math.floor(Math.log10(a));
  let hi = Math.ceil(Math.log10(b));
  if (hi <= lo) hi = lo + 1;
  return [10 ** lo, 10 ** hi];
}

/**
 * Log-axis ticks in [a, b] (a power of ten each): major ticks every k-th
 * decade so that at most ~8 are labelled; minor ticks (2..9 × 10^e) when the
 * axis spans at most 4 decades.
 */
export function logTicks(a, b) {
  const lo = Math.round(Math.log10(a));
  const hi = Math.round(Math.log10(b));
  const decades = Math.max(1, hi - lo);
  const k = Math.max(1, Math.ceil(decades / 8));
  const major = [];
  for (let e = lo; e <= hi; ++e) {
    if ((e - lo) % k === 0) major.push(10 ** e);
  }
  const minor = [];
  if (decades <= 4) {
    for (let e = lo; e < hi; ++e) {
      for (let m = 2; m <= 9; ++m) minor.push(m * 10 ** e);
    }
  }
  return { major, minor };
}

function formatLogTick(v) {
  const e = Math.round(Math.log10(v));
  if (e >= -2 && e <= 4) return formatNumber(Number(v.toPrecision(6)));
  return `1e${e}`;
}

/** A scale function [d0, d1] → [r0, r1], linear or log10 (log: d0, d1 > 0). */
export function makeScale(type, d0, d1, r0, r1) {
  let f;
  if (type === 'log') {
    const l0 = Math.log10(d0);
    const l1 = Math.log10(d1);
    f = (v) => r0 + ((Math.log10(v) - l0) * (r1 - r0)) / (l1 - l0 || 1);
  } else {
    f = (v) => r0 + ((v - d0) * (r1 - r0)) / (d1 - d0 || 1);
  }
  f.type = type;
  f.domain = [d0, d1];
  f.range = [r0, r1];
  return f;
}

/** A usable value on this axis type (log: finite and > 0). */
function usable(v, type) {
  return Number.isFinite(v) && (type !== 'log' || v > 0);
}

// ---- axes -------------------------------------------------------------------

/**
 * Draws the frame of a plot: grid lines, tick marks and labels on the left
 * and bottom axes, axis titles. `box` = {l, t, r, b} in viewBox units.
 */
function drawAxes(svg, box, xs, ys, { xLabel, yLabel, xTicks, yTicks }) {
  const g = svgEl('g', { class: 'axes' }, svg);
  const grid = svgEl('g', { class: 'grid' }, g);
  const yt = yTicks ?? (ys.type === 'log' ? logTicks(...ys.domain) : { major: linearTicks(...ys.domain, 5), minor: [] });
  for (const v of yt.minor) {
    const y = ys(v);
    svgEl('line', { x1: box.l, x2: box.r, y1: round2(y), y2: round2(y), class: 'grid-minor' }, grid);
  }
  const yAxis = svgEl('g', { class: 'y-axis' }, g);
  for (const v of yt.major) {
    const y = ys(v);
    svgEl('line', { x1: box.l, x2: box.r, y1: round2(y), y2: round2(y), class: 'grid-major' }, grid);
    svgEl('line', { x1: box.l - 4, x2: box.l, y1: round2(y), y2: round2(y), class: 'tick' }, yAxis);
    svgText(yAxis, box.l - 7, y + 4, ys.type === 'log' ? formatLogTick(v) : formatNumber(v), {
      class: 'tick-label', 'text-anchor': 'end',
    });
  }
  const xt = xTicks ?? (xs.type === 'log' ? logTicks(...xs.domain).major : linearTicks(...xs.domain, 6));
  const xAxis = svgEl('g', { class: 'x-axis' }, g);
  for (const v of xt) {
    const x = xs(v);
    svgEl('line', { x1: round2(x), x2: round2(x), y1: box.b, y2: box.b + 4, class: 'tick' }, xAxis);
    svgText(xAxis, x, box.b + 17, xs.type === 'log' ? formatLogTick(v) : formatNumber(v), {
      class: 'tick-label', 'text-anchor': 'middle',
    });
  }
  svgEl('line', { x1: box.l, x2: box.r, y1: box.b, y2: box.b, class: 'axis-line' }, g);
  svgEl('line', { x1: box.l, x2: box.l, y1: box.t, y2: box.b, class: 'axis-line' }, g);
  if (xLabel) svgText(g, (box.l + box.r) / 2, box.b + 34, xLabel, { class: 'axis-title', 'text-anchor': 'middle' });
  if (yLabel) {
    const cy = (box.t + box.b) / 2;
    svgText(g, 14, cy, yLabel, { class: 'axis-title', 'text-anchor': 'middle', transform: `rotate(-90 14 ${round2(cy)})` });
  }
}

function emptyMessage(svg, width, height, text) {
  svgText(svg, width / 2, height / 2, text, { class: 'empty-label', 'text-anchor': 'middle' });
}

function prepare(svg, width, height) {
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
}

// ---- line chart -------------------------------------------------------------

/**
 * Line chart of several series over a shared x axis.
 *   series: [{name, cls, x: [...], y: [...]}]
 *   yScale: 'linear' | 'log' — on a log axis, values <= 0 or not finite are
 *   left out (the line breaks there) and counted in svg's data-skipped.
 * Each path gets data-series and data-points (the values drawn). Returns
 * {xs, ys, box} for hover read-outs, or null when nothing could be drawn.
 */
export function drawLineChart(svg, { width = 760, height = 300, series, xLabel = '', yLabel = '', yScale = 'linear', xScale = 'linear' }) {
  prepare(svg, width, height);
  const box = { l: 70, t: 30, r: width - 16, b: height - 44 };
  let xmin = Infinity, xmax = -Infinity, ymin = Infinity, ymax = -Infinity;
  let skipped = 0;
  for (const s of series) {
    for (let i = 0; i < s.x.length; ++i) {
      const x = s.x[i], y = s.y[i];
      if (!usable(x, xScale)) continue;
      if (!usable(y, yScale)) { ++skipped; continue; }
      if (x < xmin) xmin = x;
      if (x > xmax) xmax = x;
      if (y < ymin) ymin = y;
      if (y > ymax) ymax = y;
    }
  }
  svg.dataset.skipped = String(skipped);
  if (!(xmax >= xmin) || !(ymax >= ymin)) {
    emptyMessage(svg, width, height, 'no values to plot yet');
    for (const s of series) svgEl('path', { d: '', class: `series ${s.cls}`, 'data-series': s.name, 'data-points': 0 }, svg);
    drawLegend(svg, series, box.l, 12);
    return null;
  }
  const xd = xScale === 'log' ? logDomain(xmin, xmax) : (xmax > xmin ? [xmin, xmax] : niceDomain(xmin, xmax));
  const yd = yScale === 'log' ? logDomain(ymin, ymax) : niceDomain(ymin, ymax);
  const xs = makeScale(xScale, xd[0], xd[1], box.l, box.r);
  const ys = makeScale(yScale, yd[0], yd[1], box.b, box.t);
  drawAxes(svg, box, xs, ys, { xLabel, yLabel });
  const clipId = `${svg.id || 'chart'}-clip`;
  const defs = svgEl('defs', {}, svg);
  const clip = svgEl('clipPath', { id: clipId }, defs);
  svgEl('rect', { x: box.l, y: box.t - 2, width: box.r - box.l, height: box.b - box.t + 4 }, clip);
  const lines = svgEl('g', { class: 'lines', 'clip-path': `url(#${clipId})` }, svg);
  for (const s of series) {
    let d = '';
    let pen = false;
    let n = 0, off = 0;
    for (let i = 0; i < s.x.length; ++i) {
      const x = s.x[i], y = s.y[i];
      if (!usable(x, xScale) || !usable(y, yScale)) { pen = false; ++off; continue; }
      d += `${pen ? 'L' : 'M'}${round2(xs(x))},${round2(ys(y))}`;
      pen = true;
      ++n;
    }
    // A single point has no length: draw it as a dot too.
    svgEl('path', { d, class: `series ${s.cls}`, 'data-series': s.name, 'data-points': n, 'data-skipped': off }, lines);
    if (n === 1) {
      const i = s.y.findIndex((y, k) => usable(y, yScale) && usable(s.x[k], xScale));
      svgEl('circle', { cx: round2(xs(s.x[i])), cy: round2(ys(s.y[i])), r: 3, class: `dot ${s.cls}` }, lines);
    }
  }
  drawLegend(svg, series, box.l, 12);
  return { xs, ys, box };
}

/** A one-line legend of series (line swatch + name) starting at (x, y). */
function drawLegend(svg, series, x, y) {
  const legend = svgEl('g', { class: 'legend' }, svg);
  for (const s of series) {
    svgEl('line', { x1: x, x2: x + 20, y1: y, y2: y, class: `series ${s.cls}` }, legend);
    svgText(legend, x + 26, y + 4, s.name, { class: 'legend-label' });
    x += 26 + 7.2 * s.name.length + 22;
  }
}

// ---- bar chart --------------------------------------------------------------

/**
 * Bars, one per value, on a linear or log y axis (log: values <= 0 get no
 * bar). Each rect has data-index and data-value and a <title>.
 *   labels: the x label of each bar (shown when few enough), titles: tooltips,
 *   barClass: the rects' class, or a function of the bar's index giving it.
 */
export function drawBarChart(svg, { width = 760, height = 260, values, labels = null, titles = null, xLabel = '', yLabel = '', yScale = 'linear', barClass = 'bar' }) {
  prepare(svg, width, height);
  const box = { l: 70, t: 14, r: width - 16, b: height - 44 };
  svg.dataset.count = String(values.length);
  const good = values.filter((v) => usable(v, yScale));
  if (good.length === 0) {
    emptyMessage(svg, width, height, values.length ? 'no positive values' : 'no values');
    return;
  }
  let ymin = Math.min(...good), ymax = Math.max(...good);
  let yd;
  if (yScale === 'log') {
    yd = logDomain(ymin, ymax);
  } else {
    yd = niceDomain(Math.min(0, ymin), Math.max(0, ymax));
  }
  const n = values.length;
  const band = (box.r - box.l) / n;
  const xs = makeScale('linear', 0, n, box.l, box.r);
  const ys = makeScale(yScale, yd[0], yd[1], box.b, box.t);
  // x ticks: the bar labels, thinned to at most ~16.
  const every = Math.max(1, Math.ceil(n / 16));
  const xTicks = [];
  for (let i = 0; i < n; i += every) xTicks.push(i);
  drawAxes(svg, box, xs, ys, { xLabel, yLabel, xTicks: [] });
  const xAxis = svgEl('g', { class: 'x-axis' }, svg);
  for (const i of xTicks) {
    const cx = box.l + band * (i + 0.5);
    svgText(xAxis, cx, box.b + 17, labels ? String(labels[i]) : String(i + 1), { class: 'tick-label', 'text-anchor': 'middle' });
  }
  const bars = svgEl('g', { class: 'bars' }, svg);
  const base = yScale === 'log' ? box.b : ys(0);
  const gap = band > 6 ? Math.min(band * 0.2, 6) : 0;
  for (let i = 0; i < n; ++i) {
    const v = values[i];
    const attrs = { class: typeof barClass === 'function' ? barClass(i) : barClass, 'data-index': i, 'data-value': v };
    const x = box.l + band * i + gap / 2;
    let y = base, h = 0;
    if (usable(v, yScale)) {
      const top = ys(v);
      y = Math.min(top, base);
      h = Math.abs(base - top);
    }
    const r = svgEl('rect', { ...attrs, x: round2(x), y: round2(y), width: round2(Math.max(0.5, band - gap)), height: round2(h) }, bars);
    const title = svgEl('title', {}, r);
    title.textContent = `${titles ? titles[i] : labels ? labels[i] : i + 1}: ${formatNumber(v)}`;
  }
}

// ---- scatter ----------------------------------------------------------------

/**
 * Scatter plot with equal units on both axes (principal coordinates keep
 * their geometry). One circle per point, in input order, class "pt c<k>"
 * (k = label mod 10) or "pt nolabel", data-i = the point's position.
 *   onHover(i | -1), onClick(i): point callbacks.
 */
export function drawScatter(svg, { width = 560, height = 420, x, y, labels = null, xLabel = '', yLabel = '', onHover = null, onClick = null }) {
  prepare(svg, width, height);
  const box = { l: 60, t: 12, r: width - 14, b: height - 40 };
  const n = x.length;
  svg.dataset.count = String(n);
  if (n === 0) {
    emptyMessage(svg, width, height, 'no items');
    return;
  }
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (let i = 0; i < n; ++i) {
    if (x[i] < x0) x0 = x[i];
    if (x[i] > x1) x1 = x[i];
    if (y[i] < y0) y0 = y[i];
    if (y[i] > y1) y1 = y[i];
  }
  // Equal units: the larger span (padded 6%) fits its side; the other is centred.
  const w = box.r - box.l, h = box.b - box.t;
  let xr = (x1 - x0) || Math.abs(x0) || 1, yr = (y1 - y0) || Math.abs(y0) || 1;
  const unit = Math.min(w / (xr * 1.12), h / (yr * 1.12));
  const xc = (x0 + x1) / 2, yc = (y0 + y1) / 2;
  const xd = [xc - w / (2 * unit), xc + w / (2 * unit)];
  const yd = [yc - h / (2 * unit), yc + h / (2 * unit)];
  const xs = makeScale('linear', xd[0], xd[1], box.l, box.r);
  const ys = makeScale('linear', yd[0], yd[1], box.b, box.t);
  drawAxes(svg, box, xs, ys, { xLabel, yLabel });
  const g = svgEl('g', { class: 'points' }, svg);
  const r = n > 2000 ? 1.8 : n > 500 ? 2.6 : 3.5;
  for (let i = 0; i < n; ++i) {
    const cls = labels ? `pt c${((Number(labels[i]) % 10) + 10) % 10}` : 'pt nolabel';
    svgEl('circle', { cx: round2(xs(x[i])), cy: round2(ys(y[i])), r, class: cls, 'data-i': i }, g);
  }
  const which = (ev) => (ev.target instanceof SVGCircleElement ? Number(ev.target.dataset.i) : -1);
  if (onHover) {
    g.addEventListener('mouseover', (ev) => onHover(which(ev)));
    g.addEventListener('mouseleave', () => onHover(-1));
  }
  if (onClick) {
    g.addEventListener('click', (ev) => {
      const i = which(ev);
      if (i >= 0) onClick(i);
    });
  }
}

// ---- heat map ---------------------------------------------------------------

// Viridis, sampled at 9 stops.
const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

/** Viridis colour of t in [0, 1] as [r, g, b]. */
export function viridis(t) {
  const u = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(u));
  const f = u - i;
  const a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
}

/**
 * An m × m heat map of row-major `values` on a canvas, one square cell of
 * `cell` pixels per entry (cell = the largest whole size that fits
 * maxPixels), viridis from the minimum to the maximum. Thin white lines
 * separate label groups (items sorted by label). canvas gets data-size = m,
 * data-cell, data-min, data-max. onHover(i, j) (−1, −1 when leaving).
 */
export function drawHeatmap(canvas, { m, values, labels = null, maxPixels = 440, onHover = null }) {
  const cell = Math.max(1, Math.floor(maxPixels / Math.max(1, m)));
  const size = Math.max(1, m * cell);
  canvas.width = size;
  canvas.height = size;
  canvas.dataset.size = String(m);
  canvas.dataset.cell = String(cell);
  const ctx = canvas.getContext('2d');
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!(hi >= lo)) { lo = 0; hi = 1; }
  canvas.dataset.min = String(lo);
  canvas.dataset.max = String(hi);
  if (m === 0) {
    ctx.clearRect(0, 0, size, size);
    return { lo, hi, cell };
  }
  const img = ctx.createImageData(size, size);
  const px = img.data;
  const span = hi - lo || 1;
  for (let i = 0; i < m; ++i) {
    for (let j = 0; j < m; ++j) {
      const [r, g, b] = viridis((values[i * m + j] - lo) / span);
      for (let dy = 0; dy < cell; ++dy) {
        let o = ((i * cell + dy) * size + j * cell) * 4;
        for (let dx = 0; dx < cell; ++dx, o += 4) {
          px[o] = r; px[o + 1] = g; px[o + 2] = b; px[o + 3] = 255;
        }
      }
    }
  }
  ctx.putImageData(img, 0, 0);
  if (labels && labels.length === m && cell >= 2) {
    ctx.strokeStyle = 'rgba(255,255,255,0.85)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 1; i < m; ++i) {
      if (String(labels[i]) !== String(labels[i - 1])) {
        const p = i * cell + 0.5;
        ctx.moveTo(p, 0); ctx.lineTo(p, size);
        ctx.moveTo(0, p); ctx.lineTo(size, p);
      }
    }
    ctx.stroke();
  }
  if (onHover) {
    canvas.onmousemove = (ev) => {
      const rect = canvas.getBoundingClientRect();
      const j = Math.floor(((ev.clientX - rect.left) * (size / rect.width)) / cell);
      const i = Math.floor(((ev.clientY - rect.top) * (size / rect.height)) / cell);
      if (i >= 0 && j >= 0 && i < m && j < m) onHover(i, j);
    };
    canvas.onmouseleave = () => onHover(-1, -1);
  }
  return { lo, hi, cell };
}

/** A horizontal colour bar for [lo, hi] (SVG gradient; stops are attributes). */
export function drawColorBar(svg, lo, hi, { width = 440, height = 34 } = {}) {
  prepare(svg, width, height);
  const id = `${svg.id || 'colorbar'}-gradient`;
  const defs = svgEl('defs', {}, svg);
  const grad = svgEl('linearGradient', { id, x1: 0, x2: 1, y1: 0, y2: 0 }, defs);
  for (let k = 0; k <= 8; ++k) {
    const [r, g, b] = viridis(k / 8);
    svgEl('stop', { offset: `${k * 12.5}%`, 'stop-color': `rgb(${r | 0},${g | 0},${b | 0})` }, grad);
  }
  svgEl('rect', { x: 0, y: 2, width, height: 12, fill: `url(#${id})`, class: 'colorbar' }, svg);
  svgText(svg, 0, 30, formatNumber(lo), { class: 'tick-label', 'text-anchor': 'start' });
  svgText(svg, width / 2, 30, formatNumber((lo + hi) / 2), { class: 'tick-label', 'text-anchor': 'middle' });
  svgText(svg, width, 30, formatNumber(hi), { class: 'tick-label', 'text-anchor': 'end' });
}
