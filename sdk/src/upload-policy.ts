/**
 * Whether this viewer shares its upload (`upload="auto|on|off"`, issue 15). A phone on a metered
 * or slow link, a user who asked to save data, or a laptop about to run out of battery should not
 * pay for other viewers' streams: in `auto` mode such a viewer is receive-only (load 0: it takes
 * the stream from its parents and forwards nothing), and it shares again once the reason is gone.
 *
 * The signals are the browser's own, where it has them:
 * - Network Information (`navigator.connection`): `type === 'cellular'`, or `saveData`. Chromium
 *   on Android has both; desktop Chromium has `saveData` only; Firefox and Safari have neither.
 * - Battery Status (`navigator.getBattery()`): discharging below LOW_BATTERY_LEVEL. Chromium has
 *   it; Firefox and Safari do not.
 * A browser without either API uploads in `auto` mode, as it would with `on`.
 */

export type UploadMode = 'auto' | 'on' | 'off';
export const UPLOAD_MODES: readonly UploadMode[] = ['auto', 'on', 'off'];

/** Why a viewer is receive-only: `off` was asked for, or what `auto` saw. */
export type ReceiveOnlyReason = 'upload-off' | 'cellular' | 'save-data' | 'battery-low';

/** Below this battery level (0‥1), discharging, `auto` stops uploading: the usual low-battery mark. */
export const LOW_BATTERY_LEVEL = 0.2;

/** The parts of NetworkInformation read here (all optional: browsers differ). */
export interface ConnectionLike extends EventTarget {
  readonly type?: string;
  readonly saveData?: boolean;
}

/** The parts of BatteryManager read here. */
export interface BatteryLike extends EventTarget {
  readonly charging: boolean;
  readonly level: number;
}

/** Where the signals come from: the page's `navigator`, or a test's stand-in. */
export interface UploadPlatform {
  readonly connection?: ConnectionLike;
  getBattery?(): Promise<BatteryLike>;
}

/** What the platform says now; null where it has no such API (or the battery is not known yet). */
export interface UploadConditions {
  readonly connectionType: string | null;
  readonly saveData: boolean | null;
  readonly batteryCharging: boolean | null;
  readonly batteryLevel: number | null;
}

/** Why the viewer is receive-only under `mode` and `conditions`; empty: it uploads. */
export function receiveOnlyReasons(mode: UploadMode, conditions: UploadConditions): ReceiveOnlyReason[] {
  if (mode === 'off') return ['upload-off'];
  if (mode === 'on') return [];
  const reasons: ReceiveOnlyReason[] = [];
  if (conditions.connectionType === 'cellular') reasons.push('cellular');
  if (conditions.saveData === true) reasons.push('save-data');
  if (
    conditions.batteryCharging === false &&
    conditions.batteryLevel !== null &&
    conditions.batteryLevel < LOW_BATTERY_LEVEL
  )
    reasons.push('battery-low');
  return reasons;
}

/**
 * Reads `upload` as given by a host (attribute or option, possibly unchecked JSON): undefined or
 * empty means `auto`. Anything else is an error message and `off`: a viewer who wrote something must
 * not upload because of a typo.
 */
export function parseUploadMode(raw: unknown): { mode: UploadMode; error: string | null } {
  if (raw === undefined || raw === null || raw === '') return { mode: 'auto', error: null };
  const value = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
  const mode = UPLOAD_MODES.find((m) => m === value);
  if (mode !== undefined) return { mode, error: null };
  const shown = typeof raw === 'string' ? raw : JSON.stringify(raw);
  return { mode: 'off', error: `upload="${shown}" must be auto, on or off; not uploading` };
}

const CONNECTION_EVENTS = ['change', 'typechange'] as const;
const BATTERY_EVENTS = ['chargingchange', 'levelchange'] as const;

/**
 * Watches the platform in `auto` mode and calls `onChange` with the new reasons whenever the
 * decision changes (not on every event: a battery reports each percent).
 */
export class UploadPolicy {
  private connectionType: string | null = null;
  private saveData: boolean | null = null;
  private batteryCharging: boolean | null = null;
  private batteryLevel: number | null = null;
  private current: readonly ReceiveOnlyReason[];
  private closed = false;
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    readonly mode: UploadMode,
    platform: UploadPlatform,
    private readonly onChange: (reasons: readonly ReceiveOnlyReason[]) => void,
  ) {
    if (mode === 'auto') {
      const connection = platform.connection;
      if (connection !== undefined) {
        const read = (): void => {
          this.connectionType = typeof connection.type === 'string' ? connection.type : null;
          this.saveData = typeof connection.saveData === 'boolean' ? connection.saveData : null;
        };
        read();
        this.listen(connection, CONNECTION_EVENTS, read);
      }
      if (typeof platform.getBattery === 'function')
        platform.getBattery().then(
          (battery) => {
            if (this.closed) return;
            const read = (): void => {
              this.batteryCharging = typeof battery.charging === 'boolean' ? battery.charging : null;
              this.batteryLevel =
                typeof battery.level === 'number' && Number.isFinite(battery.level) ? battery.level : null;
            };
            read();
            this.listen(battery, BATTERY_EVENTS, read);
            this.update();
          },
          () => undefined, // refused (a permissions policy): no battery signal, as without the API
        );
    }
    this.current = receiveOnlyReasons(mode, this.conditions);
  }

  /** Why the viewer is receive-only now; empty: it uploads. */
  get reasons(): readonly ReceiveOnlyReason[] {
    return this.current;
  }

  get receiveOnly(): boolean {
    return this.current.length > 0;
  }

  get conditions(): UploadConditions {
    return {
      connectionType: this.connectionType,
      saveData: this.saveData,
      batteryCharging: this.batteryCharging,
      batteryLevel: this.batteryLevel,
    };
  }

  close(): void {
    this.closed = true;
    for (const off of this.unsubscribe.splice(0)) off();
  }

  private listen(target: EventTarget, events: readonly string[], read: () => void): void {
    const handler = (): void => {
      read();
      this.update();
    };
    for (const event of events) target.addEventListener(event, handler);
    this.unsubscribe.push(() => {
      for (const event of events) target.removeEventListener(event, handler);
    });
  }

  private update(): void {
    if (this.closed) return;
    const next = receiveOnlyReasons(this.mode, this.conditions);
    if (next.join() === this.current.join()) return;
    this.current = next;
    this.onChange(next);
  }
}
