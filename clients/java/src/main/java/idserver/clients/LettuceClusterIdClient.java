package idserver.clients;

import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.dynamic.Commands;
import io.lettuce.core.dynamic.RedisCommandFactory;
import io.lettuce.core.dynamic.annotation.Command;
import io.lettuce.core.dynamic.annotation.Key;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.ValueListOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

/**
 * LettuceClusterIdClient is Lettuce's RedisClusterClient on its defaults (RESP3 through HELLO 3,
 * every adaptive topology refresh trigger on, no periodic refresh, 60 s command timeout), given
 * one node. GETID and MGETID go through dispatch with a custom ProtocolKeyword and the output
 * that types the reply; having no key, they go to the cluster connection's default node.
 */
final class LettuceClusterIdClient implements IdClient {
  /** Cmd is idserver's commands for Lettuce's dispatch. */
  enum Cmd implements ProtocolKeyword {
    GETID,
    MGETID,
    DECODEID;

    private final byte[] bytes = name().getBytes(StandardCharsets.US_ASCII);

    @Override
    public byte[] getBytes() {
      return bytes;
    }

    @Override
    public String toString() {
      return name();
    }
  }

  /** IdCommands is the other way: a command interface, reply typed by return type. */
  interface IdCommands extends Commands {
    @Command("GETID")
    Long getid();

    @Command("MGETID")
    List<String> mgetid(int n);

    @Command("INCR")
    Long incr(@Key String key);
  }

  private final RedisClusterClient client;
  private final StatefulRedisClusterConnection<String, String> conn;
  private final RedisAdvancedClusterCommands<String, String> sync;

  /**
   * LettuceClusterIdClient connects, with a command timeout of timeout, or Lettuce's default
   * (60 s) if null.
   */
  LettuceClusterIdClient(String host, int port, Duration timeout) {
    RedisURI uri = RedisURI.create(host, port);
    if (timeout != null) {
      uri.setTimeout(timeout);
    }
    client = RedisClusterClient.create(uri);
    conn = client.connect();
    sync = conn.sync();
  }

  @Override
  public long getId() {
    return sync.dispatch(Cmd.GETID, new IntegerOutput<>(StringCodec.UTF8));
  }

  @Override
  public List<String> mgetId(int n) {
    return sync.dispatch(Cmd.MGETID, new ValueListOutput<>(StringCodec.UTF8),
        new CommandArgs<>(StringCodec.UTF8).add(n));
  }

  @Override
  public long incr(String key) {
    return sync.incr(key);
  }

  @Override
  public String get(String key) {
    return sync.get(key);
  }

  /** otherWays: RedisCommandFactory's command interface, on the same cluster connection. */
  @Override
  public String otherWays() {
    IdCommands cmds = new RedisCommandFactory(conn).getCommands(IdCommands.class);
    Long id = cmds.getid();
    Check.expect(id != null && id > 0, "RedisCommandFactory GETID: %s", id);
    List<String> ids = cmds.mgetid(2);
    Check.expect(ids.size() == 2 && Check.increasing(ids), "RedisCommandFactory MGETID 2: %s", ids);
    String key = "lettuce-factory:" + System.nanoTime();
    Long a = cmds.incr(key);
    Long b = cmds.incr(key);
    Check.expect(a == 1 && b == 2, "RedisCommandFactory INCR: %s, %s", a, b);
    // Lettuce's default is RESP3 (HELLO 3), kept: the server must say so.
    String info = sync.clientInfo();
    Check.expect(info.contains(" resp=3 "), "CLIENT INFO: %s, want resp=3", info);
    return "RedisCommandFactory GETID/MGETID/INCR ok; CLIENT INFO says resp=3";
  }

  @Override
  public void close() {
    conn.close();
    client.shutdown();
  }
}
