package idserver.clients;

import com.google.common.math.IntMath;
import idserver.clients.LettuceClusterIdClient.Cmd;
import io.lettuce.core.LettuceFutures;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.dynamic.Commands;
import io.lettuce.core.dynamic.RedisCommandFactory;
import io.lettuce.core.dynamic.annotation.Command;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.MapOutput;
import io.lettuce.core.output.ValueListOutput;
import io.lettuce.core.protocol.CommandArgs;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * LettuceSingle is Lettuce's RedisClient on its defaults (RESP3 through HELLO 3). idserver's
 * commands go through dispatch with the output that types the reply (IntegerOutput for GETID,
 * ValueListOutput for MGETID, MapOutput for DECODEID), or through a RedisCommandFactory
 * interface whose return types choose the outputs.
 */
final class LettuceSingle implements SingleClient {
  /** IdCommands is Lettuce's other way: a command interface (docs/clients.md). */
  interface IdCommands extends Commands {
    @Command("GETID")
    Long getid();

    @Command("MGETID")
    List<String> mgetid(int count);
  }

  private static final DateTimeFormatter DATE_FORMATTER = DateTimeFormatter.ofPattern("yyyyMMdd");
  private final String prefix = "order";
  private final int sequenceLength = 8;

  private final RedisClient client;
  private final StatefulRedisConnection<String, String> conn;
  private final RedisCommands<String, String> redis;

  LettuceSingle(String host, int port) {
    client = RedisClient.create(RedisURI.create(host, port));
    conn = client.connect();
    redis = conn.sync();
  }

  @Override
  public long getId() {
    Long id = redis.dispatch(Cmd.GETID, new IntegerOutput<>(StringCodec.UTF8));
    return id;
  }

  /**
   * getIds pipelines on a connection of its own: Lettuce holds commands back while auto-flush is
   * off, which would hold back every user of a shared connection.
   */
  @Override
  public List<Long> getIds(int n) {
    try (StatefulRedisConnection<String, String> c = client.connect()) {
      RedisAsyncCommands<String, String> async = c.async();
      c.setAutoFlushCommands(false);
      List<RedisFuture<Long>> fs = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        fs.add(async.dispatch(Cmd.GETID, new IntegerOutput<>(StringCodec.UTF8)));
      }
      c.flushCommands();
      Check.expect(LettuceFutures.awaitAll(Duration.ofSeconds(30), fs.toArray(new RedisFuture[0])),
          "1,000 pipelined GETIDs not answered within 30 s");
      List<Long> ids = new ArrayList<>();
      for (RedisFuture<Long> f : fs) {
        ids.add(f.toCompletableFuture().join());
      }
      return ids;
    }
  }

  @Override
  public List<String> mgetId(int n) {
    List<String> ids = redis.dispatch(Cmd.MGETID, new ValueListOutput<>(StringCodec.UTF8),
        new CommandArgs<>(StringCodec.UTF8).add(n));
    return ids;
  }

  @Override
  @SuppressWarnings("unchecked")
  public Map<String, Object> decodeId(long id) {
    // MapOutput reads RESP3's map and RESP2's flat array alike; integers come as Long.
    Map<String, ?> fields = redis.dispatch(Cmd.DECODEID, new MapOutput<>(StringCodec.UTF8),
        new CommandArgs<>(StringCodec.UTF8).add(id)); // integers come as Long
    return new HashMap<>((Map<String, Object>) fields);
  }

  @Override
  public long incr(String key) {
    return redis.incr(key);
  }

  @Override
  public long incrBy(String key, long n) {
    return redis.incrby(key, n);
  }

  @Override
  public String get(String key) {
    return redis.get(key);
  }

  @Override
  public void set(String key, long value) {
    redis.set(key, Long.toString(value));
  }

  @Override
  public List<Object> transaction(String key) {
    redis.multi();
    redis.incr(key);
    redis.dispatch(Cmd.GETID, new IntegerOutput<>(StringCodec.UTF8));
    TransactionResult r = redis.exec();
    List<Object> out = new ArrayList<>();
    r.forEach(out::add);
    return out;
  }


  @Override
  public long nextOrderNumber() {
    String date = DATE_FORMATTER.format(LocalDateTime.now());           // yyyyMMdd
    return Long.parseLong(date) * IntMath.pow(10, sequenceLength)
         + redis.incrby(prefix + ":" + date, 1);
  }

  /** extra: the command interface, and RESP3 kept (Lettuce's default). */
  @Override
  public String extra() {
    IdCommands ids = new RedisCommandFactory(conn).getCommands(IdCommands.class);
    Long a = ids.getid();
    List<String> more = ids.mgetid(3);
    Check.expect(a != null && a > 0 && more.size() == 3 && Check.increasing(more)
        && Long.parseLong(more.get(0)) > a, "RedisCommandFactory GETID %s, MGETID 3 %s", a, more);
    String info = redis.clientInfo();
    Check.expect(info.contains(" resp=3 "), "CLIENT INFO: %s, want resp=3", info);
    return "RedisCommandFactory GETID/MGETID ok; resp=3";
  }

  @Override
  public void close() {
    conn.close();
    client.shutdown();
  }
}
