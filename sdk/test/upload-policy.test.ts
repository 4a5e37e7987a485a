import { describe, expect, it } from 'vitest';
import {
  LOW_BATTERY_LEVEL,
  UploadPolicy,
  parseUploadMode,
  receiveOnlyReasons,
  type BatteryLike,
  type ReceiveOnlyReason,
  type UploadConditions,
} from '../src/upload-policy.js';

const unknown: UploadConditions = {
  connectionType: null,
  saveData: null,
  batteryCharging: null,
  batteryLevel: null,
};

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
});
