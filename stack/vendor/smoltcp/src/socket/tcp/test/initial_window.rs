// [xsk-stack patch: initial-window, cc-reset] A connection's congestion window starts at RFC
// 6928's initial window when the socket asks for it, and a socket used again starts with a
// fresh controller.

use super::*;

const MSS: usize = 1460;

/// A listener with room for 32 KiB to send, Reno, the initial window on or off.
fn listener(rfc6928: bool) -> TestSocket {
    let mut s = socket_with_buffer_sizes(32 * 1024, 64);
    s.set_congestion_control(CongestionControl::Reno);
    s.set_rfc6928_initial_window(rfc6928);
    s.state = State::Listen;
    s.listen_endpoint = LISTEN_END;
    s
}

/// The handshake, the peer offering an MSS of 1,460 and a 65,535-octet window.
fn handshake(s: &mut TestSocket) {
    send(s, Instant::from_millis(0), &TcpRepr {
        control: TcpControl::Syn,
        seq_number: REMOTE_SEQ,
        ack_number: None,
        max_seg_size: Some(MSS as u16),
        window_len: 65535,
        ..SEND_TEMPL
    });
    let mut syn_acks = 0;
    recv(s, Instant::from_millis(0), |r| {
        assert_eq!(r.map(|r| r.control), Ok(TcpControl::Syn));
        syn_acks += 1;
    });
    assert_eq!(syn_acks, 1);
    send(s, Instant::from_millis(1), &TcpRepr {
        seq_number: REMOTE_SEQ + 1,
        ack_number: Some(LOCAL_SEQ + 1),
        window_len: 65535,
        ..SEND_TEMPL
    });
    assert_eq!(s.state, State::Established);
}

/// The payload lengths of what the socket sends now, until it sends nothing.
fn flight(s: &mut TestSocket) -> Vec<usize> {
    let mut lens = Vec::new();
    loop {
        let mut len = None;
        let _ = s.socket.dispatch(&mut s.cx, |_, _, (_, tcp)| {
            len = Some(tcp.payload.len());
            Ok::<(), ()>(())
        });
        match len {
            Some(n) if n > 0 => lens.push(n),
            _ => return lens,
        }
    }
}

#[test]
fn test_initial_window_ten_segments_go_in_the_first_flight() {
    let mut s = listener(true);
    handshake(&mut s);
    assert_eq!(s.congestion_controller.inner().window(), 10 * MSS);
    s.send_slice(&[7; 20_000]).unwrap();
    assert_eq!(flight(&mut s), vec![MSS; 10]);
}

#[test]
fn test_initial_window_off_upstreams_window_sends_one_segment() {
    let mut s = listener(false);
    handshake(&mut s);
    // Reno starts at 2,048 octets: one full segment; Nagle holds the rest of the room.
    assert_eq!(s.congestion_controller.inner().window(), 2048);
    s.send_slice(&[7; 20_000]).unwrap();
    assert_eq!(flight(&mut s), vec![MSS]);
}

#[test]
fn test_initial_window_is_capped_at_14600_octets_or_two_segments() {
    // RFC 6928: min(10 * MSS, max(2 * MSS, 14,600)).
    let mut s = listener(true);
    s.set_remote_mss(4000);
    assert_eq!(s.congestion_controller.inner().window(), 14_600);
    s.set_remote_mss(9000);
    assert_eq!(s.congestion_controller.inner().window(), 18_000);
    s.set_remote_mss(536);
    assert_eq!(s.congestion_controller.inner().window(), 5360);
}

#[test]
fn test_cc_reset_a_socket_used_again_starts_with_a_fresh_controller() {
    let mut s = listener(false);
    handshake(&mut s);
    // A loss episode leaves the window at one segment and the threshold low.
    s.congestion_controller.inner_mut().on_rto(Instant::from_millis(2), 8 * MSS);
    assert_eq!(s.congestion_controller.inner().window(), MSS);
    // Closed and listening again: the next connection starts where a new socket does.
    s.abort();
    s.listen(LISTEN_END).unwrap();
    assert_eq!(s.congestion_control(), CongestionControl::Reno);
    assert_eq!(s.congestion_controller.inner().window(), 2048);
}
