/**
 * A throwaway coturn for the TURN tests: loopback only, a free port, the TURN REST API's shared
 * secret (`use-auth-secret`, `static-auth-secret`), its pid file and database in a temp directory,
 * killed when stopped. coturn is a system package that `npm run setup` installs; without it the
 * tests that need it fail, saying what to run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TURNSERVER = '/usr/bin/turnserver';
const START_TIMEOUT_MS = 10_000;

/** A UDP port nothing listens on right now. */
async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) =>
    socket.close(() => {
      resolve();
    }),
  );
  return port;
}

/** Whether a STUN Binding request to 127.0.0.1:port is answered within `ms` (coturn answers unauthenticated). */
async function answersStun(port: number, ms: number): Promise<boolean> {
  const socket = createSocket('udp4');
  // Binding request: type 0x0001, length 0, the magic cookie, a 12-byte transaction id.
  const request = Buffer.concat([Buffer.from([0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42]), randomBytes(12)]);
  try {
    return await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        resolve(false);
      }, ms);
      socket.on('message', (reply) => {
        clearTimeout(timer);
        resolve(reply.length >= 20 && reply.readUInt16BE(0) === 0x0101);
      });
      socket.on('error', () => {
        clearTimeout(timer);
        resolve(false);
      });
      socket.send(request, port, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

export class TurnServer {
  private output = '';

  private constructor(
    readonly port: number,
    readonly secret: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString('utf8')).slice(-20_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  static async start(secret: string): Promise<TurnServer> {
    if (!existsSync(TURNSERVER))
      throw new Error(
        `${TURNSERVER} is missing: the TURN tests need a real coturn. ` +
          'Run `npm run setup` (it installs the coturn package), or apt-get install coturn.',
      );
    const port = await freeUdpPort();
    const dir = await mkdtemp(join(tmpdir(), 'chunkycast-turn-'));
    const child = spawn(
      TURNSERVER,
      [
        '-n', // no configuration file: everything is here
        `--listening-ip=127.0.0.1`,
        `--relay-ip=127.0.0.1`,
        `--listening-port=${port}`,
        '--use-auth-secret',
        `--static-auth-secret=${secret}`,
        '--realm=chunkycast.test',
        // The peers are on loopback too; coturn refuses to relay to loopback unless told.
        '--allow-loopback-peers',
        '--no-cli',
        '--no-tls',
        '--no-dtls',
        `--pidfile=${join(dir, 'turnserver.pid')}`,
        `--userdb=${join(dir, 'turndb')}`,
        '--log-file=stdout',
        '--simple-log',
        '--verbose',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const server = new TurnServer(port, secret, child, dir);
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await answersStun(port, 200))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await server.stop();
        throw new Error(`coturn did not start on 127.0.0.1:${port}:\n${server.output}`);
      }
    }
    return server;
  }

  /** What coturn logged (the last 20,000 characters). */
  get log(): string {
    return this.output;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise<void>((resolve) =>
        this.child.once('exit', () => {
          resolve();
        }),
      );
      this.child.kill('SIGKILL');
      await exited;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
