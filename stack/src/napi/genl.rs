//! The little generic netlink [`super`] needs, over libc: resolve a family (its id and
//! operations) through the controller, dump, and a request with its acknowledgement.
//!
//! Written here rather than taken from a crate: the whole need is three message shapes and
//! flat u32/u64 attributes (about 250 lines), while the netlink crates that know the "netdev"
//! family are either young generated bindings or pull in an async runtime. Message layout from
//! include/uapi/linux/netlink.h and genetlink.h: `nlmsghdr` (16 bytes), `genlmsghdr` (4),
//! then attributes (`nlattr`: u16 length, u16 type, payload padded to 4 bytes).

use std::fmt;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;
const NLA_HDRLEN: usize = 4;
/// The attribute type without NLA_F_NESTED / NLA_F_NET_BYTEORDER.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `GENL_ID_CTRL`: the controller's fixed family id.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_OPS: u16 = 6;
const CTRL_ATTR_OP_ID: u16 = 1;
/// `NLMSGERR_ATTR_MSG`: the extended ack's text.
const NLMSGERR_ATTR_MSG: u16 = 1;

const RECV_BUF: usize = 64 * 1024;

/// A netlink failure: the errno the kernel (or a syscall) gave, and the extended ack's text
/// when the kernel sent one.
#[derive(Debug)]
pub(crate) struct NlError {
    pub errno: i32,
    pub msg: Option<String>,
}

