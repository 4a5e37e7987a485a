// The parts of @thaunknown/simple-peer (lite: data channels only) that the mesh host uses. The
// package ships no types.
declare module '@thaunknown/simple-peer/lite.js' {
  export interface SimplePeerOptions {
    initiator?: boolean;
    trickle?: boolean;
    config?: Record<string, unknown>;
    channelConfig?: RTCDataChannelInit;
    channelName?: string;
    iceCompleteTimeout?: number;
  }
  export default class SimplePeer {
    constructor(options?: SimplePeerOptions);
    readonly connected: boolean;
    readonly destroyed: boolean;
    /** The data channel's bufferedAmount (0 before it exists). */
    readonly bufferSize: number;
    signal(data: unknown): void;
    send(chunk: Uint8Array): void;
    destroy(error?: Error): void;
    on(event: 'signal', listener: (data: unknown) => void): this;
    on(event: 'connect' | 'close', listener: () => void): this;
    on(event: 'data', listener: (data: Uint8Array) => void): this;
    on(event: 'error', listener: (error: Error & { code?: string }) => void): this;
    removeAllListeners(): this;
  }
}
