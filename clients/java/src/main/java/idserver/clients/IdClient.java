package idserver.clients;

import java.util.List;

/**
 * IdClient is one Java client library, connected to idserver, seen through the commands the
 * checks and the load driver send. A library joins by implementing it and adding a line to
 * {@link Main#open}; each implementation sends idserver's own commands (GETID, MGETID) the way
 * that library offers for commands it does not know.
 */
interface IdClient extends AutoCloseable {
  /** getId sends GETID: the reply must come back as an exact integer. */
  long getId();

  /** mgetId sends MGETID n: an array of IDs, as the strings the server sends. */
  List<String> mgetId(int n);

  /** incr sends INCR key, routed by key. */
  long incr(String key);

  /** get sends GET key, routed by key. */
  String get(String key);

  /**
   * otherWays checks the library's other ways of sending a custom command, where it has
   * some, and describes them; the checks call it once.
   */
  default String otherWays() {
    return "";
  }

  @Override
  void close();
}
