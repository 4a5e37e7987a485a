/**
 * Dependency-free SVG charts for simulation reports: empirical CDFs and line (time-series) plots
 * with "nice" axes (ticks at multiples of 1, 2 or 5 × 10^k), grid lines, axis labels, a title and
 * a legend. Output is a standalone `<svg>` element (no XML declaration) that can be written to a
 * `.svg` file or inlined in HTML. Non-finite values (NaN, ±Infinity) are skipped, as are
 * non-positive values on a logarithmic axis.
 */
import { cdfPoints } from './stats.js';

export interface XY {
  x: number;
  y: number;
}

export interface CdfSeries {
  name: string;
  values: ArrayLike<number>;
}

export interface CdfPlotOptions {
  title: string;
  xLabel: string;
  /** Default "Fraction ≤ x". */
  yLabel?: string;
  series: readonly CdfSeries[];
  /** Fix the x axis's ends instead of fitting them to the data. */
  xMin?: number;
  xMax?: number;
  logX?: boolean;
  width?: number;
  height?: number;
}

export interface LineSeries {
  name: string;
  /** Drawn in the given order; a non-finite point breaks the line. */
  points: readonly XY[];
}

export interface LinePlotOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly LineSeries[];
  xMin?: number;
  xMax?: number;
  yMin?: number;
  yMax?: number;
  width?: number;
  height?: number;
}

const DEFAULT_WIDTH = 720;
const DEFAULT_HEIGHT = 420;
/** Tableau 10; series beyond ten reuse the colours with a dash pattern. */
const COLOURS = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#76b7b2',
  '#59a14f',
  '#edc948',
  '#b07aa1',
  '#ff9da7',
  '#9c755f',
  '#bab0ac',
] as const;
const DASHES = ['', '6 3', '2 3', '8 3 2 3'] as const;
const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

/** Escapes text for XML content and attribute values; drops characters XML 1.0 cannot carry. */
export function escapeXml(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x26) out += '&amp;';
    else if (c === 0x3c) out += '&lt;';
    else if (c === 0x3e) out += '&gt;';
    else if (c === 0x22) out += '&quot;';
    else if (c === 0x27) out += '&apos;';
    else if (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) continue;
    else if (c === 0xfffe || c === 0xffff) continue;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += text.slice(i, i + 2);
        i++;
      }
    } else if (c >= 0xdc00 && c <= 0xdfff) continue;
    else out += text[i] ?? '';
  }
  return out;
}

/** 1, 2 or 5 × 10^k: the nice step closest above range / target. */
function niceStep(range: number, target: number): number {
  const rough = range / target;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const normalised = rough / magnitude;
  const tolerance = 1 + 1e-9;
  const mantissa =
    normalised <= tolerance ? 1 : normalised <= 2 * tolerance ? 2 : normalised <= 5 * tolerance ? 5 : 10;
  return mantissa * magnitude;
}

/** Removes binary floating-point noise such as 0.30000000000000004 (never by more than step/10⁶). */
function clean(value: number, step: number): number {
  const v = Number(value.toPrecision(12));
  if (Math.abs(v - value) > step * 1e-6) return value;
  return v === 0 ? 0 : v;
}

/**
 * Nice tick values covering [min, max]: multiples of a step that is 1, 2 or 5 × 10^k, chosen so
 * there are about `target` intervals; only ticks inside [min, max] (with a tiny tolerance).
 */
export function niceTicks(min: number, max: number, target = 5): number[] {
  if (!Number.isFinite(max - min) || !(max > min) || !(target >= 1)) return [];
  const step = niceStep(max - min, target);
  const epsilon = step * 1e-9;
  const first = Math.ceil((min - epsilon) / step);
  const last = Math.floor((max + epsilon) / step);
  const ticks: number[] = [];
  for (let k = first; k <= last; k++) ticks.push(clean(k * step, step));
  return ticks;
}

/** Powers of ten covering [min, max] (both > 0), with 2× and 5× added when the range is short. */
export function niceLogTicks(min: number, max: number): number[] {
  if (!(min > 0) || !Number.isFinite(max) || !(max > min)) return [];
  const lo = Math.floor(Math.log10(min) + 1e-9);
  const hi = Math.ceil(Math.log10(max) - 1e-9);
  const decades = hi - lo;
  const stride = Math.max(1, Math.ceil(decades / 10));
  const mantissas = decades <= 2 ? [1, 2, 5] : [1];
  const ticks: number[] = [];
  for (let k = lo; k <= hi; k += stride) {
    for (const m of mantissas) {
      const v = clean(m * 10 ** k, 10 ** k);
      if (v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9)) ticks.push(v);
    }
  }
  return ticks;
}

