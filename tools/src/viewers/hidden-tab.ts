/**
 * A viewer in a really hidden tab: a headful Debian Chromium on a private X display, with the viewer
 * page in a background tab behind a blank one, driven over raw CDP.
 *
 * Why not Playwright: it enables focus emulation on every page it attaches to, and with it a
 * background tab reports `visibilityState: 'visible'` and runs its timers at full rate (checked
 * with Chromium 156: the same tab under raw CDP is `hidden`, its 10 ms interval firing 4 times in
 * 3 s; disabling the emulation from a second CDP session did not undo it). Headless Chromium shows
 * no tab as hidden either (docs/browsers.md). So this driver launches Chromium itself, without the
 * flags that keep background pages running (KEEP_BACKGROUND_RUNNING_ARGS), and speaks CDP over the
 * browser's WebSocket on 127.0.0.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { stopProcess, tieToParent } from '../lib/process.js';
import { Ring } from '../lib/wait.js';
import {
  KEEP_BACKGROUND_RUNNING_ARGS,
  PAGE_INIT_SCRIPT,
  SNAPSHOT_EXPRESSION,
  chromiumArgs,
  chromiumPath,
  type ViewerHandle,
} from './browser.js';
import type { ViewerSnapshot } from './snapshot.js';
import { displayMissing, startXvfb } from './xvfb.js';

/** How long Chromium may take to open its DevTools endpoint, and one CDP command to answer. */
const START_TIMEOUT_MS = 20_000;
const COMMAND_TIMEOUT_MS = 20_000;
/** Console lines kept, as for Playwright-driven viewers. */
const CONSOLE_LINES_KEPT = 60;

/** A WebSocket message's text (ws hands over a Buffer, a list of them, or an ArrayBuffer). */
function rawText(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(new Uint8Array(data)).toString('utf8');
  return data.toString('utf8');
}

/** A console argument as text: its value when a primitive, else its description. */
function argText(a: { value?: unknown; description?: string }): string {
  const v = a.value;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  // JSON.stringify gives undefined for undefined and functions, whatever its declared type says.
  const json = JSON.stringify(v) as string | undefined;
  return a.description ?? json ?? '';
}

/** A CDP command the browser refused or did not answer. */
export class CdpError extends Error {
  override readonly name = 'CdpError';
}

/** One CDP connection (the browser's endpoint; page sessions are flat, by sessionId). */
class CdpConnection {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly listeners: ((method: string, params: unknown, sessionId: string | undefined) => void)[] =
    [];

  private constructor(private readonly socket: WebSocket) {
    socket.on('message', (data: WebSocket.RawData) => {
      let message: {
        id?: number;
        result?: unknown;
        error?: { message?: string };
        method?: string;
        params?: unknown;
        sessionId?: string;
      };
      try {
        message = JSON.parse(rawText(data)) as typeof message;
      } catch {
        return; // not JSON: nothing a CDP client could do with it
      }
      if (typeof message.id === 'number') {
        const waiter = this.pending.get(message.id);
        if (waiter === undefined) return;
        this.pending.delete(message.id);
        if (message.error !== undefined) waiter.reject(new CdpError(message.error.message ?? 'CDP error'));
        else waiter.resolve(message.result);
      } else if (typeof message.method === 'string') {
        for (const listener of this.listeners) listener(message.method, message.params, message.sessionId);
      }
    });
    socket.on('close', () => {
      for (const waiter of this.pending.values()) waiter.reject(new CdpError('CDP connection closed'));
      this.pending.clear();
    });
  }

  static async open(url: string): Promise<CdpConnection> {
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => {
        resolve();
      });
      socket.once('error', reject);
    });
    return new CdpConnection(socket);
  }

  send<T>(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CdpError(`${method}: no answer in ${COMMAND_TIMEOUT_MS} ms`));
      }, COMMAND_TIMEOUT_MS);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.send(
        JSON.stringify({ id, method, params, ...(sessionId === undefined ? {} : { sessionId }) }),
      );
    });
  }

  on(listener: (method: string, params: unknown, sessionId: string | undefined) => void): void {
    this.listeners.push(listener);
  }

  close(): void {
    this.socket.close();
  }
}

/** A viewer in a hidden tab: a ViewerHandle plus what only this driver can say. */
export interface HiddenTabViewer extends ViewerHandle {
  /** The page's `document.visibilityState` now (`hidden` while the tab stays in the background). */
  visibility(): Promise<string>;
  /**
   * Ticks of a 10 ms interval the page ran in `windowMs`: ~windowMs / 10 at full rate, about one a
   * second when Chromium throttles a hidden page's timers.
   */
  timerTicks(windowMs: number): Promise<number>;
}

/** Whether a headful Chromium can run here (an X display, or Xvfb to start one). */
export function hiddenTabMissing(): string | null {
  const display = displayMissing();
  return display === null ? null : `missing ${display}`;
}

/**
 * Opens `url` in a background tab of its own headful Chromium. The page gets the same init script
 * as Playwright-driven viewers (pageInit: the fake microphone for loopback candidates, playback
 * records), so its snapshots read alike.
 */
