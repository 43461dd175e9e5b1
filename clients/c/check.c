/*
 * Checks idserver with hiredis (Debian libhiredis-dev 0.14.1) on its
 * defaults.
 *
 * Usage: check HOST:PORT
 *
 * Runs every check on one redisContext, prints "ok NAME" or "FAIL NAME:
 * why" for each, and exits 1 if any failed. clients/scripts_test.go
 * compiles it (gcc ... -lhiredis) and runs it.
 *
 * hiredis keeps each reply's RESP type: an integer reply is
 * REDIS_REPLY_INTEGER with a long long, a bulk string REDIS_REPLY_STRING.
 * Pipelining is redisAppendCommand (buffered) then redisGetReply (which
 * writes the buffer and reads a reply). hiredis has no transaction API:
 * MULTI, the commands and EXEC are sent as commands, pipelined like the
 * rest.
 */
#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

/*
 * The layout of the IDs of a server on its defaults (idgen.DefaultLayout
 * and DefaultEpoch): 42 bits of ms since EPOCH_MS, then 2 bits of
 * server-id, 9 of shard and 10 random.
 */
#define EPOCH_MS 1420041600000LL
#define TIME_SHIFT 21
#define SHARD_BITS 9
#define RANDOM_BITS 10
/* How far DECODEID's time may be from this machine's clock: generous, as
 * the server borrows ahead when a millisecond is used up. */
#define DRIFT_MS (10LL * 60 * 1000)

#define ROUNDS 100
#define BATCH 1000

static char why[1024];

/* fail writes why a check failed and returns it, for "return fail(...)". */
static const char *fail(const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(why, sizeof why, format, ap);
    va_end(ap);
    return why;
}

static const char *type_name(int type) {
    switch (type) {
    case REDIS_REPLY_STRING: return "bulk string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
    }
    return "unknown type";
}

/* show describes a reply for a message. */
static const char *show(const redisReply *r) {
    static char buf[256];
    if (r == NULL) {
        return "no reply";
    }
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(buf, sizeof buf, "integer %lld", r->integer);
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(buf, sizeof buf, "array of %zu", r->elements);
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        snprintf(buf, sizeof buf, "%s \"%.*s\"", type_name(r->type), (int)(r->len > 200 ? 200 : r->len), r->str);
        break;
    default:
        snprintf(buf, sizeof buf, "%s", type_name(r->type));
    }
    return buf;
}

/* get reads the next reply; on a connection error it fails the check. */
static const char *get(redisContext *c, redisReply **r) {
    void *reply = NULL;
    if (redisGetReply(c, &reply) != REDIS_OK) {
        *r = NULL;
        return fail("connection: %s", c->errstr);
    }
    *r = reply;
    return NULL;
}

/* int_id checks a GETID reply: an integer reply, a positive ID. */
static const char *int_id(const char *what, const redisReply *r, long long *id) {
    if (r->type != REDIS_REPLY_INTEGER || r->integer <= 0) {
        return fail("%s = %s, want a positive integer reply", what, show(r));
    }
    *id = r->integer;
    return NULL;
}

/* bulk_id checks an ID MGETID sends: a bulk string of decimal digits. */
static const char *bulk_id(const char *what, const redisReply *r, long long *id) {
    char *end;
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 19 || r->str[0] < '1' || r->str[0] > '9') {
        return fail("%s = %s, want a decimal bulk string", what, show(r));
    }
    *id = strtoll(r->str, &end, 10);
    if (end != r->str + r->len) {
        return fail("%s = %s, want a decimal bulk string", what, show(r));
    }
    return NULL;
}

/* bulk_ids checks MGETID's reply: an array of n decimal bulk strings. */
static const char *bulk_ids(const char *what, const redisReply *r, size_t n, long long *ids) {
    char name[128];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
        return fail("%s = %s, want an array of %zu", what, show(r), n);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s element #%zu", what, i);
        if (bulk_id(name, r->element[i], &ids[i]) != NULL) {
            return why;
        }
    }
    return NULL;
}

/* increasing: strictly increasing in the order received also means
 * distinct. */
static const char *increasing(const char *what, const long long *ids, size_t n) {
    for (size_t i = 1; i < n; i++) {
        if (ids[i] <= ids[i - 1]) {
            return fail("%s: ID #%zu = %lld, not above %lld", what, i, ids[i], ids[i - 1]);
        }
    }
    return NULL;
}