interface Axis {
  min: number;
  max: number;
  log: boolean;
  ticks: number[];
  label: (value: number) => string;
}

function decimalsFor(step: number): number {
  return Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
}

function checkFixed(name: string, value: number | undefined, log: boolean): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || (log && value <= 0)) {
    throw new RangeError(`${name} must be finite${log ? ' and positive on a log axis' : ''}, got ${value}`);
  }
}

/** Padding that widens a degenerate range around `value`. */
function padFor(value: number): number {
  return value === 0 ? 1 : Math.abs(value) * 0.1;
}

/**
 * A linear axis over the data range [lo, hi] (NaN when there is no data) with the free ends rounded
 * out to the tick step; a fixed end is used as given.
 */
function linearAxis(lo: number, hi: number, fixedMin?: number, fixedMax?: number): Axis {
  let a = fixedMin ?? (Number.isNaN(lo) ? 0 : lo);
  let b = fixedMax ?? (Number.isNaN(hi) ? 1 : hi);
  if (!(b > a)) {
    // One distinct value, or all data beyond a fixed end: widen the free end(s).
    if (fixedMin === undefined && fixedMax === undefined) {
      const pad = padFor(a);
      a -= pad;
      b += pad;
    } else if (fixedMin === undefined) {
      a = b - padFor(b);
    } else if (fixedMax === undefined) {
      b = a + padFor(a);
    }
  }
  if (!(b > a) || !Number.isFinite(b - a)) {
    throw new RangeError(`axis range [${a}, ${b}] is empty or too wide`);
  }
  const step = niceStep(b - a, 5);
  if (fixedMin === undefined) a = clean(Math.floor(a / step + 1e-9) * step, step);
  if (fixedMax === undefined) b = clean(Math.ceil(b / step - 1e-9) * step, step);
  const ticks = niceTicks(a, b, 5);
  const decimals = decimalsFor(niceStep(b - a, 5));
  const label =
    decimals <= 15 ? (v: number) => v.toFixed(decimals) : (v: number) => (v === 0 ? '0' : v.toExponential(2));
  return { min: a, max: b, log: false, ticks, label };
}

function logLabel(value: number): string {
  const exponent = Math.floor(Math.log10(value) + 1e-9);
  if (exponent >= 7 || exponent <= -7) return value.toExponential(0).replace('e+', 'e');
  return value.toFixed(Math.max(0, -exponent));
}

function logAxis(lo: number, hi: number, fixedMin?: number, fixedMax?: number): Axis {
  let a = fixedMin ?? (Number.isNaN(lo) ? 1 : 10 ** Math.floor(Math.log10(lo) + 1e-9));
  let b = fixedMax ?? (Number.isNaN(hi) ? 10 : 10 ** Math.ceil(Math.log10(hi) - 1e-9));
  if (fixedMin === undefined && a >= b) a = b / 10;
  if (fixedMax === undefined && a >= b) b = a * 10;
  if (!(a > 0) || !Number.isFinite(b) || !(b > a)) {
    throw new RangeError(`log axis range [${a}, ${b}] is empty or not positive`);
  }
  return { min: a, max: b, log: true, ticks: niceLogTicks(a, b), label: logLabel };
}

function scaler(axis: Axis, from: number, to: number): (value: number) => number {
  if (axis.log) {
    const l0 = Math.log10(axis.min);
    const span = Math.log10(axis.max) - l0;
    return (v) => from + ((Math.log10(v) - l0) / span) * (to - from);
  }
  const span = axis.max - axis.min;
  return (v) => from + ((v - axis.min) / span) * (to - from);
}

/** Pixel coordinate with at most two decimals. */
function px(value: number): string {
  return String(Math.round(value * 100) / 100);
}

interface Frame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
  sx: (value: number) => number;
  sy: (value: number) => number;
  clipId: string;
}

interface FrameInput {
  title: string;
  xLabel: string;
  yLabel: string;
  xAxis: Axis;
  yAxis: Axis;
  names: readonly string[];
  width?: number | undefined;
  height?: number | undefined;
}

function seriesStyle(index: number): string {
  const colour = COLOURS[index % COLOURS.length] ?? '#000';
  const dash = DASHES[Math.floor(index / COLOURS.length) % DASHES.length] ?? '';
  return `stroke="${colour}"${dash === '' ? '' : ` stroke-dasharray="${dash}"`}`;
}

