"""Checks idserver with cluster-enabled yes through redis-py's RedisCluster
on its defaults, given the one node's address: GETID and MGETID (keyless:
sent to a node redis-py picks, target_nodes, as for any keyless command it
has no rule for), and INCR and GET of 100 keys routed by slot.

Usage: python3 cluster.py host:port (../cluster_test.go runs it)."""
import sys
import time

import redis
from redis.cluster import RedisCluster

host, port = sys.argv[1].rsplit(":", 1)
rc = RedisCluster(host=host, port=int(port))
any_node = RedisCluster.RANDOM
id1 = rc.execute_command("GETID", target_nodes=any_node)
assert isinstance(id1, int) and id1 > 0, id1
ids = [int(x) for x in rc.execute_command("MGETID", 5, target_nodes=any_node)]
assert ids == sorted(ids) and len(set(ids)) == 5 and ids[0] > id1, ids
prefix = "py:%d:" % time.time_ns()
for i in range(100):
    assert rc.incr(prefix + str(i)) == 1
    assert rc.incr(prefix + str(i)) == 2
    assert rc.get(prefix + str(i)) == b"2"
assert rc.keyslot("{user1000}.following") == 3443
print("redis-py %s RedisCluster: GETID %d, MGETID 5, INCR/GET on 100 keys ok" % (redis.__version__, id1))