/* command sends one command and reads its reply. */
static const char *command(redisContext *c, redisReply **r, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    *r = redisvCommand(c, format, ap);
    va_end(ap);
    if (*r == NULL) {
        return fail("connection: %s", c->errstr);
    }
    return NULL;
}

/* The checks. Each returns NULL when it passed, else why it failed. */

static const char *check_connect(redisContext *c) {
    redisReply *r;
    const char *err = command(c, &r, "PING");
    if (err == NULL && (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0)) {
        err = fail("PING = %s, want status PONG", show(r));
    }
    freeReplyObject(r);
    return err;
}

static const char *check_getid_exact(redisContext *c) {
    long long prev = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < BATCH; i++) {
            if (redisAppendCommand(c, "GETID") != REDIS_OK) {
                return fail("redisAppendCommand: %s", c->errstr);
            }
        }
        /* After a bad reply the rest of the batch is still read, so that
         * the next check gets its own replies. */
        const char *bad = NULL;
        for (int i = 0; i < BATCH; i++) {
            redisReply *r;
            char what[64];
            long long id = 0;
            const char *err = get(c, &r);
            if (err != NULL) {
                return err;
            }
            if (bad == NULL) {
                snprintf(what, sizeof what, "GETID #%d", round * BATCH + i);
                bad = int_id(what, r, &id);
                if (bad == NULL && id <= prev) {
                    bad = fail("%s = %lld, not above %lld", what, id, prev);
                }
                prev = id;
            }
            freeReplyObject(r);
        }
        if (bad != NULL) {
            return bad;
        }
    }
    return NULL;
}

static const char *check_mgetid(redisContext *c) {
    redisReply *r;
    long long ids[10];
    const char *err = command(c, &r, "MGETID 10");
    if (err == NULL) {
        err = bulk_ids("MGETID 10", r, 10, ids);
    }
    if (err == NULL) {
        err = increasing("MGETID 10", ids, 10);
    }
    freeReplyObject(r);
    return err;
}

static const char *check_transaction(redisContext *c) {
    static const char *const cmds[] = {"MULTI", "GETID", "GETID", "MGETID 2", "EXEC"};
    redisReply *r[5] = {0};
    long long ids[4];
    const char *err = NULL;
    for (int i = 0; i < 5; i++) {
        if (redisAppendCommand(c, cmds[i]) != REDIS_OK) {
            return fail("redisAppendCommand: %s", c->errstr);
        }
    }
    for (int i = 0; i < 5 && err == NULL; i++) {
        err = get(c, &r[i]);
    }
    if (err == NULL && (r[0]->type != REDIS_REPLY_STATUS || strcmp(r[0]->str, "OK") != 0)) {
        err = fail("MULTI = %s, want status OK", show(r[0]));
    }
    for (int i = 1; i < 4 && err == NULL; i++) {
        if (r[i]->type != REDIS_REPLY_STATUS || strcmp(r[i]->str, "QUEUED") != 0) {
            err = fail("%s = %s, want status QUEUED", cmds[i], show(r[i]));
        }
    }
    if (err == NULL && (r[4]->type != REDIS_REPLY_ARRAY || r[4]->elements != 3)) {
        err = fail("EXEC = %s, want an array of 3", show(r[4]));
    }
    if (err == NULL) {
        err = int_id("EXEC reply #0", r[4]->element[0], &ids[0]);
    }
    if (err == NULL) {
        err = int_id("EXEC reply #1", r[4]->element[1], &ids[1]);
    }
    if (err == NULL) {
        err = bulk_ids("EXEC reply #2 (MGETID 2)", r[4]->element[2], 2, &ids[2]);
    }
    if (err == NULL) {
        err = increasing("GETID, GETID, MGETID 2", ids, 4);
    }
    for (int i = 0; i < 5; i++) {
        if (r[i] != NULL) {
            freeReplyObject(r[i]);
        }
    }
    return err;
}

/* field checks DECODEID's pair #i: its name, and an integer value unless
 * it is the time. */
static const char *field(const redisReply *r, size_t i, const char *name, int integer) {
    const redisReply *k = r->element[2 * i], *v = r->element[2 * i + 1];
    if (k->type != REDIS_REPLY_STRING || strcmp(k->str, name) != 0) {
        return fail("DECODEID field #%zu = %s, want \"%s\"", i, show(k), name);
    }
    if (integer && v->type != REDIS_REPLY_INTEGER) {
        return fail("DECODEID %s = %s, want an integer", name, show(v));
    }
    if (!integer && v->type != REDIS_REPLY_STRING) {
        return fail("DECODEID %s = %s, want a bulk string", name, show(v));
    }
    return NULL;
}

