"""Checks idserver with redis-py on its defaults.

Usage: /usr/bin/python3 check.py HOST:PORT [CHECK ...]

Runs the named checks (all without names), each on a fresh redis.Redis,
prints "ok NAME" or "FAIL NAME: why" for each, and exits 1 if any
failed. Meant for Debian's python3-redis 4.3.4, which only
/usr/bin/python3 sees; clients/python_test.go runs it.
"""

import sys

import redis


def want_increasing(what, ids):
    """Strictly increasing in the order received also means distinct."""
    for i in range(1, len(ids)):
        if ids[i] <= ids[i - 1]:
            raise AssertionError(
                "%s: ID #%d = %d, not above %d" % (what, i, ids[i], ids[i - 1])
            )


def int_id(what, reply):
    """A GETID reply must be an integer reply, which redis-py makes an int."""
    if type(reply) is not int or reply <= 0:
        raise AssertionError("%s = %r, want a positive int" % (what, reply))
    return reply


def bulk_ids(what, reply, n):
    """MGETID replies with bulk strings, which redis-py leaves as bytes."""
    if not isinstance(reply, list) or len(reply) != n:
        raise AssertionError("%s = %r, want a list of %d" % (what, reply, n))
    ids = []
    for b in reply:
        if not isinstance(b, bytes) or not b.isdigit():
            raise AssertionError("%s: element %r is not a decimal bytes" % (what, b))
        ids.append(int(b))
    return ids


def check_getid_exact(r):
    """100,000 GETIDs pipelined without MULTI, 1,000 per round trip."""
    total, batch = 100_000, 1_000
    prev = 0
    for sent in range(0, total, batch):
        p = r.pipeline(transaction=False)
        for _ in range(batch):
            p.execute_command("GETID")
        for i, reply in enumerate(p.execute()):
            got = int_id("GETID #%d" % (sent + i), reply)
            if got <= prev:
                raise AssertionError(
                    "GETID #%d = %d, not above %d" % (sent + i, got, prev)
                )
            prev = got


def check_mgetid(r):
    want_increasing("MGETID 10", bulk_ids("MGETID 10", r.execute_command("MGETID", 10), 10))


def check_mixed_pipeline(r):
    """ID commands between others, without MULTI: each reply in its place."""
    p = r.pipeline(transaction=False)
    p.execute_command("GETID")
    p.execute_command("MGETID", 3)
    p.ping()
    p.echo("hello")
    replies = p.execute()
    if len(replies) != 4:
        raise AssertionError("%d replies, want 4: %r" % (len(replies), replies))
    ids = [int_id("GETID", replies[0])] + bulk_ids("MGETID 3", replies[1], 3)
    want_increasing("GETID, MGETID 3", ids)
    if replies[2] is not True or replies[3] != b"hello":
        raise AssertionError("PING, ECHO hello = %r, %r" % (replies[2], replies[3]))


def check_transaction(r):
    """redis-py's default pipeline() wraps the commands in MULTI/EXEC."""
    p = r.pipeline()
    p.execute_command("GETID")
    p.execute_command("GETID")
    p.execute_command("MGETID", 2)
    replies = p.execute()
    if len(replies) != 3:
        raise AssertionError("EXEC gave %d replies, want 3: %r" % (len(replies), replies))
    ids = [int_id("GETID", replies[0]), int_id("GETID", replies[1])]
    want_increasing("GETID, GETID, MGETID 2", ids + bulk_ids("MGETID 2", replies[2], 2))


def check_transaction_abort(r):
    """An unknown command queued makes EXEC refuse it all (EXECABORT);
    redis-py then raises the queued command's own error. The name must
    be in it: an error about MULTI or EXEC means no transaction at all."""
    p = r.pipeline(transaction=True)
    p.execute_command("GETID")
    p.execute_command("NOSUCHCOMMAND")
    try:
        replies = p.execute()
    except redis.ResponseError as e:
        if "NOSUCHCOMMAND" not in str(e) and "EXECABORT" not in str(e):
            raise AssertionError("raised %r, want the error about NOSUCHCOMMAND" % str(e))
    else:
        raise AssertionError("gave %r, want a ResponseError" % (replies,))
    int_id("GETID after the abort", r.execute_command("GETID"))


