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
 *
 * Whatever the mode, a viewer that cannot relay on time stops relaying (reasons `frozen` and
 * `throttled`), and its session hands its children over at once rather than through the load
 * phase, which runs on the timers that are stalled:
 * - `frozen`: the page is being frozen (Page Lifecycle `freeze`, Chromium; until `resume`). A frozen
 *   page runs nothing, so the hand-over must happen in the event itself.
 * - `throttled`: the page is hidden and a probe timer, chained every PROBE_INTERVAL_MS while hidden,
 *   ran THROTTLED_LATE_MS or more late (until the page is visible again). Chromium only aligns a
 *   hidden page's timers to whole seconds while it has an open data channel (its 1-minute
 *   "intensive" throttling exempts WebRTC pages), and data is forwarded on arrival, not on a
 *   timer, so a hidden Chromium viewer keeps relaying; a browser that throttles harder, or
 *   suspends hidden pages, trips the probe before the viewer's neighbours time it out.
 */

export type UploadMode = 'auto' | 'on' | 'off';
export const UPLOAD_MODES: readonly UploadMode[] = ['auto', 'on', 'off'];

/** Why a viewer is receive-only: `off` was asked for, what `auto` saw, or a page that cannot relay on time. */
export type ReceiveOnlyReason =
  'upload-off' | 'cellular' | 'save-data' | 'battery-low' | 'frozen' | 'throttled';

/** Reasons that mean the page cannot relay on time: its children must leave at once. */
export const CANNOT_RELAY_REASONS: readonly ReceiveOnlyReason[] = ['frozen', 'throttled'];

/** Below this battery level (0‥1), discharging, `auto` stops uploading: the usual low-battery mark. */
export const LOW_BATTERY_LEVEL = 0.2;

/** While the page is hidden, a probe timer is chained this often to see how late timers run. */
export const PROBE_INTERVAL_MS = 1000;
/**
 * A probe this late (ms) means the page's timers are throttled beyond the whole-second alignment
 * every browser applies to hidden pages: half the engine's failureTimeoutMs (4 s), so that the
 * viewer's heartbeats would soon leave its neighbours thinking it failed.
 */
export const THROTTLED_LATE_MS = 2000;

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

/** The parts of Document read here: its visibility, and the events `visibilitychange`, `freeze`, `resume`. */
export interface PageLifecycleLike extends EventTarget {
  readonly visibilityState: string;
}

/** Time and timers for the probe (the session's clock). */
export interface PolicyClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Where the signals come from: the page's `navigator` and `document`, or a test's stand-in. */
export interface UploadPlatform {
  readonly connection?: ConnectionLike;
  getBattery?(): Promise<BatteryLike>;
  /** The page's document: without one (Node), the viewer is never frozen or throttled. */
  readonly page?: PageLifecycleLike;
}

/** The page's `navigator` and `document`, where there are (none in Node). */
export function browserUploadPlatform(): UploadPlatform {
  const nav =
    typeof navigator === 'undefined'
      ? undefined
      : (navigator as unknown as { connection?: ConnectionLike; getBattery?: () => Promise<BatteryLike> });
  const connection = nav?.connection;
  const getBattery = nav?.getBattery;
  return {
    ...(connection !== undefined ? { connection } : {}),
    ...(typeof getBattery === 'function' ? { getBattery: () => getBattery.call(nav) } : {}),
    ...(typeof document === 'undefined' ? {} : { page: document }),
  };
}

/** What the platform says now; null where it has no such API (or the battery is not known yet). */
export interface UploadConditions {
  readonly connectionType: string | null;
  readonly saveData: boolean | null;
  readonly batteryCharging: boolean | null;
  readonly batteryLevel: number | null;
  /** The page is frozen (between `freeze` and `resume`); absent: false. */
  readonly frozen?: boolean;
  /** The page is hidden and its timers ran THROTTLED_LATE_MS late; absent: false. */
  readonly throttled?: boolean;
}

/** Why the viewer is receive-only under `mode` and `conditions`; empty: it uploads. */
export function receiveOnlyReasons(mode: UploadMode, conditions: UploadConditions): ReceiveOnlyReason[] {
  if (mode === 'off') return ['upload-off'];
  const reasons: ReceiveOnlyReason[] = [];
  if (conditions.frozen === true) reasons.push('frozen');
  if (conditions.throttled === true) reasons.push('throttled');
  if (mode === 'on') return reasons;
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

const PAGE_EVENTS = ['visibilitychange', 'freeze', 'resume'] as const;

/**
 * Watches the platform (the connection and battery in `auto` mode; the page's lifecycle unless
 * `off`) and calls `onChange` with the new reasons whenever the decision changes (not on every
 * event: a battery reports each percent).
 */
export class UploadPolicy {
  private connectionType: string | null = null;
  private saveData: boolean | null = null;
  private batteryCharging: boolean | null = null;
  private batteryLevel: number | null = null;
  private frozen = false;
  private throttled = false;
  /** The probe timer while the page is hidden (its handle boxed: a handle may be any value). */
  private probe: { readonly handle: unknown } | null = null;
  private current: readonly ReceiveOnlyReason[];
  private closed = false;
  private readonly unsubscribe: (() => void)[] = [];

  /** `clock`: for the throttling probe (without one, throttling is not watched). */
  constructor(
    readonly mode: UploadMode,
    platform: UploadPlatform,
    private readonly onChange: (reasons: readonly ReceiveOnlyReason[]) => void,
    private readonly clock: PolicyClock | null = null,
  ) {
    const page = platform.page;
    if (mode !== 'off' && page !== undefined) {
      this.listen(page, PAGE_EVENTS, (event) => {
        if (event.type === 'freeze') this.frozen = true;
        else if (event.type === 'resume') this.frozen = false;
        this.watchTimers(page);
      });
      this.watchTimers(page);
    }
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
      frozen: this.frozen,
      throttled: this.throttled,
    };
  }

  close(): void {
    this.closed = true;
    this.stopProbe();
    for (const off of this.unsubscribe.splice(0)) off();
  }

  /**
   * While the page is hidden, chain a probe timer and time it: a page visible again is not
   * throttled. A chained timer is what a browser's harshest throttling targets (Chromium's counts
   * the chain), as the session's own timers are.
   */
  private watchTimers(page: PageLifecycleLike): void {
    const clock = this.clock;
    if (clock === null || this.closed) return;
    if (page.visibilityState !== 'hidden') {
      this.stopProbe();
      this.throttled = false;
      return;
    }
    if (this.probe !== null) return;
    const arm = (): void => {
      const dueAt = clock.now() + PROBE_INTERVAL_MS;
      const handle = clock.setTimeout(() => {
        this.probe = null;
        if (this.closed || page.visibilityState !== 'hidden') return;
        if (clock.now() - dueAt >= THROTTLED_LATE_MS && !this.throttled) {
          this.throttled = true;
          this.update();
        }
        arm();
      }, PROBE_INTERVAL_MS);
      this.probe = { handle };
    };
    arm();
  }

  private stopProbe(): void {
    if (this.probe === null) return;
    this.clock?.clearTimeout(this.probe.handle);
    this.probe = null;
  }

  private listen(target: EventTarget, events: readonly string[], read: (event: Event) => void): void {
    const handler = (event: Event): void => {
      read(event);
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
