//! The honest client of the fuzzer.

use bytes::BytesMut;
use std::net::SocketAddrV4;

use super::{PORT, SERVER};
use crate::transport::{ConnId, Event};
use crate::xsk::testing::MemTransport;

/// One connection at a time, one echo at a time, checked byte for byte.
#[derive(Default)]
pub(super) struct Honest {
    pub(super) conn: Option<ConnId>,
    pub(super) up: bool,
    pub(super) sent: u32,
    pub(super) buf: BytesMut,
    pub(super) echoes: u64,
}

impl Honest {
    pub(super) fn drive(&mut self, t: &mut MemTransport, events: &mut Vec<Event>) {
        if self.conn.is_none() {
            self.conn = t.connect(SocketAddrV4::new(SERVER, PORT)).ok();
            self.up = false;
        }
        let _ = t.poll(events, None);
        for e in events.drain(..) {
            match e {
                Event::Connected(_) => self.up = true,
                Event::Closed(c) => {
                    // A request in flight died with the connection.
                    t.close(c);
                    self.conn = None;
                    self.buf.clear();
                    self.sent = self.echoes as u32;
                }
                _ => {}
            }
        }
        let Some(c) = self.conn else { return };
        if !self.up {
            return;
        }
        let _ = t.recv(c, &mut self.buf);
        let want = 4 + 8;
        if self.buf.len() >= want {
            let n = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
            assert_eq!(&self.buf[..4], &8u32.to_be_bytes(), "echo framing");
            assert_eq!(n, self.sent, "echo payload");
            let _ = self.buf.split_to(want);
            self.echoes += 1;
            // New connections now and then: accept must keep working too.
            if self.echoes.is_multiple_of(8) {
                t.close(c);
                self.conn = None;
                self.buf.clear();
                return;
            }
        }
        if self.buf.is_empty() && self.echoes as u32 == self.sent {
            self.sent += 1;
            let mut m = [0u8; 12];
            m[..4].copy_from_slice(&8u32.to_be_bytes());
            m[4..8].copy_from_slice(&self.sent.to_be_bytes());
            if t.send(c, &m).ok() != Some(12) {
                self.sent -= 1;
            }
        }
        let _ = t.flush();
    }

    pub(super) fn close(&mut self, t: &mut MemTransport) {
        if let Some(c) = self.conn.take() {
            t.close(c);
        }
    }
}
