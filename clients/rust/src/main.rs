//! Checks idserver with redis-rs (crates.io's `redis`) on its defaults,
//! the synchronous client, the same checks as clients/python/check.py.
//!
//! Usage: idserver-rust-check [--resp3] HOST:PORT [CHECK ...]
//!
//! Runs the named checks (all without names), each on a new connection,
//! prints "ok NAME" or "FAIL NAME: why" for each, and exits 1 if any
//! failed. Without --resp3 the connection is on redis-rs's default, RESP2;
//! with it, the URL asks `?protocol=resp3` (HELLO 3). Replies are read as
//! `redis::Value`, not converted: redis-rs turns a bulk string of digits
//! into an integer on request, which would hide a GETID of the wrong type.
//! clients/rust_test.go runs it.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use redis::{Commands, Connection, ErrorKind, ServerErrorKind, Value};

type Check = fn(&mut Connection, &Opts) -> Result<(), String>;

/// Opts is what the checks are told by the command line.
struct Opts {
    /// The protocol the connection should be on: 2 or 3.
    resp: u8,
    /// Prefixes the sequence checks' keys: new to each run, as those
    /// checks want new keys to count from 1.
    keys: String,
}

const CHECKS: &[(&str, Check)] = &[
    ("Connection", check_connection),
    ("GetIDExact", check_getid_exact),
    ("MGetID", check_mgetid),
    ("DecodeID", check_decode_id),
    ("MixedPipeline", check_mixed_pipeline),
    ("Transaction", check_transaction),
    ("TransactionAbort", check_transaction_abort),
    ("ErrorReply", check_error_reply),
    ("Sequences", check_sequences),
    ("SequencePipeline", check_sequence_pipeline),
    ("SequenceTransaction", check_sequence_transaction),
];

/// The layout of a server on its defaults (idgen.DefaultLayout and
/// DefaultEpoch): ms since EPOCH_MS above bit 21, then 2 bits of
/// server-id, 9 of shard and 10 random.
const EPOCH_MS: i64 = 1420041600000;
const TIME_SHIFT: u32 = 21;
const SHARD_BITS: u32 = 9;
const RANDOM_BITS: u32 = 10;

