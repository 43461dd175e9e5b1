#!/usr/bin/perl
# Checks idserver with Perl's Redis (Debian libredis-perl 2.000) on its
# defaults.
#
# Usage: perl check.pl HOST:PORT
#
# Runs every check on one client, prints "ok NAME" or "FAIL NAME: why" for
# each, and exits 1 if any failed. clients/scripts_test.go runs it.
#
# Redis.pm hands an integer reply back as the text of its line, the same
# kind of scalar as a bulk string: from Perl, GETID's ":123" and a "$3 123"
# cannot be told apart (a number that was never used as one is a plain
# string scalar either way). So the GETID checks take a plain, defined,
# non-reference scalar of decimal digits, and check the reply type where
# the library cannot: the server's own CLIENT INFO must say
# getid-reply=integer for this connection.
use strict;
use warnings;

use POSIX qw(strftime);
use Redis;
use Time::HiRes ();

# The layout of the IDs of a server on its defaults (idgen.DefaultLayout
# and DefaultEpoch): 42 bits of ms since EPOCH_MS, then 2 bits of
# server-id, 9 of shard and 10 random.
use constant {
    EPOCH_MS    => 1420041600000,
    TIME_SHIFT  => 21,
    SHARD_BITS  => 9,
    RANDOM_BITS => 10,
    # How far DECODEID's time may be from this machine's clock: generous,
    # as the server borrows ahead when a millisecond is used up.
    DRIFT_MS => 10 * 60 * 1000,
};

# want_id returns the ID a GETID reply carries, or dies. See the top: the
# library leaves only the text to check.
sub want_id {
    my ($what, $reply) = @_;
    die "$what = undef, want an ID\n" unless defined $reply;
    die "$what is a " . ref($reply) . " reference, want an ID\n" if ref $reply;
    die "$what = '$reply', want a decimal ID\n" unless $reply =~ /\A[1-9][0-9]{0,18}\z/;
    return $reply;
}

# bulk_ids returns the IDs of MGETID's array of n bulk strings.
sub bulk_ids {
    my ($what, $reply, $n) = @_;
    die "$what = " . (defined $reply ? "'$reply'" : 'undef') . ", want an array of $n\n"
        unless ref $reply eq 'ARRAY';
    die "$what has " . scalar(@$reply) . " elements, want $n\n" unless @$reply == $n;
    return map { want_id("$what element #$_", $reply->[$_]) } 0 .. $#$reply;
}

# want_increasing: strictly increasing in the order received also means
# distinct. The IDs fit a 64-bit IV, which Perl compares exactly.
sub want_increasing {
    my ($what, @ids) = @_;
    for my $i (1 .. $#ids) {
        die "$what: ID #$i = $ids[$i], not above $ids[$i-1]\n" unless $ids[$i] > $ids[$i - 1];
    }
}

# want_integer_replies checks, through CLIENT INFO, that the server
# replies to this connection's GETIDs with integers (see the top).
sub want_integer_replies {
    my ($r) = @_;
    my $info = $r->client_info;
    $info =~ s/\s+\z//;
    die "CLIENT INFO = '$info', want getid-reply=integer\n" unless $info =~ /(?:^| )getid-reply=integer(?: |$)/m;
}

