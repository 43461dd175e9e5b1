# Checks idserver with redis-rb (Debian ruby-redis 4.8.0) on its defaults.
#
# Usage: ruby check.rb HOST:PORT
#
# Runs every check on one client, prints "ok NAME" or "FAIL NAME: why" for
# each, and exits 1 if any failed. clients/scripts_test.go runs it.
#
# redis-rb's call sends any command and decodes the reply by RESP type
# alone: an integer reply is an Integer, a bulk string a String, an array
# an Array, an error reply is raised as Redis::CommandError.
require "redis"

# The layout of the IDs of a server on its defaults (idgen.DefaultLayout
# and DefaultEpoch): 42 bits of ms since EPOCH_MS, then 2 bits of
# server-id, 9 of shard and 10 random.
EPOCH_MS = 1_420_041_600_000
TIME_SHIFT = 21
SHARD_BITS = 9
RANDOM_BITS = 10
# How far DECODEID's time may be from this machine's clock: generous, as
# the server borrows ahead when a millisecond is used up.
DRIFT_MS = 10 * 60 * 1000

class CheckFailed < StandardError; end

def fail!(msg)
  raise CheckFailed, msg
end

# int_id returns a GETID reply, which must be an integer reply: an Integer.
def int_id(what, reply)
  fail!("#{what} = #{reply.inspect} (#{reply.class}), want a positive Integer") unless reply.is_a?(Integer) && reply.positive?
  reply
end

# bulk_ids returns the IDs of MGETID's array of n bulk strings.
def bulk_ids(what, reply, n)
  fail!("#{what} = #{reply.inspect}, want an Array of #{n}") unless reply.is_a?(Array) && reply.length == n
  reply.each_with_index.map do |b, i|
    fail!("#{what} element ##{i} = #{b.inspect}, want a decimal String") unless b.is_a?(String) && b.match?(/\A[1-9][0-9]*\z/)
    Integer(b, 10)
  end
end

# Strictly increasing in the order received also means distinct.
def want_increasing(what, ids)
  ids.each_cons(2).with_index do |(a, b), i|
    fail!("#{what}: ID ##{i + 1} = #{b}, not above #{a}") unless b > a
  end
end

CHECKS = [
  # redis-rb connects on the first command; PING makes it.
  ["connect", lambda do |r|
    pong = r.ping
    fail!("PING = #{pong.inspect}, want \"PONG\"") unless pong == "PONG"
    fail!("not connected after PING") unless r.connected?
  end],

  ["GETID exact", lambda do |r|
    prev = 0
    100.times do |round|
      replies = r.pipelined { |p| 1000.times { p.call(:getid) } }
      fail!("round #{round}: #{replies.length} replies, want 1000") unless replies.length == 1000
      replies.each_with_index do |reply, i|
        id = int_id("GETID ##{round * 1000 + i}", reply)
        fail!("GETID ##{round * 1000 + i} = #{id}, not above #{prev}") unless id > prev
        prev = id
      end
    end
  end],

  ["MGETID 10", lambda do |r|
    want_increasing("MGETID 10", bulk_ids("MGETID 10", r.call(:mgetid, 10), 10))
  end],

  # multi with a block: MULTI, the commands, EXEC; returns EXEC's replies.
  ["MULTI, GETID, GETID, MGETID 2, EXEC", lambda do |r|
    replies = r.multi do |tx|
      tx.call(:getid)
      tx.call(:getid)
      tx.call(:mgetid, 2)
    end
    fail!("EXEC = #{replies.inspect}, want 3 replies") unless replies.is_a?(Array) && replies.length == 3
    want_increasing("GETID, GETID, MGETID 2",
                    [int_id("EXEC reply #0", replies[0]), int_id("EXEC reply #1", replies[1])] +
                    bulk_ids("EXEC reply #2 (MGETID 2)", replies[2], 2))
  end],

  # DECODEID replies with a map, which RESP2 writes as an array of name,
  # value pairs in cmdDecodeID's order.
  ["DECODEID of a fresh GETID", lambda do |r|
    id = int_id("GETID", r.call(:getid))
    reply = r.call(:decodeid, id)
    fail!("DECODEID = #{reply.inspect}, want an Array of 10") unless reply.is_a?(Array) && reply.length == 10
    names = reply.each_slice(2).map(&:first)
    fail!("DECODEID field names #{names.inspect}") unless names == %w[unix-ms time server-id shard random]
    f = reply.each_slice(2).to_h
    %w[unix-ms server-id shard random].each do |k|
      fail!("DECODEID #{k} = #{f[k].inspect}, want an Integer") unless f[k].is_a?(Integer)
    end
    want = (id >> TIME_SHIFT) + EPOCH_MS
    fail!("DECODEID unix-ms #{f['unix-ms']}, want #{want} ((id >> 21) + epoch)") unless f["unix-ms"] == want
    drift = f["unix-ms"] - (Time.now.to_r * 1000).to_i
    fail!("DECODEID unix-ms #{f['unix-ms']} is #{drift} ms from this machine's clock") if drift.abs > DRIFT_MS
    time = Time.at(Rational(want, 1000)).utc.strftime("%Y-%m-%dT%H:%M:%S.%LZ")
    fail!("DECODEID time #{f['time'].inspect}, want #{time.inspect}") unless f["time"] == time
    low = (f["server-id"] << (SHARD_BITS + RANDOM_BITS)) | (f["shard"] << RANDOM_BITS) | f["random"]
    low_want = id & ((1 << TIME_SHIFT) - 1)
    fail!("DECODEID server-id, shard and random make #{low}, want the ID's low 21 bits #{low_want}") unless low == low_want
  end],

  ["MGETID 0 is an error, then GETID", lambda do |r|
    begin
      reply = r.call(:mgetid, 0)
    rescue Redis::CommandError => e
      fail!("MGETID 0 raised #{e.message.inspect}, want \"out of range\"") unless e.message.include?("out of range")
    else
      fail!("MGETID 0 = #{reply.inspect}, want a Redis::CommandError")
    end
    int_id("GETID after the error", r.call(:getid))
  end],
].freeze

abort "usage: check.rb HOST:PORT" unless ARGV.length == 1
host, _, port = ARGV[0].rpartition(":")
r = Redis.new(host: host, port: Integer(port, 10))
failed = false
CHECKS.each do |name, check|
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  begin
    check.call(r)
    puts format("ok %s (%.0f ms)", name, (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000)
  rescue StandardError => e # any exception is a failed check, not a crash
    failed = true
    puts "FAIL #{name}: #{e.class}: #{e.message}"
  end
  $stdout.flush
end
r.close
exit(failed ? 1 : 0)
