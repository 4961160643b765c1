//! The ready-made handlers over each codec: `Echo` (length-prefixed, unframed, lines) and `Kv`.

use bytes::BytesMut;
use rr_load::{EchoWorkload, FnWorkload, LoadMode};
use stack::codec::{LengthPrefixed, Lines, Stream};
use stack::rr::{Echo, Kv, KvRequest, KvResponse, KvStatus, ServerConfig};

use super::{assert_clean, client_cfg, run_client, spawn_server, MAX_FRAME};

/// Random 1 B..64 KiB echo over length-prefixed framing, every response compared byte-exact.
fn echo_matrix(connections: usize, requests: u64) {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
    for depth in [1, 4] {
        let workload = EchoWorkload::random(1, 64 * 1024, 7 + depth as u64);
        let cfg = client_cfg(server.addr, connections, LoadMode::ClosedLoop { depth }, requests);
        let report = run_client(LengthPrefixed::new(MAX_FRAME), workload, cfg);
        assert_clean(&report, requests);
        assert_eq!(report.connections, connections);
        eprintln!("conns {connections} depth {depth}: {report}");
    }
    let (stats, _) = server.finish();
    assert_eq!(stats.requests, 2 * requests);
    assert_eq!(stats.accepted, 2 * connections as u64);
    assert_eq!(stats.protocol_errors + stats.io_errors, 0, "{stats:?}");
}

#[test]
fn echo_1_connection() {
    echo_matrix(1, 400);
}

#[test]
fn echo_16_connections() {
    echo_matrix(16, 1500);
}

#[test]
fn echo_256_connections() {
    echo_matrix(256, 3000);
}

/// RFC 862 style: no framing at all. The client recovers boundaries from the request
/// lengths, and the server echoes whatever chunks it reads.
#[test]
fn echo_unframed_stream() {
    let server = spawn_server(Stream, Echo, ServerConfig::default());
    let cfg = client_cfg(server.addr, 4, LoadMode::ClosedLoop { depth: 4 }, 2000);
    let report = run_client(Stream, EchoWorkload::random(1, 16 * 1024, 3), cfg);
    assert_clean(&report, 2000);
    server.finish();
}

#[test]
fn echo_lines() {
    let server = spawn_server(Lines::new(256), Echo, ServerConfig::default());
    let workload = FnWorkload::new(
        |conn, seq, out: &mut BytesMut| out.extend_from_slice(format!("conn {conn} line {seq}").as_bytes()),
        |_conn, req: &[u8], resp: &[u8]| req == resp,
    );
    let cfg = client_cfg(server.addr, 3, LoadMode::ClosedLoop { depth: 8 }, 3000);
    let report = run_client(Lines::new(256), workload, cfg);
    assert_clean(&report, 3000);
    server.finish();
}

/// Each connection alternates SET k / GET k on its own keys, so FIFO order per connection
/// makes every GET's answer predictable even with pipelining.
#[test]
fn kv_set_get_pipelined() {
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Kv::new(), ServerConfig::default());
    let value_of = |conn: usize, n: u64| format!("value-{conn}-{n}").repeat(1 + (n % 5) as usize);
    let generate = move |conn: usize, seq: u64, out: &mut BytesMut| {
        let key = format!("key-{conn}-{}", seq / 2);
        let value = value_of(conn, seq / 2);
        let req = if seq.is_multiple_of(2) {
            KvRequest::Set { key: key.as_bytes(), value: value.as_bytes() }
        } else {
            KvRequest::Get { key: key.as_bytes() }
        };
        req.encode(out).unwrap();
    };
    let check = move |conn: usize, req: &[u8], resp: &[u8]| {
        let Ok(resp) = KvResponse::parse(resp) else { return false };
        match KvRequest::parse(req) {
            Ok(KvRequest::Set { .. }) => resp.status == KvStatus::Ok && resp.value.is_empty(),
            Ok(KvRequest::Get { key }) => {
                let n: u64 = std::str::from_utf8(key).unwrap().rsplit('-').next().unwrap().parse().unwrap();
                resp.status == KvStatus::Ok && resp.value == value_of(conn, n).as_bytes()
            }
            _ => false,
        }
    };
    let cfg = client_cfg(server.addr, 8, LoadMode::ClosedLoop { depth: 4 }, 4000);
    let report = run_client(LengthPrefixed::new(MAX_FRAME), FnWorkload::new(generate, check), cfg);
    assert_clean(&report, 4000);
    let (stats, kv) = server.finish();
    assert_eq!(stats.requests, 4000);
    assert_eq!(kv.len(), 2000, "one key per SET");
    assert_eq!(kv.get(b"key-0-0").map(|v| &v[..]), Some(value_of(0, 0).as_bytes()));

    // Misses, deletes and a malformed request, over the wire.
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Kv::new(), ServerConfig::default());
    let script: Vec<(Vec<u8>, KvStatus, &[u8])> = {
        let enc = |r: KvRequest<'_>| {
            let mut b = BytesMut::new();
            r.encode(&mut b).unwrap();
            b.to_vec()
        };
        vec![
            (enc(KvRequest::Get { key: b"a" }), KvStatus::NotFound, b""),
            (enc(KvRequest::Set { key: b"a", value: b"1" }), KvStatus::Ok, b""),
            (enc(KvRequest::Get { key: b"a" }), KvStatus::Ok, b"1"),
            (enc(KvRequest::Del { key: b"a" }), KvStatus::Ok, b""),
            (enc(KvRequest::Del { key: b"a" }), KvStatus::NotFound, b""),
            (b"Zjunk".to_vec(), KvStatus::BadRequest, b""),
        ]
    };
    let n = script.len() as u64;
    let reqs: Vec<Vec<u8>> = script.iter().map(|s| s.0.clone()).collect();
    // One connection answers in order, so the n-th check belongs to the n-th script step.
    let mut step = 0;
    let workload = FnWorkload::new(
        move |_conn, seq, out: &mut BytesMut| out.extend_from_slice(&reqs[seq as usize % reqs.len()]),
        move |_conn, req: &[u8], resp: &[u8]| {
            let (sent, status, value) = &script[step % script.len()];
            step += 1;
            req == &sent[..] && KvResponse::parse(resp) == Ok(KvResponse { status: *status, value })
        },
    );
    let report = run_client(
        LengthPrefixed::new(MAX_FRAME),
        workload,
        client_cfg(server.addr, 1, LoadMode::ClosedLoop { depth: 1 }, n),
    );
    assert_clean(&report, n);
    server.finish();
}