def check_error_reply(r):
    """MGETID 0 is refused, and the connection, back in the pool, works."""
    try:
        reply = r.execute_command("MGETID", 0)
    except redis.ResponseError as e:
        if "out of range" not in str(e):
            raise AssertionError("MGETID 0 raised %r, want \"out of range\"" % str(e))
    else:
        raise AssertionError("MGETID 0 = %r, want a ResponseError" % (reply,))
    int_id("GETID after the error", r.execute_command("GETID"))


def raises(what, call, text):
    """call must raise redis-py's ResponseError with text in it."""
    try:
        reply = call()
    except redis.ResponseError as e:
        if text not in str(e):
            raise AssertionError("%s raised %r, want %r in it" % (what, str(e), text))
    else:
        raise AssertionError("%s = %r, want a ResponseError" % (what, reply))


def want(what, got, expected):
    if type(got) is not type(expected) or got != expected:
        raise AssertionError("%s = %r, want %r" % (what, got, expected))


def check_sequences(r):
    """A new key counts from 1; SET only up; DEL refused; INCR gives an
    int, GET and MGET bytes, as against Redis."""
    k, none = "py:Sequences:k", "py:Sequences:none"
    want("incr of a new key", r.incr(k), 1)
    want("incr", r.incr(k), 2)
    want("incrby 10", r.incrby(k, 10), 12)
    want("get", r.get(k), b"12")
    want("get of an unknown key", r.get(none), None)
    want("set 100", r.set(k, 100), True)
    want("incr after set 100", r.incr(k), 101)
    raises("set 50", lambda: r.set(k, 50), 'sequences only go up: "%s" is at 101' % k)
    want("setnx of a key that exists", r.setnx(k, 500), False)
    raises("delete", lambda: r.delete(k), "DEL is refused: sequences never go back")
    want("exists of a key and an unknown one", r.exists(k, none), 1)
    want("type", r.type(k), b"string")
    want("mget", r.mget(k, none), [b"101", None])


def check_sequence_pipeline(r):
    """100 INCRs of a new key in one pipeline without MULTI: 1 to 100."""
    p = r.pipeline(transaction=False)
    for _ in range(100):
        p.incr("py:SequencePipeline")
    want("100 pipelined incr", p.execute(), list(range(1, 101)))


def check_sequence_transaction(r):
    """The default pipeline() is MULTI/EXEC: INCR, INCRBY 5 and GET of a
    new key give 1, 6 and b"6". A SET in it is refused (not allowed
    inside a transaction), which discards the INCR before it too."""
    k = "py:SequenceTransaction"
    want("pipeline() incr, incrby 5, get", r.pipeline().incr(k).incrby(k, 5).get(k).execute(), [1, 6, b"6"])
    raises("pipeline() incr, set", lambda: r.pipeline().incr(k).set(k, 100).execute(),
           "Command not allowed inside a transaction")
    want("get after the discarded transaction", r.get(k), b"6")


CHECKS = {
    "GetIDExact": check_getid_exact,
    "MGetID": check_mgetid,
    "MixedPipeline": check_mixed_pipeline,
    "Transaction": check_transaction,
    "TransactionAbort": check_transaction_abort,
    "ErrorReply": check_error_reply,
    "Sequences": check_sequences,
    "SequencePipeline": check_sequence_pipeline,
    "SequenceTransaction": check_sequence_transaction,
}


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: check.py HOST:PORT [%s ...]" % "|".join(CHECKS))
    host, _, port = argv[1].rpartition(":")
    names = argv[2:] or list(CHECKS)
    failed = False
    for name in names:
        if name not in CHECKS:
            sys.exit("unknown check %r; known: %s" % (name, ", ".join(CHECKS)))
        r = redis.Redis(host=host, port=int(port))
        try:
            CHECKS[name](r)
            print("ok", name)
        except Exception as e:  # any exception is a failed check, not a crash
            failed = True
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        finally:
            r.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv)
