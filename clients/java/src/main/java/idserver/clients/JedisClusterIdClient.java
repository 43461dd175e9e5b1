package idserver.clients;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

/**
 * JedisClusterIdClient is Jedis's JedisCluster on its defaults (RESP3 since Jedis 8, 5 attempts
 * within 10 s, socket timeout 2 s), given one node: it reads the slots from it. JedisCluster is
 * deprecated in Jedis 8 (for RedisClusterClient) but still what most code uses. Jedis's typed
 * methods send INCR and GET; GETID and MGETID go through sendCommand(ProtocolCommand, ...),
 * which passes no key, so Jedis treats them as keyless and sends each to the next primary in
 * turn (one counter shared by every keyless command), not following -MOVED.
 */
final class JedisClusterIdClient implements IdClient {
  /** Cmd is idserver's commands for Jedis: a ProtocolCommand is just the name's bytes. */
  enum Cmd implements ProtocolCommand {
    GETID,
    MGETID,
    DECODEID;

    private final byte[] raw = SafeEncoder.encode(name());

    @Override
    public byte[] getRaw() {
      return raw;
    }
  }

  private final JedisCluster jedis;

  JedisClusterIdClient(HostAndPort seed) {
    jedis = new JedisCluster(seed);
  }

  @Override
  public long getId() {
    return (Long) jedis.sendCommand(Cmd.GETID);
  }

  @Override
  public List<String> mgetId(int n) {
    List<String> ids = new ArrayList<>();
    for (Object o : (List<?>) jedis.sendCommand(Cmd.MGETID, Integer.toString(n))) {
      ids.add(new String((byte[]) o, StandardCharsets.UTF_8));
    }
    return ids;
  }

  @Override
  public long incr(String key) {
    return jedis.incr(key);
  }

  @Override
  public String get(String key) {
    return jedis.get(key);
  }

  /**
   * otherWays: sendCommand(sampleKey, cmd, args) routes a command by the slot of sampleKey, a
   * custom keyed command's way (here INCR sent as a raw command).
   */
  @Override
  public String otherWays() {
    String key = "jedis-raw:" + System.nanoTime();
    Object first = jedis.sendCommand(key, () -> SafeEncoder.encode("INCR"), key);
    Object second = jedis.sendCommand(key, () -> SafeEncoder.encode("INCR"), key);
    Check.expect(Long.valueOf(1).equals(first) && Long.valueOf(2).equals(second),
        "sendCommand(sampleKey, INCR, key): %s, %s; want 1, 2", first, second);
    // The protocol is Jedis's choice, reported rather than checked: RESP3 in Jedis 8.
    Object info = jedis.sendCommand(() -> SafeEncoder.encode("CLIENT"), "INFO");
    String resp = new String((byte[]) info, StandardCharsets.UTF_8).replaceAll("(?s).*( resp=\\d+).*", "$1");
    return "sendCommand(sampleKey, INCR) routed; CLIENT INFO says" + resp;
  }

  @Override
  public void close() {
    jedis.close();
  }
}