export async function openHiddenTabViewer(
  url: string,
  { label }: { label?: string } = {},
): Promise<HiddenTabViewer> {
  const children: ChildProcess[] = [];
  const userDataDir = mkdtempSync(join(tmpdir(), 'chunkycast-hidden-tab-'));
  let cdp: CdpConnection | null = null;
  const stopAll = async (): Promise<void> => {
    cdp?.close();
    for (const child of children.reverse())
      await stopProcess(child, { graceMs: 2000 }).catch(() => undefined);
    rmSync(userDataDir, { recursive: true, force: true });
  };
  try {
    const xvfb = await startXvfb();
    if (xvfb.process !== null) children.push(xvfb.process);
    const args = [
      ...chromiumArgs.filter((a) => !KEEP_BACKGROUND_RUNNING_ARGS.includes(a)),
      `--user-data-dir=${userDataDir}`,
      // Port 0: Chromium picks a free one and writes it to DevToolsActivePort (no race for a port).
      '--remote-debugging-address=127.0.0.1',
      '--remote-debugging-port=0',
      '--no-default-browser-check',
      '--password-store=basic',
      '--window-size=800,600',
      // The tab in front: a blank page. The viewer's tab is opened behind it below.
      'about:blank',
    ];
    const chromium = spawn(chromiumPath(), args, {
      stdio: 'ignore',
      env: { ...process.env, DISPLAY: xvfb.display },
    });
    tieToParent(chromium);
    children.push(chromium); // stopAll stops the children last in first out: Chromium before Xvfb
    const portFile = join(userDataDir, 'DevToolsActivePort');
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!existsSync(portFile) || readFileSync(portFile, 'utf8').split('\n').length < 2) {
      if (Date.now() > deadline || chromium.exitCode !== null)
        throw new Error(
          `Chromium did not open its DevTools endpoint (exit code ${String(chromium.exitCode)})`,
        );
      await sleep(50);
    }
    const [port, path] = readFileSync(portFile, 'utf8').split('\n');
    const connection = await CdpConnection.open(`ws://127.0.0.1:${port ?? ''}${path ?? ''}`);
    cdp = connection;
    const origin = new URL(url).origin;
    await connection.send('Browser.grantPermissions', {
      origin,
      permissions: ['audioCapture', 'videoCapture'],
    });
    const { targetId } = await connection.send<{ targetId: string }>('Target.createTarget', {
      url: 'about:blank',
      background: true,
      newWindow: false,
    });
    const { sessionId } = await connection.send<{ sessionId: string }>('Target.attachToTarget', {
      targetId,
      flatten: true,
    });
    const console = new Ring(CONSOLE_LINES_KEPT);
    connection.on((method, params, from) => {
      if (from !== sessionId) return;
      if (method === 'Runtime.consoleAPICalled') {
        const p = params as { type?: string; args?: { value?: unknown; description?: string }[] };
        if (p.type === 'error' || p.type === 'warning')
          console.push(`[${p.type}] ${(p.args ?? []).map(argText).join(' ')}`);
      } else if (method === 'Runtime.exceptionThrown') {
        const p = params as { exceptionDetails?: { text?: string; exception?: { description?: string } } };
        console.push(
          `[pageerror] ${p.exceptionDetails?.exception?.description ?? p.exceptionDetails?.text ?? '?'}`,
        );
      }
    });
    await connection.send('Runtime.enable', {}, sessionId);
    await connection.send('Page.enable', {}, sessionId);
    await connection.send('Page.addScriptToEvaluateOnNewDocument', { source: PAGE_INIT_SCRIPT }, sessionId);
    const evaluate = async <T>(expression: string): Promise<T> => {
      const r = await connection.send<{ result?: { value?: unknown }; exceptionDetails?: { text?: string } }>(
        'Runtime.evaluate',
        { expression, returnByValue: true, awaitPromise: true },
        sessionId,
      );
      if (r.exceptionDetails !== undefined)
        throw new CdpError(`in the page: ${r.exceptionDetails.text ?? '?'}`);
      return r.result?.value as T;
    };
    const openedAt = Date.now();
    const navigated = await connection.send<{ errorText?: string }>('Page.navigate', { url }, sessionId);
    if (navigated.errorText !== undefined && navigated.errorText !== '')
      throw new Error(`navigation to ${url} failed: ${navigated.errorText}`);
    const viewer: HiddenTabViewer = {
      label: label ?? url,
      url,
      openedAt,
      console,
      closed: false,
      stats: () => evaluate<ViewerSnapshot>(SNAPSHOT_EXPRESSION),
      visibility: () => evaluate<string>('document.visibilityState'),
      timerTicks: (windowMs) =>
        evaluate<number>(
          `new Promise((resolve) => { let n = 0; const id = setInterval(() => { n++; }, 10); setTimeout(() => { clearInterval(id); resolve(n); }, ${String(windowMs)}); })`,
        ),
      async close() {
        viewer.closed = true;
        await connection.send('Browser.close').catch(() => undefined);
        await stopAll();
      },
    };
    return viewer;
  } catch (error) {
    await stopAll();
    throw error;
  }
}
