//! What the server bounds: an oversized frame, a client that does not read its responses, and
//! allocations per request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use rr_load::{Client, EchoWorkload, LoadMode};
use stack::codec::{Codec, LengthPrefixed};
use stack::rr::{Echo, ServerConfig};

use super::{assert_clean, client_cfg, run_client, spawn_server, spawn_server_on, thread_allocs, Backend, MAX_FRAME};

/// A peer announcing a frame over the limit is disconnected; everyone else carries on.
#[test]
fn oversized_frame_closes_only_that_connection() {
    let server = spawn_server(LengthPrefixed::new(64 * 1024), Echo, ServerConfig::default());
    let addr = server.addr;
    let bad = thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // A valid request first (answered), then a 4 GiB - 1 length header.
        s.write_all(&[0, 0, 0, 2, b'h', b'i']).unwrap();
        let mut resp = [0u8; 6];
        s.read_exact(&mut resp).unwrap();
        assert_eq!(&resp, &[0, 0, 0, 2, b'h', b'i']);
        s.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
        let mut rest = Vec::new();
        // EOF (Ok) or reset (Err) both mean the server closed us. A timeout would mean it did not.
        match s.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty()),
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "server kept the connection open"),
        }
    });
    let cfg = client_cfg(server.addr, 8, LoadMode::ClosedLoop { depth: 2 }, 2000);
    let report = run_client(LengthPrefixed::new(64 * 1024), EchoWorkload::random(1, 4096, 11), cfg);
    assert_clean(&report, 2000);
    bad.join().unwrap();
    let (stats, _) = server.finish();
    assert_eq!(stats.protocol_errors, 1, "{stats:?}");
    assert_eq!(stats.requests, 2001);
}

/// A client that pipelines far more than the server's write high-water mark before reading
/// anything. The server must pause reading, drain on Writable, resume, and lose nothing.
#[test]
fn backpressure_pauses_and_resumes_reading() {
    let cfg = ServerConfig::default().with_write_high_water(64 * 1024);
    let server = spawn_server(LengthPrefixed::new(MAX_FRAME), Echo, cfg);
    let count = 3000usize;
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let mut codec = LengthPrefixed::new(MAX_FRAME);
        let mut wire = BytesMut::new();
        for i in 0..count {
            codec.encode(&[(i % 251) as u8; 1000], &mut wire);
        }
        writer.write_all(&wire).unwrap();
    });
    // Reading only starts after a pause, so the server's send buffer and its wbuf fill up first.
    thread::sleep(Duration::from_millis(200));
    let mut codec = LengthPrefixed::new(MAX_FRAME);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < count {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "server closed early after {got} responses");
        buf.extend_from_slice(&chunk[..n]);
        while let Some(msg) = codec.decode(&mut buf).unwrap() {
            assert_eq!(&msg[..], &[(got % 251) as u8; 1000][..], "response {got}");
            got += 1;
        }
    }
    sender.join().unwrap();
    drop(stream);
    let (stats, _) = server.finish();
    assert_eq!(stats.requests, count as u64);
}

/// Ten times more requests must not mean more allocations: buffers are reused and only
/// grow (amortised), on both the server and the client side. The io_uring backend allocates
/// nothing per request either (its module docs), so the bounds are the same for it.
#[test]
fn hot_path_does_not_allocate_per_request() {
    on_backend!(|T| hot_path_allocations::<T>())
}

fn hot_path_allocations<T: Backend>() {
    let mut measured = Vec::new();
    for requests in [2_000u64, 20_000] {
        let server = spawn_server_on::<T, _, _>(LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default());
        let transport = T::open();
        let cfg = client_cfg(server.addr, 4, LoadMode::ClosedLoop { depth: 4 }, requests);
        let mut client = Client::new(transport, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(1, 2048, 5), cfg);
        let before = thread_allocs();
        let report = client.run().unwrap();
        let client_allocs = thread_allocs() - before;
        assert_clean(&report, requests);
        let (_, _, server_allocs) = server.finish_counting();
        measured.push((client_allocs, server_allocs));
    }
    let [(c_small, s_small), (c_big, s_big)] = measured[..] else { unreachable!() };
    eprintln!("allocations (client, server): {measured:?} for 2k, 20k requests");
    // Allow a little slack for amortised growth and the connection setup/teardown.
    assert!(c_big <= c_small + 32, "client allocs: {c_small} for 2k requests, {c_big} for 20k");
    assert!(s_big <= s_small + 32, "server allocs: {s_small} for 2k requests, {s_big} for 20k");
}