function checkSize(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 200 || value > 10_000) {
    throw new RangeError(`${name} must be in [200, 10000] px, got ${value}`);
  }
  return value;
}

/** Background, title, grid, ticks, labels and legend; returns the parts and the plot geometry. */
function frame(input: FrameInput): { head: string[]; tail: string[]; frame: Frame } {
  const width = checkSize('width', input.width ?? DEFAULT_WIDTH);
  const height = checkSize('height', input.height ?? DEFAULT_HEIGHT);
  const longestName = input.names.reduce((m, name) => Math.max(m, name.length), 0);
  const legendWidth = input.names.length === 0 ? 0 : Math.min(240, Math.round(36 + 6.6 * longestName));
  const left = 70;
  const right = width - 20 - legendWidth;
  const top = input.title === '' ? 20 : 44;
  const bottom = height - 52;
  const sx = scaler(input.xAxis, left, right);
  const sy = scaler(input.yAxis, bottom, top);
  const clipId = `plot-clip-${width}x${height}-${left}-${right}-${top}-${bottom}`;
  const head: string[] = [];
  head.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" font-family="${escapeXml(FONT)}" font-size="12">`,
  );
  head.push(
    `<defs><clipPath id="${clipId}"><rect x="${left}" y="${top}" width="${right - left}" ` +
      `height="${bottom - top}"/></clipPath></defs>`,
  );
  head.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  if (input.title !== '') {
    head.push(
      `<text class="title" x="${px(width / 2)}" y="26" text-anchor="middle" font-size="16" ` +
        `font-weight="bold">${escapeXml(input.title)}</text>`,
    );
  }
  head.push('<g class="grid" stroke="#e3e3e3" stroke-width="1">');
  for (const t of input.xAxis.ticks) {
    const x = px(sx(t));
    head.push(`<line x1="${x}" y1="${top}" x2="${x}" y2="${bottom}"/>`);
  }
  for (const t of input.yAxis.ticks) {
    const y = px(sy(t));
    head.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}"/>`);
  }
  head.push('</g>');
  head.push('<g fill="#333333" font-size="11">');
  for (const t of input.xAxis.ticks) {
    head.push(
      `<text class="tick-x" x="${px(sx(t))}" y="${bottom + 16}" text-anchor="middle">` +
        `${escapeXml(input.xAxis.label(t))}</text>`,
    );
  }
  for (const t of input.yAxis.ticks) {
    head.push(
      `<text class="tick-y" x="${left - 6}" y="${px(sy(t) + 4)}" text-anchor="end">` +
        `${escapeXml(input.yAxis.label(t))}</text>`,
    );
  }
  head.push('</g>');
  head.push(
    `<text class="x-label" x="${px((left + right) / 2)}" y="${height - 14}" text-anchor="middle">` +
      `${escapeXml(input.xLabel)}</text>`,
  );
  head.push(
    `<text class="y-label" transform="translate(18 ${px((top + bottom) / 2)}) rotate(-90)" ` +
      `text-anchor="middle">${escapeXml(input.yLabel)}</text>`,
  );
  head.push(`<g clip-path="url(#${clipId})" fill="none" stroke-width="1.75" stroke-linejoin="round">`);

  const tail: string[] = ['</g>'];
  tail.push(
    `<rect x="${left}" y="${top}" width="${right - left}" height="${bottom - top}" fill="none" ` +
      `stroke="#888888" stroke-width="1"/>`,
  );
  if (input.names.length > 0) {
    tail.push('<g class="legend">');
    const lx = right + 12;
    input.names.forEach((name, i) => {
      const y = top + 8 + i * 18;
      tail.push(
        `<line x1="${lx}" y1="${y}" x2="${lx + 20}" y2="${y}" stroke-width="2.5" ${seriesStyle(i)}/>` +
          `<text x="${lx + 26}" y="${y + 4}">${escapeXml(name)}</text>`,
      );
    });
    tail.push('</g>');
  }
  tail.push('</svg>');
  return { head, tail, frame: { width, height, left, right, top, bottom, sx, sy, clipId } };
}

/** Finite values (positive ones on a log axis) of a series. */
function usable(values: ArrayLike<number>, log: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (Number.isFinite(v) && (!log || v > 0)) out.push(v);
  }
  return out;
}

/** [smallest, largest] of finite values; [NaN, NaN] for none. */
function rangeOf(values: Iterable<number>): [number, number] {
  let lo = Number.NaN;
  let hi = Number.NaN;
  for (const v of values) {
    if (!(v >= lo)) lo = v;
    if (!(v <= hi)) hi = v;
  }
  return [lo, hi];
}

