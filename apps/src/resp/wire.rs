//! RESP on the wire, the small pieces: reply writers (straight into the response buffer, no
//! allocation) and strict integer parsing as Redis does it.

use bytes::{BufMut, BytesMut};

pub(super) fn put_num(out: &mut BytesMut, n: i64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(num(n, &mut digits));
}

/// `n` in decimal, written into `digits` (no allocation).
pub(super) fn num(n: i64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        digits[i] = b'-';
    }
    &digits[i..]
}

pub(super) fn put_line(out: &mut BytesMut, tag: u8, n: i64) {
    out.put_u8(tag);
    put_num(out, n);
    out.extend_from_slice(b"\r\n");
}

pub(super) fn simple(out: &mut BytesMut, s: &str) {
    out.put_u8(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub(super) fn int(out: &mut BytesMut, n: i64) {
    put_line(out, b':', n);
}

pub(super) fn bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 16);
    put_line(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// The null bulk string (RESP2) or null (RESP3): a missing key or field.
pub(super) fn nil(out: &mut BytesMut, r3: bool) {
    out.extend_from_slice(if r3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// The null array (RESP2) or null (RESP3): COMMAND INFO of an unknown command.
pub(super) fn nil_array(out: &mut BytesMut, r3: bool) {
    out.extend_from_slice(if r3 { b"_\r\n" } else { b"*-1\r\n" });
}

pub(super) fn array(out: &mut BytesMut, n: usize) {
    put_line(out, b'*', n as i64);
}

/// A map of `n` pairs: `%n` in RESP3, a flat array of `2n` in RESP2. The caller writes
/// key, value, key, value...
pub(super) fn map(out: &mut BytesMut, n: usize, r3: bool) {
    if r3 {
        put_line(out, b'%', n as i64);
    } else {
        array(out, 2 * n);
    }
}

/// A set of `n` elements (`~n` in RESP3, an array in RESP2): COMMAND's flags.
pub(super) fn set(out: &mut BytesMut, n: usize, r3: bool) {
    put_line(out, if r3 { b'~' } else { b'*' }, n as i64);
}

/// Text for humans (INFO): a verbatim string of format `txt` in RESP3, a bulk string in RESP2.
pub(super) fn verbatim(out: &mut BytesMut, text: &[u8], r3: bool) {
    if r3 {
        put_line(out, b'=', text.len() as i64 + 4);
        out.extend_from_slice(b"txt:");
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text);
    }
}

/// Peer bytes inside a simple error string: no CR/LF (they would end the reply early), printable,
/// bounded.
pub(super) fn put_sanitized(out: &mut BytesMut, b: &[u8]) {
    for &c in b.iter().take(128) {
        out.put_u8(if (0x20..0x7f).contains(&c) { c } else { b'?' });
    }
}

/// Strict decimal i64 as Redis reads it: optional `-`, no `+`, no spaces, no leading zeros.
pub(super) fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        // Accumulate negatively so i64::MIN parses.
        v = v.checked_mul(10)?.checked_sub(d)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_is_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"-", b"+1", b" 1", b"01", b"-0", b"1a", b"9223372036854775808", b"99999999999999999999"]
        {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut d = [0u8; 20];
        assert_eq!(num(i64::MIN, &mut d), b"-9223372036854775808");
        assert_eq!(num(0, &mut d), b"0");
    }
}
