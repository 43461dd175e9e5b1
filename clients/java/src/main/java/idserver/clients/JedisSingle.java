package idserver.clients;

import com.google.common.math.IntMath;
import idserver.clients.JedisClusterIdClient.Cmd;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.AbstractTransaction;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.Response;
import redis.clients.jedis.util.KeyValue;
import redis.clients.jedis.util.SafeEncoder;

/**
 * JedisSingle is Jedis 8's RedisClient on its defaults (a pool, RESP3 since Jedis 8). idserver's
 * commands go through sendCommand with a ProtocolCommand; GETID's reply is a Long.
 */
final class JedisSingle implements SingleClient {
  private static final DateTimeFormatter DATE_FORMATTER = DateTimeFormatter.ofPattern("yyyyMMdd");
  private final String prefix = "order";
  private final int sequenceLength = 8;

  private final RedisClient jedis;

  JedisSingle(String host, int port) {
    jedis = RedisClient.create(host, port);
  }

  @Override
  public long getId() {
    long id = (Long) jedis.sendCommand(Cmd.GETID);
    return id;
  }

  /** id checks a GETID reply: an exact integer, not a string to parse. */
  static long id(Object reply) {
    Check.expect(reply instanceof Long, "GETID: %s (%s), want a Long", reply,
        reply == null ? "null" : reply.getClass().getName());
    return (Long) reply;
  }

  @Override
  public List<Long> getIds(int n) {
    List<Response<Object>> rs = new ArrayList<>();
    try (AbstractPipeline p = jedis.pipelined()) {
      for (int i = 0; i < n; i++) {
        Response<Object> r = p.sendCommand(new CommandArguments(Cmd.GETID)); // a Long after p.sync()
        rs.add(r);
      }
      p.sync();
    }
    List<Long> ids = new ArrayList<>();
    for (Response<Object> r : rs) {
      ids.add(id(r.get()));
    }
    return ids;
  }

  @Override
  public List<String> mgetId(int n) {
    List<String> ids = new ArrayList<>();
    List<?> reply = (List<?>) jedis.sendCommand(Cmd.MGETID, Integer.toString(n)); // byte[] each
    for (Object o : reply) {
      ids.add(SafeEncoder.encode((byte[]) o));
    }
    return ids;
  }

  @Override
  public Map<String, Object> decodeId(long id) {
    // RESP3: a map, which Jedis's sendCommand gives as a list of KeyValue;
    // RESP2: a flat list of name, value. Names and the time come as bytes.
    List<Object> flat = new ArrayList<>();
    List<?> fields = (List<?>) jedis.sendCommand(Cmd.DECODEID, Long.toString(id));
    for (Object o : fields) {
      if (o instanceof KeyValue) {
        flat.add(((KeyValue<?, ?>) o).getKey());
        flat.add(((KeyValue<?, ?>) o).getValue());
      } else {
        flat.add(o);
      }
    }
    flat.replaceAll(o -> o instanceof byte[] ? new String((byte[]) o, StandardCharsets.UTF_8) : o);
    return Single.pairs(flat);
  }

  @Override
  public long incr(String key) {
    return jedis.incr(key);
  }

  @Override
  public long incrBy(String key, long n) {
    return jedis.incrBy(key, n);
  }

  @Override
  public String get(String key) {
    return jedis.get(key);
  }

  @Override
  public void set(String key, long value) {
    jedis.set(key, Long.toString(value));
  }

  @Override
  public List<Object> transaction(String key) {
    try (AbstractTransaction tx = jedis.multi()) {
      tx.incr(key);
      tx.sendCommand(new CommandArguments(Cmd.GETID));
      return tx.exec();
    }
  }


  @Override
  public long nextOrderNumber() {
    String date = DATE_FORMATTER.format(LocalDateTime.now());           // yyyyMMdd
    return Long.parseLong(date) * IntMath.pow(10, sequenceLength)
         + jedis.incrBy(prefix + ":" + date, 1);
  }

  @Override
  public void close() {
    jedis.close();
  }
}
