package dev.contextengine.adk;

import com.google.common.cache.Cache;
import com.google.common.cache.CacheBuilder;
import com.google.genai.types.Content;
import java.util.ArrayList;
import java.util.List;

/**
 * The genai {@link Content} of each engine {@code Content} the plugin has converted, so that the
 * unchanged history of a model call is not converted again on the next one.
 *
 * <p>{@link AdkConvert#contentFromProto} goes through JSON (the engine's proto JSON, then
 * google-genai's Jackson mapper); for a history of thousands of contents that is most of a model
 * call's time on the client. The conversion is a function of the message alone, so the cache is
 * keyed by the engine's message itself (protobuf's structural {@code equals} / {@code hashCode}):
 * an entry can never be stale, whichever session, agent or branch the content came from, and a
 * rewind, a compaction summary or a deleted and re-created session only brings contents the cache
 * has not seen (converted then). It holds at most {@code maximumSize} entries, least recently used
 * evicted; 0 turns it off.
 *
 * <p>A cached {@link Content} is handed to every request whose history holds it, as ADK Java's own
 * contents processor hands every request the session's {@code event.content()} instances.
 */
final class ContentCache {
  private final Cache<dev.contextengine.v1.Content, Content> cache;
  private final boolean enabled;

  ContentCache(long maximumSize) {
    if (maximumSize < 0) {
      throw new IllegalArgumentException("contents cache size must be >= 0, got " + maximumSize);
    }
    this.enabled = maximumSize > 0;
    this.cache = CacheBuilder.newBuilder().maximumSize(Math.max(maximumSize, 1)).build();
  }

  /** The genai form of each content, in order: cached ones reused, the others converted. */
  List<Content> convert(List<dev.contextengine.v1.Content> contents) {
    List<Content> out = new ArrayList<>(contents.size());
    for (dev.contextengine.v1.Content content : contents) {
      if (!enabled) {
        out.add(AdkConvert.contentFromProto(content));
        continue;
      }
      Content converted = cache.getIfPresent(content);
      if (converted == null) {
        converted = AdkConvert.contentFromProto(content);
        cache.put(content, converted);
      }
      out.add(converted);
    }
    return out;
  }

  /** How many conversions are held (for tests). */
  long size() {
    return cache.size();
  }
}
