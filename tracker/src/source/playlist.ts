/**
 * A bounded reader of HLS media playlists (RFC 8216 §4.3): just what the true source needs to find
 * new segments: the media sequence, each segment's URI and duration, and whether the stream ended.
 */

/** Largest playlist we parse: a live window of a few dozen segments is a few KB. */
export const MAX_PLAYLIST_BYTES = 1024 * 1024;
const MAX_SEGMENTS = 10_000;

export interface PlaylistSegment {
  readonly sequence: number;
  readonly uri: string;
  readonly durationMs: number;
}

export interface MediaPlaylist {
  readonly mediaSequence: number;
  readonly segments: readonly PlaylistSegment[];
  readonly ended: boolean;
}

export class PlaylistError extends Error {
  override readonly name = 'PlaylistError';
}

export function parseMediaPlaylist(text: string): MediaPlaylist {
  if (text.length > MAX_PLAYLIST_BYTES)
    throw new PlaylistError(`playlist of ${text.length} characters exceeds ${MAX_PLAYLIST_BYTES}`);
  const lines = text.split(/\r?\n/);
  if (lines[0]?.trim() !== '#EXTM3U') throw new PlaylistError('not an HLS playlist: no #EXTM3U first line');
  let mediaSequence = 0;
  let ended = false;
  let pendingDurationMs: number | null = null;
  const segments: PlaylistSegment[] = [];
  for (const raw of lines.slice(1)) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#EXT-X-STREAM-INF'))
      throw new PlaylistError('this is a multivariant playlist: give the true source a media playlist');
    if (line.startsWith('#EXT-X-MEDIA-SEQUENCE:')) {
      const n = Number(line.slice('#EXT-X-MEDIA-SEQUENCE:'.length));
      if (!Number.isInteger(n) || n < 0 || n > 0xffff_ffff)
        throw new PlaylistError(`bad EXT-X-MEDIA-SEQUENCE: ${line}`);
      mediaSequence = n;
    } else if (line.startsWith('#EXTINF:')) {
      const seconds = Number(line.slice('#EXTINF:'.length).split(',')[0]);
      if (!Number.isFinite(seconds) || seconds < 0 || seconds > 3600)
        throw new PlaylistError(`bad EXTINF duration: ${line}`);
      pendingDurationMs = Math.round(seconds * 1000);
    } else if (line === '#EXT-X-ENDLIST') {
      ended = true;
    } else if (!line.startsWith('#')) {
      if (pendingDurationMs === null) throw new PlaylistError(`segment URI without #EXTINF: ${line}`);
      if (segments.length >= MAX_SEGMENTS) throw new PlaylistError(`more than ${MAX_SEGMENTS} segments`);
      const sequence = mediaSequence + segments.length;
      if (sequence > 0xffff_ffff) throw new PlaylistError('media sequence overflows 32 bits');
      segments.push({ sequence, uri: line, durationMs: pendingDurationMs });
      pendingDurationMs = null;
    }
  }
  return { mediaSequence, segments, ended };
}