/* check_decodeid: DECODEID replies with a map, which RESP2 writes as an
 * array of name, value pairs in cmdDecodeID's order. */
static const char *check_decodeid(redisContext *c) {
    redisReply *g, *r = NULL;
    long long id = 0;
    const char *err = command(c, &g, "GETID");
    if (err != NULL) {
        return err;
    }
    err = int_id("GETID", g, &id);
    freeReplyObject(g);
    if (err != NULL) {
        return err;
    }
    err = command(c, &r, "DECODEID %lld", id);
    if (err != NULL) {
        return err;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 10) {
        err = fail("DECODEID = %s, want an array of 10", show(r));
    }
    static const char *const names[] = {"unix-ms", "time", "server-id", "shard", "random"};
    for (size_t i = 0; i < 5 && err == NULL; i++) {
        err = field(r, i, names[i], i != 1);
    }
    if (err == NULL) {
        long long ms = r->element[1]->integer;
        long long want = (id >> TIME_SHIFT) + EPOCH_MS;
        struct timeval now;
        gettimeofday(&now, NULL);
        long long drift = ms - ((long long)now.tv_sec * 1000 + now.tv_usec / 1000);
        time_t sec = (time_t)(want / 1000);
        struct tm tm;
        char stamp[64], time_want[80];
        gmtime_r(&sec, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(time_want, sizeof time_want, "%s.%03lldZ", stamp, want % 1000);
        long long low = (r->element[5]->integer << (SHARD_BITS + RANDOM_BITS)) |
                        (r->element[7]->integer << RANDOM_BITS) | r->element[9]->integer;
        long long low_want = id & ((1LL << TIME_SHIFT) - 1);
        if (ms != want) {
            err = fail("DECODEID unix-ms %lld, want %lld ((id >> 21) + epoch)", ms, want);
        } else if (drift > DRIFT_MS || drift < -DRIFT_MS) {
            err = fail("DECODEID unix-ms %lld is %lld ms from this machine's clock", ms, drift);
        } else if (strcmp(r->element[3]->str, time_want) != 0) {
            err = fail("DECODEID time \"%s\", want \"%s\"", r->element[3]->str, time_want);
        } else if (low != low_want) {
            err = fail("DECODEID server-id, shard and random make %lld, want the ID's low 21 bits %lld", low, low_want);
        }
    }
    freeReplyObject(r);
    return err;
}

static const char *check_error_reply(redisContext *c) {
    redisReply *r;
    long long id = 0;
    const char *err = command(c, &r, "MGETID 0");
    if (err != NULL) {
        return err;
    }
    if (r->type != REDIS_REPLY_ERROR || strstr(r->str, "out of range") == NULL) {
        err = fail("MGETID 0 = %s, want an error with \"out of range\"", show(r));
    }
    freeReplyObject(r);
    if (err != NULL) {
        return err;
    }
    err = command(c, &r, "GETID");
    if (err != NULL) {
        return err;
    }
    err = int_id("GETID after the error", r, &id);
    freeReplyObject(r);
    return err;
}

static const struct {
    const char *name;
    const char *(*run)(redisContext *);
} checks[] = {
    {"connect", check_connect},
    {"GETID exact", check_getid_exact},
    {"MGETID 10", check_mgetid},
    {"MULTI, GETID, GETID, MGETID 2, EXEC", check_transaction},
    {"DECODEID of a fresh GETID", check_decodeid},
    {"MGETID 0 is an error, then GETID", check_error_reply},
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 2 || strrchr(argv[1], ':') == NULL) {
        fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
        return 2;
    }
    char *colon = strrchr(argv[1], ':');
    *colon = '\0';
    const char *host = argv[1];
    int port = atoi(colon + 1);

    /* redisConnect: blocking, no timeout, hiredis's defaults. */
    redisContext *c = redisConnect(host, port);
    int failed = 0;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        const char *err;
        double t0 = now_ms();
        if (c == NULL) {
            err = "cannot allocate a redisContext";
        } else if (c->err) {
            err = i == 0 ? fail("redisConnect(%s, %d): %s", host, port, c->errstr) : fail("no connection: %s", c->errstr);
        } else {
            err = checks[i].run(c);
        }
        if (err == NULL) {
            printf("ok %s (%.0f ms)\n", checks[i].name, now_ms() - t0);
        } else {
            printf("FAIL %s: %s\n", checks[i].name, err);
            failed = 1;
        }
        fflush(stdout);
    }
    if (c != NULL) {
        redisFree(c);
    }
    return failed;
}
