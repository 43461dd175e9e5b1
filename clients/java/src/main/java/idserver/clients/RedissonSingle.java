package idserver.clients;

import com.google.common.math.IntMath;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.redisson.Redisson;
import org.redisson.api.BatchOptions;
import org.redisson.api.RFuture;
import org.redisson.api.RIdGenerator;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.api.redisnode.RedisNodes;
import org.redisson.client.RedisException;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.client.protocol.RedisCommands;
import org.redisson.client.protocol.RedisStrictCommand;
import org.redisson.client.protocol.decoder.ObjectListReplayDecoder;
import org.redisson.client.protocol.decoder.StringListReplayDecoder;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.command.CommandBatchService;
import org.redisson.config.Config;

/**
 * RedissonSingle is Redisson on a single-server configuration and its defaults (RESP2, a pool of
 * connections, the Lua script cache on). Its objects send Redis's commands (RAtomicLong: INCR,
 * INCRBY, GET, SET); idserver's own go through the client's command executor, which is how
 * Redisson sends a command it has no object for, and RBatch's CommandBatchService for a pipeline
 * or a transaction.
 */
final class RedissonSingle implements SingleClient {
  // idserver's commands for Redisson (docs/clients.md).
  static final RedisStrictCommand<Long> GETID = new RedisStrictCommand<>("GETID");
  static final RedisCommand<List<String>> MGETID = new RedisCommand<>("MGETID", new StringListReplayDecoder());
  static final RedisCommand<List<Object>> DECODEID = new RedisCommand<>("DECODEID", new ObjectListReplayDecoder<>());

  /** What idserver's reply to a scripting command begins with (respserver/cmd_script.go). */
  static final String NO_SCRIPTS = "ERR idserver does not run scripts";

  private static final DateTimeFormatter DATE_FORMATTER = DateTimeFormatter.ofPattern("yyyyMMdd");
  private final String prefix = "order";
  private final int sequenceLength = 8;

  private final RedissonClient redisson;
  private final CommandAsyncExecutor executor;

  RedissonSingle(String host, int port) {
    Config config = new Config();
    config.useSingleServer().setAddress("redis://" + host + ":" + port);
    redisson = Redisson.create(config);
    executor = ((Redisson) redisson).getCommandExecutor();
  }

  @Override
  public long getId() {
    Long id = executor.get(executor.writeAsync((String) null, LongCodec.INSTANCE, GETID));
    return id;
  }