my %checks = (
    # Redis.pm connects in new(); PING proves the connection answers.
    connect => sub {
        my ($r) = @_;
        my $pong = $r->ping;
        die "PING = " . (defined $pong ? "'$pong'" : 'undef') . ", want PONG\n" unless defined $pong && $pong eq 'PONG';
    },

    # 100 pipelines of 1000 GETIDs: a command with a callback is sent at
    # once and its reply read by wait_all_responses, Redis.pm's pipelining.
    'GETID exact' => sub {
        my ($r) = @_;
        my $prev = 0;
        for my $round (0 .. 99) {
            my @got;
            # The callbacks only keep the replies: one that died would
            # leave the rest unread, for the next command to take.
            $r->getid(sub { push @got, [@_] }) for 1 .. 1000;
            $r->wait_all_responses;
            die "round $round: " . scalar(@got) . " replies, want 1000\n" unless @got == 1000;
            for my $i (0 .. $#got) {
                my $n = $round * 1000 + $i;
                my ($reply, $error) = @{ $got[$i] };
                die "GETID #$n: error $error\n" if defined $error;
                my $id = want_id("GETID #$n", $reply);
                die "GETID #$n = $id, not above $prev\n" unless $id > $prev;
                $prev = $id;
            }
        }
        want_integer_replies($r);
    },

    'MGETID 10' => sub {
        my ($r) = @_;
        # In scalar context Redis.pm returns the array reply as a reference.
        my $reply = $r->mgetid(10);
        want_increasing('MGETID 10', bulk_ids('MGETID 10', $reply, 10));
    },

    # Redis.pm has no transaction object: multi, the commands (each
    # answered QUEUED) and exec, which returns EXEC's replies.
    'MULTI, GETID, GETID, MGETID 2, EXEC' => sub {
        my ($r) = @_;
        my $ok = $r->multi;
        die "MULTI = '$ok', want OK\n" unless $ok eq 'OK';
        for my $cmd (['getid'], ['getid'], ['mgetid', 2]) {
            my ($name, @args) = @$cmd;
            my $queued = $r->$name(@args);
            die "$name = '$queued', want QUEUED\n" unless $queued eq 'QUEUED';
        }
        my @replies = $r->exec;
        die scalar(@replies) . " replies to EXEC, want 3\n" unless @replies == 3;
        want_increasing('GETID, GETID, MGETID 2',
            want_id('EXEC reply #0', $replies[0]),
            want_id('EXEC reply #1', $replies[1]),
            bulk_ids('EXEC reply #2 (MGETID 2)', $replies[2], 2));
    },

    # DECODEID replies with a map, which RESP2 writes as an array of
    # name, value pairs in cmdDecodeID's order.
    'DECODEID of a fresh GETID' => sub {
        my ($r)   = @_;
        my $id    = want_id('GETID', $r->getid);
        my $reply = $r->decodeid($id);
        die "DECODEID = '$reply', want an array\n" unless ref $reply eq 'ARRAY';
        my @names = map { $reply->[ 2 * $_ ] } 0 .. $#$reply / 2;
        die "DECODEID field names '@names', want 'unix-ms time server-id shard random'\n"
            unless "@names" eq 'unix-ms time server-id shard random' && @$reply == 10;
        my %f = @$reply;
        for my $k ('unix-ms', 'server-id', 'shard', 'random') {
            die "DECODEID $k = '$f{$k}', want an integer\n" unless defined $f{$k} && $f{$k} =~ /\A[0-9]+\z/;
        }
        my $want = ($id >> TIME_SHIFT) + EPOCH_MS;
        die "DECODEID unix-ms $f{'unix-ms'}, want $want ((id >> 21) + epoch)\n" unless $f{'unix-ms'} == $want;
        my $drift = $f{'unix-ms'} - int(Time::HiRes::time() * 1000);
        die "DECODEID unix-ms $f{'unix-ms'} is $drift ms from this machine's clock\n" if abs($drift) > DRIFT_MS;
        my $time = strftime('%Y-%m-%dT%H:%M:%S', gmtime(int($want / 1000))) . sprintf('.%03dZ', $want % 1000);
        die "DECODEID time '$f{time}', want '$time'\n" unless $f{time} eq $time;
        my $low  = ($f{'server-id'} << (SHARD_BITS + RANDOM_BITS)) | ($f{shard} << RANDOM_BITS) | $f{random};
        my $lowWant = $id & ((1 << TIME_SHIFT) - 1);
        die "DECODEID server-id, shard and random make $low, want the ID's low 21 bits $lowWant\n" unless $low == $lowWant;
    },

    # Redis.pm croaks on an error reply: "[mgetid] ERR count 0 out of
    # range...". The client stays usable.
    'MGETID 0 is an error, then GETID' => sub {
        my ($r) = @_;
        my $reply = eval { $r->mgetid(0) };
        my $err = $@;
        die "MGETID 0 = '" . ($reply // 'undef') . "', want an error\n" unless $err;
        die "MGETID 0 died with '$err', want \"out of range\"\n" unless $err =~ /out of range/;
        want_id('GETID after the error', $r->getid);
    },
);

my @order = ('connect', 'GETID exact', 'MGETID 10', 'MULTI, GETID, GETID, MGETID 2, EXEC',
    'DECODEID of a fresh GETID', 'MGETID 0 is an error, then GETID');

@ARGV == 1 or die "usage: check.pl HOST:PORT\n";
my $addr   = $ARGV[0];
my $failed = 0;
my $r      = eval { Redis->new(server => $addr) };
for my $name (@order) {
    my $err;
    if (!$r) {
        $err = $name eq 'connect' ? "Redis->new(server => '$addr'): $@" : 'no connection';
    } else {
        my $t0 = Time::HiRes::time();
        eval { $checks{$name}->($r); 1 } or $err = $@ || 'died';
        if (!defined $err) {
            printf "ok %s (%.0f ms)\n", $name, (Time::HiRes::time() - $t0) * 1000;
            next;
        }
    }
    $err =~ s/\s+\z//;
    print "FAIL $name: $err\n";
    $failed = 1;
}
exit $failed;
