package idserver.clients;

import redis.clients.jedis.HostAndPort;

/**
 * Main runs idserver's Java client checks and load driver; see README.md for the command
 * lines. Each library is one {@link SingleClient} against a single server ({@link Single}) and,
 * for the cluster checks and the load driver, one {@link IdClient}, named on the command line.
 */
public final class Main {
  private Main() {}

  /**
   * open connects the client named name to a cluster, given one node's address, on the
   * library's defaults, or for failover where a default cannot recover from a node that stops
   * answering (Load's comment says which and why).
   */
  static IdClient open(String name, HostAndPort seed, boolean failover) {
    switch (name) {
      case "jedis":
        return new JedisClusterIdClient(seed);
      case "lettuce":
        return new LettuceClusterIdClient(seed.getHost(), seed.getPort(),
            failover ? Load.lettuceTimeout : null);
      default:
        throw new IllegalArgumentException("unknown client " + name + " (jedis, lettuce)");
    }
  }

  public static void main(String[] args) throws Exception {
    int code;
    try {
      if (args.length == 3 && args[0].equals("check")) {
        Check.run(args[1], HostAndPort.from(args[2]));
        code = 0;
      } else if ((args.length == 3 || args.length == 4) && args[0].equals("single")) {
        HostAndPort addr = HostAndPort.from(args[2]);
        Single.run(args[1], addr.getHost(), addr.getPort());
        if (args.length == 4) {
          Single.orders(args[1], addr.getHost(), addr.getPort(), Integer.parseInt(args[3]));
        }
        code = 0;
      } else if (args.length == 4 && args[0].equals("orders")) {
        HostAndPort addr = HostAndPort.from(args[2]);
        Single.orders(args[1], addr.getHost(), addr.getPort(), Integer.parseInt(args[3]));
        code = 0;
      } else if (args.length == 2 && args[0].equals("load")) {
        code = Load.run(args[1]);
      } else {
        System.err.println("usage: check jedis|lettuce host:port   (a cluster, given one node)\n"
            + "       single jedis|lettuce|spring|redisson host:port [n]   (then orders n)\n"
            + "       orders jedis|lettuce|spring|redisson host:port n\n"
            + "       load jedis|lettuce  (env IDSERVER_SEED, IDSERVER_KEYS, IDSERVER_OUT,"
            + " IDSERVER_WORKERS; stops at EOF on stdin)");
        code = 2;
      }
    } catch (Exception | AssertionError e) {
      e.printStackTrace();
      code = 1;
    }
    // The clients' own threads (Lettuce's event loops, Jedis's pools) must not keep the JVM.
    System.exit(code);
  }
}
