package idserver.clients;

import com.google.common.math.IntMath;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.MapOutput;
import io.lettuce.core.output.ValueListOutput;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.springframework.dao.DataAccessException;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnection;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.RedisOperations;
import org.springframework.data.redis.core.RedisTemplate;
import org.springframework.data.redis.core.SessionCallback;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.serializer.GenericToStringSerializer;
import org.springframework.data.redis.serializer.StringRedisSerializer;

/**
 * SpringSingle is Spring Data Redis on Lettuce, wired as Spring Boot's auto-configuration does
 * (a LettuceConnectionFactory on a standalone configuration and Lettuce's defaults, RESP3; a
 * StringRedisTemplate), plus the RedisTemplate&lt;String, Integer&gt; the order-number code of
 * issue 33 uses, as an application declares it. The container's part (afterPropertiesSet,
 * start, destroy) is done by hand: Spring Boot itself adds nothing these checks need.
 *
 * <p>Spring's RedisConnection.execute(String, byte[]...) reads the reply of a command it does
 * not know with Lettuce's ByteArrayOutput, which refuses an integer reply: GETID goes through
 * LettuceConnection.execute with an IntegerOutput instead (docs/clients.md says why).
 */
final class SpringSingle implements SingleClient {
  private static final DateTimeFormatter DATE_FORMATTER = DateTimeFormatter.ofPattern("yyyyMMdd");
  private final String prefix = "order";
  private final int sequenceLength = 8;

  private final LettuceConnectionFactory factory;
  private final StringRedisTemplate stringRedisTemplate;
  private final RedisTemplate<String, Integer> stringIntegerRedisTemplate;

  SpringSingle(String host, int port) {
    factory = new LettuceConnectionFactory(new RedisStandaloneConfiguration(host, port));
    factory.afterPropertiesSet();
    factory.start();
    stringRedisTemplate = new StringRedisTemplate(factory);
    stringIntegerRedisTemplate = new RedisTemplate<>();
    stringIntegerRedisTemplate.setConnectionFactory(factory);
    stringIntegerRedisTemplate.setKeySerializer(StringRedisSerializer.UTF_8);
    stringIntegerRedisTemplate.setValueSerializer(new GenericToStringSerializer<>(Integer.class));
    stringIntegerRedisTemplate.afterPropertiesSet();
  }

  // The lines of docs/clients.md: a callback given the LettuceConnection itself
  // (exposeConnection true: otherwise it gets a proxy of the RedisConnection interface).

  /** getid is GETID on the template's connection. */
  static Long getid(RedisTemplate<String, ?> template) {
    Long id = template.execute((RedisCallback<Long>) c ->
        (Long) ((LettuceConnection) c).execute("GETID", new IntegerOutput<>(ByteArrayCodec.INSTANCE)), true);
    return id;
  }

  @Override
  public long getId() {
    return getid(stringIntegerRedisTemplate);
  }

  @Override
  public List<Long> getIds(int n) {
    RedisTemplate<String, Integer> template = stringIntegerRedisTemplate;
    List<Object> replies = template.execute((RedisCallback<List<Object>>) c -> {
      LettuceConnection lc = (LettuceConnection) c;
      lc.openPipeline();
      for (int i = 0; i < n; i++) {
        lc.execute("GETID", new IntegerOutput<>(ByteArrayCodec.INSTANCE));
      }
      return lc.closePipeline();
    }, true);
    return replies.stream().map(r -> JedisSingle.id(r)).toList();
  }

  @Override
  @SuppressWarnings("unchecked")
  public List<String> mgetId(int n) {
    RedisTemplate<String, Integer> template = stringIntegerRedisTemplate;
    List<String> ids = template.execute((RedisCallback<List<String>>) c ->
        (List<String>) ((LettuceConnection) c).execute("MGETID", new ValueListOutput<>(StringCodec.UTF8),
            Integer.toString(n).getBytes(StandardCharsets.US_ASCII)), true);
    return ids;
  }

  @Override
  @SuppressWarnings("unchecked")
  public Map<String, Object> decodeId(long id) {
    RedisTemplate<String, Integer> template = stringIntegerRedisTemplate;
    Map<String, Object> fields = template.execute((RedisCallback<Map<String, Object>>) c ->
        (Map<String, Object>) ((LettuceConnection) c).execute("DECODEID", new MapOutput<>(StringCodec.UTF8),
            Long.toString(id).getBytes(StandardCharsets.US_ASCII)), true);
    return new HashMap<>(fields);
  }

  @Override
  public long incr(String key) {
    return stringRedisTemplate.opsForValue().increment(key);
  }

  @Override
  public long incrBy(String key, long n) {
    return stringRedisTemplate.opsForValue().increment(key, n);
  }

  @Override
  public String get(String key) {
    return stringRedisTemplate.opsForValue().get(key);
  }

  @Override
  public void set(String key, long value) {
    stringRedisTemplate.opsForValue().set(key, Long.toString(value));
  }

  /**
   * transaction: Spring's SessionCallback keeps one connection for MULTI ... EXEC; GETID is
   * queued on it like any command.
   */
  @Override
  public List<Object> transaction(String key) {
    return stringIntegerRedisTemplate.execute(new SessionCallback<List<Object>>() {
      @Override
      @SuppressWarnings("unchecked")
      public List<Object> execute(RedisOperations ops) throws DataAccessException {
        ops.multi();
        ops.opsForValue().increment(key);
        getid((RedisTemplate<String, ?>) ops);
        return ops.exec();
      }
    });
  }


  @Override
  public long nextOrderNumber() {
    String date = DATE_FORMATTER.format(LocalDateTime.now());           // yyyyMMdd
    return Long.parseLong(date) * IntMath.pow(10, sequenceLength)
         + stringIntegerRedisTemplate.opsForValue().increment(prefix + ":" + date, 1);
  }

  /**
   * extra: the line a Spring user tries first, RedisConnection.execute("GETID"), fails as
   * docs/clients.md says (Lettuce's ByteArrayOutput refuses the integer), and the connection
   * serves on after it.
   */
  @Override
  public String extra() {
    String failure;
    try {
      Object r = stringRedisTemplate.execute((RedisCallback<Object>) c -> c.execute("GETID"));
      throw new AssertionError("RedisConnection.execute(\"GETID\") returned " + r
          + ": docs/clients.md says it fails");
    } catch (DataAccessException e) {
      Throwable root = e.getMostSpecificCause();
      failure = e.getClass().getSimpleName() + " caused by " + root;
      Check.expect(String.valueOf(root.getMessage()).contains("ByteArrayOutput does not support set(long)"),
          "RedisConnection.execute(\"GETID\"): %s, want ByteArrayOutput's refusal", failure);
    }
    long id = getId();
    Check.expect(id > 0, "GETID after the untyped call: %d", id);
    return "untyped execute(\"GETID\") fails as documented: " + failure;
  }

  @Override
  public void close() {
    factory.destroy();
  }
}
