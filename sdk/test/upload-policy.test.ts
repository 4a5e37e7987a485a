import { describe, expect, it } from 'vitest';
import {
  LOW_BATTERY_LEVEL,
  THROTTLED_LATE_MS,
  UploadPolicy,
  parseUploadMode,
  receiveOnlyReasons,
  type BatteryLike,
  type PageLifecycleLike,
  type PolicyClock,
  type ReceiveOnlyReason,
  type UploadConditions,
} from '../src/upload-policy.js';

const unknown: UploadConditions = {
  connectionType: null,
  saveData: null,
  batteryCharging: null,
  batteryLevel: null,
  frozen: false,
  throttled: false,
};

/** A Document stand-in: its visibility is set by the test before it dispatches the event. */
class FakePage extends EventTarget implements PageLifecycleLike {
  visibilityState: 'visible' | 'hidden' = 'visible';
  show(state: 'visible' | 'hidden'): void {
    this.visibilityState = state;
    this.dispatchEvent(new Event('visibilitychange'));
  }
}

/**
 * Timers driven by hand. `lateMs` makes the next timers fire that much after they are due, as a
 * browser throttling a hidden page does.
 */
class ManualClock implements PolicyClock {
  private t = 0;
  private nextId = 1;
  readonly timers = new Map<number, { at: number; callback: () => void }>();
  lateMs = 0;
  now(): number {
    return this.t;
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + ms + this.lateMs, callback });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  /** Run every timer due up to `untilMs`, in time order. */
  advanceTo(untilMs: number): void {
    for (;;) {
      let first: [number, { at: number; callback: () => void }] | null = null;
      for (const entry of this.timers) if (first === null || entry[1].at < first[1].at) first = entry;
      if (first === null || first[1].at > untilMs) break;
      this.timers.delete(first[0]);
      this.t = first[1].at;
      first[1].callback();
    }
    this.t = untilMs;
  }
}

/** A NetworkInformation stand-in whose fields a test changes before dispatching `change`. */
class FakeConnection extends EventTarget {
  type: string | undefined = 'wifi';
  saveData: boolean | undefined = false;
}

/** A BatteryManager stand-in. */
class FakeBattery extends EventTarget implements BatteryLike {
  charging = true;
  level = 1;
}

describe('receiveOnlyReasons', () => {
  it('off never uploads and on always does', () => {
    expect(receiveOnlyReasons('off', unknown)).toEqual(['upload-off']);
    expect(
      receiveOnlyReasons('on', {
        connectionType: 'cellular',
        saveData: true,
        batteryCharging: false,
        batteryLevel: 0.01,
      }),
    ).toEqual([]);
  });
  it('auto stops on cellular, Save-Data, and a discharging battery below 20%', () => {
    expect(receiveOnlyReasons('auto', unknown)).toEqual([]);
    expect(receiveOnlyReasons('auto', { ...unknown, connectionType: 'wifi', saveData: false })).toEqual([]);
    expect(receiveOnlyReasons('auto', { ...unknown, connectionType: 'cellular' })).toEqual(['cellular']);
    expect(receiveOnlyReasons('auto', { ...unknown, saveData: true })).toEqual(['save-data']);
    const low = { ...unknown, batteryCharging: false, batteryLevel: LOW_BATTERY_LEVEL - 0.01 };
    expect(receiveOnlyReasons('auto', low)).toEqual(['battery-low']);
    // At the mark, charging, or with the level unknown: it uploads.
    expect(receiveOnlyReasons('auto', { ...low, batteryLevel: LOW_BATTERY_LEVEL })).toEqual([]);
    expect(receiveOnlyReasons('auto', { ...low, batteryCharging: true })).toEqual([]);
    expect(receiveOnlyReasons('auto', { ...low, batteryLevel: null })).toEqual([]);
  });
});

describe('parseUploadMode', () => {
  it('reads the three modes, absent as auto, and anything else as off with a message', () => {
    expect(parseUploadMode(undefined)).toEqual({ mode: 'auto', error: null });
    expect(parseUploadMode('')).toEqual({ mode: 'auto', error: null });
    expect(parseUploadMode(' ON ')).toEqual({ mode: 'on', error: null });
    expect(parseUploadMode('off')).toEqual({ mode: 'off', error: null });
    const bad = parseUploadMode('yes');
    expect(bad.mode).toBe('off');
    expect(bad.error).toMatch(/upload="yes" must be auto, on or off/);
    expect(parseUploadMode(1).mode).toBe('off');
  });
});

