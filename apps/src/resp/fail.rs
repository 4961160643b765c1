//! Why a command failed. Its own file: the store (which fails with `Oom` and `WrongType`)
//! and the commands both use it, and neither needs the other for it.

/// Why a command failed: each variant is one Redis error reply.
pub(super) enum Fail {
    Arity(&'static str),
    Syntax,
    NotInt,
    Overflow,
    InvalidExpire(&'static str),
    Oom,
    TooManyKeys,
    WrongType,
    /// The reply passed [`super::RespLimits::max_reply`].
    ReplyTooLarge(usize),
    Unknown,
    /// `-ERR ` and the message.
    Msg(&'static str),
    /// A whole error line (code and message) built at run time, without CRLF.
    Line(String),
}