  @Override
  public List<Long> getIds(int n) {
    CommandBatchService batch = new CommandBatchService(executor);
    List<RFuture<Long>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      fs.add(batch.writeAsync((String) null, LongCodec.INSTANCE, GETID));
    }
    batch.execute();
    List<Long> ids = new ArrayList<>();
    for (RFuture<Long> f : fs) {
      ids.add(JedisSingle.id(f.toCompletableFuture().join()));
    }
    return ids;
  }

  @Override
  public List<String> mgetId(int n) {
    List<String> ids = executor.get(executor.writeAsync((String) null, StringCodec.INSTANCE, MGETID, n));
    return ids;
  }

  @Override
  public Map<String, Object> decodeId(long id) {
    List<Object> fields = executor.get(executor.writeAsync((String) null, StringCodec.INSTANCE, DECODEID, id));
    return Single.pairs(fields);
  }

  @Override
  public long incr(String key) {
    return redisson.getAtomicLong(key).incrementAndGet();
  }

  @Override
  public long incrBy(String key, long n) {
    return redisson.getAtomicLong(key).addAndGet(n);
  }

  @Override
  public String get(String key) {
    return redisson.<String>getBucket(key, StringCodec.INSTANCE).get();
  }

  @Override
  public void set(String key, long value) {
    redisson.getAtomicLong(key).set(value);
  }

  /** transaction: a batch in IN_MEMORY_ATOMIC mode is sent as MULTI ... EXEC. */
  @Override
  public List<Object> transaction(String key) {
    CommandBatchService tx = new CommandBatchService(executor,
        BatchOptions.defaults().executionMode(BatchOptions.ExecutionMode.IN_MEMORY_ATOMIC));
    RFuture<Long> incr = tx.writeAsync(key, StringCodec.INSTANCE, RedisCommands.INCR, key);
    RFuture<Long> id = tx.writeAsync((String) null, LongCodec.INSTANCE, GETID);
    tx.execute();
    List<Object> out = new ArrayList<>();
    out.add(incr.toCompletableFuture().join());
    out.add(id.toCompletableFuture().join());
    return out;
  }


  @Override
  public long nextOrderNumber() {
    String date = DATE_FORMATTER.format(LocalDateTime.now());           // yyyyMMdd
    return Long.parseLong(date) * IntMath.pow(10, sequenceLength)
         + redisson.getAtomicLong(prefix + ":" + date).incrementAndGet();
  }

  /**
   * extra: Redisson's Lua-based objects against a server without scripts. RLock's lock and
   * tryLock and RIdGenerator's tryInit throw idserver's error within a second. RIdGenerator's
   * nextId cannot throw (Redisson 4.7.0 logs a failed allocation and tries again a second later,
   * without end): its future stays open, and the EVALSHAs it sends stay at about one a second,
   * counted by the server, not a loop.
   */
  @Override
  public String extra() {
    RLock lock = redisson.getLock("lock:" + System.nanoTime());
    long lockMs = throwsNoScripts("RLock.lock()", lock::lock);
    long tryLockMs = throwsNoScripts("RLock.tryLock()", () -> lock.tryLock());
    RIdGenerator gen = redisson.getIdGenerator("gen:" + System.nanoTime());
    long initMs = throwsNoScripts("RIdGenerator.tryInit", () -> gen.tryInit(1, 100));

    long before = scriptRefusals();
    RFuture<Long> next = gen.nextIdAsync();
    try {
      Long got = next.toCompletableFuture().get(1500, TimeUnit.MILLISECONDS);
      throw new AssertionError("RIdGenerator.nextId returned " + got + " from a server without scripts");
    } catch (TimeoutException e) {
      // expected: see above
    } catch (InterruptedException | ExecutionException e) {
      throw new AssertionError("RIdGenerator.nextIdAsync: " + e, e);
    }
    long tries = scriptRefusals() - before;
    Check.expect(tries >= 1 && tries <= 4,
        "RIdGenerator.nextIdAsync sent %d scripts in 1.5 s, want 1..4 (one a second)", tries);
    next.cancel(true);

    // RAtomicLong's other methods on INCRBY; compareAndSet is Lua, refused alike.
    String key = "al:" + System.nanoTime();
    long a = redisson.getAtomicLong(key).getAndIncrement();
    long b = redisson.getAtomicLong(key).getAndAdd(5);
    long c = redisson.getAtomicLong(key).get();
    Check.expect(a == 0 && b == 1 && c == 6, "getAndIncrement, getAndAdd(5), get: %d %d %d", a, b, c);
    throwsNoScripts("RAtomicLong.compareAndSet", () -> redisson.getAtomicLong(key).compareAndSet(6, 7));
    try {
      long d = redisson.getAtomicLong(key).decrementAndGet();
      throw new AssertionError("RAtomicLong.decrementAndGet: " + d + ", want DECR refused");
    } catch (RedisException e) {
      Check.expect(e.getMessage().startsWith("ERR DECR is refused"), "RAtomicLong.decrementAndGet: %s", e);
    }
    long exists = redisson.getKeys().countExists(key);
    long count = redisson.getKeys().count();
    Check.expect(exists == 1 && count >= 1, "RKeys countExists %d, count %d", exists, count);
    return String.format("RLock.lock() threw in %d ms, tryLock() in %d ms, RIdGenerator.tryInit in %d ms;"
        + " RIdGenerator.nextIdAsync: %d EVALSHA in 1.5 s, no reply", lockMs, tryLockMs, initMs, tries);
  }

  /**
   * throwsNoScripts runs call, wants idserver's refusal thrown within a second, and returns the
   * ms. A call that does not end (Redisson resending EVALSHA on "ERR unknown command") fails
   * after 5 s rather than holding the test.
   */
  private static long throwsNoScripts(String what, Runnable call) {
    long start = System.nanoTime();
    try {
      CompletableFuture.runAsync(call).get(5, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      long ms = (System.nanoTime() - start) / 1_000_000;
      Check.expect(e.getCause() instanceof RedisException
          && String.valueOf(e.getCause().getMessage()).startsWith(NO_SCRIPTS) && ms < 1000,
          "%s threw after %d ms: %s, want %s... within a second", what, ms, e.getCause(), NO_SCRIPTS);
      return ms;
    } catch (TimeoutException e) {
      throw new AssertionError(what + " did not end within 5 s on a server without scripts");
    } catch (InterruptedException e) {
      throw new AssertionError(what + ": " + e, e);
    }
    throw new AssertionError(what + " did not throw on a server without scripts");
  }

  /** scriptRefusals is INFO's script_calls_refused, as Redisson's node API reads it. */
  private long scriptRefusals() {
    Map<String, String> stats = redisson.getRedisNodes(RedisNodes.SINGLE).getInstance()
        .info(org.redisson.api.redisnode.RedisNode.InfoSection.STATS);
    return Long.parseLong(stats.getOrDefault("script_calls_refused", "-1"));
  }

  @Override
  public void close() {
    redisson.shutdown();
  }
}