describe('UploadPolicy', () => {
  it('follows the connection and the battery in auto mode, reporting each change once', async () => {
    const connection = new FakeConnection();
    const battery = new FakeBattery();
    const changes: (readonly ReceiveOnlyReason[])[] = [];
    const policy = new UploadPolicy(
      'auto',
      { connection, getBattery: () => Promise.resolve(battery) },
      (reasons) => changes.push(reasons),
    );
    expect(policy.receiveOnly).toBe(false);
    connection.type = 'cellular';
    connection.dispatchEvent(new Event('change'));
    expect(policy.reasons).toEqual(['cellular']);
    connection.dispatchEvent(new Event('change')); // nothing new: not reported again
    await Promise.resolve(); // the battery promise settles
    battery.charging = false;
    battery.level = 0.1;
    battery.dispatchEvent(new Event('levelchange'));
    expect(policy.reasons).toEqual(['cellular', 'battery-low']);
    connection.type = 'wifi';
    connection.dispatchEvent(new Event('change'));
    battery.charging = true;
    battery.dispatchEvent(new Event('chargingchange'));
    expect(policy.receiveOnly).toBe(false);
    expect(changes).toEqual([['cellular'], ['cellular', 'battery-low'], ['battery-low'], []]);
    policy.close();
    connection.type = 'cellular';
    connection.dispatchEvent(new Event('change'));
    expect(changes).toHaveLength(4); // closed: no longer listening
  });

  it('reads a battery that is already low when it resolves', async () => {
    const battery = new FakeBattery();
    battery.charging = false;
    battery.level = 0.05;
    const changes: (readonly ReceiveOnlyReason[])[] = [];
    const policy = new UploadPolicy('auto', { getBattery: () => Promise.resolve(battery) }, (r) =>
      changes.push(r),
    );
    expect(policy.receiveOnly).toBe(false); // unknown until getBattery resolves
    await Promise.resolve();
    await Promise.resolve();
    expect(policy.reasons).toEqual(['battery-low']);
    expect(changes).toEqual([['battery-low']]);
  });

  it('uploads where the browser has neither API, or refuses the battery', async () => {
    const policy = new UploadPolicy('auto', { getBattery: () => Promise.reject(new Error('denied')) }, () => {
      throw new Error('no change expected');
    });
    await Promise.resolve();
    await Promise.resolve();
    expect(policy.receiveOnly).toBe(false);
    expect(new UploadPolicy('auto', {}, () => undefined).conditions).toEqual(unknown);
  });

  it('ignores the platform in on and off modes', () => {
    const connection = new FakeConnection();
    connection.type = 'cellular';
    expect(new UploadPolicy('on', { connection }, () => undefined).receiveOnly).toBe(false);
    expect(new UploadPolicy('off', {}, () => undefined).reasons).toEqual(['upload-off']);
  });

  it('a frozen page is receive-only until it resumes, in auto and on modes, not asked in off', () => {
    for (const mode of ['auto', 'on'] as const) {
      const page = new FakePage();
      const changes: (readonly ReceiveOnlyReason[])[] = [];
      const policy = new UploadPolicy(mode, { page }, (r) => changes.push(r));
      page.dispatchEvent(new Event('freeze'));
      expect(policy.reasons).toEqual(['frozen']);
      page.dispatchEvent(new Event('resume'));
      expect(changes).toEqual([['frozen'], []]);
      policy.close();
      page.dispatchEvent(new Event('freeze'));
      expect(changes).toHaveLength(2); // closed: no longer listening
    }
    const page = new FakePage();
    const off = new UploadPolicy('off', { page }, () => {
      throw new Error('no change expected');
    });
    page.dispatchEvent(new Event('freeze'));
    expect(off.reasons).toEqual(['upload-off']);
  });

  it('a hidden page whose probe timer runs late is throttled until it is visible again', () => {
    const page = new FakePage();
    const clock = new ManualClock();
    const changes: (readonly ReceiveOnlyReason[])[] = [];
    const policy = new UploadPolicy('auto', { page }, (r) => changes.push(r), clock);
    // Visible: nothing is probed.
    expect(clock.timers.size).toBe(0);
    page.show('hidden');
    expect(clock.timers.size).toBe(1);
    // Hidden, with timers aligned to whole seconds (as Chromium's for a page with a data channel).
    clock.lateMs = 999;
    clock.advanceTo(20_000);
    expect(policy.receiveOnly).toBe(false);
    // Throttled harder: a probe lands THROTTLED_LATE_MS late.
    clock.lateMs = THROTTLED_LATE_MS;
    clock.advanceTo(30_000);
    expect(policy.reasons).toEqual(['throttled']);
    page.show('visible');
    expect(policy.reasons).toEqual([]);
    expect(clock.timers.size).toBe(0); // the probe stops with the page visible
    expect(changes).toEqual([['throttled'], []]);
    // Hidden again: throttling has to show again before it counts.
    clock.lateMs = 0;
    page.show('hidden');
    clock.advanceTo(40_000);
    expect(policy.receiveOnly).toBe(false);
    policy.close();
    expect(clock.timers.size).toBe(0);
  });

  it('a page hidden from the start is probed from the start; without a clock it is never throttled', () => {
    const page = new FakePage();
    page.visibilityState = 'hidden';
    const clock = new ManualClock();
    clock.lateMs = 5000;
    const policy = new UploadPolicy('on', { page }, () => undefined, clock);
    clock.advanceTo(10_000);
    expect(policy.reasons).toEqual(['throttled']);
    const unclocked = new UploadPolicy('auto', { page }, () => undefined);
    page.show('hidden');
    expect(unclocked.receiveOnly).toBe(false);
  });
});
