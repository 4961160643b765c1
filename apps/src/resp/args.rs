//! Splitting one request into its arguments: ranges into the multibulk frame, or words unquoted
//! from an inline line into a reused buffer.

use super::codec::len_line;

/// The arguments of one command: ranges into `src` (the request frame, or the unquoted copy
/// of an inline line).
pub(super) struct Args<'a> {
    pub(super) src: &'a [u8],
    pub(super) ranges: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    pub(super) fn len(&self) -> usize {
        self.ranges.len()
    }

    pub(super) fn get(&self, i: usize) -> &'a [u8] {
        let (a, b) = self.ranges[i];
        &self.src[a..b]
    }

    pub(super) fn is(&self, i: usize, word: &str) -> bool {
        self.get(i).eq_ignore_ascii_case(word.as_bytes())
    }
}

/// Splits a multibulk frame (already validated by [`RespCodec`]) into argument ranges.
pub(super) fn split_multibulk(frame: &[u8], out: &mut Vec<(usize, usize)>) -> Option<()> {
    let (n, hdr) = len_line(frame.get(1..)?).ok()??;
    let mut pos = 1 + hdr;
    for _ in 0..n.max(0) {
        if *frame.get(pos)? != b'$' {
            return None;
        }
        let (len, hdr) = len_line(&frame[pos + 1..]).ok()??;
        let start = pos + 1 + hdr;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if end + 2 > frame.len() {
            return None;
        }
        out.push((start, end));
        pos = end + 2;
    }
    Some(())
}

/// Splits an inline line like Redis' `sdssplitargs`: whitespace-separated words, `"..."` with
/// `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` with `\'`. The words are copied, unquoted, into
/// `buf`. `Err` on unbalanced quotes.
pub(super) fn split_inline(line: &[u8], buf: &mut Vec<u8>, out: &mut Vec<(usize, usize)>) -> Result<(), ()> {
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Ok(());
        }
        let start = buf.len();
        let mut quote: Option<u8> = None;
        loop {
            let Some(&c) = line.get(i) else {
                if quote.is_some() {
                    return Err(());
                }
                break;
            };
            match quote {
                None if c.is_ascii_whitespace() => break,
                None if c == b'"' || c == b'\'' => {
                    quote = Some(c);
                    i += 1;
                }
                None => {
                    buf.push(c);
                    i += 1;
                }
                Some(q) if c == q => {
                    // A closing quote must end the word.
                    if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                        return Err(());
                    }
                    i += 1;
                    break;
                }
                Some(b'"') if c == b'\\' && i + 1 < n => {
                    let e = line[i + 1];
                    let hex = |c: u8| (c as char).to_digit(16);
                    if e == b'x' && i + 3 < n {
                        if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                            buf.push((h * 16 + l) as u8);
                            i += 4;
                            continue;
                        }
                    }
                    buf.push(match e {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                }
                Some(b'\'') if c == b'\\' && line.get(i + 1) == Some(&b'\'') => {
                    buf.push(b'\'');
                    i += 2;
                }
                Some(_) => {
                    buf.push(c);
                    i += 1;
                }
            }
        }
        out.push((start, buf.len()));
    }
}