/// How far an ID's time may be from this machine's clock: generous, as
/// the server borrows ahead and a busy machine answers late.
const DRIFT_MS: i64 = 10 * 60 * 1000;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let resp3 = args.first().is_some_and(|a| a == "--resp3");
    if resp3 {
        args.remove(0);
    }
    if args.is_empty() {
        let names: Vec<&str> = CHECKS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "usage: idserver-rust-check [--resp3] HOST:PORT [{} ...]",
            names.join("|")
        );
        return ExitCode::from(2);
    }
    let url = format!(
        "redis://{}/{}",
        args[0],
        if resp3 { "?protocol=resp3" } else { "" }
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let opts = Opts {
        resp: if resp3 { 3 } else { 2 },
        keys: format!("rs:{}:{now}:", if resp3 { "resp3" } else { "resp2" }),
    };
    let names: Vec<&str> = if args.len() > 1 {
        args[1..].iter().map(String::as_str).collect()
    } else {
        CHECKS.iter().map(|(n, _)| *n).collect()
    };
    println!("redis-rs, {url}");
    let mut failed = false;
    for name in names {
        let Some((_, check)) = CHECKS.iter().find(|(n, _)| *n == name) else {
            eprintln!("unknown check {name:?}");
            return ExitCode::from(2);
        };
        let result = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .map_err(|e| format!("connect: {e}"))
            .and_then(|mut con| check(&mut con, &opts));
        match result {
            Ok(()) => println!("ok {name}"),
            Err(why) => {
                failed = true;
                println!("FAIL {name}: {why}");
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A GETID reply must be an integer reply: Value::Int.
fn int_id(what: &str, v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(id) if *id > 0 => Ok(*id),
        _ => Err(format!("{what} = {v:?}, want a positive Value::Int")),
    }
}

/// MGETID replies with an array of n bulk strings of digits.
fn bulk_ids(what: &str, v: &Value, n: usize) -> Result<Vec<i64>, String> {
    let Value::Array(items) = v else {
        return Err(format!("{what} = {v:?}, want an Array of {n}"));
    };
    if items.len() != n {
        return Err(format!("{what} = {v:?}, want an Array of {n}"));
    }
    items
        .iter()
        .map(|item| match item {
            Value::BulkString(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("{what}: element {item:?} is not decimal")),
            _ => Err(format!("{what}: element {item:?} is not a BulkString")),
        })
        .collect()
}

/// Strictly increasing in the order received also means distinct.
fn want_increasing(what: &str, ids: &[i64]) -> Result<(), String> {
    for i in 1..ids.len() {
        if ids[i] <= ids[i - 1] {
            return Err(format!(
                "{what}: ID #{i} = {}, not above {}",
                ids[i],
                ids[i - 1]
            ));
        }
    }
    Ok(())
}

fn want(what: &str, got: &Value, expected: &Value) -> Result<(), String> {
    if got != expected {
        return Err(format!("{what} = {got:?}, want {expected:?}"));
    }
    Ok(())
}

/// got must be an error reply with text in it.
fn want_err(what: &str, got: redis::RedisResult<Value>, text: &str) -> Result<(), String> {
    match got {
        Err(e) if e.to_string().contains(text) => Ok(()),
        Err(e) => Err(format!(
            "{what}: error {:?}, want {text:?} in it",
            e.to_string()
        )),
        Ok(v) => Err(format!("{what} = {v:?}, want an error")),
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn query(con: &mut Connection, args: &[&str]) -> Result<Value, String> {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(con)
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}

/// CLIENT INFO of the connection says it is on the protocol asked for,
/// that it named itself redis-rs, and that it gets GETID as an integer.
fn check_connection(con: &mut Connection, o: &Opts) -> Result<(), String> {
    let line = match query(con, &["CLIENT", "INFO"])? {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::VerbatimString { text, .. } => text,
        v => return Err(format!("CLIENT INFO = {v:?}, want a string")),
    };
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or("")
            .to_string()
    };
    let got = (field("resp"), field("lib-name"), field("getid-reply"));
    let expected = (
        o.resp.to_string(),
        "redis-rs".to_string(),
        "integer".to_string(),
    );
    if got != expected {
        return Err(format!(
            "CLIENT INFO resp, lib-name and getid-reply = {got:?}, want {expected:?}: {line:?}"
        ));
    }
    Ok(())
}

/// 100,000 GETIDs pipelined without MULTI, 1,000 per round trip.
fn check_getid_exact(con: &mut Connection, _: &Opts) -> Result<(), String> {
    let mut prev = 0;
    for sent in (0..100_000).step_by(1000) {
        let mut p = redis::pipe();
        for _ in 0..1000 {
            p.cmd("GETID");
        }
        let replies: Vec<Value> = p
            .query(con)
            .map_err(|e| format!("pipeline of 1,000 GETIDs: {e}"))?;
        if replies.len() != 1000 {
            return Err(format!("{} replies to 1,000 GETIDs", replies.len()));
        }
        for (i, v) in replies.iter().enumerate() {
            let id = int_id(&format!("GETID #{}", sent + i), v)?;
            if id <= prev {
                return Err(format!("GETID #{} = {id}, not above {prev}", sent + i));
            }
            prev = id;
        }
    }
    Ok(())
}

/// MGETID's bulk strings, as Values, and as an application reads them:
/// into an i64 and a Vec<i64> (redis-rs converts digits).
fn check_mgetid(con: &mut Connection, _: &Opts) -> Result<(), String> {
    let mut ids = bulk_ids("MGETID 10", &query(con, &["MGETID", "10"])?, 10)?;
    ids.push(
        redis::cmd("GETID")
            .query::<i64>(con)
            .map_err(|e| format!("GETID as i64: {e}"))?,
    );
    ids.extend(
        redis::cmd("MGETID")
            .arg(3)
            .query::<Vec<i64>>(con)
            .map_err(|e| format!("MGETID 3 as Vec<i64>: {e}"))?,
    );
    want_increasing("MGETID 10, GETID as i64, MGETID 3 as Vec<i64>", &ids)
}

/// DECODEID of a fresh GETID: its fields in order (name, value pairs in
/// RESP2, a map in RESP3), a time that is the ID's own ((id >> 21) ms past
/// the epoch) and near the clock, and lower fields that make up the rest
/// of the ID.
fn check_decode_id(con: &mut Connection, o: &Opts) -> Result<(), String> {
    let id = int_id("GETID", &query(con, &["GETID"])?)?;
    let reply = query(con, &["DECODEID", &id.to_string()])?;
    let pairs: Vec<(Value, Value)> = match (&reply, o.resp) {
        (Value::Map(m), 3) => m.clone(),
        (Value::Array(a), 2) if a.len() == 10 => {
            a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
        }
        _ => {
            return Err(format!(
                "DECODEID = {reply:?}, want {}",
                if o.resp == 3 {
                    "a Map"
                } else {
                    "an Array of 10"
                }
            ))
        }
    };
    let names: Vec<Value> = pairs.iter().map(|(k, _)| k.clone()).collect();
    let want_names: Vec<Value> = ["unix-ms", "time", "server-id", "shard", "random"]
        .iter()
        .map(|s| bulk(s))
        .collect();
    want(
        "DECODEID field names",
        &Value::Array(names),
        &Value::Array(want_names),
    )?;
    let int = |i: usize| match pairs[i].1 {
        Value::Int(n) => Ok(n),
        ref v => Err(format!(
            "DECODEID {:?} = {v:?}, want a Value::Int",
            pairs[i].0
        )),
    };
    let (ms, server, shard, random) = (int(0)?, int(2)?, int(3)?, int(4)?);
    want(
        "DECODEID unix-ms",
        &Value::Int(ms),
        &Value::Int((id >> TIME_SHIFT) + EPOCH_MS),
    )?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    if (ms - now).abs() > DRIFT_MS {
        return Err(format!(
            "DECODEID unix-ms {ms} is {} ms from this machine's clock",
            ms - now
        ));
    }
    want("DECODEID time", &pairs[1].1, &bulk(&iso8601(ms)))?;
    let low = server << (SHARD_BITS + RANDOM_BITS) | shard << RANDOM_BITS | random;
    want(
        "DECODEID server-id, shard and random",
        &Value::Int(low),
        &Value::Int(id & ((1 << TIME_SHIFT) - 1)),
    )
}

/// iso8601 is ms since 1970 as 2006-01-02T15:04:05.000Z (the standard
/// library has no calendar: days to a date by Howard Hinnant's
/// civil_from_days).
fn iso8601(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = rem / 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        rem % 1000
    )
}

/// ID commands between others, without MULTI: each reply in its place.
fn check_mixed_pipeline(con: &mut Connection, _: &Opts) -> Result<(), String> {
    let replies: Vec<Value> = redis::pipe()
        .cmd("GETID")
        .cmd("MGETID")
        .arg(3)
        .cmd("PING")
        .cmd("ECHO")
        .arg("hello")
        .query(con)
        .map_err(|e| e.to_string())?;
    if replies.len() != 4 {
        return Err(format!("{} replies, want 4: {replies:?}", replies.len()));
    }
    let mut ids = vec![int_id("GETID", &replies[0])?];
    ids.extend(bulk_ids("MGETID 3", &replies[1], 3)?);
    want_increasing("GETID, MGETID 3", &ids)?;
    want("PING", &replies[2], &Value::SimpleString("PONG".into()))?;
    want("ECHO hello", &replies[3], &bulk("hello"))
}

/// pipe().atomic() wraps the commands in MULTI/EXEC.
fn check_transaction(con: &mut Connection, _: &Opts) -> Result<(), String> {
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("GETID")
        .cmd("GETID")
        .cmd("MGETID")
        .arg(2)
        .query(con)
        .map_err(|e| e.to_string())?;
    if replies.len() != 3 {
        return Err(format!(
            "EXEC gave {} replies, want 3: {replies:?}",
            replies.len()
        ));
    }
    let mut ids = vec![int_id("GETID", &replies[0])?, int_id("GETID", &replies[1])?];
    ids.extend(bulk_ids("MGETID 2", &replies[2], 2)?);
    want_increasing("GETID, GETID, MGETID 2", &ids)
}

/// An unknown command queued makes EXEC refuse it all (EXECABORT), which
/// redis-rs gives as an ExecAbort error carrying the queued command's own
/// error; the connection then works.
fn check_transaction_abort(con: &mut Connection, _: &Opts) -> Result<(), String> {
    let got: redis::RedisResult<Value> = redis::pipe()
        .atomic()
        .cmd("GETID")
        .cmd("NOSUCHCOMMAND")
        .query(con);
    if let Err(e) = &got {
        if e.kind() != ErrorKind::Server(ServerErrorKind::ExecAbort) {
            return Err(format!(
                "atomic GETID, NOSUCHCOMMAND: error {e} of kind {:?}, want ExecAbort",
                e.kind()
            ));
        }
    }
    want_err(
        "atomic GETID, NOSUCHCOMMAND",
        got,
        "unknown command 'NOSUCHCOMMAND'",
    )?;
    int_id("GETID after the abort", &query(con, &["GETID"])?).map(|_| ())
}

/// MGETID 0 is refused, and the connection works after it.
fn check_error_reply(con: &mut Connection, _: &Opts) -> Result<(), String> {
    want_err(
        "MGETID 0",
        redis::cmd("MGETID").arg(0).query(con),
        "out of range",
    )?;
    int_id("GETID after the error", &query(con, &["GETID"])?).map(|_| ())
}

/// A new key counts from 1; SET only up; DEL refused; through redis-rs's
/// Commands (its incr is INCRBY), read as Values: INCR an integer, GET
/// and MGET bulk strings, as against Redis.
fn check_sequences(con: &mut Connection, o: &Opts) -> Result<(), String> {
    let (k, none) = (
        format!("{}Sequences:k", o.keys),
        format!("{}Sequences:none", o.keys),
    );
    let k = k.as_str();
    want(
        "INCR of a new key",
        &query(con, &["INCR", k])?,
        &Value::Int(1),
    )?;
    want(
        "incr 1",
        &con.incr(k, 1).map_err(|e| e.to_string())?,
        &Value::Int(2),
    )?;
    want(
        "incr 10",
        &con.incr(k, 10).map_err(|e| e.to_string())?,
        &Value::Int(12),
    )?;
    want("get", &con.get(k).map_err(|e| e.to_string())?, &bulk("12"))?;
    want(
        "get of an unknown key",
        &con.get(&none).map_err(|e| e.to_string())?,
        &Value::Nil,
    )?;
    want(
        "set 100",
        &con.set(k, 100).map_err(|e| e.to_string())?,
        &Value::Okay,
    )?;
    want(
        "incr after set 100",
        &con.incr(k, 1).map_err(|e| e.to_string())?,
        &Value::Int(101),
    )?;
    want_err(
        "set 50",
        con.set(k, 50),
        &format!("sequences only go up: \"{k}\" is at 101"),
    )?;
    want(
        "set_nx of a key that exists",
        &con.set_nx(k, 500).map_err(|e| e.to_string())?,
        &Value::Int(0),
    )?;
    want_err("del", con.del(k), "DEL is refused: sequences never go back")?;
    want(
        "exists of a key and an unknown one",
        &con.exists(&[k, &none]).map_err(|e| e.to_string())?,
        &Value::Int(1),
    )?;
    want(
        "type",
        &query(con, &["TYPE", k])?,
        &Value::SimpleString("string".into()),
    )?;
    want(
        "mget",
        &con.mget(&[k, &none]).map_err(|e| e.to_string())?,
        &Value::Array(vec![bulk("101"), Value::Nil]),
    )
}

/// 100 INCRs of a new key in one pipeline without MULTI: 1 to 100.
fn check_sequence_pipeline(con: &mut Connection, o: &Opts) -> Result<(), String> {
    let k = format!("{}SequencePipeline", o.keys);
    let mut p = redis::pipe();
    for _ in 0..100 {
        p.cmd("INCR").arg(&k);
    }
    let got: Vec<Value> = p.query(con).map_err(|e| e.to_string())?;
    want(
        "100 pipelined INCR",
        &Value::Array(got),
        &Value::Array((1..=100).map(Value::Int).collect()),
    )
}

/// INCR, INCRBY 5 and GET of a new key in MULTI/EXEC give 1, 6 and "6".
/// A SET in one is refused (not allowed inside a transaction), which
/// discards the INCR before it too.
fn check_sequence_transaction(con: &mut Connection, o: &Opts) -> Result<(), String> {
    let k = format!("{}SequenceTransaction", o.keys);
    let got: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(&k)
        .cmd("INCRBY")
        .arg(&k)
        .arg(5)
        .cmd("GET")
        .arg(&k)
        .query(con)
        .map_err(|e| e.to_string())?;
    want(
        "atomic INCR, INCRBY 5, GET",
        &Value::Array(got),
        &Value::Array(vec![Value::Int(1), Value::Int(6), bulk("6")]),
    )?;
    let got = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg(&k)
        .cmd("SET")
        .arg(&k)
        .arg(100)
        .query(con);
    want_err(
        "atomic INCR, SET",
        got,
        "Command not allowed inside a transaction",
    )?;
    want(
        "GET after the discarded transaction",
        &query(con, &["GET", &k])?,
        &bulk("6"),
    )
}
