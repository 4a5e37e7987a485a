/**
 * WebKitGTK (Debian `webkit2gtk-driver`: WebKitWebDriver driving its MiniBrowser), the stand-in for
 * Safari's engine, over W3C WebDriver classic (HTTP + JSON, no library: the driver speaks nothing
 * else, and Playwright's WebKit is a patched build that cannot be downloaded here). MiniBrowser
 * needs a display: a private Xvfb is started when DISPLAY is not set. Everything binds to
 * 127.0.0.1.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { stopProcess, tieToParent } from '../lib/process.js';
import { displayMissing, startXvfb } from './xvfb.js';

/** Where Debian's webkit2gtk packages put MiniBrowser (4.1 is bookworm's; 4.0 and 6.0 are other ABIs). */
const MINIBROWSER_CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
  '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.0/MiniBrowser',
  '/usr/lib/x86_64-linux-gnu/webkitgtk-6.0/MiniBrowser',
  '/usr/lib/aarch64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
];
/** How long the driver, Xvfb or one WebDriver command may take. */
const START_TIMEOUT_MS = 15_000;
const COMMAND_TIMEOUT_MS = 30_000;

/** What is missing to run WebKitGTK here, or null when everything is: for a test's skip message. */
export function webkitMissing(): string | null {
  const missing: string[] = [];
  if (spawnSync('which', ['WebKitWebDriver']).status !== 0)
    missing.push('WebKitWebDriver (webkit2gtk-driver)');
  if (minibrowserPath() === null) missing.push('MiniBrowser (webkit2gtk-driver)');
  const display = displayMissing();
  if (display !== null) missing.push(display);
  return missing.length === 0 ? null : `missing ${missing.join(', ')}`;
}

export function minibrowserPath(): string | null {
  const fromEnvironment = process.env.MINIBROWSER_PATH;
  if (fromEnvironment !== undefined && fromEnvironment !== '') return fromEnvironment;
  return MINIBROWSER_CANDIDATES.find((p) => existsSync(p)) ?? null;
}

/** A WebDriver command the driver refused: its W3C error code and message. */
export class WebDriverError extends Error {
  override readonly name = 'WebDriverError';
  constructor(
    readonly command: string,
    readonly code: string,
    message: string,
  ) {
    super(`${command}: ${code}: ${message}`);
  }
}

/** A free TCP port on 127.0.0.1 (closed again at once; the caller binds it next). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => {
        resolve(port);
      });
    });
  });
}

export interface WebKitPage {
  /** The browser's version as the driver reports it. */
  readonly version: string;
  navigate(url: string): Promise<void>;
  /** Runs `script` (a function body; `return` its result, JSON-serialisable) in the page. */
  evaluate<T>(script: string): Promise<T>;
  close(): Promise<void>;
}

/**
 * Starts Xvfb (if needed) and WebKitWebDriver, and opens one MiniBrowser session. `close()` ends
 * the session and stops both.
 */
export async function launchWebKit(): Promise<WebKitPage> {
  const missing = webkitMissing();
  if (missing !== null) throw new Error(`WebKitGTK cannot run here: ${missing}`);
  const children: ChildProcess[] = [];
  const stopAll = async (): Promise<void> => {
    for (const child of children.reverse())
      await stopProcess(child, { graceMs: 2000 }).catch(() => undefined);
  };
  try {
    const xvfb = await startXvfb();
    if (xvfb.process !== null) children.push(xvfb.process);
    const display = xvfb.display;
    const port = await freePort();
    const driver = spawn('WebKitWebDriver', [`--port=${port}`, '--host=local'], {
      stdio: 'ignore',
      env: { ...process.env, DISPLAY: display },
    });
    tieToParent(driver);
    children.push(driver);
    const base = `http://127.0.0.1:${port}`;
    const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(COMMAND_TIMEOUT_MS),
      });
      const json = (await response.json()) as { value?: unknown };
      const value = json.value as { error?: unknown; message?: unknown } | null | undefined;
      if (!response.ok || (typeof value === 'object' && value !== null && typeof value.error === 'string'))
        throw new WebDriverError(
          `${method} ${path}`,
          typeof value?.error === 'string' ? value.error : String(response.status),
          typeof value?.message === 'string' ? value.message : JSON.stringify(json).slice(0, 300),
        );
      return json.value;
    };
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const ready = await call('GET', '/status').then(
        () => true,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline || driver.exitCode !== null) throw new Error('WebKitWebDriver did not start');
      await sleep(100);
    }
    const session = (await call('POST', '/session', {
      capabilities: {
        alwaysMatch: {
          'webkitgtk:browserOptions': { binary: minibrowserPath(), args: ['--automation'] },
          // Navigation returns at DOMContentLoaded: waiting for `load` hung a navigation in 1 of 7 runs.
          pageLoadStrategy: 'eager',
        },
      },
    })) as { sessionId: string; capabilities?: { browserVersion?: string } };
    const id = session.sessionId;
    return {
      version: `WebKitGTK ${session.capabilities?.browserVersion ?? '?'} (MiniBrowser)`,
      async navigate(url) {
        await call('POST', `/session/${id}/url`, { url });
      },
      async evaluate<T>(script: string): Promise<T> {
        return (await call('POST', `/session/${id}/execute/sync`, { script, args: [] })) as T;
      },
      async close() {
        await call('DELETE', `/session/${id}`).catch(() => undefined);
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
