import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PlaylistError, parseMediaPlaylist } from '../src/source/playlist.js';

const FFMPEG_PLAYLIST = `#EXTM3U
#EXT-X-VERSION:3
#EXT-X-TARGETDURATION:2
#EXT-X-MEDIA-SEQUENCE:41
#EXT-X-INDEPENDENT-SEGMENTS
#EXTINF:2.000000,
live41.ts
#EXTINF:2.000000,
live42.ts
#EXTINF:1.966667,
live43.ts
`;

describe('parseMediaPlaylist', () => {
  it('reads what ffmpeg writes: sequence numbers, URIs and durations', () => {
    const p = parseMediaPlaylist(FFMPEG_PLAYLIST);
    expect(p.mediaSequence).toBe(41);
    expect(p.ended).toBe(false);
    expect(p.segments).toEqual([
      { sequence: 41, uri: 'live41.ts', durationMs: 2000 },
      { sequence: 42, uri: 'live42.ts', durationMs: 2000 },
      { sequence: 43, uri: 'live43.ts', durationMs: 1967 },
    ]);
    expect(parseMediaPlaylist(`${FFMPEG_PLAYLIST}#EXT-X-ENDLIST\n`).ended).toBe(true);
  });

  it('refuses what is not a media playlist, with the reason', () => {
    const refuse = (text: string, reason: RegExp): void => {
      expect(() => parseMediaPlaylist(text)).toThrow(PlaylistError);
      expect(() => parseMediaPlaylist(text)).toThrow(reason);
    };
    refuse('<html>', /no #EXTM3U/);
    refuse('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n', /multivariant/);
    refuse('#EXTM3U\nseg.ts\n', /without #EXTINF/);
    refuse('#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n', /MEDIA-SEQUENCE/);
    refuse('#EXTM3U\n#EXTINF:abc,\nseg.ts\n', /EXTINF/);
    refuse(`#EXTM3U\n${'#'.repeat(1024 * 1024 + 1)}`, /exceeds/);
  });

  it('throws only PlaylistError on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (tail) => {
        try {
          parseMediaPlaylist(`#EXTM3U\n${tail}`);
        } catch (e) {
          expect(e).toBeInstanceOf(PlaylistError);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
