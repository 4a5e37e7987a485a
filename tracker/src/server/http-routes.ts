/**
 * The tracker's HTTP routes: CORS preflight, /metrics, /healthz, the /debug/* JSON views behind the
 * broadcaster key, the HLS origin under /live/, and optionally the demo's static files.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { STREAM_ID_PATTERN } from '@chunkycast/wire';
import { sendStatus, serveStatic, type Origin } from '../origin.js';
import type { TrackerContext } from './context.js';
import { sha256 } from './digest.js';
import type { TrackerViews } from './views.js';

/** Browsers may cache a CORS preflight answer this long (seconds). */
const CORS_MAX_AGE_S = 600;
const READ_ONLY = 'GET, HEAD';

export interface HttpRouteSettings {
  /** Digest of the broadcaster key (see `sha256`), which /debug/* needs. */
  readonly keyDigest: Buffer;
  readonly origin: Origin | null;
  readonly staticDir: string | null;
  /** The Prometheus text and its content type. */
  readonly prometheus: () => Promise<{ text: string; contentType: string }>;
}

export class HttpRoutes {
  /** The read-only JSON views over HTTP (GET or HEAD), by exact path; /debug/* ones need the key. */
  private readonly jsonViews: Readonly<Record<string, (() => unknown) | undefined>>;

  constructor(
    private readonly context: TrackerContext,
    private readonly views: TrackerViews,
    private readonly settings: HttpRouteSettings,
  ) {
    this.jsonViews = {
      '/healthz': () => views.health(),
      '/debug/origin': () => views.originStats(),
      '/debug/metrics': () => views.metrics(),
      '/debug/swarms': () => views.swarms(),
    };
  }

  /** The server's request listener: a fault answers 500 (or cuts the response) and is logged. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    this.route(req, res).catch((e: unknown) => {
      this.context.log('error', 'http handler fault', { url: req.url, error: e });
      if (!res.headersSent) sendStatus(res, 500, 'internal error');
      else res.destroy();
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rawPath = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    // Pages on other origins (a dev server, the broadcaster page) read the media and debug JSON.
    res.setHeader('Access-Control-Allow-Origin', '*');
    if (method === 'OPTIONS') {
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'GET, HEAD, POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Range, X-Chunkycast-Role, Authorization',
        'Access-Control-Max-Age': String(CORS_MAX_AGE_S),
      });
      res.end();
      return;
    }
    res.setHeader('Access-Control-Expose-Headers', 'Content-Length, Content-Range, Accept-Ranges');
    const readOnly = method === 'GET' || method === 'HEAD';

    if (rawPath === '/debug' || rawPath.startsWith('/debug/')) {
      if (!this.authorized(req)) {
        this.context.counters.debugAuthFailures++;
        this.context.log('debug', 'debug request without the broadcaster key', { url: rawPath });
        res.setHeader('WWW-Authenticate', 'Bearer realm="chunkycast-tracker"');
        json(res, 401, {
          error: 'unauthorized',
          message: '/debug/* needs the header "Authorization: Bearer <broadcaster key>"',
        });
        return;
      }
      if (rawPath === '/debug/origin/reset') {
        if (method !== 'POST') {
          methodNotAllowed(res, 'POST');
          return;
        }
        this.views.resetOriginStats();
        this.context.log('debug', 'origin counters reset');
        json(res, 200, { ok: true });
        return;
      }
    }
    if (rawPath === '/metrics') {
      if (!readOnly) {
        methodNotAllowed(res, READ_ONLY);
        return;
      }
      const { text, contentType } = await this.settings.prometheus();
      res.writeHead(200, {
        'Content-Type': contentType,
        'Content-Length': Buffer.byteLength(text),
        'Cache-Control': 'no-store',
      });
      res.end(text);
      return;
    }
    // Read-only JSON views: one method check, one answer each.
    const view = this.jsonViews[rawPath];
    if (view !== undefined) {
      if (!readOnly) {
        methodNotAllowed(res, READ_ONLY);
        return;
      }
      json(res, 200, view());
      return;
    }
    if (rawPath.startsWith('/debug/swarm/')) {
      if (!readOnly) {
        methodNotAllowed(res, READ_ONLY);
        return;
      }
      const stream = safeDecode(rawPath.slice('/debug/swarm/'.length));
      if (stream === null || !STREAM_ID_PATTERN.test(stream)) {
        json(res, 400, { error: 'bad stream id' });
        return;
      }
      const body = this.views.debugSwarm(stream);
      if (body === null) json(res, 404, { error: `no swarm for stream ${stream}` });
      else json(res, 200, body);
      return;
    }
    const { origin, staticDir } = this.settings;
    if (rawPath.startsWith('/live/')) {
      if (!readOnly) {
        methodNotAllowed(res, READ_ONLY);
        return;
      }
      if (origin === null) {
        sendStatus(res, 404, 'no origin directory configured');
        return;
      }
      return origin.serve(req, res, rawPath.slice('/live/'.length));
    }
    if (staticDir !== null && !rawPath.startsWith('/debug/')) {
      if (!readOnly) {
        methodNotAllowed(res, READ_ONLY);
        return;
      }
      return serveStatic(req, res, staticDir, rawPath);
    }
    sendStatus(res, 404);
  }

  /** `Authorization: Bearer <broadcaster key>`, compared as digests in constant time. */
  private authorized(req: IncomingMessage): boolean {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    const presented = match?.[1];
    return presented !== undefined && timingSafeEqual(sha256(presented), this.settings.keyDigest);
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
  });
  res.end(text);
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('Allow', allow);
  sendStatus(res, 405);
}

function safeDecode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}
