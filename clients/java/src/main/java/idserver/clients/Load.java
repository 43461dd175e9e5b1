package idserver.clients;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import redis.clients.jedis.HostAndPort;

/**
 * Load is the load driver of the end-to-end failover tests (README.md): IDSERVER_WORKERS
 * threads share one cluster client, each looping over INCR of a random key of IDSERVER_KEYS
 * (13 in 16), GETID (1 in 8) and MGETID 5 (1 in 16), and every reply becomes one line of
 * IDSERVER_OUT. An error is a line too, then the worker sleeps 10 ms and goes on: recovering is
 * the client's own business (its retries and topology refresh), which is what the test watches.
 * At EOF on stdin the workers stop, the file is flushed and the driver exits 0.
 */
final class Load {
  private Load() {}

  /**
   * lettuceTimeout is the Lettuce driver's command timeout, Jedis's default socket timeout, in
   * place of Lettuce's 60 s: on its defaults Lettuce does not recover from a node that still
   * accepts connections but answers nothing, as a killed server whose port the end-to-end tests
   * keep, a paused one or a hung host. Commands for its slots wait on its connection for 60 s,
   * holding every worker; each reconnect attempt waits 60 s for the handshake, and the adaptive
   * topology refresh (every trigger on by default since Lettuce 7) waits for 5 of them.
   * Measured: no INCR of its keys answered within 80 s, nor with a periodic refresh every 5 s
   * within 50 s; with 2 s, 11.2-11.5 s after the kill. Where the port closes, defaults do
   * recover (9.2 s): the reconnects fail at once.
   */
  static final Duration lettuceTimeout = Duration.ofSeconds(2);

  /** stopGrace bounds the wait for requests in flight at EOF: their replies are not written. */
  private static final long stopGraceMillis = 3000;

  private static volatile boolean stopping;

  static int run(String name) throws Exception {
    HostAndPort seed = HostAndPort.from(env("IDSERVER_SEED"));
    int keys = Integer.parseInt(env("IDSERVER_KEYS"));
    int workers = Integer.parseInt(System.getenv().getOrDefault("IDSERVER_WORKERS", "4"));
    Out out = new Out(env("IDSERVER_OUT"));
    IdClient client = connect(name, seed);
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < workers; i++) {
      Thread t = new Thread(() -> work(client, keys, out), "worker-" + i);
      t.setDaemon(true);
      t.start();
      threads.add(t);
    }
    Thread flusher = new Thread(() -> {
      // Lines reach the file within a second, so a test can watch the load go on.
      while (!stopping) {
        sleep(1000);
        out.flush();
      }
    }, "flusher");
    flusher.setDaemon(true);
    flusher.start();

    InputStream in = System.in;
    byte[] buf = new byte[256];
    while (in.read(buf) >= 0) {
      // Anything written to stdin is ignored: only its end counts.
    }
    stopping = true;
    long deadline = System.currentTimeMillis() + stopGraceMillis;
    for (Thread t : threads) {
      t.join(Math.max(1, deadline - System.currentTimeMillis()));
    }
    out.close();
    return 0;
  }

  /**
   * connect opens the client, trying again for 30 s: the seed may still be coming up (its
   * failures go to stderr, not the file, which holds replies).
   */
  private static IdClient connect(String name, HostAndPort seed) {
    long deadline = System.currentTimeMillis() + 30_000;
    while (true) {
      try {
        return Main.open(name, seed, true);
      } catch (RuntimeException e) {
        if (System.currentTimeMillis() > deadline || e instanceof IllegalArgumentException) {
          throw e;
        }
        System.err.println("connecting: " + e);
        sleep(100);
      }
    }
  }

  private static void work(IdClient client, int keys, Out out) {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    while (!stopping) {
      int pick = rnd.nextInt(16);
      String cmd = pick < 2 ? "getid" : pick == 2 ? "mgetid" : "incr";
      String key = "k" + rnd.nextInt(keys);
      long sent = Clock.floor();
      try {
        switch (cmd) {
          case "getid": {
            long id = client.getId();
            out.line("id " + sent + " " + Clock.ceil() + " " + id);
            break;
          }
          case "mgetid": {
            List<String> ids = client.mgetId(5);
            long recv = Clock.ceil();
            StringBuilder b = new StringBuilder();
            for (String id : ids) {
              b.append("id ").append(sent).append(' ').append(recv).append(' ').append(id).append('\n');
            }
            out.lines(b.toString());
            break;
          }
          default: {
            long v = client.incr(key);
            out.line("incr " + key + " " + sent + " " + Clock.ceil() + " " + v);
          }
        }
      } catch (Exception e) {
        long recv = Clock.ceil();
        out.line("err " + cmd + " " + sent + " " + recv + " " + message(e));
        sleep(10);
      }
    }
  }

  /** message is e and its causes on one line. */
  private static String message(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (Throwable c = e; c != null && b.length() < 500; c = c.getCause()) {
      if (b.length() > 0) {
        b.append(" <- ");
      }
      b.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
    }
    return b.toString().replaceAll("\\s+", " ");
  }

  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException(name + " is not set");
    }
    return v;
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Clock is the wall clock in ns since the epoch, as Instant.now() reads it (microseconds on
   * Linux). A reading t means a moment in [t, t+resolution): floor is a lower bound for a send,
   * ceil an upper bound for a receipt, so that "received before sent" is never claimed
   * wrongly.
   */
  static final class Clock {
    private Clock() {}

    static final long resolution = resolution();

    static long floor() {
      return read();
    }

    static long ceil() {
      return read() + resolution;
    }

    private static long read() {
      Instant now = Instant.now();
      long ns = now.getEpochSecond() * 1_000_000_000L + now.getNano();
      return ns - Math.floorMod(ns, resolution);
    }

    /** resolution is the largest of 1 ms, 1 µs and 1 ns that divides 200 readings. */
    private static long resolution() {
      long[] steps = {1_000_000, 1_000};
      for (long step : steps) {
        boolean all = true;
        for (int i = 0; i < 200 && all; i++) {
          all = Instant.now().getNano() % step == 0;
        }
        if (all) {
          return step;
        }
      }
      return 1;
    }
  }

  /** Out is the output file; lines are written whole, and not at all once it is closed. */
  static final class Out {
    private final Writer w;
    private boolean closed;

    Out(String path) throws IOException {
      w = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(path), StandardCharsets.UTF_8), 1 << 16);
    }

    void line(String s) {
      lines(s + "\n");
    }

    synchronized void lines(String s) {
      if (closed) {
        return;
      }
      try {
        w.write(s);
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }

    synchronized void flush() {
      if (!closed) {
        try {
          w.flush();
        } catch (IOException e) {
          System.err.println("flushing: " + e);
        }
      }
    }

    synchronized void close() throws IOException {
      closed = true;
      w.close();
    }
  }
}