impl NlError {
    fn last_os() -> Self {
        NlError { errno: io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO), msg: None }
    }

    fn proto(what: &str) -> Self {
        NlError { errno: libc::EPROTO, msg: Some(format!("malformed netlink reply: {what}")) }
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.errno))?;
        if let Some(m) = &self.msg {
            write!(f, " ({m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for NlError {}

impl From<NlError> for io::Error {
    fn from(e: NlError) -> io::Error {
        let kind = io::Error::from_raw_os_error(e.errno).kind();
        io::Error::new(kind, e)
    }
}

/// An attribute to send.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Attr<'a> {
    U32(u16, u32),
    /// NLA_UINT: sent as 4 bytes when the value fits (the kernel takes 4 or 8).
    Uint(u16, u64),
    /// NUL-terminated on the wire.
    Str(u16, &'a str),
}

/// A family as the controller describes it.
#[derive(Clone, Debug)]
pub(crate) struct Family {
    pub id: u16,
    /// The command numbers it has (CTRL_ATTR_OPS).
    pub ops: Vec<u32>,
}

/// A generic netlink socket of this thread's network namespace (it stays bound to that
/// namespace wherever it is used later).
#[derive(Debug)]
pub(crate) struct GenlSocket {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl GenlSocket {
    pub fn open() -> Result<Self, NlError> {
        // SAFETY: socket() takes no pointers; the result is checked below.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
        if fd < 0 {
            return Err(NlError::last_os());
        }
        // SAFETY: fd was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Errors with the kernel's explanation, and without our request echoed back. Both are
        // optional: an old kernel without them still answers with an errno.
        for opt in [libc::NETLINK_EXT_ACK, libc::NETLINK_CAP_ACK] {
            let one: libc::c_int = 1;
            // SAFETY: the value points at a live c_int of the size passed.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_NETLINK,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        Ok(GenlSocket { fd, seq: 1, buf: vec![0; RECV_BUF] })
    }

    /// The family `name`, or `None` if the kernel has no such family.
    pub fn family(&mut self, name: &str) -> Result<Option<Family>, NlError> {
        let mut replies = Vec::new();
        match self.exchange(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 2, &[Attr::Str(CTRL_ATTR_FAMILY_NAME, name)], false, &mut replies)
        {
            Ok(()) => {}
            Err(e) if e.errno == libc::ENOENT => return Ok(None),
            Err(e) => return Err(e),
        }
        let reply = replies.first().ok_or_else(|| NlError::proto("no family in the controller's answer"))?;
        let mut fam = Family { id: 0, ops: Vec::new() };
        for (ty, data) in attrs(reply) {
            match ty {
                CTRL_ATTR_FAMILY_ID => fam.id = get_uint(data).ok_or_else(|| NlError::proto("family id"))? as u16,
                CTRL_ATTR_OPS => {
                    for (_, op) in attrs(data) {
                        if let Some(id) = attrs(op).find(|(t, _)| *t == CTRL_ATTR_OP_ID).and_then(|(_, d)| get_uint(d)) {
                            fam.ops.push(id as u32);
                        }
                    }
                }
                _ => {}
            }
        }
        if fam.id == 0 {
            return Err(NlError::proto("no family id"));
        }
        Ok(Some(fam))
    }

    /// A dump of `cmd`: the attributes of every message, in order.
    pub fn dump(&mut self, family: u16, cmd: u8, version: u8, req: &[Attr]) -> Result<Vec<Vec<u8>>, NlError> {
        let mut replies = Vec::new();
        self.exchange(family, cmd, version, req, true, &mut replies)?;
        Ok(replies)
    }

    /// A `do` request of `cmd`, acknowledged.
    pub fn request(&mut self, family: u16, cmd: u8, version: u8, req: &[Attr]) -> Result<(), NlError> {
        self.exchange(family, cmd, version, req, false, &mut Vec::new())
    }

    /// Sends one request and reads until its end: the ack (do) or NLMSG_DONE (dump). The
    /// attribute payload of every genetlink answer goes to `replies`.
    fn exchange(
        &mut self,
        family: u16,
        cmd: u8,
        version: u8,
        req: &[Attr],
        dump: bool,
        replies: &mut Vec<Vec<u8>>,
    ) -> Result<(), NlError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let flags = libc::NLM_F_REQUEST | if dump { libc::NLM_F_DUMP } else { libc::NLM_F_ACK };
        let msg = encode(family, flags as u16, seq, cmd, version, req);
        // SAFETY: send() reads msg.len() bytes from the live vector `msg`.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(NlError::last_os());
        }
        loop {
            // SAFETY: recv() writes at most buf.len() bytes into the live, owned buffer.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
            if n < 0 {
                let e = NlError::last_os();
                if e.errno == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            let mut data = &self.buf[..n as usize];
            while data.len() >= NLMSG_HDRLEN {
                let len = u32::from_ne_bytes(data[0..4].try_into().unwrap()) as usize;
                let ty = u16::from_ne_bytes(data[4..6].try_into().unwrap());
                let mseq = u32::from_ne_bytes(data[8..12].try_into().unwrap());
                if len < NLMSG_HDRLEN || len > data.len() {
                    return Err(NlError::proto("message length"));
                }
                let body = &data[NLMSG_HDRLEN..len];
                data = &data[align4(len).min(data.len())..];
                if mseq != seq {
                    continue; // an answer to an earlier request that gave up
                }
                match ty as libc::c_int {
                    libc::NLMSG_ERROR => {
                        let err = body.get(0..4).map(|b| i32::from_ne_bytes(b.try_into().unwrap()));
                        let err = err.ok_or_else(|| NlError::proto("short error message"))?;
                        if err == 0 {
                            return Ok(()); // the ack
                        }
                        return Err(NlError { errno: -err, msg: ext_ack_msg(body, 4 + NLMSG_HDRLEN) });
                    }
                    libc::NLMSG_DONE => {
                        let err = body.get(0..4).map(|b| i32::from_ne_bytes(b.try_into().unwrap())).unwrap_or(0);
                        if err < 0 {
                            return Err(NlError { errno: -err, msg: ext_ack_msg(body, 4) });
                        }
                        return Ok(());
                    }
                    _ => {
                        if body.len() < GENL_HDRLEN {
                            return Err(NlError::proto("short genetlink message"));
                        }
                        replies.push(body[GENL_HDRLEN..].to_vec());
                    }
                }
            }
        }
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One request: nlmsghdr, genlmsghdr, attributes.
pub(crate) fn encode(family: u16, flags: u16, seq: u32, cmd: u8, version: u8, req: &[Attr]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&0u32.to_ne_bytes()); // length, filled in below
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    m.extend_from_slice(&[cmd, version, 0, 0]);
    for a in req {
        let (ty, payload): (u16, Vec<u8>) = match *a {
            Attr::U32(t, v) => (t, v.to_ne_bytes().to_vec()),
            Attr::Uint(t, v) => match u32::try_from(v) {
                Ok(v) => (t, v.to_ne_bytes().to_vec()),
                Err(_) => (t, v.to_ne_bytes().to_vec()),
            },
            Attr::Str(t, s) => {
                let mut p = s.as_bytes().to_vec();
                p.push(0);
                (t, p)
            }
        };
        m.extend_from_slice(&((NLA_HDRLEN + payload.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&payload);
        m.resize(align4(m.len()), 0);
    }
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m
}

/// The attributes in `data`: (type without flags, payload). Stops at the first malformed one.
pub(crate) fn attrs(data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < NLA_HDRLEN {
            return None;
        }
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let ty = u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > rest.len() {
            return None;
        }
        let payload = &rest[NLA_HDRLEN..len];
        rest = &rest[align4(len).min(rest.len())..];
        Some((ty, payload))
    })
}

/// A u8/u16/u32/u64 payload (NLA_UINT is 4 or 8 bytes).
pub(crate) fn get_uint(data: &[u8]) -> Option<u64> {
    Some(match data.len() {
        1 => u64::from(data[0]),
        2 => u64::from(u16::from_ne_bytes(data.try_into().ok()?)),
        4 => u64::from(u32::from_ne_bytes(data.try_into().ok()?)),
        8 => u64::from_ne_bytes(data.try_into().ok()?),
        _ => return None,
    })
}

/// The extended ack's text in an error message body, whose attributes start at `at`: after
/// the i32 error and the request's nlmsghdr in NLMSG_ERROR (NETLINK_CAP_ACK: without the
/// request's payload), right after the i32 in NLMSG_DONE.
fn ext_ack_msg(body: &[u8], at: usize) -> Option<String> {
    let tlvs = body.get(at..)?;
    let (_, msg) = attrs(tlvs).find(|(t, _)| *t == NLMSGERR_ATTR_MSG)?;
    let text = msg.split(|b| *b == 0).next()?;
    Some(String::from_utf8_lossy(text).into_owned())
}
