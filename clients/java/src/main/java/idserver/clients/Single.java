package idserver.clients;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Single runs the checks of one client against a single idserver on the default layout
 * (clients/java_test.go starts it): GETID an exact integer, 1,000 GETIDs in one pipeline
 * increasing, MGETID, DECODEID's fields, INCR/INCRBY/GET/SET, a transaction, an error reply
 * (and the client usable after it), then the library's own checks. The first failure throws.
 * It reports on stderr: stdout is for {@link #orders}, which prints order numbers for the
 * kill -9 test.
 */
final class Single {
  private Single() {}

  /** The default layout's epoch and field widths (DESIGN.md: 2 / 9 / 10). */
  private static final long EPOCH_MS = 1420041600000L;

  private static final DateTimeFormatter ISO_MS =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  static SingleClient open(String name, String host, int port) {
    switch (name) {
      case "jedis":
        return new JedisSingle(host, port);
      case "lettuce":
        return new LettuceSingle(host, port);
      case "spring":
        return new SpringSingle(host, port);
      case "redisson":
        return new RedissonSingle(host, port);
      default:
        throw new IllegalArgumentException(
            "unknown client " + name + " (jedis, lettuce, spring, redisson)");
    }
  }

  static void run(String name, String host, int port) {
    try (SingleClient c = open(name, host, port)) {
      long first = c.getId();
      Check.expect(first > 0, "GETID %d, want a positive integer", first);
      List<Long> ids = c.getIds(1000);
      Check.expect(ids.size() == 1000, "%d replies to 1,000 pipelined GETIDs", ids.size());
      long prev = first;
      for (int i = 0; i < ids.size(); i++) {
        Long id = ids.get(i);
        Check.expect(id != null && id > prev, "pipelined GETID #%d: %s, not above %d", i, id, prev);
        prev = id;
      }
      List<String> m = c.mgetId(10);
      Check.expect(m.size() == 10 && Check.increasing(m) && Long.parseLong(m.get(0)) > prev,
          "MGETID 10: %s, want 10 increasing IDs above %d", m, prev);

      long id = c.getId();
      Map<String, Object> got = c.decodeId(id);
      Map<String, Object> want = decode(id);
      Check.expect(want.equals(got), "DECODEID %d: %s, want %s", id, got, want);
      long lag = Math.abs(System.currentTimeMillis() - (Long) want.get("unix-ms"));
      Check.expect(lag < 60_000, "ID %d is of %s, %d ms from now", id, want.get("time"), lag);

      String key = name + ":" + System.nanoTime();
      Check.expect(c.get(key) == null, "GET of a new key: %s, want nil", c.get(key));
      long v1 = c.incr(key);
      long v2 = c.incr(key);
      long v12 = c.incrBy(key, 10);
      Check.expect(v1 == 1 && v2 == 2 && v12 == 12, "INCR, INCR, INCRBY 10: %d %d %d", v1, v2, v12);
      Check.expect("12".equals(c.get(key)), "GET %s: %s, want 12", key, c.get(key));
      c.set(key, 100);
      long v101 = c.incr(key);
      Check.expect(v101 == 101 && "101".equals(c.get(key)), "SET 100, INCR: %d, GET %s",
          v101, c.get(key));

      long before = c.getId();
      List<Object> tx = c.transaction(key + ":tx");
      Check.expect(tx.size() == 2 && Long.valueOf(1).equals(tx.get(0))
          && tx.get(1) instanceof Long && (Long) tx.get(1) > before,
          "MULTI INCR GETID EXEC: %s, want [1, an ID above %d]", tx, before);

      RuntimeException e = null;
      try {
        List<String> none = c.mgetId(0);
        throw new AssertionError("MGETID 0 returned " + none + ", want the error reply thrown");
      } catch (RuntimeException thrown) {
        e = thrown; // each library's own: JedisDataException, RedisCommandExecutionException, ...
      }
      Check.expect(e != null && messages(e).contains("ERR count 0 out of range"),
          "MGETID 0: %s, want the error reply thrown", e == null ? null : messages(e));
      long after = c.getId();
      Check.expect(after > before, "GETID after the error: %d", after);

      String extra = c.extra();
      System.err.printf("%s: GETID, 1,000 pipelined, MGETID, DECODEID, INCR/INCRBY/GET/SET,"
          + " transaction, error (%s) ok%s%n", name, e.getClass().getSimpleName(),
          extra.isEmpty() ? "" : "; " + extra);
    }
  }

  /** messages is the messages of e and its causes, for an error reply a library wraps. */
  static String messages(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      b.append(b.length() == 0 ? "" : " <- ").append(t);
    }
    return b.toString();
  }

  /** decode is DECODEID's fields of id under the default layout and epoch. */
  static Map<String, Object> decode(long id) {
    long ms = (id >>> 21) + EPOCH_MS;
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("unix-ms", ms);
    m.put("time", ISO_MS.format(Instant.ofEpochMilli(ms)));
    m.put("server-id", (id >>> 19) & 3);
    m.put("shard", (id >>> 10) & 511);
    m.put("random", id & 1023);
    return m;
  }

  /** pairs turns a flat list of name, value (RESP2's DECODEID) into a map. */
  static Map<String, Object> pairs(List<?> flat) {
    Check.expect(flat.size() % 2 == 0, "an odd number of elements: %s", flat);
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < flat.size(); i += 2) {
      m.put(String.valueOf(flat.get(i)), flat.get(i + 1));
    }
    return m;
  }

  /**
   * orders prints n order numbers of nextOrderNumber, one a line. A call answered -BUSY (the
   * server could not reserve values in time: a disk that stalls on a loaded machine) is made
   * again after 100 ms, as the reply says to, at most 50 times in all, and counted on stderr: no
   * number was issued for it.
   */
  static void orders(String name, String host, int port, int n) throws Exception {
    int busy = 0;
    try (SingleClient c = open(name, host, port)) {
      BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
      for (int i = 0; i < n; i++) {
        long number;
        while (true) {
          try {
            number = c.nextOrderNumber();
            break;
          } catch (RuntimeException e) {
            if (!messages(e).contains("BUSY") || ++busy > 50) {
              throw e;
            }
            Thread.sleep(100);
          }
        }
        out.write(Long.toString(number));
        out.newLine();
      }
      out.flush();
    }
    if (busy > 0) {
      System.err.printf("%s: %d order number calls answered -BUSY, made again%n", name, busy);
    }
  }
}