/**
 * Empirical CDFs, one step line per series, y from 0 to 1. Each line starts at (smallest value, 0)
 * and continues flat at 1 after the largest value.
 */
export function cdfPlot(options: CdfPlotOptions): string {
  const log = options.logX ?? false;
  checkFixed('xMin', options.xMin, log);
  checkFixed('xMax', options.xMax, log);
  const data = options.series.map((s) => usable(s.values, log));
  const [lo, hi] = rangeOf(data.flat());
  const xAxis = log
    ? logAxis(lo, hi, options.xMin, options.xMax)
    : linearAxis(lo, hi, options.xMin, options.xMax);
  const yAxis = linearAxis(0, 1, 0, 1);
  const {
    head,
    tail,
    frame: f,
  } = frame({
    title: options.title,
    xLabel: options.xLabel,
    yLabel: options.yLabel ?? 'Fraction ≤ x',
    xAxis,
    yAxis,
    names: options.series.map((s) => s.name),
    width: options.width,
    height: options.height,
  });
  const maxPoints = Math.max(2, Math.round(2 * (f.right - f.left)));
  // Points far outside the axis are clamped just outside it, so the clip hides them.
  const minX = f.left - 10;
  const maxX = f.right + 10;
  const x = (v: number): string => px(Math.min(maxX, Math.max(minX, f.sx(v))));
  const body: string[] = [];
  data.forEach((values, i) => {
    const points = cdfPoints(values, maxPoints);
    const first = points[0];
    if (first === undefined) return;
    let d = `M${x(first.x)} ${px(f.sy(0))}V${px(f.sy(first.y))}`;
    for (let k = 1; k < points.length; k++) {
      const p = points[k] as XY;
      d += `H${x(p.x)}V${px(f.sy(p.y))}`;
    }
    d += `H${px(maxX)}`;
    body.push(`<path class="series" ${seriesStyle(i)} d="${d}"/>`);
  });
  return [...head, ...body, ...tail].join('\n');
}

/** Line plot of (x, y) series, e.g. time series; non-finite points break the line. */
export function linePlot(options: LinePlotOptions): string {
  checkFixed('xMin', options.xMin, false);
  checkFixed('xMax', options.xMax, false);
  checkFixed('yMin', options.yMin, false);
  checkFixed('yMax', options.yMax, false);
  const finite = (p: XY): boolean => Number.isFinite(p.x) && Number.isFinite(p.y);
  const xs: number[] = [];
  const ys: number[] = [];
  for (const s of options.series) {
    for (const p of s.points) {
      if (finite(p)) {
        xs.push(p.x);
        ys.push(p.y);
      }
    }
  }
  const [xLo, xHi] = rangeOf(xs);
  const [yLo, yHi] = rangeOf(ys);
  const xAxis = linearAxis(xLo, xHi, options.xMin, options.xMax);
  const yAxis = linearAxis(yLo, yHi, options.yMin, options.yMax);
  const {
    head,
    tail,
    frame: f,
  } = frame({
    title: options.title,
    xLabel: options.xLabel,
    yLabel: options.yLabel,
    xAxis,
    yAxis,
    names: options.series.map((s) => s.name),
    width: options.width,
    height: options.height,
  });
  // Keep coordinates bounded so far-out points cannot produce absurd numbers; the clip hides them.
  const limit = 4 * Math.max(f.width, f.height);
  const c = (v: number): string => px(Math.min(limit, Math.max(-limit, v)));
  const body: string[] = [];
  options.series.forEach((s, i) => {
    let d = '';
    const dots: string[] = [];
    let run: XY[] = [];
    const flush = (): void => {
      const only = run[0];
      if (run.length === 1 && only !== undefined) {
        dots.push(`<circle cx="${c(f.sx(only.x))}" cy="${c(f.sy(only.y))}" r="2.5"/>`);
      } else if (run.length > 1) {
        d += run.map((p, k) => `${k === 0 ? 'M' : 'L'}${c(f.sx(p.x))} ${c(f.sy(p.y))}`).join('');
      }
      run = [];
    };
    for (const p of s.points) {
      if (finite(p)) run.push(p);
      else flush();
    }
    flush();
    if (d !== '') body.push(`<path class="series" ${seriesStyle(i)} d="${d}"/>`);
    if (dots.length > 0) {
      const fill = COLOURS[i % COLOURS.length] ?? '#000';
      body.push(`<g fill="${fill}" stroke="none">${dots.join('')}</g>`);
    }
  });
  return [...head, ...body, ...tail].join('\n');
}
