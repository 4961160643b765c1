//! Lab names: `{prefix}-{pid base36}-{counter base36}{a|b}`, unique per
//! process and lab, short enough for an interface, and parsed back to tell
//! which process made a namespace.

use super::error::LabError;

/// Longest interface name the kernel accepts (IFNAMSIZ minus the NUL).
pub const MAX_IFNAME_LEN: usize = 15;
/// Longest [`LabConfig::prefix`](super::LabConfig::prefix): leaves room for a pid up to 2^22 and at
/// least 36^3 labs per process.
pub const MAX_PREFIX_LEN: usize = 4;

/// Which end of the pair a name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `ns_a` / `if_a` (name ends in `a`).
    A,
    /// `ns_b` / `if_b` (name ends in `b`).
    B,
}

impl Side {
    fn letter(self) -> char {
        match self {
            Side::A => 'a',
            Side::B => 'b',
        }
    }
}

pub(super) fn validate_prefix(prefix: &str) -> Result<(), LabError> {
    let ok_chars = prefix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN || !ok_chars {
        return Err(LabError::Config(format!(
            "prefix {prefix:?} must be 1..={MAX_PREFIX_LEN} characters of [a-z0-9]"
        )));
    }
    Ok(())
}

pub(super) fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ascii digits")
}

pub(super) fn parse_base36(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 12 {
        return None;
    }
    let mut n: u64 = 0;
    for c in s.chars() {
        let d = c.to_digit(36)?;
        if c.is_ascii_uppercase() {
            return None;
        }
        n = n * 36 + u64::from(d);
    }
    Some(n)
}

/// How many distinct counters fit in a name with this prefix length and pid.
pub(super) fn counter_capacity(prefix_len: usize, pid: u32) -> u64 {
    // prefix '-' pid '-' counter side
    let fixed = prefix_len + 1 + base36(u64::from(pid)).len() + 1 + 1;
    let digits = MAX_IFNAME_LEN.saturating_sub(fixed).min(8) as u32;
    36u64.pow(digits)
}

/// The namespace (and interface) name of one side of a lab:
/// `{prefix}-{pid base36}-{counter base36}{a|b}`, at most 15 characters.
pub fn lab_name(prefix: &str, pid: u32, counter: u64, side: Side) -> Result<String, LabError> {
    validate_prefix(prefix)?;
    if pid == 0 {
        return Err(LabError::Config("pid 0 in a lab name".into()));
    }
    let name = format!("{prefix}-{}-{}{}", base36(u64::from(pid)), base36(counter), side.letter());
    if name.len() > MAX_IFNAME_LEN {
        return Err(LabError::Config(format!(
            "lab name {name:?} is longer than {MAX_IFNAME_LEN} characters"
        )));
    }
    Ok(name)
}

/// A lab name taken apart by [`parse_lab_name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabName {
    /// The pid of the process that made the lab.
    pub pid: u32,
    /// That process's lab counter.
    pub counter: u64,
    /// Which end.
    pub side: Side,
}

/// Parse a name made by [`lab_name`] with exactly this prefix; `None` for
/// anything else (other prefixes, foreign namespaces, pid 0).
pub fn parse_lab_name(prefix: &str, name: &str) -> Option<LabName> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (pid, rest) = rest.split_once('-')?;
    let pid = u32::try_from(parse_base36(pid)?).ok().filter(|&p| p != 0 && p <= i32::MAX as u32)?;
    let side = match rest.chars().last()? {
        'a' => Side::A,
        'b' => Side::B,
        _ => return None,
    };
    let counter = parse_base36(&rest[..rest.len() - 1])?;
    Some(LabName { pid, counter, side })
}
