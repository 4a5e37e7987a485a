/**
 * A private X display for browsers that need one (WebKitGTK's MiniBrowser; a headful Chromium whose
 * background tab is really hidden): Xvfb on a display number nobody uses, or the DISPLAY already set.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tieToParent } from '../lib/process.js';

/** How long Xvfb may take to open its socket. */
const XVFB_START_TIMEOUT_MS = 15_000;
/** The first display number tried: well above what a desktop or CI runner uses. */
const FIRST_DISPLAY_NUMBER = 90;

export interface Display {
  /** `:N`, for the DISPLAY of the browser's process. */
  readonly display: string;
  /** The Xvfb started for it, or null when DISPLAY was already set (the caller stops it). */
  readonly process: ChildProcess | null;
}

/** What is missing for a private display (null when DISPLAY is set or Xvfb is installed). */
export function displayMissing(): string | null {
  if (process.env.DISPLAY !== undefined && process.env.DISPLAY !== '') return null;
  return spawnSync('which', ['Xvfb']).status === 0 ? null : 'Xvfb (xvfb)';
}

/** DISPLAY when set; otherwise starts Xvfb on a free display (no TCP listener) and waits for its socket. */
export async function startXvfb(): Promise<Display> {
  const existing = process.env.DISPLAY;
  if (existing !== undefined && existing !== '') return { display: existing, process: null };
  // X's sockets live in /tmp/.X11-unix/X<n>, its locks in /tmp/.X<n>-lock.
  let n = FIRST_DISPLAY_NUMBER;
  while (existsSync(`/tmp/.X11-unix/X${n}`) || existsSync(`/tmp/.X${n}-lock`)) n++;
  const display = `:${n}`;
  const xvfb = spawn('Xvfb', [display, '-screen', '0', '1024x768x24', '-nolisten', 'tcp'], {
    stdio: 'ignore',
  });
  tieToParent(xvfb);
  const deadline = Date.now() + XVFB_START_TIMEOUT_MS;
  while (!existsSync(`/tmp/.X11-unix/X${n}`)) {
    if (Date.now() > deadline || xvfb.exitCode !== null) {
      xvfb.kill('SIGKILL');
      throw new Error(`Xvfb ${display} did not start`);
    }
    await sleep(50);
  }
  return { display, process: xvfb };
}
