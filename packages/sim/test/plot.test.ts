import { describe, expect, it } from 'vitest';
import { createRandom } from '@chunkycast/engine';
import { cdfPlot, escapeXml, linePlot, niceLogTicks, niceTicks } from '../src/plot.js';

/**
 * A tiny well-formedness checker: one root element, every tag balanced, attributes quoted and
 * unique, no raw '<', '>' or stray '&' in text or attribute values. Throws on the first problem.
 */
function checkWellFormed(xml: string): void {
  const tag =
    /<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[A-Za-z_:][\w.:-]*="(?:[^"<&]|&(?:amp|lt|gt|quot|apos|#\d+);)*")*)\s*(\/?)>/y;
  const entity = /&(?:amp|lt|gt|quot|apos|#\d+|#x[\da-fA-F]+);/y;
  const stack: string[] = [];
  let rootDone = false;
  let i = 0;
  while (i < xml.length) {
    const ch = xml[i]!;
    if (ch === '<') {
      tag.lastIndex = i;
      const m = tag.exec(xml);
      if (m === null) throw new Error(`malformed tag at ${i}: ${xml.slice(i, i + 40)}`);
      const [, close, name, attrs, selfClose] = m as unknown as [string, string, string, string, string];
      if (rootDone) throw new Error(`content after the root element at ${i}`);
      const names = [...attrs.matchAll(/([\w.:-]+)="/g)].map((a) => a[1]);
      if (new Set(names).size !== names.length) throw new Error(`duplicate attribute in <${name}>`);
      if (close === '/') {
        if (selfClose === '/' || attrs !== '') throw new Error(`bad closing tag </${name}>`);
        const open = stack.pop();
        if (open !== name) throw new Error(`</${name}> closes <${open}> at ${i}`);
        if (stack.length === 0) rootDone = true;
      } else if (selfClose === '/') {
        if (stack.length === 0) rootDone = true;
      } else {
        stack.push(name);
      }
      i = tag.lastIndex;
    } else if (ch === '&') {
      entity.lastIndex = i;
      if (entity.exec(xml) === null) throw new Error(`stray & at ${i}`);
      i = entity.lastIndex;
    } else if (ch === '>') {
      throw new Error(`raw > in text at ${i}`);
    } else {
      if (stack.length === 0 && !/\s/.test(ch)) throw new Error(`text outside the root at ${i}`);
      i++;
    }
  }
  if (stack.length > 0) throw new Error(`unclosed <${stack.join('>, <')}>`);
  if (!rootDone) throw new Error('no root element');
}

function checkSvg(svg: string): void {
  expect(svg.startsWith('<svg')).toBe(true);
  checkWellFormed(svg);
  expect(svg).not.toMatch(/NaN|Infinity|undefined/);
}

function tickLabels(svg: string, axis: 'x' | 'y'): string[] {
  return [...svg.matchAll(new RegExp(`<text class="tick-${axis}"[^>]*>([^<]*)</text>`, 'g'))].map(
    (m) => m[1]!,
  );
}

/** Ticks are consecutive multiples of a step that is 1, 2 or 5 × 10^k. */
function expectNice(ticks: readonly number[]): void {
  expect(ticks.length).toBeGreaterThanOrEqual(2);
  const step = ticks[1]! - ticks[0]!;
  const exponent = Math.floor(Math.log10(step) + 1e-9);
  const mantissa = step / 10 ** exponent;
  expect([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6)).toBe(true);
  for (let i = 0; i < ticks.length; i++) {
    const k = ticks[i]! / step;
    expect(Math.abs(k - Math.round(k))).toBeLessThan(1e-6);
    if (i > 0) expect(Math.abs(ticks[i]! - ticks[i - 1]! - step)).toBeLessThan(step * 1e-6);
  }
}

describe('the test’s XML checker', () => {
  it('rejects malformed documents', () => {
    expect(() => {
      checkWellFormed('<svg><g></svg>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg>a & b</svg>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg x="1" x="2"/>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg></svg><svg></svg>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg><text x=1>a</text></svg>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg><g>');
    }).toThrow();
    expect(() => {
      checkWellFormed('<svg a="x &lt; y"><g/>a &amp; b</svg>');
    }).not.toThrow();
  });
});

describe('niceTicks', () => {
  it('gives 1/2/5 × 10^k steps inside the range', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 437)).toEqual([0, 100, 200, 300, 400]);
    expect(niceTicks(-3.7, 12.2)).toEqual([0, 5, 10]);
    expect(niceTicks(0.1, 0.35)).toEqual([0.1, 0.15, 0.2, 0.25, 0.3, 0.35]);
    expect(niceTicks(1, 1)).toEqual([]);
    expect(niceTicks(Number.NaN, 1)).toEqual([]);
    expect(niceLogTicks(1, 1000)).toEqual([1, 10, 100, 1000]);
    expect(niceLogTicks(1, 100)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(niceLogTicks(0.01, 0.1)).toEqual([0.01, 0.02, 0.05, 0.1]);
    expect(niceLogTicks(0, 10)).toEqual([]);
  });

  it('is nice for random ranges', () => {
    const random = createRandom(5);
    for (let k = 0; k < 2000; k++) {
      const scale = 10 ** (random.int(16) - 8);
      const a = (random.nextFloat() * 2 - 1) * scale * 100;
      const b = a + (random.nextFloat() + 0.01) * scale * 10;
      const ticks = niceTicks(a, b);
      expectNice(ticks);
      expect(ticks.length).toBeLessThanOrEqual(11);
      for (const t of ticks) {
        expect(t).toBeGreaterThanOrEqual(a - (b - a) * 1e-6);
        expect(t).toBeLessThanOrEqual(b + (b - a) * 1e-6);
      }
    }
  });
});

describe('escapeXml', () => {
  it('escapes markup and drops characters XML cannot carry', () => {
    expect(escapeXml(`a<b>&"c'`)).toBe('a&lt;b&gt;&amp;&quot;c&apos;');
    expect(escapeXml('x\u0000y\u0007z\tw\n')).toBe('xyz\tw\n');
    expect(escapeXml('lone \ud800 high, lone \udc00 low, pair 😀')).toBe('lone  high, lone  low, pair 😀');
  });
});

describe('cdfPlot', () => {
  const latency = Array.from({ length: 1000 }, (_, i) => 100 + ((i * 37) % 500));
  const svg = cdfPlot({
    title: 'Latency <one-way> & "join"',
    xLabel: 'Latency (ms)',
    series: [
      { name: 'Chunkyspread & co', values: [...latency, Number.NaN] },
      { name: 'tree <single>', values: [Number.NaN, 5, 700, 300, Number.POSITIVE_INFINITY] },
      { name: 'empty', values: [] },
      { name: 'all missing', values: [Number.NaN, Number.NaN] },
    ],
  });

  it('is well-formed SVG with escaped text and no NaN', () => {
    checkSvg(svg);
    expect(svg).toContain('width="720" height="420"');
    expect(svg).toContain('Latency &lt;one-way&gt; &amp; &quot;join&quot;');
    for (const name of ['Chunkyspread &amp; co', 'tree &lt;single&gt;', 'empty', 'all missing']) {
      expect(svg).toContain(`>${name}</text>`);
    }
    expect(svg).toContain('Latency (ms)');
    expect(svg).toContain('Fraction ≤ x');
    // One step line per series with data, in distinct colours.
    const paths = [...svg.matchAll(/<path class="series" stroke="(#[0-9a-f]{6})"/g)].map((m) => m[1]);
    expect(paths).toHaveLength(2);
    expect(new Set(paths).size).toBe(2);
  });

  it('has nice ticks covering the data', () => {
    const xs = tickLabels(svg, 'x').map(Number);
    expectNice(xs);
    expect(xs[0]).toBeLessThanOrEqual(5);
    expect(xs[xs.length - 1]).toBeGreaterThanOrEqual(700);
    expect(tickLabels(svg, 'y')).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8', '1.0']);
  });

  it('supports a logarithmic x axis, skipping non-positive values', () => {
    const log = cdfPlot({
      title: 'Stretch',
      xLabel: 'ratio',
      yLabel: 'CDF',
      logX: true,
      series: [{ name: 's', values: [0, -3, 1.5, 20, 350, 4999, Number.NaN] }],
    });
    checkSvg(log);
    expect(tickLabels(log, 'x')).toEqual(['1', '10', '100', '1000', '10000']);
    expect(() => cdfPlot({ title: '', xLabel: '', series: [], logX: true, xMin: 0 })).toThrow(RangeError);
  });

  it('honours fixed x limits and a custom size', () => {
    const fixed = cdfPlot({
      title: 'Fixed',
      xLabel: 'ms',
      series: [{ name: 'a', values: [1, 50, 2000] }],
      xMin: 0,
      xMax: 1000,
      width: 400,
      height: 300,
    });
    checkSvg(fixed);
    expect(fixed).toContain('width="400" height="300"');
    expect(tickLabels(fixed, 'x').map(Number)).toEqual([0, 200, 400, 600, 800, 1000]);
  });

  it('renders an empty plot', () => {
    const empty = cdfPlot({ title: 'Nothing', xLabel: 'x', series: [] });
    checkSvg(empty);
    expect(empty).not.toContain('class="series"');
    expect(empty).not.toContain('class="legend"');
    expectNice(tickLabels(empty, 'x').map(Number));
  });
});

describe('linePlot', () => {
  it('draws time series, breaking lines at NaN and marking isolated points', () => {
    const svg = linePlot({
      title: 'Delivery ratio over time',
      xLabel: 'time (s)',
      yLabel: 'ratio',
      series: [
        {
          name: 'ratio',
          points: [
            { x: 0, y: 0.5 },
            { x: 1, y: 0.9 },
            { x: 2, y: Number.NaN },
            { x: 3, y: 0.95 },
            { x: 4, y: 0.97 },
            { x: Number.NaN, y: 1 },
            { x: 6, y: 0.99 },
          ],
        },
        { name: 'nothing', points: [{ x: Number.NaN, y: Number.NaN }] },
      ],
    });
    checkSvg(svg);
    const d = /<path class="series"[^>]* d="([^"]*)"/.exec(svg)?.[1] ?? '';
    expect(d.match(/M/g)).toHaveLength(2);
    expect(d.match(/L/g)).toHaveLength(2);
    expect(svg.match(/<circle /g)).toHaveLength(1);
    expect(svg).toContain('>ratio</text>');
    expect(svg).toContain('>nothing</text>');
    const xs = tickLabels(svg, 'x').map(Number);
    const ys = tickLabels(svg, 'y').map(Number);
    expectNice(xs);
    expectNice(ys);
    expect(xs[0]).toBeLessThanOrEqual(0);
    expect(xs[xs.length - 1]).toBeGreaterThanOrEqual(6);
    expect(ys[0]).toBeLessThanOrEqual(0.5);
    expect(ys[ys.length - 1]).toBeGreaterThanOrEqual(0.99);
  });

  it('copes with constant, single-point and empty data', () => {
    const flat = linePlot({
      title: 'Flat',
      xLabel: 't',
      yLabel: 'v',
      series: [
        {
          name: 'flat',
          points: [
            { x: 5, y: 3 },
            { x: 5, y: 3 },
          ],
        },
      ],
    });
    checkSvg(flat);
    expectNice(tickLabels(flat, 'x').map(Number));
    expectNice(tickLabels(flat, 'y').map(Number));
    const none = linePlot({ title: '', xLabel: 't', yLabel: 'v', series: [] });
    checkSvg(none);
    expect(none).not.toContain('class="title"');
  });

  it('uses distinct styles for many series', () => {
    const series = Array.from({ length: 14 }, (_, i) => ({
      name: `peer ${i}`,
      points: [
        { x: 0, y: i },
        { x: 10, y: i * 2 },
      ],
    }));
    const svg = linePlot({ title: 'Many', xLabel: 't', yLabel: 'v', series });
    checkSvg(svg);
    const styles = [
      ...svg.matchAll(/<path class="series" (stroke="[^"]*"(?: stroke-dasharray="[^"]*")?)/g),
    ].map((m) => m[1]);
    expect(styles).toHaveLength(14);
    expect(new Set(styles).size).toBe(14);
  });
});
