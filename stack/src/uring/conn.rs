//! One connection's state in the io_uring backend: what the ring has in flight for it, the
//! received buffers it holds for the application, and the bytes it has yet to send.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// A connect is in the ring; `Connected` or `Closed` follows.
    Connecting,
    Open,
    /// The application closed it; it stays until its last bytes are sent, then its socket is
    /// closed by the ring. Its id is dead to the application.
    Closing,
}

/// Where a half-close stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ShutWrite {
    No,
    /// Asked for; the shutdown goes into the ring once the queued bytes have left.
    Pending,
    Done,
}

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) fd: OwnedFd,
    pub(super) peer: Option<SocketAddrV4>,
    pub(super) state: State,
    /// The connect's address: the ring reads it when the connect is submitted.
    pub(super) connect_addr: Option<Box<libc::sockaddr_in>>,

    /// Received buffers (id, length) in arrival order, not yet handed to the application.
    pub(super) held: VecDeque<(u16, u32)>,
    /// Received bytes moved out of the buffer ring when the receive was paused, so that a
    /// slow reader holds none of the ring's shared buffers (they come before `held`).
    pub(super) spill: Vec<u8>,
    /// Bytes in `spill` and `held`.
    pub(super) held_bytes: usize,
    /// A multishot receive is in the ring.
    pub(super) recv_armed: bool,
    /// Its receive was cancelled because it holds too much unread: re-armed when drained.
    pub(super) recv_paused: bool,
    /// It waits in the transport's re-arm list.
    pub(super) rearm_queued: bool,
    /// `Readable` was reported and `recv` has not drained since.
    pub(super) notified: bool,
    /// The peer's FIN, a reset or an error ended the receive side.
    pub(super) eof: bool,
    pub(super) closed_reported: bool,

    /// Bytes to send. While `send_in_ring`, the ring reads from it: it is neither grown nor
    /// moved until the send's completion, and new bytes go to `more`.
    pub(super) out: Vec<u8>,
    pub(super) more: Vec<u8>,
    pub(super) send_in_ring: bool,
    /// A send came back short (the socket's buffer is full): a POLLOUT wait is in the ring.
    pub(super) send_blocked: bool,
    /// It waits in the transport's dirty list (bytes to push at the next poll).
    pub(super) dirty: bool,
    /// A `send` accepted less than offered: report `Writable` once there is room.
    pub(super) write_blocked: bool,
    /// False after a reset, an error or a failed connect.
    pub(super) can_send: bool,
    pub(super) shut_write: ShutWrite,
}

impl Conn {
    pub(super) fn new(fd: OwnedFd, peer: Option<SocketAddrV4>, state: State) -> Conn {
        Conn {
            fd,
            peer,
            state,
            connect_addr: None,
            held: VecDeque::new(),
            spill: Vec::new(),
            held_bytes: 0,
            recv_armed: false,
            recv_paused: false,
            rearm_queued: false,
            notified: false,
            eof: false,
            closed_reported: false,
            out: Vec::new(),
            more: Vec::new(),
            send_in_ring: false,
            send_blocked: false,
            dirty: false,
            write_blocked: false,
            can_send: true,
            shut_write: ShutWrite::No,
        }
    }

    pub(super) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Bytes accepted by `send` and not yet handed to the kernel.
    pub(super) fn queued(&self) -> usize {
        self.out.len() + self.more.len()
    }

    /// Nothing left to send and nothing in the ring that reads its buffers.
    pub(super) fn drained(&self) -> bool {
        !self.send_in_ring && self.out.is_empty() && self.more.is_empty()
    }
}
