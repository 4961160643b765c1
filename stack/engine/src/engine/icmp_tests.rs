//! Ping: the engine answers an echo request for its address (dedicated mode, where the
//! XDP program steers ICMP to it), and nothing else of ICMP.

use std::net::Ipv4Addr;

use crate::testing::frames::icmp_echo;
use crate::testing::{config, mac_of, MemTransport};

const US: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

#[test]
fn echo_request_is_answered_with_its_id_sequence_and_data() {
    let mut t = MemTransport::new(config(US));
    let data: Vec<u8> = (0..56u8).collect();
    t.inbox.push_back(icmp_echo(8, mac_of(PEER), mac_of(US), PEER, US, 0x1234, 7, &data));
    t.ingest();
    t.egress();
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1, "one echo reply, sent: {sent:02x?}");
    let want = icmp_echo(0, mac_of(US), mac_of(PEER), US, PEER, 0x1234, 7, &data);
    let f = &sent[0];
    assert_eq!(f.len(), want.len());
    // Ethernet, then IP addresses and protocol, then the whole ICMP message with its checksum
    // (the IP id, TTL and header checksum are the stack's own).
    assert_eq!(f[..14], want[..14], "ethernet header");
    assert_eq!(f[23], 1, "protocol ICMP");
    assert_eq!(f[26..34], want[26..34], "addresses swapped");
    assert_eq!(f[34..], want[34..], "ICMP echo reply with the request's id, sequence and data");
    let st = t.engine.stats();
    assert_eq!(st.rx_frames, 1);
    assert_eq!(st.drops.total(), 0);
}

#[test]
fn echo_reply_is_not_answered() {
    let mut t = MemTransport::new(config(US));
    t.inbox.push_back(icmp_echo(0, mac_of(PEER), mac_of(US), PEER, US, 1, 1, b"x"));
    t.ingest();
    t.egress();
    assert!(t.take_sent().is_empty(), "an echo reply gets no answer");
}
