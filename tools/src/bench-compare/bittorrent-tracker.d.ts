// The part of bittorrent-tracker (npm, no types of its own) the WebTorrent tracker child uses.
declare module 'bittorrent-tracker' {
  import type { EventEmitter } from 'node:events';
  import type { Server as HttpServer } from 'node:http';

  export interface ServerOptions {
    udp?: boolean;
    http?: boolean;
    ws?: boolean;
    stats?: boolean;
    trustProxy?: boolean;
  }

  export class Server extends EventEmitter {
    constructor(options?: ServerOptions);
    readonly http: HttpServer;
    listen(port: number, hostname: string, onListening?: () => void): void;
    close(onClose?: () => void): void;
  }
}
