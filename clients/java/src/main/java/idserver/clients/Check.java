package idserver.clients;

import java.util.List;
import redis.clients.jedis.HostAndPort;

/**
 * Check runs the cluster checks through one client, given one node of a cluster: GETID as an
 * exact integer, MGETID 3 as increasing IDs above it, INCR twice and GET on 100 keys (spread
 * over the slots, so the client must route them), then the client's other ways of sending a
 * custom command. The first failure throws.
 */
final class Check {
  private Check() {}

  static void run(String name, HostAndPort seed) {
    try (IdClient c = Main.open(name, seed, false)) {
      long id = c.getId();
      expect(id > 0, "GETID %d, want a positive integer", id);
      List<String> ids = c.mgetId(3);
      expect(ids.size() == 3 && increasing(ids) && Long.parseLong(ids.get(0)) > id,
          "MGETID 3: %s, want 3 increasing IDs above GETID's %d", ids, id);
      String prefix = name + ":" + System.nanoTime() + ":";
      for (int i = 0; i < 100; i++) {
        String key = prefix + i;
        for (long want = 1; want <= 2; want++) {
          long got = c.incr(key);
          expect(got == want, "INCR %s: %d, want %d", key, got, want);
        }
        String got = c.get(key);
        expect("2".equals(got), "GET %s: %s, want 2", key, got);
      }
      String other = c.otherWays();
      System.out.printf("%s cluster: GETID %d, MGETID %s, INCR/GET on 100 keys ok; %s%n",
          name, id, ids, other);
    }
  }

  /** expect throws an AssertionError with the formatted message unless ok. */
  static void expect(boolean ok, String format, Object... args) {
    if (!ok) {
      throw new AssertionError(String.format(format, args));
    }
  }

  /** increasing reports whether ids, decimal strings, increase strictly. */
  static boolean increasing(List<String> ids) {
    for (int i = 1; i < ids.size(); i++) {
      if (Long.parseLong(ids.get(i)) <= Long.parseLong(ids.get(i - 1))) {
        return false;
      }
    }
    return true;
  }
}
