package idserver.clients;

import java.util.List;
import java.util.Map;

/**
 * SingleClient is one Java client library connected, on its defaults, to a single idserver,
 * seen through the commands {@link Single}'s checks send. Each implementation sends GETID,
 * MGETID and DECODEID the way docs/clients.md shows for that library, so that the suite runs
 * exactly those lines.
 */
interface SingleClient extends AutoCloseable {
  /** getId sends GETID: the reply must come back as an exact integer. */
  long getId();

  /** getIds sends n GETIDs in one pipeline and returns the replies in order. */
  List<Long> getIds(int n);

  /** mgetId sends MGETID n: the IDs as the server sends them, decimal strings. */
  List<String> mgetId(int n);

  /** decodeId sends DECODEID id: field name to value (a Long, or a String for time). */
  Map<String, Object> decodeId(long id);

  long incr(String key);

  long incrBy(String key, long n);

  /** get sends GET key: the value as a string, null for a new key. */
  String get(String key);

  void set(String key, long value);

  /** transaction runs MULTI, INCR key, GETID, EXEC and returns EXEC's two replies. */
  List<Object> transaction(String key);

  /** nextOrderNumber is the order-number code of issue 33 in this library's words. */
  long nextOrderNumber();

  /** extra runs the checks of this library alone and describes them. */
  default String extra() {
    return "";
  }

  @Override
  void close();
}
